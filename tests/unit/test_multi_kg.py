"""Several KGs searched together (paper §2.4): linking, merged relations, limits.

The KGs are the dict-backed doubles of ``kgdouble`` (no I/O); the embedded-store and
SPARQL-server versions of these scenarios are in tests/integration/test_multi_kg.py."""

from __future__ import annotations

from traversals.api import SearchConfig, build_solver
from traversals.kg.base import Entity
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet
from traversals.search.machine import Action, ActionType, Machine, State
from traversals.search.subgraph import Subgraph

from .kgdouble import DictKG

def hub_and_small() -> tuple[DictKG, DictKG]:
    """"Omaha" with 12 relations in ``wiki`` (a hub) and 2 in ``mb`` (linked by label)."""
    wiki = DictKG([("Q2", f"P{i}", f"Q{100 + i}") for i in range(12)], labels={"Q2": "Omaha"}, name="wiki")
    mb = DictKG([("mb-omaha", "capacity", "18975"), ("mb-omaha", "venue_of", "mb-show")],
                labels={"mb-omaha": "Omaha", "mb-show": "The Show"}, name="mb")
    return wiki, mb


async def test_a_hub_in_one_kg_does_not_crowd_out_the_other_kgs_relations():
    wiki, mb = hub_and_small()
    kgs = KGSet([wiki, mb], max_relations=6)
    omaha = wiki.entities["Q2"]
    usage = Usage()
    await kgs.link([omaha], usage)
    rels = await kgs.get_relations([omaha], usage)
    by_kg = [r.kg for r in rels.items]
    assert len(rels.items) == 6 and by_kg.count("mb") == 2, by_kg  # mb's two, and four of wiki's twelve
    assert rels.omitted == 8
    # any first part of the list shares the KGs out too (a caller may cut it shorter)
    assert [r.kg for r in rels.items[:2]] == ["wiki", "mb"]
    # a KG with fewer relations than its share leaves the rest to the others
    alone = await kgs.get_relations([omaha], usage, limit=20)
    assert len(alone.items) == 14 and alone.omitted == 0


async def test_an_entity_not_linked_yet_is_linked_before_its_relations_are_listed():
    """The question's own entities (and anything a strategy reached without linking it)
    get the other KGs' relations: before, only entities an expansion of the tree or chain
    reached were linked, so ``Omaha`` as the topic entity offered wiki's relations only."""
    wiki, mb = hub_and_small()
    kgs = KGSet([wiki, mb])
    omaha = wiki.entities["Q2"]
    usage = Usage()
    rels = await kgs.get_relations([omaha], usage)
    assert {"capacity", "venue_of"} <= {r.key for r in rels.items}
    assert kgs.copies(omaha, mb) == [mb.entities["mb-omaha"]]
    calls = usage.kg_calls
    await kgs.get_relations([omaha], usage)
    assert usage.kg_calls == calls + 2  # linked once: the second time only the two get_relations


async def test_the_relation_options_of_a_hub_offer_the_other_kgs_relations():
    wiki, mb = hub_and_small()
    machine = Machine(KGSet([wiki, mb], max_relations=6))
    omaha = wiki.entities["Q2"]
    usage = Usage()
    root = machine.root(Subgraph().with_entities([omaha]))
    node = await machine.transition(root, Action(ActionType.EXPAND_KG, "go"), usage)
    node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=(omaha,)), usage)
    assert node.state is State.SELECTING_RELATION
    assert {"capacity", "venue_of"} <= set(node.relation_keys), node.relation_keys
    assert len(node.relation_keys) == 6 and node.relations_omitted == 8


def venue_kgs() -> tuple[DictKG, DictKG]:
    """The venue's place is in wiki, the place's capacity only in mb."""
    wiki = DictKG([("Q1", "P1", "Q2"), ("Q1", "P2", "Q3")], labels={"Q1": "Venue", "Q2": "Omaha", "Q3": "Concert"},
                  name="wiki", relation_labels={"P1": ("located in", ""), "P2": ("event", "")})
    mb = DictKG([("mb-omaha", "capacity", "18975")], labels={"mb-omaha": "Omaha"}, name="mb")
    return wiki, mb


async def test_beam_search_walks_a_relation_of_the_other_kg_from_an_entity_it_reached():
    """RwT's strategies never linked what they reached: the place's capacity (mb) was never
    offered from Omaha reached in wiki."""
    def score(prompt, options, prefix):
        if prefix.startswith("RATING"):
            want = "0.9" if "18975" in prompt else "0.3"
            return [0.0 if o == want else -6.0 for o in options]
        return [-0.1 if o.endswith(("capacity", "located in")) else -4.0 for o in options]

    llm = ScriptedLLM(rules=[("three most likely answers", "A: 20000, B: 15000, C: 10000]")], score=score)
    for strategy in ("beam", "mcts"):
        answer = await build_solver(strategy, llm, list(venue_kgs()), SearchConfig(max_depth=2)).ask(
            "what is the capacity of the place of Venue", topic_entities=["Venue"])
        edges = [(e.subject.label, e.relation.label, e.object.label, e.relation.kg) for e in answer.supporting_edges]
        assert answer.text == "18975", (strategy, answer.trace)
        assert ("Omaha", "capacity", "18975", "mb") in edges and ("Venue", "located in", "Omaha", "wiki") in edges


# -- initialize: the question's entities across KGs --------------------------------------

def linker_llm(pick: str = "C1", calls: list | None = None) -> ScriptedLLM:
    def choose(prompt, *_):
        if calls is not None:
            calls.append(prompt)
        return pick

    return ScriptedLLM(rules=[("Which entity does the question mean?", choose)])


async def test_an_entity_found_in_both_kgs_is_one_topic_entity_with_both_kgs_relations():
    """Before, each KG's "Omaha" was a topic entity of its own: two "E1: Omaha", "E2: Omaha"
    the LLM could not tell apart, each offering one KG's relations."""
    from traversals.search.linking import Linker

    wiki, mb = hub_and_small()
    kgs = KGSet([wiki, mb])
    usage = Usage()
    got = await Linker(linker_llm(), kgs, constrained=False).initialize("how big is [Omaha]", usage)
    assert got == [wiki.entities["Q2"]]
    assert kgs.copies(got[0], mb) == [mb.entities["mb-omaha"]]
    rels = await kgs.get_relations(got, usage)
    assert {"capacity", "venue_of", "P0"} <= {r.key for r in rels.items}


async def test_the_candidate_the_llm_picked_among_namesakes_is_the_copy_linked():
    """mb has two "Heat"s; the LLM picked the second for the question: the film's copy in mb
    is that one (the label fallback alone takes the first exact match, the band)."""
    from traversals.search.linking import Linker

    movies = DictKG([("m-heat", "directed_by", "m-mann")], labels={"m-heat": "Heat", "m-mann": "Michael Mann"},
                    name="movies")
    mb = DictKG([("b-band", "genre", "b-rock"), ("b-score", "composer", "b-goldenthal")],
                labels={"b-band": "Heat", "b-score": "Heat", "b-rock": "rock", "b-goldenthal": "Elliot Goldenthal"},
                name="mb")
    kgs = KGSet([movies, mb])
    got = await Linker(linker_llm("C2"), kgs, constrained=False).initialize("who scored [Heat]", Usage())
    assert got == [movies.entities["m-heat"]]
    assert kgs.copies(got[0], mb) == [mb.entities["b-score"]]



async def test_a_kg_with_only_partial_matches_adds_no_topic_entity_when_another_kg_has_the_name():
    """"Inception" is a film in movies; labels only has "Inception Records" and "The
    Inception of Rock": neither was the question's entity, yet the LLM was made to pick one
    and it became a second topic entity."""
    from traversals.search.linking import Linker

    movies = DictKG([("m-inc", "directed_by", "m-nolan")], labels={"m-inc": "Inception", "m-nolan": "Christopher Nolan"},
                    name="movies")
    labels = DictKG([("l-rec", "based_in", "l-berlin"), ("l-rock", "genre", "l-r")],
                    labels={"l-rec": "Inception Records", "l-rock": "The Inception of Rock"}, name="labels")
    prompts: list[str] = []
    got = await Linker(linker_llm("C1", prompts), KGSet([movies, labels]), constrained=False).initialize(
        "who directed [Inception]", Usage())
    assert got == [movies.entities["m-inc"]] and prompts == []
    # with no exact match anywhere, each KG's best partial match is still taken
    got = await Linker(linker_llm("C1", prompts), KGSet([movies, labels]), constrained=False).initialize(
        "who runs [Inception Rec]", Usage())
    assert got == [labels.entities["l-rec"]]


def test_relation_keys_stay_unique_when_a_relation_id_looks_like_a_prefixed_one():
    """Two KGs' "genre" become "m:genre" and "y:genre"; a third KG whose own relation is
    named "m:genre" (a CURIE in a plain triple file) must not show the same key."""
    from traversals.kg.base import Relation

    rels = [Relation("genre", "genre", kg="m"), Relation("genre", "genre", kg="y"), Relation("m:genre", "m genre", kg="x"),
            Relation("genre", "genre", inverse=True, kg="m"), Relation("P1", "p", kg="x")]
    keys = KGSet([DictKG([], name="m"), DictKG([], name="y")]).option_keys(rels)
    assert len(set(keys)) == len(keys), keys
    assert keys == ["m:genre", "y:genre", "x:m:genre", "~genre", "P1"]


async def expand(machine: Machine, node, entity, key: str, usage: Usage):
    node = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), usage)
    node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=(entity,)), usage)
    rel = node.relation_options[node.relation_keys.index(key)]
    return await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=rel, relation_key=key), usage)


async def test_an_entity_reached_in_the_other_kg_is_the_node_the_subgraph_has():
    """Hans Zimmer's films in ``scores`` include Inception, the question's entity from
    ``movies``: it is that node, not a second "Inception" (E4) the search could select,
    expand and answer with as if it were something else."""
    from traversals.search.linking import Linker

    movies = DictKG([("m-inc", "music_by", "m-hz"), ("m-inc", "directed_by", "m-nolan")],
                    labels={"m-inc": "Inception", "m-hz": "Hans Zimmer", "m-nolan": "Christopher Nolan"}, name="movies")
    scores = DictKG([("s-hz", "composed_for", "s-inc"), ("s-hz", "composed_for", "s-dune")],
                    labels={"s-hz": "Hans Zimmer", "s-inc": "Inception", "s-dune": "Dune"}, name="scores")
    kgs = KGSet([movies, scores])
    machine = Machine(kgs)
    usage = Usage()
    topic = await Linker(linker_llm(), kgs, constrained=False).initialize("[Inception]", usage)
    node = await expand(machine, machine.root(Subgraph().with_entities(topic)), topic[0], "music_by", usage)
    zimmer = node.subgraph.entities[-1]
    node = await expand(machine, node, zimmer, "composed_for", usage)
    assert [(e.label, e.kg) for e in node.subgraph.entities] == [
        ("Inception", "movies"), ("Hans Zimmer", "movies"), ("Dune", "scores")]
    facts = [(f.source.label, f.relation.key, f.target.label, f.target.kg) for f in node.subgraph.facts]
    assert ("Hans Zimmer", "composed_for", "Inception", "movies") in facts
    # an entity reached first in the later KG is named by its copy in the first KG as well
    got = await kgs.get_edges([scores.entities["s-dune"]], scores.relations["composed_for"].reversed(), usage)
    assert [(e.subject.id, e.object.id) for e in got.edges] == [("m-hz", "s-dune")] and got.new_entities == (
        movies.entities["m-hz"],)


async def test_identity_links_are_not_offered_as_relations_to_walk_between_kgs():
    """owl:sameAs joins the KGs (the linked copy's relations are offered); walking it
    reached the other KG's IRI as a bare node ("artist-hz") -- and the 1.5B model picked
    "sameAs" over "born in" at 0.99 for "where was the composer of [Inception] born"."""
    from traversals.kg.base import Relation, Relations

    same = Relation("sameAs", "sameAs", iri="http://www.w3.org/2002/07/owl#sameAs", kg="films")
    match = Relation("exactMatch", "exact match", iri="http://www.w3.org/2004/02/skos/core#exactMatch", kg="films")
    composer = Relation("composer", "composer", iri="http://films.example/composer", kg="films")

    class Films(DictKG):
        async def get_relations(self, entities, limit=100):
            items = (same, composer.reversed(), match.reversed())
            return Relations(items[:limit], max(0, len(items) - limit))

    films = Films([("f-hz", "x", "y")], labels={"f-hz": "Hans Zimmer"}, name="films")
    music = DictKG([("m-hz", "born_in", "m-frankfurt")], labels={"m-hz": "Hans Zimmer"}, name="music")
    zimmer = films.entities["f-hz"]
    rels = await KGSet([films, music], max_relations=2).get_relations([zimmer], Usage())
    assert [r.key for r in rels.items] == ["~composer", "born_in"] and rels.omitted == 0
    # one KG: nothing joins it to another, its relations are its own business
    alone = await KGSet([films]).get_relations([zimmer], Usage())
    assert [r.key for r in alone.items] == ["sameAs", "~composer", "~exactMatch"]


async def test_two_kgs_using_one_id_for_different_things_are_kept_apart_on_the_path():
    """What a path expanded and exhausted is kept per KG: before, expanding France (``x1``
    in KG a) exhausted ``x1``, and Peru (``x1`` in KG b) was no longer offered."""
    a = DictKG([("x1", "capital", "x2")], labels={"x1": "France", "x2": "Paris"}, name="a")
    b = DictKG([("x1", "capital", "x2")], labels={"x1": "Peru", "x2": "Lima"}, name="b")
    machine = Machine(KGSet([a, b]))
    france, peru = a.entities["x1"], b.entities["x1"]
    usage = Usage()
    node = machine.root(Subgraph().with_entities([france, peru]))
    node = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), usage)
    node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=(france,)), usage)
    capital = next(r for r in node.relation_options if r.kg == "a" and not r.inverse)
    node = await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=capital, relation_key="capital"), usage)
    assert ("a", "x1") in node.exhausted and ("b", "x1") not in node.exhausted
    picking = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), usage)
    offered = {(e.kg, e.label) for _, act in machine.options(picking) for e in act.entities}
    assert ("b", "Peru") in offered and ("a", "France") not in offered
    node = await machine.transition(picking, Action(ActionType.SELECT_ENTITIES, entities=(peru,)), usage)
    assert node.state is State.SELECTING_RELATION and any(r.kg == "b" for r in node.relation_options)


async def test_each_question_starts_with_no_links_an_earlier_question_made():
    """One solver answers an evaluation run's questions: the links (and RwT's walked
    relations) of an earlier question made a later one cheaper and could change its
    subgraph, so a run's figures depended on the order and on resuming. A question asked
    twice now costs the same KG calls and gives the same search both times."""
    def score(prompt, options, prefix):
        if prefix.startswith("RATING"):
            want = "0.9" if "18975" in prompt else "0.3"
            return [0.0 if o == want else -6.0 for o in options]
        return [-0.1 if o.endswith(("capacity", "located in")) else -4.0 for o in options]

    def act(prompt, *_):
        return "ANSWER: 18975" if "18975" in prompt else "EXPAND_KG: go"

    llm = ScriptedLLM(rules=[("three most likely answers", "A: 20000, B: 15000, C: 10000]"),
                             ("So the next action should be:", act)], score=score)
    question = "what is the capacity of the place of Venue"
    for strategy in ("chain", "beam", "mcts"):
        solver = build_solver(strategy, llm, list(venue_kgs()), SearchConfig(max_depth=4))
        first = await solver.ask(question, topic_entities=["Venue"])
        again = await solver.ask(question, topic_entities=["Venue"])
        assert first.usage.kg_calls > 0
        assert again.usage.kg_calls == first.usage.kg_calls, strategy
        # and the same LLM calls: mcts/beam's LLM rater kept its ratings across questions
        assert again.usage.llm_calls == first.usage.llm_calls, strategy
        assert again.text == first.text and len(again.trace["nodes"]) == len(first.trace["nodes"]), strategy


async def test_what_a_link_step_links_does_not_depend_on_what_a_sibling_linked_first():
    """Sibling expansions link their entities concurrently: the cut of a step (at most
    ``max_links_per_step``) is taken before the entities linked already are left out, so
    the same step links the same entities whichever sibling's call finished first."""
    wiki = DictKG([("Q1", "P1", "Q2"), ("Q1", "P1", "Q3"), ("Q1", "P1", "Q4")],
                  labels={"Q1": "A", "Q2": "B", "Q3": "C", "Q4": "D"}, name="wiki")
    mb = DictKG([("mb-b", "r", "mb-x"), ("mb-c", "r", "mb-x"), ("mb-d", "r", "mb-x")],
                labels={"mb-b": "B", "mb-c": "C", "mb-d": "D", "mb-x": "X"}, name="mb")
    b, c, d = (wiki.entities[q] for q in ("Q2", "Q3", "Q4"))

    async def linked(first: list) -> set[str]:
        kgs = KGSet([wiki, mb], max_links_per_step=2)
        if first:
            await kgs.link(first, Usage())  # a sibling's step that finished first
        await kgs.link([b, c, d], Usage())
        return {e.label for e in (b, c, d) if kgs.copies(e, mb)}

    assert await linked([]) == await linked([b]) == {"B", "C"}


# -- links: every reached entity, transitive, explicit before labels (sixty-fourth session) --

class LinkedKG(DictKG):
    """A DictKG that states identity links (owl:sameAs), as the built-in back ends can."""

    def __init__(self, *args, same: dict[str, list[str]] | None = None, **kw) -> None:
        super().__init__(*args, **kw)
        self.same = same or {}

    async def same_as(self, ids):
        out = {}
        for i in ids:
            found = [self.entities[i]] if i in self.entities else []
            found += [self.entities[s] if s in self.entities else Entity(s, s, kg=self.name)
                      for s, targets in self.same.items() if i in targets]
            out[i] = found
        return out


async def test_an_entity_reached_past_twenty_is_linked_and_one_node_when_reached_again():
    """Zimmer (b) composed for 25 films, Nolan (a) directed them: only the first 20 far ends
    of a step were linked, so films 20-24 were two nodes each, their edges merged under one name."""
    films = [f"Film {i:02d}" for i in range(25)]
    a = DictKG([("a-nolan", "directed", f"a-{i}") for i in range(25)],
               labels={"a-nolan": "Christopher Nolan", **{f"a-{i}": t for i, t in enumerate(films)}}, name="a")
    b = DictKG([("b-hz", "composed_for", f"b-{i}") for i in range(25)],
               labels={"b-hz": "Hans Zimmer", **{f"b-{i}": t for i, t in enumerate(films)}}, name="b")
    machine = Machine(KGSet([a, b]))
    usage = Usage()
    zimmer, nolan = b.entities["b-hz"], a.entities["a-nolan"]
    node = machine.root(Subgraph().with_entities([nolan, zimmer]))
    node = await expand(machine, node, zimmer, "composed_for", usage)
    node = await expand(machine, node, nolan, "directed", usage)
    labels = [e.label for e in node.subgraph.entities]
    assert len(labels) == 27 and sorted(labels[2:]) == films
    assert {e.kg for e in node.subgraph.entities if e.label in films} == {"a"}  # named as the first KG names them


async def test_links_are_transitive_across_three_kgs():
    """Zimmer in b is linked to a's and c's copies: named as a names him, he was offered a's
    and b's relations only (a's copy knew b's alone), and reached through c he was a second node."""
    a = DictKG([("a-hz", "a_rel", "a-x")], labels={"a-hz": "Hans Zimmer", "a-x": "X"}, name="a")
    b = DictKG([("b-inc", "music_by", "b-hz")], labels={"b-inc": "Inception", "b-hz": "Hans Zimmer"}, name="b")
    c = DictKG([("c-hz", "born_in", "c-ffm")], labels={"c-hz": "Hans Zimmer", "c-ffm": "Frankfurt"}, name="c")
    kgs = KGSet([a, b, c])
    usage = Usage()
    got = await kgs.get_edges([b.entities["b-inc"]], b.relations["music_by"], usage)
    [zimmer] = got.new_entities
    assert (zimmer.kg, zimmer.id) == ("a", "a-hz")
    rels = await kgs.get_relations([zimmer], usage)
    assert {(r.kg, r.key) for r in rels.items} == {("a", "a_rel"), ("b", "~music_by"), ("c", "born_in")}
    back = await kgs.get_edges([c.entities["c-ffm"]], c.relations["born_in"].reversed(), usage)
    assert [(e.kg, e.id) for e in back.new_entities] == [("a", "a-hz")]


async def test_a_label_is_no_link_to_what_an_explicit_link_says_is_another_entity():
    """songs states s-city owl:sameAs geo-paris; its song "Paris" was linked to geo's city by
    the label fallback, and offered the city's relations."""
    geo = DictKG([("geo-paris", "country", "geo-france")], labels={"geo-paris": "Paris", "geo-france": "France"},
                 name="geo")
    songs = LinkedKG([("s-band", "performed", "s-song"), ("s-city", "population", "2100000")],
                     labels={"s-band": "The Chainsmokers", "s-song": "Paris", "s-city": "Paris"}, name="songs",
                     same={"s-city": ["geo-paris"]})
    kgs = KGSet([geo, songs])
    usage = Usage()
    got = await kgs.get_edges([songs.entities["s-band"]], songs.relations["performed"], usage)
    [song] = got.new_entities
    assert (song.kg, song.id) == ("songs", "s-song") and kgs.copies(song, geo) == []
    city = await kgs.get_relations([songs.entities["s-city"]], usage)
    assert ("geo", "country") in {(r.kg, r.key) for r in city.items}  # the stated link still joins them


async def test_labels_are_linked_across_kgs_whatever_their_accents():
    """b's search finds "Beyonce" for "Beyoncé", as the embedded store's does: the label
    fallback compared them casefolded only, and b's relations were never offered."""

    class Folding(DictKG):
        async def search(self, text, limit=10):
            from traversals.kg.text import normalise
            return [e for e in self.entities.values() if normalise(e.label) == normalise(text)][:limit]

    a = DictKG([("a-b", "born", "a-houston")], labels={"a-b": "Beyoncé", "a-houston": "Houston"}, name="a")
    b = Folding([("b-b", "member_of", "b-dc")], labels={"b-b": "Beyonce", "b-dc": "Destiny's Child"}, name="b")
    rels = await KGSet([a, b]).get_relations([a.entities["a-b"]], Usage())
    assert {(r.kg, r.key) for r in rels.items} == {("a", "born"), ("b", "member_of")}


async def test_an_entity_given_by_its_id_alone_is_linked_by_its_label():
    """`kg relations ID`, an MCP client's kg_relations: the entity came with its id as its
    label, the other KGs were searched for the id, and their relations were never offered."""
    a = LinkedKG([("a-hz", "music_for", "a-inc")], labels={"a-hz": "Hans Zimmer", "a-inc": "Inception"}, name="a")
    b = DictKG([("b-hz", "born_in", "b-ffm")], labels={"b-hz": "Hans Zimmer", "b-ffm": "Frankfurt"}, name="b")
    from traversals.kg.base import Entity as E

    rels = await KGSet([a, b]).get_relations([E("a-hz", "a-hz", kg="a")], Usage())
    assert {(r.kg, r.key) for r in rels.items} == {("a", "music_for"), ("b", "born_in")}


async def test_a_relation_cut_short_in_one_kg_marks_no_relation_of_that_key_in_another():
    """a's genre lost 3 edges, b's genre (shown "literary style") none: "(3 more not shown)"
    was also put under b's, the marks being keyed by source and relation key only."""
    import yaml

    a = DictKG([("a-x", "genre", f"a-g{i}") for i in range(5)],
               labels={"a-x": "Dune", **{f"a-g{i}": f"Genre {i}" for i in range(5)}}, name="a")
    b = DictKG([("b-x", "genre", "b-s1")], labels={"b-x": "Dune", "b-s1": "Space opera"},
               relation_labels={"genre": ("literary style", "")}, name="b")
    kgs = KGSet([a, b], max_edges=2)
    machine = Machine(kgs)
    usage = Usage()
    dune = a.entities["a-x"]
    node = machine.root(Subgraph().with_entities([dune]))
    for kg in ("b", "a"):
        node = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), usage)
        node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=(dune,)), usage)
        i = next(i for i, r in enumerate(node.relation_options) if r.kg == kg and r.key == "genre")
        node = await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=node.relation_options[i],
                                                     relation_key=node.relation_keys[i]), usage)
    assert yaml.safe_load("\n".join(node.subgraph.render_edges())) == {
        "Dune": {"literary style": "Space opera", "genre": ["Genre 0", "Genre 1", "(3 more not shown)"]}}
    assert node.subgraph.cut_short("a-x", "genre", "a") and not node.subgraph.cut_short("a-x", "genre", "b")


async def test_a_literal_value_is_never_linked_to_an_entity_of_another_kg():
    """books' Dune was published in "1984"^^xsd:gYear; the value was linked by its label to
    films' film "1984" and offered its director."""
    books = DictKG([("b-dune", "published", '"1984"^^xsd:gYear')],
                   labels={"b-dune": "Dune", '"1984"^^xsd:gYear': "1984"}, name="books")
    films = DictKG([("f-1984", "directed_by", "f-radford")], labels={"f-1984": "1984", "f-radford": "Michael Radford"},
                   name="films")
    kgs = KGSet([books, films])
    got = await kgs.get_edges([books.entities["b-dune"]], books.relations["published"], Usage())
    [year] = got.new_entities
    assert (year.kg, year.id) == ("books", '"1984"^^xsd:gYear') and kgs.copies(year, films) == []
    rels = await kgs.get_relations([year], Usage())
    assert {(r.kg, r.key) for r in rels.items} == {("books", "~published")}


# -- concurrent links of one entity: linked once, counted once --

def gated_pair(fail: int = 0):
    from .kgdouble import GatedKG

    wiki = DictKG([("Q1", "P1", "Q2")], labels={"Q1": "A", "Q2": "B"}, name="wiki")
    mb = GatedKG([("mb-b", "r", "mb-x")], labels={"mb-b": "B", "mb-x": "X"}, name="mb", fail=fail)
    return wiki, mb


async def test_two_concurrent_links_of_one_entity_search_its_label_once():
    """Sibling expansions reaching the same entity link it concurrently: each call left out
    what was linked when it started, so while one's label search was under way the other
    searched again -- kg_calls changed between identical runs as the calls interleaved.
    Now the second awaits the first's search: one search, counted once, to the call that did it."""
    import asyncio

    wiki, mb = gated_pair()
    kgs = KGSet([wiki, mb])
    b = wiki.entities["Q2"]
    first, second = Usage(), Usage()
    one = asyncio.ensure_future(kgs.link([b], first))
    await mb.entered.wait()  # the first call's label search is under way
    two = asyncio.ensure_future(kgs.link([b], second))
    for _ in range(5):
        await asyncio.sleep(0)
    mb.gate.set()
    await asyncio.wait_for(asyncio.gather(one, two), 5)
    assert mb.searched == ["B"]
    assert (first.kg_calls, second.kg_calls) == (1, 0)
    assert kgs.copies(b, mb) == [mb.entities["mb-b"]]


async def test_a_link_waiting_on_a_cancelled_or_failed_one_links_the_entity_itself():
    """The call a concurrent one waits on may end without linking: cancelled (its sibling's
    step failed), or its search failed. The waiter is not left cancelled, nor the entity
    taken for linked with no copy: it searches itself, and counts that search."""
    import asyncio

    for how in ("cancelled", "failed"):
        wiki, mb = gated_pair(fail=1 if how == "failed" else 0)
        kgs = KGSet([wiki, mb])
        b = wiki.entities["Q2"]
        first, second = Usage(), Usage()
        one = asyncio.ensure_future(kgs.link([b], first))
        await mb.entered.wait()
        two = asyncio.ensure_future(kgs.link([b], second))
        for _ in range(5):
            await asyncio.sleep(0)
        if how == "cancelled":
            one.cancel()
            await asyncio.gather(one, return_exceptions=True)
        mb.gate.set()
        await asyncio.wait_for(asyncio.gather(one, two, return_exceptions=True), 5)
        assert one.cancelled() if how == "cancelled" else isinstance(one.exception(), Exception), how
        assert kgs.copies(b, mb) == [mb.entities["mb-b"]], how
        assert second.kg_calls == 1, how  # its own search
    # a cancelled waiter leaves the first call's work to finish for the others
    wiki, mb = gated_pair()
    kgs = KGSet([wiki, mb])
    b = wiki.entities["Q2"]
    one = asyncio.ensure_future(kgs.link([b], Usage()))
    await mb.entered.wait()
    two = asyncio.ensure_future(kgs.link([b], Usage()))
    three = asyncio.ensure_future(kgs.link([b], Usage()))
    for _ in range(5):
        await asyncio.sleep(0)
    two.cancel()
    await asyncio.gather(two, return_exceptions=True)
    mb.gate.set()
    await asyncio.wait_for(asyncio.gather(one, three), 5)
    assert mb.searched == ["B"] and kgs.copies(b, mb) == [mb.entities["mb-b"]]


# -- pinned by a mutation audit: behaviours no test above would notice changing --

async def test_a_label_only_containing_the_entitys_is_no_link():
    """b's search for "Nolan" finds "Christopher Nolan" (a partial match): only a label
    equal to the entity's, once normalised, links it, or a's Nolan would be offered the
    films another Nolan directed."""
    a = DictKG([("a-nolan", "born_in", "a-london")], labels={"a-nolan": "Nolan", "a-london": "London"}, name="a")
    b = DictKG([("b-cn", "directed", "b-inc")], labels={"b-cn": "Christopher Nolan", "b-inc": "Inception"}, name="b")
    kgs = KGSet([a, b])
    nolan = a.entities["a-nolan"]
    rels = await kgs.get_relations([nolan], Usage())
    assert {(r.kg, r.key) for r in rels.items} == {("a", "born_in")}
    assert kgs.copies(nolan, b) == []


async def test_the_far_end_of_an_inverse_relation_is_linked_and_named_as_the_first_kg_names_it():
    """Walking ~director from Nolan (KG a) reaches the film, the edges' subject: it is the
    end linked to the other KGs, and as b (given first) knows it, b's film is the node."""
    b = DictKG([("b-film", "year", '"2010"')], labels={"b-film": "Inception", '"2010"': "2010"}, name="b")
    a = DictKG([("a-film", "director", "a-nolan")], labels={"a-film": "Inception", "a-nolan": "Christopher Nolan"},
               name="a")
    kgs = KGSet([b, a])
    nolan = a.entities["a-nolan"]
    usage = Usage()
    got = await kgs.get_edges([nolan], a.relations["director"].reversed(), usage)
    assert got.new_entities == (b.entities["b-film"],)
    assert [(e.subject.kg, e.subject.id, e.object.id) for e in got.edges] == [("b", "b-film", "a-nolan")]
    assert kgs.copies(a.entities["a-film"], b) == [b.entities["b-film"]]


async def test_each_kgs_search_gives_at_most_the_limit_even_when_the_kg_ignores_it():
    class Unbounded(DictKG):
        async def search(self, text, limit=10):
            return await super().search(text, 10_000)

    a = Unbounded([("a1", "r", "a2"), ("a3", "r", "a4")], labels={"a1": "Dune", "a2": "Dune II", "a3": "Dune III"},
                  name="a")
    b = Unbounded([("b1", "r", "b2")], labels={"b1": "Dune", "b2": "Dune Messiah"}, name="b")
    got = await KGSet([a, b]).search("dune", Usage(), limit=2)
    assert [(e.kg, e.id) for e in got] == [("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2")]
    assert [(e.kg, e.id) for e in await KGSet([a]).search("dune", Usage(), limit=1)] == [("a", "a1")]
