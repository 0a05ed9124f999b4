"""Tree-of-Traversals search logic with a scripted LLM (Algorithm 1, §2.2–2.3, App. B)."""


import re

import pytest

from traversals.api import SearchConfig, build_solver
from traversals.errors import BadInput
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet
from traversals.search.machine import NEUTRAL, Action, ActionType, Machine, State, entity_key
from traversals.search.subgraph import Subgraph

from .kgdouble import DictKG, dylan_kg

DEFAULT = "So the next action should be:"
ENTITIES = "entities to expand:"
RELATION = "I suggest selecting property:"
ANSWER_EVAL = "Provided answer:"
RATING = "RATING [0.0-1.0]: "
EXTRACT = ("Find the names in a text", "Bob Dylan")


def history(prompt: str) -> list[str]:
    block = prompt.split("Previous Actions:\n", 1)[1]
    return [ln for ln in block.split("\n\n", 1)[0].splitlines() if ln and ln != "(none)"]


def grandmother_policy(prompt: str, prefix: str, n: int, temperature: float):
    """The obvious chain for "Who is Bob Dylan's maternal grandmother?"."""
    h = history(prompt)
    relations = [ln for ln in h if ln.startswith("SELECT RELATION")]
    if len(relations) >= 2:
        return "ANSWER: Florence Stone"
    return "EXPAND_KG: I should search for the mother"


#: what marks a neutral (calibration) prompt
NEUTRAL_TASK = f"Original query: {NEUTRAL}"


def table_score(table: dict[str, float], *, other: float = -4.0):
    """A scripted scorer: options in ``table`` get their log-prob, relation P25 -0.1, the
    rating "1.0" 0.0 (others -5.0), anything else ``other``. A neutral (calibration)
    prompt scores every option alike, so calibration keeps the table's preferences."""
    def score(prompt, options, prefix):
        if NEUTRAL_TASK in prompt:
            return [0.0] * len(options)
        out = []
        for o in options:
            if o in table:
                out.append(table[o])
            elif o.startswith("P25"):
                out.append(-0.1)
            elif prefix.startswith(("RATING", "So the score")):
                out.append(0.0 if o == "1.0" else -5.0)
            else:
                out.append(other)
        return out

    return score


def scripted(default=grandmother_policy, *, answer_value="1.0", rating="0.8", entities=None, relation="P25 - has mother",
             score=None, extra=()):
    def pick_entities(prompt, prefix, n, t):
        if entities is not None:
            return entities
        # the newest entity: Beatrice after one expansion, else Bob Dylan
        return "Q62519478" if "Beatrice Stone" in prompt.split("Knowledge Graph Edges:")[1] else "Q392"

    return ScriptedLLM(
        rules=[
            *extra,
            EXTRACT,
            (ANSWER_EVAL, f"Reasoning: the KG says so.\nSo the score for the provided answer should be {answer_value}"),
            (RATING, rating),
            (RELATION, relation),
            (ENTITIES, pick_entities),
            (DEFAULT, default),
        ],
        score=score,
    )


async def expand(machine, node, entity, key, usage):
    """EXPAND_KG, select ``entity`` (or a tuple of entities), select the relation with option key ``key``."""
    entities = entity if isinstance(entity, tuple) else (entity,)
    node = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), usage)
    node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=entities), usage)
    rel = next(r for r, k in zip(node.relation_options, node.relation_keys) if k == key)
    return await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=rel, relation_key=key), usage)


def solver(llm, kg=None, **cfg):
    cfg.setdefault("decoding", "sampled")
    return build_solver("tree", llm, [kg or dylan_kg()], SearchConfig(**cfg))


# -- Action State Machine transitions ---------------------------------------------------

async def test_every_asm_transition_and_the_kg_calls_they_make():
    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    dylan = (await kg.search("Bob Dylan"))[0]
    root = machine.root(Subgraph().with_entities([dylan]))
    u = Usage()

    think = await machine.transition(root, Action(ActionType.THINK, "Dylan's mother first"), u)
    assert think.state is State.DEFAULT and think.history[-1] == "THINK: Dylan's mother first"

    expand = await machine.transition(think, Action(ActionType.EXPAND_KG, "search the mother"), u)
    assert expand.state is State.SELECTING_ENTITIES and kg.calls.count("get_relations") == 0

    select = await machine.transition(expand, Action(ActionType.SELECT_ENTITIES, entities=(dylan,)), u)
    assert select.state is State.SELECTING_RELATION
    assert select.history[-1] == "SELECT ENTITIES: Q392"
    assert {r.key for r in select.relation_options} == {"P25", "P19", "P106"}
    assert kg.calls.count("get_relations") == 1 and u.kg_calls == 1
    mother = next(r for r in select.relation_options if r.key == "P25")

    back = await machine.transition(select, Action(ActionType.SELECT_RELATION, relation=mother, relation_key="P25"), u)
    assert back.state is State.DEFAULT
    assert back.history[-1] == "SELECT RELATION: P25 - mother"
    assert [e.label for e in back.subgraph.entities] == ["Bob Dylan", "Beatrice Stone"]
    # get_edges, then the dead-end screen of the entity it reached: get_relations of
    # Beatrice Stone and get_edges of her ~P25 (it only walks back to Dylan; her own
    # mother, P25, is new, so she is not a dead end)
    assert kg.calls[-3:] == ["get_edges", "get_relations", "get_edges"] and u.kg_calls == 4
    assert back.exhausted == frozenset() and back.depth == 4

    done = await machine.transition(back, Action(ActionType.ANSWER, "Beatrice Stone"), u)
    assert done.state is State.DONE and done.answer == "Beatrice Stone"


async def test_actions_not_allowed_in_a_state_become_invalid_nodes():
    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    root = machine.root(Subgraph())
    node = await machine.transition(root, Action(ActionType.SELECT_ENTITIES, entities=()), Usage())
    assert node.invalid and node.state is State.DEFAULT


def test_parsing_tolerates_formats_and_rejects_unknown_ids():
    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    dylan = kg.entities["Q392"]
    root = machine.root(Subgraph().with_entities([dylan, kg.entities["Q62519478"]]))
    assert machine.parse(root, "  EXPAND KG: look up the mother").type is ActionType.EXPAND_KG
    assert machine.parse(root, "ANSWER: [A, B]").text == "[A, B]"
    assert machine.parse(root, "I think the answer is probably X").type is ActionType.INVALID
    # the answer-only prompt's prefix echoed, or followed by another action instead of an answer
    assert machine.parse(root, " ANSWER: Paris", prefix="ANSWER:").text == "Paris"
    assert machine.parse(root, " EXPAND_KG: E1", prefix="ANSWER:").type is ActionType.INVALID
    sel = root.__class__(id=9, state=State.SELECTING_ENTITIES, subgraph=root.subgraph)
    assert machine.parse(sel, "Q392, Q62519478").entities == (dylan, kg.entities["Q62519478"])
    assert machine.parse(sel, "Bob Dylan").entities == (dylan,)  # by label
    assert machine.parse(sel, "Q123456").type is ActionType.INVALID  # not in the subgraph
    assert machine.parse(sel, "You have selected the following entities to expand: Q392").entities == (dylan,)
    # the ids a reply starts with are its choice, not those its explanation names after them
    beatrice = kg.entities["Q62519478"]
    assert machine.parse(sel, "Q62519478 (the mother of Q392)").entities == (beatrice,)
    assert machine.parse(sel, "Q62519478, not Q392").entities == (beatrice,)
    assert machine.parse(sel, "Q62519478 Q392").entities == (beatrice, dylan)
    assert machine.parse(sel, "Q123456 (the father of Q392)").type is ActionType.INVALID  # not another id named
    rel = root.__class__(id=10, state=State.SELECTING_RELATION, subgraph=root.subgraph,
                         relation_options=(kg.relations["P25"], kg.relations["P25"].reversed()),
                         relation_keys=("P25", "~P25"))
    for text in ["~P25", "I suggest selecting property: ~P25", "~P25 - is mother of", "the best is ~P25.", "~is mother of"]:
        assert machine.parse(rel, text).relation_key == "~P25", text
    assert machine.parse(rel, "P19").type is ActionType.INVALID
    assert machine.parse(rel, "P25").relation_key == "P25"  # both offered: the exact key wins
    inverse_only = root.__class__(id=11, state=State.SELECTING_RELATION, subgraph=root.subgraph,
                                  relation_options=(kg.relations["P25"].reversed(),), relation_keys=("~P25",))
    said = 'The property to expand along for the selected entities [Q392] is "P25".'
    assert machine.parse(inverse_only, said).relation_key == "~P25"  # the dropped "~" is forgiven


async def test_a_selection_that_starts_with_unknown_ids_is_no_choice_of_the_labels_after_them():
    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    root = machine.root(Subgraph().with_entities([kg.entities["Q392"], kg.entities["Q62519478"]]))
    sel = await machine.transition(root, Action(ActionType.EXPAND_KG, "go"), Usage())
    for reply in ("E7, Beatrice Stone", "E7 (Beatrice Stone's mother)"):
        assert machine.parse(sel, reply).type is ActionType.INVALID, reply
    assert machine.parse(sel, "Beatrice Stone").entities == (kg.entities["Q62519478"],)  # labels alone still choose


async def test_a_reply_with_no_action_word_at_max_depth_is_the_answer():
    # past max depth the only action is ANSWER: a reply that is the answer alone answers
    kg = dylan_kg()
    machine = Machine(KGSet([kg]), max_depth=1)
    root = machine.root(Subgraph().with_entities([kg.entities["Q392"]]))
    node = await machine.transition(root, Action(ActionType.THINK, "hmm"), Usage())
    assert machine.must_answer(node)
    answer = machine.parse(node, "Beatrice Stone\nmore")
    assert (answer.type, answer.text) == (ActionType.ANSWER, "Beatrice Stone")  # its first line
    assert machine.parse(root, "Beatrice Stone").type is ActionType.INVALID  # not before it


async def test_a_lone_entity_reached_is_no_group_option():
    kg = dylan_kg()
    machine = Machine(KGSet([kg]), group_option=True)
    dylan = kg.entities["Q392"]
    node = await expand(machine, machine.root(Subgraph().with_entities([dylan])), dylan, "P25", Usage())
    node = await machine.transition(node, Action(ActionType.EXPAND_KG, "grandmother"), Usage())
    assert [text for text, _ in machine.options(node)] == [
        "Q62519478 (Beatrice Stone)", "Q392 (Bob Dylan; already expanded: mother)"]


async def test_a_relation_whose_shown_edges_were_cut_short_is_not_dropped_as_a_walk_back():
    # the films' directed_by edges, cut at max_edges=2, all lead back to the director; the
    # one not shown leads to a co-director, so the relation is still offered
    kg = DictKG([("F1", "directed_by", "D"), ("F2", "directed_by", "D"), ("F2", "directed_by", "E")],
                labels={"F1": "Film One", "F2": "Film Two", "D": "Dee Director", "E": "Eve Codirector"})
    machine = Machine(KGSet([kg], max_edges=2))
    u = Usage()
    dee = kg.entities["D"]
    node = await expand(machine, machine.root(Subgraph().with_entities([dee])), dee, "~directed_by", u)
    films = tuple(e for e in node.subgraph.entities if e.id.startswith("F"))
    assert len(films) == 2
    node = await machine.transition(node, Action(ActionType.EXPAND_KG, "co-directors"), u)
    node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=films), u)
    assert list(node.relation_keys) == ["directed_by"]


def test_the_walk_to_an_entity_reached_from_the_question_entity_does_not_come_back_through_it():
    # "the wife of X's husband": X -spouse-> H -spouse-> X. H is reached from X in one step;
    # the walk to H does not run on back through X (H -> X -> H)
    from traversals.kg.base import Entity, Relation
    from traversals.search.provenance import walked_paths
    from traversals.search.subgraph import Fact

    x, h = Entity("x", "Xena Ward", kg="t"), Entity("h", "Hugo Ward", kg="t")
    spouse = Relation("spouse", "spouse", "", kg="t")
    sg = Subgraph().with_entities([x]).extend([Fact(x, spouse, h)]).extend([Fact(h, spouse, x)])
    walks = [[(f.source.label, f.target.label) for f in path] for path in walked_paths(sg, [h, x], [x])]
    assert walks == [[("Xena Ward", "Hugo Ward")], [("Xena Ward", "Hugo Ward"), ("Hugo Ward", "Xena Ward")]]


def test_markdown_lists_and_a_line_of_prose_before_the_choice_parse_as_a_reader_would():
    """"**ANSWER:** X" answered "** X"; "**P25**", a fenced id, "Here is my choice:\nQ392" were
    invalid; "- Q392\n- Q62519478" chose the first only; "~ P25" walked P25 forward."""
    from traversals.search.cot import extract_answer

    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    dylan, beatrice = kg.entities["Q392"], kg.entities["Q62519478"]
    root = machine.root(Subgraph().with_entities([dylan, beatrice]))
    for reply in ("**ANSWER:** Beatrice Stone", "**ANSWER**: Beatrice Stone", "__ANSWER__: Beatrice Stone",
                  "ANSWER: **Beatrice Stone**"):
        got = machine.parse(root, reply)
        assert (got.type, got.text) == (ActionType.ANSWER, "Beatrice Stone"), reply
    assert machine.parse(root, "**THINK**: her mother next").text == "her mother next"
    assert machine.parse(root, "ANSWERS: x").type is ActionType.INVALID  # another word, not the action
    sel = root.__class__(id=9, state=State.SELECTING_ENTITIES, subgraph=root.subgraph)
    for reply in ("- Q392\n- Q62519478", "Q392\nQ62519478", "1. Q392\n2. Q62519478"):
        assert machine.parse(sel, reply).entities == (dylan, beatrice), reply
    for reply in ("```\nQ392\n```", "Here is my choice:\nQ392", "Q392\nbecause he is the one asked about"):
        assert machine.parse(sel, reply).entities == (dylan,), reply
    rel = root.__class__(id=10, state=State.SELECTING_RELATION, subgraph=root.subgraph,
                         relation_options=(kg.relations["P25"], kg.relations["P25"].reversed()),
                         relation_keys=("P25", "~P25"))
    for reply, key in (("**~P25**", "~P25"), ("**P25**", "P25"), ("`P25`", "P25"), ("~ P25", "~P25"),
                       ("The best property is:\n~P25", "~P25")):
        assert machine.parse(rel, reply).relation_key == key, reply
    assert extract_answer("Thinking.\n**Answer**: Rome") == "Rome" == extract_answer("**ANSWER:** **Rome**")
    # but an id an explanation names below its first line is no choice; fences around one id are
    for reply in ("None of these entities would help.\nQ392 has already been expanded.",):
        assert machine.parse(sel, reply).type is ActionType.INVALID, reply
    assert machine.parse(rel, "None of these leads to it.\nP25 (mother) is unrelated.").type is ActionType.INVALID
    assert machine.parse(sel, "```Q392```").entities == (dylan,) and machine.parse(rel, "```P25```").relation_key == "P25"
    assert machine.parse(sel, "```text Q392").entities == (dylan,)
    # a label that looks like a list item is itself first ("1. FC Köln" is a club)
    koln = DictKG([("Q1", "P1", "Q2"), ("Q3", "P1", "Q2")], labels={"Q1": "1. FC Köln", "Q3": "FC Köln", "Q2": "x"})
    sg = Subgraph().with_entities([koln.entities["Q1"], koln.entities["Q3"]])
    pick = root.__class__(id=12, state=State.SELECTING_ENTITIES, subgraph=sg)
    assert machine.parse(pick, "1. FC Köln").entities == (koln.entities["Q1"],)


async def test_an_answer_whose_name_starts_or_ends_with_a_star_keeps_it_and_its_evidence(tmp_path):
    """Emphasis marks were cut from either end alone: "ANSWER: 61*" (a MetaQA film) answered
    61, "*batteries not included" (Wikidata's) batteries not included; neither named an
    entity: no supporting edge, the value scaled, the search ran on to frontier_empty."""
    from traversals import open_kg
    from traversals.search.cot import extract_answer

    kb = tmp_path / "kb.txt"
    kb.write_text("61*|directed_by|Billy Crystal\n*batteries not included|directed_by|Matthew Robbins\n")
    for who, film in (("Billy Crystal", "61*"), ("Matthew Robbins", "*batteries not included")):
        llm = ScriptedLLM(rules=[
            (RELATION, "~directed_by"), ("You have selected the following entities", "E1"),
            ("score the correctness", "Score: 1.0"), (f"E2: {film}", f"ANSWER: {film}"),
            ("Choose the next action", "EXPAND_KG: films this person directed"),
        ])
        s = build_solver("chain", llm, [open_kg(str(kb))], SearchConfig(k=1, decoding="sampled"))
        answer = await s.ask(f"what films did [{who}] direct")
        assert answer.text == film and answer.stopped == "threshold", (answer.text, answer.stopped)
        assert [e.subject.label for e in answer.supporting_edges] == [film]
    # markdown around the answer still goes, paired or left open before the action word
    kg = dylan_kg()
    root = Machine(KGSet([kg])).root(Subgraph().with_entities([kg.entities["Q392"]]))
    for reply, text in (("ANSWER: **61***", "61*"), ("**ANSWER: 61***", "61*"), ("ANSWER: `61*`", "61*"),
                        ("**ANSWER:** *batteries not included", "*batteries not included"),
                        ("**ANSWER: Beatrice Stone**", "Beatrice Stone"), ("ANSWER: ***Beatrice Stone***", "Beatrice Stone"),
                        ("ANSWER: **Beatrice Stone", "Beatrice Stone")):
        got = Machine(KGSet([kg])).parse(root, reply)
        assert (got.type, got.text) == (ActionType.ANSWER, text), reply
        assert extract_answer(f"Thinking.\n{reply}") == text, reply


def test_a_sampled_selection_of_an_exhausted_entity_is_no_choice_of_it():
    """options() leaves exhausted entities out, but a sampled "Q1" still selected one: a child of
    the k spent on a dead end known already."""
    from traversals.search.machine import Node

    kg = DictKG([("Q1", "P1", "Q2")], labels={"Q1": "Paris", "Q2": "Rome"})
    paris, rome = kg.entities["Q1"], kg.entities["Q2"]
    machine = Machine(KGSet([kg]))
    node = Node(1, State.SELECTING_ENTITIES, Subgraph().with_entities([paris, rome]),
                exhausted=frozenset({entity_key(paris)}))
    assert [a.entities for _, a in machine.options(node)] == [(rome,)]
    for reply in ("Q1", "Paris"):
        assert machine.parse(node, reply).type is ActionType.INVALID, reply
    assert machine.parse(node, "Q1, Q2").entities == (rome,)


def test_a_long_line_of_ids_and_prose_parses_at_once():
    """A line of ids separated by single spaces, then prose, took 2^n steps to be told no id
    line (24 ids: 9 s; 30: about 20 minutes), blocking the event loop of serve and mcp."""
    import time

    kg = DictKG([(f"Q{i}", "P1", "Q0") for i in range(1, 60)])
    machine = Machine(KGSet([kg]))
    sel = machine.root(Subgraph().with_entities([kg.entities[f"Q{i}"] for i in range(1, 60)]))
    sel = sel.__class__(id=9, state=State.SELECTING_ENTITIES, subgraph=sel.subgraph)
    ids = " ".join(f"Q{i}" for i in range(1, 41))
    start = time.perf_counter()
    got = machine.parse(sel, f"I select these:\n{ids} are the films")
    assert time.perf_counter() - start < 5  # milliseconds once each gap is read one way
    assert got.type is ActionType.INVALID  # prose after the ids: an explanation, no choice
    # the separators the line allows still read as before
    for line in ("Q1 Q2", "Q1, Q2", "Q1; Q2", "Q1 and Q2", "Q1 ,Q2"):
        assert machine.parse(sel, f"My choice:\n{line}").entities == (kg.entities["Q1"], kg.entities["Q2"]), line


# -- the search --------------------------------------------------------------------------

async def test_chain_answers_a_two_hop_question_with_provenance():
    llm = scripted()
    answer = await solver(llm, k=1).ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.text == "Florence Stone" and answer.value == 1.0
    assert [(e.subject.label, e.relation.label, e.object.label) for e in answer.supporting_edges] == [
        ("Beatrice Stone", "mother", "Florence Stone"),
        ("Bob Dylan", "mother", "Beatrice Stone"),
    ]
    assert [e["label"] for e in answer.to_json()["linked_entities"]] == ["Bob Dylan"]  # where the search began
    assert answer.usage.llm_calls == len(llm.calls) and answer.usage.kg_calls >= 4
    nodes = answer.trace["nodes"]
    assert nodes[0]["parent"] is None and all({"id", "parent", "depth", "state", "action", "value"} <= n.keys() for n in nodes)
    # k = 1: one sample per prompt at temperature 0 (no oversampling)
    assert {(c.n, c.temperature) for c in llm.generate_calls} == {(1, 0.0)}


async def test_backtracking_returns_a_later_branchs_answer_when_the_first_is_below_threshold():
    # Two actions at the root: a wrong guess (valued 0.3) and the real search.
    def default(prompt, prefix, n, t):
        if not history(prompt):
            return ["ANSWER: Beatrice Stone", "EXPAND_KG: search the mother"]
        return grandmother_policy(prompt, prefix, n, t)

    def answer_value(prompt, prefix, n, t):
        value = "0.3" if "Provided answer: Beatrice Stone" in prompt else "0.9"
        return f"So the score for the provided answer should be {value}"

    llm = ScriptedLLM(rules=[EXTRACT, (ANSWER_EVAL, answer_value), (RATING, "0.5"), (RELATION, "P25"),
                             (ENTITIES, lambda p, *_: "Q62519478" if "SELECT RELATION" in p else "Q392"), (DEFAULT, default)])
    answer = await solver(llm, k=2).ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.text == "Florence Stone" and answer.value == 0.9
    proposed = {n["answer"]: n["value"] for n in answer.trace["nodes"] if "answer" in n}
    assert proposed == {"Beatrice Stone": 0.21, "Florence Stone": 0.9}  # 0.3 × 0.7: not from the KG
    assert answer.trace["stopped"] == answer.stopped == answer.to_json()["stopped"] == "threshold"
    chosen = next(n for n in answer.trace["nodes"] if n["id"] == answer.trace["answer_node"])
    assert chosen["answer"] == "Florence Stone"  # the trace names the node the answer came from
    assert chosen["grounded"] is True  # an entity of the subgraph, not free text


async def test_sampling_calls_get_seeds_from_the_search_seed():
    """--seed reached only the option sampler nothing turned on: a sampled run's LLM calls
    went unseeded (an endpoint drew fresh randomness each time). Every call that samples now
    carries a seed drawn from the search's seeded generator; greedy calls carry none."""
    async def seeds(seed):
        llm = scripted()
        await solver(llm, k=2, seed=seed).ask("Who is Bob Dylan's maternal grandmother?")
        sampled = [c.seed for c in llm.generate_calls if c.temperature > 0]
        assert sampled and all(isinstance(x, int) for x in sampled)
        assert all(c.seed is None for c in llm.generate_calls if c.temperature == 0)
        return sampled

    first = await seeds(0)
    assert await seeds(0) == first and await seeds(1) != first


def test_choose_answer_by_value_or_by_pooled_support():
    from traversals.search.tree import choose_answer

    proposals = [("Beatrice Stone", 0.35), ("Sara Dylan", 0.42), ("beatrice  stone", 0.36), ("Sara Dylan", None)]
    assert choose_answer(proposals, "value") == 1
    # the two Beatrice proposals pool 0.71 > 0.42; the better-valued of them is returned
    assert choose_answer(proposals, "support") == 2
    assert choose_answer([("A", 0.4), ("B", 0.4)], "support") == 0  # ties: the answer proposed first
    assert choose_answer([("A", 0.4), ("B", 0.5)], "support") == 1  # one proposal each: the value decides
    assert choose_answer([], "support") is None
    # ties: an answer made of the subgraph's entities before a sentence about them, by either choice
    said = [("Heat was directed by Michael Mann", 0.8), ("[Michael Mann]", 0.8), ("Michael Mann", 0.8)]
    assert choose_answer(said, "value", [False, True, True]) == 1
    assert choose_answer(said, "value") == 0 and choose_answer(said, "value", [False, False, True]) == 2
    assert choose_answer([("Heat was directed by Michael Mann", 0.9), ("[Michael Mann]", 0.8)], "value",
                         [False, True]) == 0  # the value comes first
    with pytest.raises(ValueError, match="support"):
        choose_answer(proposals, "votes")


def test_lists_rank_first_what_earlier_answers_named_and_the_fullest_list_holding_an_answer_is_found():
    from traversals.search.policy import fuller_lists, ranked_lists

    candidates = {"[Animation, Documentary, Drama]": ("Animation", "Documentary", "Drama"),
                  "[Animation, Documentary]": ("Animation", "Documentary"),
                  "Documentary": ("Documentary",), "Animation": ("Animation",), "Drama": ("Drama",)}
    assert fuller_lists(["Documentary"], candidates) == ["[Animation, Documentary, Drama]"]
    assert fuller_lists(["Documentary", "Animation", "free text"], candidates) == ["[Animation, Documentary, Drama]"]
    assert fuller_lists(["[Animation, Documentary, Drama]"], candidates) == []  # nothing fuller
    # the LLM ranked Documentary first, so the list names it first; free text stays as it is
    assert ranked_lists(["Documentary", "[Animation, Documentary]", "x"], candidates) == [
        "Documentary", "[Documentary, Animation]", "x"]
    assert ranked_lists(["Drama", "Documentary", "[Animation, Documentary, Drama]"], candidates)[-1] == (
        "[Drama, Documentary, Animation]")
    assert ranked_lists(["[Animation, Documentary]", "Documentary"], candidates)[0] == "[Animation, Documentary]"


def test_choose_answer_prefers_the_fuller_grounded_answer_at_the_same_value():
    from traversals.search.policy import listed_labels
    from traversals.search.tree import choose_answer

    # a trained value rates the path: one actor and the whole cast it reached tie
    cast = [("Amber Tamblyn", 0.9962), ("[Amber Tamblyn, Dana Andrews, Joan Fontaine]", 0.9962), ("Dana Andrews", 0.9962)]
    assert choose_answer(cast, "value", [True, True, True]) == 1
    assert choose_answer(cast, "value", [True, False, True]) == 0  # free text is not an entity list
    assert choose_answer(cast, "value") == 0  # nothing known to be grounded: the first, as before
    # a list that does not hold the chosen answer is no fuller answer of it, and the value still comes first
    assert choose_answer([("Heat", 0.9), ("[Ronin, Alien]", 0.9)], "value", [True, True]) == 0
    assert choose_answer([("Heat", 0.9), ("[Heat, Alien]", 0.8)], "value", [True, True]) == 0
    # the fullest of several, ties by order
    lists = [("[A]", 0.5), ("[A, B]", 0.5), ("[A, B, C]", 0.5), ("[A, C, B]", 0.5)]
    assert choose_answer(lists, "value", [True] * 4) == 2
    assert listed_labels("[Paris, Texas, Heat]") == {"Paris", "Texas", "Heat"}
    assert listed_labels("[Heat, Ronin]") == listed_labels("[Ronin, Heat]")
    assert listed_labels("Paris, Texas") == {"Paris, Texas"}  # an answer alone is one label
    # so a list naming a label with a comma in it is not taken as holding it: the first choice stays
    assert choose_answer([("Paris, Texas", 0.7), ("[Paris, Texas, Heat]", 0.7)], "value", [True, True]) == 0


async def test_without_an_answer_over_the_threshold_the_tree_returns_the_best_valued_or_the_best_supported_answer():
    # Root: two guesses and a thought; after the thought the first guess comes back. Neither
    # guess is in the KG (value × 0.7): Beatrice 0.5 → 0.35 twice, Sara 0.6 → 0.42 once.
    def default(prompt, prefix, n, t):
        if not history(prompt):
            return ["ANSWER: Beatrice Stone", "ANSWER: Sara Dylan", "THINK: a"]
        return ["ANSWER: Beatrice Stone", "THINK: b", "EXPAND_KG: go"]

    def answer_value(prompt, prefix, n, t):
        return f"So the score for the provided answer should be {0.5 if 'Provided answer: Beatrice' in prompt else 0.6}"

    def run(**cfg):
        llm = ScriptedLLM(rules=[EXTRACT, (ANSWER_EVAL, answer_value), (RATING, "0.5"), (ENTITIES, "Q392"),
                                 (RELATION, "P25"), (DEFAULT, default)])
        return solver(llm, k=3, max_expansions=2, **cfg).ask("Who is Bob Dylan's mother?")

    best_valued = await run()  # the default: Algorithm 1's best-valued answer
    assert best_valued.text == "Sara Dylan" and best_valued.value == pytest.approx(0.42)
    assert best_valued.trace["config"]["answer_choice"] == "value"
    supported = await run(answer_choice="support")
    assert supported.text == "Beatrice Stone" and supported.value == pytest.approx(0.35)
    assert supported.trace["config"]["answer_choice"] == "support" and supported.trace["stopped"] == "max_expansions"
    assert supported.stopped == supported.to_json()["stopped"] == "max_expansions"  # an answer under τ
    proposed = [n["answer"] for n in supported.trace["nodes"] if "answer" in n]
    assert sorted(proposed) == ["Beatrice Stone", "Beatrice Stone", "Sara Dylan"]
    # an answer over τ is returned as soon as it is found, whatever the choice
    crossing = await run(threshold=0.4, answer_choice="support")
    assert crossing.text == "Sara Dylan" and crossing.trace["stopped"] == "threshold"


async def test_an_answer_over_the_threshold_is_returned_though_another_answer_has_more_support():
    # Sara Dylan is proposed twice under τ = 0.65 (0.9 × 0.7 = 0.63 each: pooled 1.26), then
    # Florence Stone once at 1.0 × 0.7 = 0.7 > τ: Algorithm 1 returns the answer that crossed
    # τ, whatever the configured choice among answers under it
    def default(prompt, *_):
        h = history(prompt)
        if not h:
            return ["THINK: a", "THINK: b"]
        if len(h) == 1:
            return ["ANSWER: Sara Dylan", "ANSWER: Florence Stone"] if h[0] == "THINK: b" else ["ANSWER: Sara Dylan", "THINK: c"]
        return "ANSWER: Sara Dylan"

    def answer_value(prompt, *_):
        return f"So the score for the provided answer should be {1.0 if 'Provided answer: Florence' in prompt else 0.9}"

    llm = ScriptedLLM(rules=[EXTRACT, (ANSWER_EVAL, answer_value), (RATING, lambda p, *_: "0.9" if "THINK: a" in p else "0.5"),
                             (DEFAULT, default)])
    answer = await solver(llm, k=2, answer_choice="support", threshold=0.65).ask("Who is Bob Dylan's maternal grandmother?")
    proposed = [(n["answer"], n["value"]) for n in answer.trace["nodes"] if "answer" in n]
    assert proposed == [("Sara Dylan", 0.63), ("Sara Dylan", 0.63), ("Florence Stone", 0.7)]
    assert (answer.text, answer.value, answer.stopped) == ("Florence Stone", 0.7, "threshold")


async def test_answers_of_equal_value_return_the_one_proposed_first():
    llm = ScriptedLLM(rules=[EXTRACT, (ANSWER_EVAL, "So the score for the provided answer should be 0.5"), (RATING, "0.5"),
                             (DEFAULT, ["ANSWER: Sara Dylan", "ANSWER: Florence Stone"])])
    answer = await solver(llm, k=2, max_expansions=1).ask("Who is Bob Dylan's maternal grandmother?")
    proposed = [(n["answer"], n["value"]) for n in answer.trace["nodes"] if "answer" in n]
    assert proposed == [("Sara Dylan", 0.35), ("Florence Stone", 0.35)]
    assert answer.text == "Sara Dylan"


async def test_the_search_reports_its_events_as_it_goes():
    events = []
    cfg = SearchConfig(k=2, decoding="sampled")
    s = build_solver("tree", scripted(), [dylan_kg()], cfg, on_event=events.append)
    answer = await s.ask("Who is Bob Dylan's maternal grandmother?")
    kinds = [e["event"] for e in events]
    assert kinds[:3] == ["linked", "node", "expand"] and events[0]["entities"][0]["label"] == "Bob Dylan"
    nodes = answer.trace["nodes"]
    # every node once, in creation order, each announced after its parent was picked for expansion
    assert [e["id"] for e in events if e["event"] == "node"] == [n["id"] for n in nodes]
    expanded = [e["node"] for e in events if e["event"] == "expand"]
    assert expanded == [n["id"] for n in sorted((n for n in nodes if n["expansion"]), key=lambda n: n["expansion"])]
    for i, e in enumerate(events):
        if e["event"] == "node" and e["parent"] is not None:
            assert any(x["event"] == "expand" and x["node"] == e["parent"] for x in events[:i])
    final = next(e for e in events if e["event"] == "node" and e["id"] == answer.trace["answer_node"])
    assert final["answer"] == answer.text and final["value"] == answer.value


async def test_best_first_expands_the_highest_value_and_breaks_ties_depth_first():
    values = iter(["0.2", "0.7", "0.7"])
    llm = ScriptedLLM(rules=[EXTRACT, (ANSWER_EVAL, "score 0.0"), (RATING, lambda *a: next(values, "0.1")),
                             (ENTITIES, "Q392"), (RELATION, "P25"),
                             (DEFAULT, ["THINK: a", "THINK: b", "THINK: c"])])
    answer = await solver(llm, k=3, max_expansions=2).ask("q")
    nodes = {n["id"]: n for n in answer.trace["nodes"]}
    second = next(n for n in nodes.values() if n["expansion"] == 2)
    assert second["value"] == 0.7 and second["id"] == 3  # equal values: the newest (deepest) first


async def test_a_tree_of_two_rates_its_intermediate_states_and_expands_the_better_one():
    # evaluate_intermediate's default rates intermediate states whenever k > 1: with k = 2
    # the better-rated thought, proposed first but older, is expanded second, not the newer
    def default(prompt, *_):
        h = history(prompt)
        if not h:
            return ["THINK: the good idea", "THINK: the bad idea"]
        return "ANSWER: Florence Stone" if "good" in h[-1] else "ANSWER: Sara Dylan"

    llm = ScriptedLLM(rules=[EXTRACT, (ANSWER_EVAL, "So the score for the provided answer should be 0.5"),
                             (RATING, lambda p, *_: "0.9" if "THINK: the good idea" in p else "0.1"), (DEFAULT, default)])
    answer = await solver(llm, k=2, max_expansions=2).ask("Who is Bob Dylan's maternal grandmother?")
    thoughts = {n["action"]["text"]: n for n in answer.trace["nodes"] if n["depth"] == 1}
    assert (thoughts["the good idea"]["value"], thoughts["the bad idea"]["value"]) == (0.9, 0.1)
    assert thoughts["the good idea"]["expansion"] == 2 and thoughts["the bad idea"]["expansion"] is None
    assert answer.text == "Florence Stone"


async def test_forced_answer_past_max_depth():
    llm = scripted(default="EXPAND_KG: more", extra=[("The search is over", ["ANSWER: Beatrice Stone"])])
    answer = await solver(llm, k=1, max_depth=3).ask("Who is Bob Dylan's maternal grandmother?")
    depths = [n["depth"] for n in answer.trace["nodes"] if n["state"] == "done"]
    assert answer.text == "Beatrice Stone" and depths == [4]
    forced = [c for c in llm.generate_calls if "The search is over" in c.prompt]
    assert len(forced) == 1 and forced[0].prefix == "ANSWER:"


async def test_a_search_out_of_expansions_with_no_answer_answers_from_its_deepest_state():
    # the LLM never answers of itself: when the 5 expansions are spent, the deepest state
    # reached (after the expansion of Bob Dylan's mother) is made to answer, and the answer
    # says the search stopped under τ (rated 0.5: one rated over τ stops as "threshold")
    llm = scripted(default="EXPAND_KG: more", answer_value="0.5", extra=[("The search is over", "Beatrice Stone")])
    answer = await solver(llm, k=1, max_depth=50, max_expansions=5).ask("q")
    assert answer.text == "Beatrice Stone" and answer.stopped == "max_expansions"
    assert answer.trace["expansions"] == 5 and answer.trace["stopped"] == "max_expansions"
    chosen = next(n for n in answer.trace["nodes"] if n["id"] == answer.trace["answer_node"])
    parent = next(n for n in answer.trace["nodes"] if n["id"] == chosen["parent"])
    assert "expansions ran out" in chosen["note"] and parent["depth"] == max(
        n["depth"] for n in answer.trace["nodes"] if n["state"] == "default")
    assert [e.label for e in answer.linked_entities] == ["Bob Dylan"]  # the scripted linker's pick
    assert len([c for c in llm.generate_calls if "The search is over" in c.prompt]) == 1
    # every LLM call counted once: the forced answer's node has its own usage, not its parent's
    assert answer.usage.llm_calls == len(llm.calls)
    assert chosen["usage"] != parent["usage"]


async def test_a_search_whose_frontier_empties_with_no_answer_answers_from_its_deepest_state_not_its_best_rated():
    # The thought (rated 0.9) is followed by a second thought, the state after the walk to
    # Beatrice Stone (rated 0.3) by unparseable output: each invalid node is retried once,
    # then the frontier is empty. The thought was expanded and its rating did not pan out;
    # the deepest state holds the most facts walked, so it is made to answer.
    def default(prompt, *_):
        h = history(prompt)
        if not h:
            return ["THINK: idea one", "EXPAND_KG: search the mother"]
        return "I am not sure what to do" if h[-1].startswith("SELECT RELATION") else "THINK: again"

    def forced(prompt, *_):
        return " Florence Stone" if "SELECT RELATION" in prompt else " Sara Dylan"

    llm = ScriptedLLM(rules=[EXTRACT, ("The search is over", forced),
                             (ANSWER_EVAL, "So the score for the provided answer should be 0.5"),
                             (RATING, lambda p, *_: "0.9" if "idea one" in p else "0.3"), (ENTITIES, "Q392"),
                             (RELATION, "P25"), (DEFAULT, default)])
    answer = await solver(llm, k=2).ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.text == "Florence Stone" and answer.stopped == "frontier_empty"
    nodes = {n["id"]: n for n in answer.trace["nodes"]}
    chosen = nodes[answer.trace["answer_node"]]
    parent = nodes[chosen["parent"]]
    assert "frontier ran out" in chosen["note"] and parent["value"] == 0.3
    states = [n for n in nodes.values() if n["state"] == "default" and not n["invalid"]]
    assert parent["depth"] == max(n["depth"] for n in states) == 3
    assert max(n["value"] or 0.0 for n in states) == 0.9  # the thought, rated higher, did not answer


async def test_the_budget_answers_from_a_state_only_when_it_is_rated_above_every_answer_found():
    # The budget (one expansion) ends with Sara Dylan rated 0.5 × 0.7 = 0.35 and a thought on
    # the frontier; with answer_at_budget the thought is asked for its answer only when it is
    # rated above 0.35: at 0.35 exactly it is no better than the answer in hand
    from traversals.search.tree import TreeConfig, TreeOfTraversals

    async def run(rating):
        def answer_value(prompt, *_):
            return f"So the score for the provided answer should be {1.0 if 'Provided answer: Florence' in prompt else 0.5}"

        llm = ScriptedLLM(rules=[EXTRACT, ("The search is over", " Florence Stone"), (ANSWER_EVAL, answer_value),
                                 (RATING, rating), (DEFAULT, ["ANSWER: Sara Dylan", "THINK: a"])])
        tree = TreeOfTraversals(llm, KGSet([dylan_kg()]),
                                TreeConfig(k=2, max_expansions=1, answer_at_budget=True, constrained=False))
        answer = await tree.ask("Who is Bob Dylan's maternal grandmother?")
        return answer, sum("The search is over" in c.prompt for c in llm.generate_calls)

    answer, forced = await run("0.35")
    assert (answer.text, answer.value, forced) == ("Sara Dylan", 0.35, 0)
    assert [n["value"] for n in answer.trace["nodes"] if n["depth"] == 1] == [0.35, 0.35]
    answer, forced = await run("0.36")
    assert (answer.text, answer.value, forced) == ("Florence Stone", 0.7, 1)


async def test_an_answer_says_when_nothing_in_the_question_was_found_in_the_kg():
    answer = await solver(scripted(), k=1).ask("who is nobody's mother?", topic_entities=["Nobody Here"])
    assert answer.linked_entities == [] and answer.to_json()["linked_entities"] == []


async def test_a_repeated_thought_is_invalid_and_constrained_decoding_never_thinks_twice_in_a_row():
    from traversals.search.policy import allowed_default_actions

    llm = scripted(default="THINK: the same thought")
    answer = await solver(llm, k=1, max_expansions=4).ask("q")
    assert [n["invalid"] for n in answer.trace["nodes"]] == [False, False, True, True]
    assert answer.trace["nodes"][2]["note"] == "repeated thought"
    # the frontier ran out with no answer: one forced answer from the deepest valid node,
    # asked once (prefix "ANSWER:"); "ANSWER: THINK: the same thought" is no answer
    forced = [c for c in llm.generate_calls if c.prefix == "ANSWER:"]
    assert len(forced) == 1 and not answer.found and answer.stopped == "frontier_empty"
    # the sampled prompt after a THINK offers only EXPAND_KG or ANSWER
    after_think = [c.prompt for c in llm.generate_calls if DEFAULT in c.prompt][1]
    assert "Choose the next action: EXPAND_KG or ANSWER." in after_think
    thought = answer.trace["nodes"][1]
    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    dylan = (await kg.search("Bob Dylan"))[0]
    node = await machine.transition(machine.root(Subgraph((dylan,))), Action(ActionType.THINK, "x"), Usage())
    assert allowed_default_actions(node) == (ActionType.EXPAND_KG, ActionType.ANSWER)
    assert thought["action"]["type"] == "THINK"


async def test_a_question_linked_to_nothing_is_not_offered_an_expansion():
    """With no entity in the subgraph an EXPAND_KG could only be an invalid node: the LLM
    is offered THINK and ANSWER (it answers from what it knows, as CoT does)."""
    from traversals.search.policy import allowed_default_actions

    machine = Machine(KGSet([dylan_kg()]))
    assert allowed_default_actions(machine.root(Subgraph())) == (ActionType.THINK, ActionType.ANSWER)
    llm = scripted(default="ANSWER: Beatrice Stone")
    answer = await solver(llm, k=1).ask("who is nobody's mother?", topic_entities=["Nobody Here"])
    assert answer.linked_entities == [] and not any(n["invalid"] for n in answer.trace["nodes"])
    assert "Choose the next action: THINK or ANSWER." in [c.prompt for c in llm.generate_calls if DEFAULT in c.prompt][0]


async def test_diversity_oversampling_keeps_the_first_k_unique_options():
    llm = scripted(relation=["P25 - has mother", "P25", "P19 - place of birth", "P106", "P25"])
    s = solver(llm, k=2, max_expansions=3)
    answer = await s.ask("Who is Bob Dylan's maternal grandmother?")
    rel_calls = [c for c in llm.generate_calls if RELATION in c.prompt]
    assert rel_calls and all(c.n == 4 and c.temperature == 1.0 for c in rel_calls)
    children = [n for n in answer.trace["nodes"] if n["action"] and n["action"]["type"] == "SELECT_RELATION"]
    assert [c["action"]["relation"]["key"] for c in children][:2] == ["P25", "P19"]


async def test_invalid_llm_output_becomes_an_invalid_node_and_the_search_goes_on():
    outputs = iter(["I am not sure what to do", "EXPAND_KG: search the mother"])

    def default(prompt, prefix, n, t):
        if not history(prompt):
            return next(outputs)
        return grandmother_policy(prompt, prefix, n, t)

    llm = scripted(default=default)
    answer = await solver(llm, k=1).ask("Who is Bob Dylan's maternal grandmother?")
    invalid = [n for n in answer.trace["nodes"] if n["invalid"]]
    assert len(invalid) == 1 and invalid[0]["value"] == 0.0 and invalid[0]["action"]["type"] == "INVALID"
    assert answer.text == "Florence Stone"
    # the invalid node was retried with sampling, not greedily again
    assert [c.temperature for c in llm.generate_calls if DEFAULT in c.prompt][:2] == [0.0, 1.0]


async def test_constrained_decoding_scores_options_and_draws_distinct_ones():
    score = table_score({"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "Q392 (Bob Dylan)": -0.2,
                         "Q62519478 (Beatrice Stone)": -0.1})

    llm = scripted(score=score, extra=[
        (lambda text: text.endswith("ANSWER:"), " Florence Stone"),
        (lambda text: text.endswith("EXPAND_KG:"), " look up the mother"),
        (lambda text: text.endswith("THINK:"), " some thought"),
    ])
    s = build_solver("tree", llm, [dylan_kg()], SearchConfig(k=1, decoding="constrained"))
    answer = await s.ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.decoding == "constrained"
    root = answer.trace["nodes"][0]
    assert max(root["priors"], key=root["priors"].get) == "EXPAND_KG"
    assert all(c.prefix in ("EXPAND_KG:", "ANSWER:", "THINK:") for c in llm.generate_calls if DEFAULT in c.prompt)
    # the answer's value came from the rating distribution (mostly on "1.0"); with k = 1
    # intermediate nodes are not valued (nothing to choose between)
    assert answer.value > 0.9
    assert all(n["value"] is None for n in answer.trace["nodes"][1:] if n["state"] != "done" and not n["invalid"])
    assert not [c for c in llm.score_calls if c.prefix.startswith("RATING")]


def test_pick_draws_k_distinct_options_argmax_first():
    import random

    from traversals.search.choices import pick

    probs = [0.5, 0.3, 0.15, 0.05, 0.0]
    for seed in range(20):
        got = pick(probs, 3, temperature=1.0, rng=random.Random(seed))
        assert got[0] == 0 and len(set(got)) == 3 and 4 not in got
    assert pick(probs, 2, temperature=0.0, rng=random.Random(0)) == [0, 1]


def test_pick_samples_the_rest_as_often_as_their_probability_at_the_temperature():
    """Gumbel top-k: after the argmax, option i is drawn with probability p_i ** (1 / T),
    renormalised over the rest. 10,000 seeded draws per temperature; wide tolerances."""
    import random
    from collections import Counter

    from traversals.search.choices import pick

    probs = [0.5, 0.3, 0.15, 0.05]
    for temperature in (1.0, 0.3, 2.0):
        rng = random.Random(0)
        drawn = Counter(pick(probs, 2, temperature=temperature, rng=rng)[1] for _ in range(10_000))
        weights = [p ** (1 / temperature) for p in probs[1:]]
        expected = [w / sum(weights) for w in weights]  # T=1: 0.6, 0.3, 0.1; T=0.3: 0.91, 0.09, 0.00
        assert [abs(drawn[i + 1] / 10_000 - e) < 0.03 for i, e in enumerate(expected)] == [True] * 3, (
            temperature, drawn)


def test_the_geometric_mean_of_identical_distributions_is_that_distribution():
    from traversals.search.choices import geometric_mean

    assert [round(p, 6) for p in geometric_mean([[0.8, 0.2], [0.8, 0.2]])] == [0.8, 0.2]
    assert [round(p, 6) for p in geometric_mean([[0.5, 0.3, 0.2]] * 3)] == [0.5, 0.3, 0.2]


async def test_a_bare_action_word_is_asked_for_its_text():
    """A reply that is the action's name alone ("THINK") is no invalid node: the action's text
    is asked for after its name, as a second call."""
    from traversals.search.policy import Policy

    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    root = machine.root(Subgraph().with_entities([kg.entities["Q392"]]))
    llm = ScriptedLLM(lambda prompt, prefix, n, t: " I should find his mother" if prefix == "THINK:" else "THINK")
    proposal = await Policy(llm, machine, constrained=False).propose("Who is Bob Dylan's mother?", root, 1, Usage())
    assert [(a.type, a.text) for a in proposal.actions] == [(ActionType.THINK, "I should find his mother")]
    assert [c.prefix for c in llm.generate_calls] == ["", "THINK:"]


async def test_an_oversampled_selection_keeps_exactly_k_distinct_actions():
    # App. B.1: 2k replies are sampled and the first k distinct ones kept, not every distinct one
    from traversals.search.policy import Policy

    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    dylan, beatrice = kg.entities["Q392"], kg.entities["Q62519478"]
    node = await machine.transition(machine.root(Subgraph().with_entities([dylan, beatrice])),
                                    Action(ActionType.EXPAND_KG, "go"), Usage())
    llm = ScriptedLLM(lambda prompt, prefix, n, t: ["Q392", "Q62519478", "Q392, Q62519478", "Q392"][:n])
    proposal = await Policy(llm, machine, constrained=False).propose("Who is Bob Dylan's mother?", node, 2, Usage())
    assert [a.entities for a in proposal.actions] == [(dylan,), (beatrice,)]


# -- hostile labels and linking ------------------------------------------------------------

HOSTILE = 'Dr. "Who" {x} back\\slash\nnewline: #1'


async def test_labels_with_quotes_braces_backslashes_and_newlines_flow_through_the_search():
    kg = DictKG([("a", "rel", "b")], labels={"a": HOSTILE, "b": "$answer {0} %s"},
                relation_labels={"rel": ('likes "x" {y}', "")})

    def default(prompt, prefix, n, t):
        return "ANSWER: $answer {0} %s" if "SELECT RELATION" in prompt else "EXPAND_KG: go"

    llm = ScriptedLLM(rules=[(ANSWER_EVAL, "should be 1.0"), (RATING, "0.5"), (RELATION, "rel"),
                             (ENTITIES, "E1"), (DEFAULT, default)])
    s = build_solver("chain", llm, [kg], SearchConfig(decoding="sampled"))
    answer = await s.ask(f"what does [{HOSTILE}] like?", topic_entities=[HOSTILE])
    assert answer.text == "$answer {0} %s"
    assert answer.supporting_edges[0].subject.label == HOSTILE
    assert any('"Dr. \\"Who\\" {x} back\\\\slash\\nnewline: #1":' in c.prompt for c in llm.generate_calls)


async def test_initialize_uses_brackets_then_llm_extraction_and_llm_choice():
    from traversals.search.linking import Linker

    kg = DictKG([("m1", "r", "x"), ("m2", "r", "y")], labels={"m1": "Heat", "m2": "Heat wave"})
    kgs = KGSet([kg])
    llm = ScriptedLLM(rules=[("Find the names in a text", "Heat\n"), ("Which entity", "C2")])
    linker = Linker(llm, kgs, constrained=False)
    # exact label with a single exact match: no LLM call
    got = await linker.initialize("who directed [Heat]", Usage())
    assert [e.id for e in got] == ["m1"] and llm.calls == []
    got = await linker.initialize("who directed heat wave?", Usage(), topic_entities=["heat w"])
    assert [e.id for e in got] == ["m2"]  # two partial candidates: the LLM chose C2
    got = await linker.initialize("Who directed Heat?", Usage())
    assert [e.id for e in got] == ["m1"] and llm.calls[-1].prompt.endswith("Text: \"Who directed Heat?\"\nNames:")


def test_build_solver_rejects_bad_configuration():
    llm = ScriptedLLM(["x"])
    with pytest.raises(BadInput):
        build_solver("nope", llm, [dylan_kg()])
    with pytest.raises(BadInput):
        build_solver("tree", llm, [dylan_kg()], SearchConfig(decoding="constrained"))
    with pytest.raises(BadInput):
        build_solver("tree", llm, [])
    with pytest.raises(BadInput, match="k = 1"):  # a k = 3 search must not be reported as "chain"
        build_solver("chain", llm, [dylan_kg()], SearchConfig(k=3))
    with pytest.raises(BadInput, match="answer choice"):
        build_solver("tree", llm, [dylan_kg()], SearchConfig(answer_choice="votes"))


def test_chain_and_tree_get_their_branching_factor_from_the_command_line():
    from traversals.cli import _search_config, _strategy, build_parser

    for argv, strategy, k in ((["--strategy", "chain"], "chain", 1), ([], "tree", 3),
                              (["--k", "1"], "chain", 1), (["--strategy", "tree", "--k", "2"], "tree", 2)):
        args = build_parser().parse_args(["ask", "q", *argv])
        solver = build_solver(_strategy(args), ScriptedLLM(["x"]), [dylan_kg()], _search_config(args, k=args.k))
        assert (solver.name, solver.config.k) == (strategy, k)


async def test_two_kgs_are_searched_together_with_entity_linking():
    wiki = DictKG([("Q1", "P1", "Q2")], labels={"Q1": "Venue", "Q2": "Omaha"}, name="wiki",
                  relation_labels={"P1": ("located in", "")})
    mb = DictKG([("mb-omaha", "capacity", "18975")], labels={"mb-omaha": "Omaha"}, name="mb")

    def default(prompt, prefix, n, t):
        h = history(prompt)
        if sum(ln.startswith("SELECT RELATION") for ln in h) == 2:
            return "ANSWER: 18975"
        return "EXPAND_KG: next"

    llm = ScriptedLLM(rules=[(ANSWER_EVAL, "should be 1.0"), (RATING, "0.6"),
                             (RELATION, lambda p, *_: "capacity" if "SELECT ENTITIES: Q2" in p else "P1"),
                             (ENTITIES, lambda p, *_: "Q2" if "SELECT RELATION" in p else "Q1"), (DEFAULT, default)])
    s = build_solver("chain", llm, [wiki, mb], SearchConfig(decoding="sampled"))
    answer = await s.ask("capacity of the place of [Venue]", topic_entities=["Venue"])
    assert answer.text == "18975"
    assert [e.relation.label for e in answer.supporting_edges] == ["capacity", "located in"]
    assert "search" in mb.calls  # Omaha (wiki) was linked to Omaha (mb) by label


async def test_answers_not_confirmed_by_the_kg_are_valued_lower():
    def default(prompt, prefix, n, t):
        if not history(prompt):
            return ["ANSWER: Joan Baez", "EXPAND_KG: search the mother"]
        return grandmother_policy(prompt, prefix, n, t)

    llm = ScriptedLLM(rules=[EXTRACT, (ANSWER_EVAL, "So the score for the provided answer should be 0.6"),
                             (RATING, "0.5"), (RELATION, "P25"),
                             (ENTITIES, lambda p, *_: "Q62519478" if "SELECT RELATION" in p else "Q392"),
                             (DEFAULT, default)])
    answer = await solver(llm, k=2).ask("Who is Bob Dylan's maternal grandmother?")
    values = {n["answer"]: n["value"] for n in answer.trace["nodes"] if "answer" in n}
    assert values == {"Joan Baez": 0.42, "Florence Stone": 0.6}  # 0.6 × 0.7 for the unconfirmed one
    assert answer.text == "Florence Stone"


async def test_relations_already_expanded_are_not_offered_again_and_answers_are_grounded():
    from traversals.search.policy import answer_candidates

    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    dylan = kg.entities["Q392"]
    u = Usage()
    node = machine.root(Subgraph().with_entities([dylan]))
    for _ in range(2):
        node = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), u)
        node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=(dylan,)), u)
        keys = [r.key for r in node.relation_options]
        rel = node.relation_options[keys.index("P25")] if "P25" in keys else node.relation_options[0]
        node = await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=rel, relation_key=rel.key), u)
        if rel.key == "P25":
            first_keys = keys
    assert "P25" in first_keys and "P25" not in keys  # offered once, then filtered
    # answer candidates: reached entities (not the question's own), newest first
    assert list(answer_candidates(node))[-1] == "Beatrice Stone" and "Bob Dylan" not in answer_candidates(node)


async def test_a_self_loop_on_the_question_entity_is_an_answer_candidate():
    # PathQuestion mints one IRI per label, so an album and its track "Lost" are one node
    # with a self-loop; "what is the Lost 's tracks 's tracks" has the gold answer "Lost".
    from traversals.search.policy import answer_candidates

    kg = DictKG([("lost", "tracks", "lost"), ("lost", "artist", "band"), ("band", "member", "lost")],
                labels={"lost": "Lost", "band": "The Band"}, relation_labels={})
    machine = Machine(KGSet([kg]))
    lost = kg.entities["lost"]
    u = Usage()
    root = machine.root(Subgraph().with_entities([lost]))

    assert list(answer_candidates(await expand(machine, root, lost, "tracks", u))) == ["Lost"]
    # reached back alone by another stored edge (a round trip), it is an answer too
    band = await expand(machine, root, lost, "artist", u)
    assert list(answer_candidates(await expand(machine, band, kg.entities["band"], "member", u))) == ["Lost", "The Band"]


async def test_the_question_entity_reached_back_is_an_answer_only_on_a_round_trip():
    # "who is the offspring of tasha_tudor 's mom ?" → tasha_tudor: PathQuestion stores
    # parents and children both ways. "co-stars of X" meets X among others, and walking
    # back along the edge the walk came by (MetaQA stores each fact one way) is no answer.
    from traversals.search.policy import answer_candidates
    from traversals.search.provenance import reached_back
    from traversals.search.subgraph import Fact

    kg = DictKG([("tasha", "parents", "william"), ("william", "children", "tasha"),
                 ("film", "starring", "x"), ("film", "starring", "y"), ("film2", "directed_by", "d"), ("film2", "written_by", "d")],
                labels={"tasha": "Tasha Tudor", "william": "William Burgess", "x": "Actor X", "y": "Actor Y",
                        "film": "Film", "film2": "Film Two", "d": "Director D"}, relation_labels={})
    machine = Machine(KGSet([kg]))
    u = Usage()

    def ask_about(key):
        return machine.root(Subgraph().with_entities([kg.entities[key]]))

    mom = await expand(machine, ask_about("tasha"), kg.entities["tasha"], "parents", u)
    assert "Tasha Tudor" in answer_candidates(await expand(machine, mom, kg.entities["william"], "children", u))
    films = await expand(machine, ask_about("x"), kg.entities["x"], "~starring", u)
    costars = answer_candidates(await expand(machine, films, kg.entities["film"], "starring", u))
    assert "Actor Y" in costars and "Actor X" not in costars
    # MetaQA stores film -> person only: back along the same edge, or along another edge
    # stored the same way ("the writers of the films directed by [D]", D wrote them too)
    directors = await expand(machine, ask_about("film2"), kg.entities["film2"], "directed_by", u)
    (came_by,) = directors.new_facts
    walked_back = Fact(came_by.target, came_by.relation.reversed(), came_by.source)
    assert reached_back(walked_back, directors.path()[0].subgraph, directors.subgraph.extend([walked_back]))
    films = await expand(machine, ask_about("d"), kg.entities["d"], "~directed_by", u)
    writers = await expand(machine, films, kg.entities["film2"], "written_by", u)
    assert "Director D" not in answer_candidates(writers)


async def test_what_one_step_reached_from_several_entities_is_offered_as_one_answer():
    # "what are the genres of the films X starred in": the answer is the union of the
    # films' genres, the one most of them have first, not one film's genres
    from traversals.search.policy import answer_candidates

    kg = DictKG([("a", "starring", "x"), ("b", "starring", "x"), ("a", "has_genre", "comedy"),
                 ("a", "has_genre", "drama"), ("b", "has_genre", "drama"), ("b", "has_genre", "mystery")],
                labels={"x": "Actor X", "a": "Film A", "b": "Film B", "comedy": "Comedy", "drama": "Drama",
                        "mystery": "Mystery"}, relation_labels={})
    machine = Machine(KGSet([kg]))
    u = Usage()
    films = await expand(machine, machine.root(Subgraph().with_entities([kg.entities["x"]])), kg.entities["x"],
                         "~starring", u)
    assert list(answer_candidates(films))[0] == "[Film A, Film B]"  # one source: no union, the group as before
    genres = answer_candidates(await expand(machine, films, (kg.entities["a"], kg.entities["b"]), "has_genre", u))
    assert list(genres)[0] == "[Drama, Comedy, Mystery]" and genres["[Drama, Comedy, Mystery]"] == (
        "Drama", "Comedy", "Mystery")
    assert "[Film A, Film B]" in genres and "[Drama, Mystery]" in genres and "Comedy" in genres


def test_a_sentence_naming_one_entity_is_reduced_to_it():
    from traversals.search.policy import reduce_to_entity

    cands = ["[Beatrice Stone, Florence Stone]", "Florence Stone", "Beatrice Stone", "Sara Dylan"]
    assert reduce_to_entity("Bob Dylan's maternal grandmother is Florence Stone.", cands) == "Florence Stone"
    assert reduce_to_entity("Either Sara Dylan or Beatrice Stone", cands) == "Either Sara Dylan or Beatrice Stone"
    assert reduce_to_entity("No", cands) == "No"


async def test_a_label_also_named_on_its_own_outside_a_longer_one_is_kept():
    """A label inside a longer candidate's is dropped only where every place it stands is
    inside the longer one: "Alien and Aliens" names two films (it was reduced to "Aliens")."""
    from traversals.search.policy import Policy, reduce_to_entity

    cands = ["Alien", "Aliens", "Frozen", "Frozen II", "Ridley Scott"]
    assert reduce_to_entity("Alien and Aliens", cands) == "Alien and Aliens"
    assert reduce_to_entity("Frozen II came out after Frozen.", cands) == "Frozen II came out after Frozen."
    assert reduce_to_entity("Frozen II came out in 2019.", cands) == "Frozen II"
    assert reduce_to_entity("The answer is Aliens.", cands) == "Aliens"
    # constrained answers take the free text as written when it names two candidates
    kg = DictKG([("f1", "starred_actors", "s"), ("f2", "starred_actors", "s"), ("f3", "starred_actors", "s")],
                labels={"s": "Sigourney Weaver", "f1": "Alien", "f2": "Aliens", "f3": "Gorillas in the Mist"})
    machine, u = Machine(KGSet([kg])), Usage()
    weaver = (await kg.search("Sigourney Weaver"))[0]
    node = await expand(machine, machine.root(Subgraph().with_entities([weaver])), weaver, "~starred_actors", u)
    free = "Alien and Aliens"
    llm = ScriptedLLM(rules=[("", free)], score=lambda p, opts, pre: [-0.1 if o == free else -3.0 for o in opts])
    proposal = await Policy(llm, machine, constrained=True).propose(
        "Which films with Sigourney Weaver did Ridley Scott and James Cameron direct?", node, 1, u, force_answer=True)
    assert [a.text for a in proposal.actions] == [free]


def test_the_goal_of_an_expansion_is_the_thought_before_it():
    from traversals.search.machine import expansion_goal

    assert expansion_goal(["THINK: find the mother", "EXPAND_KG: country of origin of X"]) == "find the mother"
    assert expansion_goal(["EXPAND_KG: the mother", "SELECT ENTITIES: Q1"]) == "the mother"
    assert expansion_goal([]) == ""


async def test_an_entity_whose_relations_were_all_expanded_is_not_offered_again():
    from traversals.search.machine import allowed_default_actions

    kg = dylan_kg()
    u = Usage()
    dylan, duluth = kg.entities["Q392"], kg.entities["Q485708"]
    # Duluth's only relation, ~P19, walks back to Bob Dylan along the known edge: the
    # expansion that reaches Duluth finds it a dead end and exhausts it at once
    machine = Machine(KGSet([kg]))
    node = await expand(machine, machine.root(Subgraph().with_entities([dylan])), dylan, "P19", u)
    assert node.exhausted == {entity_key(duluth)}  # Dylan has more
    picking = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), u)
    assert [a.entities[0].label for _, a in machine.options(picking)] == ["Bob Dylan"]
    # without the screen (screen_limit=0) Duluth is offered; selected, it is found a dead
    # end — exhausted, and the retry selects again
    machine = Machine(KGSet([kg]), screen_limit=0)
    node = await expand(machine, machine.root(Subgraph().with_entities([dylan])), dylan, "P19", u)
    assert entity_key(duluth) not in node.exhausted and entity_key(dylan) not in node.exhausted
    picking = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), u)
    dead = await machine.transition(picking, Action(ActionType.SELECT_ENTITIES, entities=(duluth,)), u)
    assert dead.invalid and dead.state is State.SELECTING_ENTITIES and dead.exhausted == {entity_key(duluth)}
    assert "walks back" in dead.note and dead.history == picking.history
    offered = [a.entities[0].label for _, a in machine.options(dead)]
    assert offered == ["Bob Dylan"]
    # an entity whose offered relations were all expanded is exhausted too
    node = await expand(machine, node, dylan, "P25", u)
    node = await expand(machine, node, dylan, "P106", u)
    assert entity_key(dylan) in node.exhausted
    # a subgraph whose entities are all exhausted offers no EXPAND_KG at all
    alone = machine.root(Subgraph().with_entities([duluth]))
    alone = await expand(machine, alone, duluth, "~P19", u)
    only = [entity_key(e) for e in alone.subgraph.entities]
    assert set(only) == {entity_key(duluth), entity_key(dylan)}
    assert ActionType.EXPAND_KG in allowed_default_actions(alone)
    from dataclasses import replace as _replace
    done = _replace(alone, exhausted=frozenset(only))
    assert ActionType.EXPAND_KG not in allowed_default_actions(done)


async def test_the_dead_end_screen_checks_as_many_reached_entities_as_its_limit():
    # the genre X reaches two films whose only relation walks back to it: with a screen of
    # 1 (--screen-dead-ends 1) the first film reached is found a dead end, the second is not
    # checked; with 2 both are (X, whose one relation was walked, is exhausted either way)
    kg = DictKG([("f1", "has_genre", "x"), ("f2", "has_genre", "x")],
                labels={"f1": "Film 1", "f2": "Film 2", "x": "Genre X"})
    x, f1, f2 = (entity_key(kg.entities[k]) for k in ("x", "f1", "f2"))
    exhausted = {}
    for limit in (1, 2):
        machine = Machine(KGSet([kg]), screen_limit=limit)
        node = await expand(machine, machine.root(Subgraph().with_entities([kg.entities["x"]])), kg.entities["x"],
                            "~has_genre", Usage())
        assert [f.target.label for f in node.new_facts] == ["Film 1", "Film 2"]
        exhausted[limit] = node.exhausted
    assert exhausted == {1: {x, f1}, 2: {x, f1, f2}}


async def test_an_entity_with_relations_not_shown_is_not_exhausted_by_walking_the_shown_ones():
    # max_relations 1: one of Bob Dylan's three relations is shown, "(2 more not shown)";
    # once it is walked he is still offered, and the next selection shows another one
    kg = dylan_kg()
    machine = Machine(KGSet([kg], max_relations=1))
    dylan = kg.entities["Q392"]
    u = Usage()
    node = machine.root(Subgraph().with_entities([dylan]))
    picking = await machine.transition(await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), u),
                                       Action(ActionType.SELECT_ENTITIES, entities=(dylan,)), u)
    (first,) = picking.relation_keys
    assert picking.relations_omitted == 2
    node = await expand(machine, node, dylan, first, u)
    assert entity_key(dylan) not in node.exhausted
    picking = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), u)
    assert "Bob Dylan" in [a.entities[0].label for _, a in machine.options(picking)]
    picking = await machine.transition(picking, Action(ActionType.SELECT_ENTITIES, entities=(dylan,)), u)
    assert picking.state is State.SELECTING_RELATION and len(picking.relation_keys) == 1
    assert picking.relation_keys[0] != first and picking.relations_omitted == 1


async def test_relations_expanded_for_some_of_the_selected_entities_are_offered_for_the_others():
    # Film A's genres were walked; selected with Film B, has_genre is still offered (Film
    # B's are not known), and the walk's new facts are Film B's alone: re-walking Film A's
    # known edges adds nothing new
    kg = DictKG([("a", "has_genre", "comedy"), ("a", "has_genre", "drama"), ("b", "has_genre", "drama"),
                 ("b", "has_genre", "mystery")],
                labels={"a": "Film A", "b": "Film B", "comedy": "Comedy", "drama": "Drama", "mystery": "Mystery"})
    machine = Machine(KGSet([kg]), screen_limit=0)
    a, b = kg.entities["a"], kg.entities["b"]
    u = Usage()
    node = await expand(machine, machine.root(Subgraph().with_entities([a, b])), a, "has_genre", u)
    assert [(f.source.label, f.target.label) for f in node.new_facts] == [("Film A", "Comedy"), ("Film A", "Drama")]
    picking = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), u)
    picking = await machine.transition(picking, Action(ActionType.SELECT_ENTITIES, entities=(a, b)), u)
    assert list(picking.relation_keys) == ["has_genre"]
    both = await machine.transition(picking, Action(ActionType.SELECT_RELATION, relation=picking.relation_options[0],
                                                    relation_key="has_genre"), u)
    assert len(both.subgraph.facts) == 4
    assert [(f.source.label, f.target.label) for f in both.new_facts] == [("Film B", "Drama"), ("Film B", "Mystery")]
    # once walked for both, it is offered for neither
    picking = await machine.transition(both, Action(ActionType.EXPAND_KG, "go"), u)
    again = await machine.transition(picking, Action(ActionType.SELECT_ENTITIES, entities=(a, b)), u)
    assert again.invalid and "already expanded" in again.note


async def test_a_hub_is_read_once_a_question_to_see_that_it_does_not_only_walk_back():
    # Film 0 reaches the genre Drama by has_genre; from Drama, ~has_genre reverses that
    # edge, so it is checked for walking back: ten films, more than a call shows (3), so it
    # never only walks back, and a hub is not read again for it at the next selections
    class Counting(DictKG):
        def __init__(self, *a, **k) -> None:
            super().__init__(*a, **k)
            self.edges_asked: list[tuple[tuple[str, ...], str]] = []

        async def get_edges(self, entities, relation, limit=50):
            self.edges_asked.append((tuple(e.id for e in entities), relation.key))
            return await super().get_edges(entities, relation, limit)

    kg = Counting([(f"Film {i}", "has_genre", "Drama") for i in range(10)] + [("Film 0", "directed_by", "Ann")])
    u = Usage()
    for screen in (50, 0):
        kg.edges_asked.clear()
        machine = Machine(KGSet([kg], max_edges=3), screen_limit=screen)
        node = await expand(machine, machine.root(Subgraph().with_entities([kg.entities["Film 0"]])),
                            kg.entities["Film 0"], "has_genre", u)
        assert [e.label for e in node.subgraph.entities] == ["Film 0", "Drama"]
        drama = kg.entities["Drama"]
        offered = []
        for _ in range(3):  # three branches select Drama from the same node
            picking = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), u)
            picking = await machine.transition(picking, Action(ActionType.SELECT_ENTITIES, entities=(drama,)), u)
            offered.append(list(picking.relation_keys))
        assert offered == [["~has_genre"]] * 3  # offered every time: it reaches nine more films
        assert kg.edges_asked.count((("Drama",), "~has_genre")) == 1  # was 4 with the screen, 3 without
    # a relation that only walks back is still checked, and left out, at every selection
    film = kg.entities["Film 0"]
    machine = Machine(KGSet([kg], max_edges=3), screen_limit=0)
    node = await expand(machine, machine.root(Subgraph().with_entities([kg.entities["Ann"]])),
                        kg.entities["Ann"], "~directed_by", u)
    kg.edges_asked.clear()
    for _ in range(2):
        picking = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), u)
        picking = await machine.transition(picking, Action(ActionType.SELECT_ENTITIES, entities=(film,)), u)
        assert list(picking.relation_keys) == ["has_genre"]
    assert kg.edges_asked.count((("Film 0",), "directed_by")) == 2


def test_dead_ends_are_screened_by_default_only_when_every_kg_is_embedded():
    from traversals.api import screen_limit
    from traversals.errors import BadInput
    from traversals.search.machine import DEFAULT_SCREEN_LIMIT

    local, remote = dylan_kg(), dylan_kg()
    local.embedded = True  # what the pyoxigraph store declares
    assert screen_limit(None, [local]) == DEFAULT_SCREEN_LIMIT
    assert screen_limit(None, [local, remote]) == 0  # a request per entity to an endpoint
    assert screen_limit(7, [remote]) == 7 and screen_limit(0, [local]) == 0
    with pytest.raises(BadInput):
        screen_limit(-1, [local])


#: the 1.5B model's habit: THINK first, EXPAND_KG next
THINK_FIRST = table_score({"THINK": -0.1, "EXPAND_KG": -1.0, "ANSWER": -3.0, "Florence Stone": -0.1})


def thinking_llm(thought, score=THINK_FIRST, **kw):
    """A scripted model that prefers to think; ``thought`` is its THINK text (or a rule)."""
    return scripted(score=score, **kw, extra=[
        (lambda text: text.endswith("ANSWER:"), " Florence Stone"),
        (lambda text: text.endswith("EXPAND_KG:"), " look up the mother"),
        (lambda text: text.endswith("THINK:"), thought),
    ])


async def test_constrained_decoding_replaces_a_repeated_thought_with_the_next_ranked_action():
    llm = thinking_llm(" the same thought")
    s = build_solver("tree", llm, [dylan_kg()], SearchConfig(k=1, decoding="constrained", max_expansions=12))
    answer = await s.ask("Who is Bob Dylan's maternal grandmother?")
    nodes = answer.trace["nodes"]
    thoughts = [n for n in nodes if n["action"] and n["action"]["type"] == "THINK"]
    assert len(thoughts) == 1  # thought once; its greedy repeats were replaced, not kept
    assert not [n for n in nodes if n["invalid"]]
    assert [n["action"]["relation"]["key"] for n in nodes if n["action"] and n["action"]["type"] == "SELECT_RELATION"][:2] == ["P25", "P25"]


async def test_an_expansion_right_after_a_thought_carries_that_thought_without_a_call():
    llm = thinking_llm(" first the mother of Bob Dylan")
    s = build_solver("chain", llm, [dylan_kg()], SearchConfig(decoding="constrained", max_depth=9))
    nodes = (await s.ask("Who is Bob Dylan's maternal grandmother?")).trace["nodes"]
    acts = [(n["action"]["type"], n["action"]["text"]) for n in nodes if n["action"]]
    assert acts[:2] == [("THINK", "first the mother of Bob Dylan"), ("EXPAND_KG", "first the mother of Bob Dylan")]
    # the second expansion follows a SELECT RELATION, not a thought: its text is generated
    assert ("EXPAND_KG", "look up the mother") in acts
    gens = [c for c in llm.generate_calls if c.prefix == "EXPAND_KG:"]
    assert gens and all("THINK:" not in history(c.prompt)[-1] for c in gens)


async def test_a_tree_resamples_a_repeated_thought_instead_of_keeping_an_invalid_node():
    # k = 3 proposes every action type, so no other type can take a repeated greedy
    # thought's place: the thought is sampled again, and dropped if it still repeats
    def score(prompt, options, prefix):  # values favour the branch that thought first
        if prefix.startswith(("RATING", "So the score")):
            want = "1.0" if "THINK: the same thought" in prompt else "0.5"
            return [0.0 if o == want else -5.0 for o in options]
        return THINK_FIRST(prompt, options, prefix)

    def thoughts(nodes):
        return [n["action"]["text"] for n in nodes if n["action"] and n["action"]["type"] == "THINK"]

    async def run(think):
        llm = thinking_llm(think, score=score, answer_value="0.5")
        s = build_solver("tree", llm, [dylan_kg()], SearchConfig(k=3, decoding="constrained", max_expansions=8))
        return llm, (await s.ask("Who is Bob Dylan's maternal grandmother?")).trace["nodes"]

    fresh = iter(range(1, 100))
    llm, nodes = await run(lambda p, x, n, t: " the same thought" if t == 0 else f" fresh thought {next(fresh)}")
    assert not [n for n in nodes if n.get("note") == "repeated thought"]
    assert thoughts(nodes).count("the same thought") == 1 and "fresh thought 1" in thoughts(nodes)
    assert [c.temperature > 0 for c in llm.generate_calls if c.prefix == "THINK:"] == [False, False, True]
    # a thought that keeps repeating is dropped: the other action types stay
    llm, nodes = await run(" the same thought")
    assert not [n for n in nodes if n.get("note") == "repeated thought"]
    assert thoughts(nodes) == ["the same thought"]
    assert sum(c.temperature > 0 for c in llm.generate_calls if c.prefix == "THINK:") == 2  # THOUGHT_RETRIES


def test_yes_no_questions_are_told_apart_from_wh_questions():
    from traversals.search.policy import is_yes_no_question

    assert is_yes_no_question("Is Bob Dylan older than Joan Baez?")
    assert is_yes_no_question("did [Ingmar Bergman] direct [Persona]")
    assert not is_yes_no_question("when was [Torso] released")
    assert not is_yes_no_question("[Torso], when was it released")
    assert not is_yes_no_question("Isaac Newton was born where?")


async def test_a_bare_no_does_not_answer_a_wh_question_when_the_kg_offers_entities():
    # the copied example "No" is the model's favourite answer
    score = table_score({"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "No": -0.01, "Florence Stone": -1.0})

    def default(prompt, prefix, n, t):
        relations = [ln for ln in history(prompt) if ln.startswith("SELECT RELATION")]
        return "ANSWER: No" if len(relations) >= 2 else "EXPAND_KG: the mother"

    extra = [(lambda text: text.endswith("ANSWER:"), " No"), (lambda text: text.endswith("EXPAND_KG:"), " the mother")]
    wh = build_solver("chain", scripted(score=score, extra=extra, default=default), [dylan_kg()],
                      SearchConfig(decoding="constrained", max_depth=6))
    answer = await wh.ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.text == "Florence Stone"
    polar = build_solver("chain", scripted(score=score, extra=extra, default=default), [dylan_kg()],
                         SearchConfig(decoding="constrained", max_depth=6))
    answer = await polar.ask("Is Bob Dylan's maternal grandmother Joan Baez?")
    assert answer.text == "No"


ACTION_WORDS = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0}


def expanding_model(score_options):
    """A model that takes EXPAND_KG, writes " x" for any text and scores every other choice
    (relations, entities) by ``score_options(prompt, options)``."""
    def score(prompt, options, prefix):
        if set(options) <= ACTION_WORDS.keys():
            return [ACTION_WORDS[o] for o in options]
        return score_options(prompt, options)

    return scripted(score=score, extra=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")])


def relation_scores(real: dict[str, float], neutral: dict[str, float]):
    """An :func:`expanding_model` that scores the relations by ``real`` (``neutral`` under a
    neutral prompt)."""
    def score(prompt, options):
        table = {**real, **(neutral if NEUTRAL_TASK in prompt else {})}
        return [table.get(o, -9.0) for o in options]

    return expanding_model(score)


async def first_relation_choice(llm, calibrate: float, *, both_orders: bool = False,
                                question: str = "Who is Bob Dylan's maternal grandmother?"):
    """The first relation a chain takes for the question (the demo's by default), and the node's priors."""
    solver = build_solver("tree", llm, [dylan_kg()], SearchConfig(k=1, decoding="constrained", max_expansions=4,
                                                                calibrate=calibrate, both_orders=both_orders))
    answer = await solver.ask(question)
    node = next(n for n in answer.trace["nodes"] if n["state"] == "selecting-relation")
    return answer.trace["nodes"][node["id"] + 1]["action"]["relation"]["key"], node["priors"]


async def test_relation_choice_is_calibrated_against_a_neutral_prompt():
    # The model prefers "P106 - occupation" whatever the question (it does so under the
    # neutral prompt too); relative to that bias "P25 - mother" is the question's choice.
    llm = relation_scores({"P106 - occupation": -0.2, "P25 - mother": -1.0, "P19 - place of birth": -3.0},
                          {"P106 - occupation": -0.1, "P25 - mother": -3.0, "P19 - place of birth": -3.0})
    key, priors = await first_relation_choice(llm, 1.0)  # --calibrate
    assert key == "P25" and max(priors, key=priors.get) == "P25 - mother"
    # the neutral prompt is the same prompt without the query and the goal
    neutral = [c.prompt for c in llm.score_calls if NEUTRAL_TASK in c.prompt]
    assert neutral and all("maternal grandmother" not in p and "Bob Dylan" in p for p in neutral)
    # only the neutral prompt is a one-off for the KV cache
    assert all(c.transient == (NEUTRAL_TASK in c.prompt) for c in llm.score_calls)
    assert (await first_relation_choice(llm, 0.0))[0] == "P106"  # not calibrated


async def test_relation_calibration_weighs_the_neutral_prompt():
    # "P19" is improbable with the query and far more so without it: dividing by the whole
    # neutral probability (--calibrate, weight 1) picks it (gain -3.5 + 6 = 2.5 against P25's
    # -1 + 2 = 1); --calibrate-weight 0.5 weighs the neutral log-probability by half, so P25
    # wins (-1 + 1 = 0 against -3.5 + 3 = -0.5).
    llm = relation_scores({"P106 - occupation": -0.5, "P25 - mother": -1.0, "P19 - place of birth": -3.5},
                          {"P106 - occupation": -0.1, "P25 - mother": -2.0, "P19 - place of birth": -6.0})
    key, p = await first_relation_choice(llm, 0.5)
    assert key == "P25"
    # the node's prior is the calibrated distribution
    assert p["P25 - mother"] > p["P106 - occupation"] > p["P19 - place of birth"]
    key, p = await first_relation_choice(llm, 1.0)
    assert key == "P19"
    assert p["P19 - place of birth"] > p["P25 - mother"] > p["P106 - occupation"]


async def test_both_orders_pools_out_a_preference_for_the_first_listed_relation():
    # The model adds 0.6 to whichever relation the prompt lists first; on its merits it
    # prefers "P19 - place of birth" (-1.0 against -1.6), listed in the middle. Asked once,
    # the first-listed relation wins; asked with the list in both orders, each order's
    # favourite pays for its place in the other.
    def score(prompt, options):
        first = min(options, key=lambda o: prompt.find("\n" + o + "\n"))
        merit = "P19 - place of birth" if NEUTRAL_TASK not in prompt else None  # without the query: none
        return [(-1.0 if o == merit else -1.6) + (0.6 if o == first else 0.0) for o in options]

    async def choice(both: bool, calibrate: float = 0.0):
        model = expanding_model(score)
        key, priors = await first_relation_choice(model, calibrate, both_orders=both, question="Where was Bob Dylan born?")
        return key, priors, [c for c in model.score_calls if "P19 - place of birth" in c.options]

    key, _, calls = await choice(False)
    assert key != "P19" and len(calls) == 1
    listed = [o for o in calls[0].options if "\n" + o + "\n" in calls[0].prompt]
    listed.sort(key=calls[0].prompt.find)
    assert listed[0] != "P19 - place of birth" != listed[-1]  # the test needs it inside the list
    key, priors, calls = await choice(True)
    assert key == "P19" and max(priors, key=priors.get) == "P19 - place of birth"
    # the second asking lists the options last to first and is scored beside the cached context
    assert [c.transient for c in calls] == [False, True]
    second = sorted(listed, key=calls[1].prompt.find)
    assert second == listed[::-1]
    # with --calibrate each order is calibrated against its own neutral prompt
    key, _, calls = await choice(True, 1.0)
    assert key == "P19" and len(calls) == 4
    assert sum(NEUTRAL_TASK in c.prompt for c in calls) == 2


async def test_a_repeated_answer_on_the_same_path_is_valued_once():
    # A tree proposes ANSWER at every default node; after a THINK the subgraph is the same,
    # so the same answer comes back with the same path and the same value prompt.
    from traversals.search.value import ValueFunction

    kg = dylan_kg()
    llm = scripted(score=table_score({}))
    machine = Machine(KGSet([kg]))
    u = Usage()
    root = machine.root(Subgraph().with_entities((await kg.search("Bob Dylan"))[:1]))
    think = await machine.transition(root, Action(ActionType.THINK, "the mother first"), u)
    other = await machine.transition(root, Action(ActionType.THINK, "the grandmother"), u)
    values = ValueFunction(llm, machine, constrained=True)
    query = "Who is Bob Dylan's mother?"
    first = [await values.evaluate(query, await machine.transition(n, Action(ActionType.ANSWER, "Beatrice Stone"), u), u)
             for n in (root, think, other)]
    assert len({*first}) == 1 and len(llm.score_calls) == 1
    await values.evaluate(query, await machine.transition(root, Action(ActionType.ANSWER, "Sara Dylan"), u), u)
    assert len(llm.score_calls) == 2  # another answer is another prompt



@pytest.mark.parametrize("constrained", [True, False])
async def test_value_examples_put_worked_examples_between_the_preamble_and_the_query(constrained):
    from traversals.search.templates import template
    from traversals.search.value import ValueFunction

    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    u = Usage()
    root = machine.root(Subgraph().with_entities((await kg.search("Bob Dylan"))[:1]))
    answer = await machine.transition(root, Action(ActionType.ANSWER, "Beatrice Stone"), u)
    query = "Who is Bob Dylan's mother?"
    examples = template("answer_value_examples").template
    preamble = template("preamble").template
    plain = ValueFunction(scripted(), machine, constrained=constrained).prompt(query, answer)
    shown = ValueFunction(scripted(), machine, constrained=constrained, examples=True).prompt(query, answer)
    assert examples not in plain and shown.count(examples) == 1
    # the fixed text comes before anything the node changes, so the KV cache keeps it
    assert shown.index(preamble) < shown.index(examples) < shown.index(query)
    assert shown.replace(examples + "\n\n", "") == plain
    # intermediate states are rated as before
    think = await machine.transition(root, Action(ActionType.THINK, "the mother first"), u)
    assert ValueFunction(scripted(), machine, constrained=constrained, examples=True).prompt(query, think) == \
        ValueFunction(scripted(), machine, constrained=constrained).prompt(query, think)
    # the examples end on the rating the scorer or the reasoning continues from
    assert "So the score for the provided answer should be 0.0" in examples
    assert "So the score for the provided answer should be 1.0" in examples


@pytest.mark.parametrize("constrained", [True, False])
async def test_value_examples_reach_the_tree_value_prompts(constrained):
    llm = scripted(score=table_score({}) if constrained else None)
    solver = build_solver("tree", llm, [dylan_kg()], SearchConfig(k=1, value_examples=True))
    answer = await solver.ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.text == "Florence Stone"
    rated = [c.prompt for c in llm.calls if "Provided answer: Florence Stone" in c.prompt]
    assert rated and all("what books did [Jane Austen] write" in p for p in rated)



async def test_value_reasoning_reads_the_score_after_the_models_own_reasoning():
    from traversals.search.value import ANSWER_SCORE_PREFIX, ValueFunction

    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    u = Usage()
    root = machine.root(Subgraph().with_entities((await kg.search("Bob Dylan"))[:1]))
    node = await expand(machine, root, kg.entities["Q392"], "P25", u)

    def rate(prompt, options, prefix):  # the score depends on what the reasoning said
        high = "is the mother" in prefix
        return [0.0 if o == ("1.0" if high else "0.0") else -6.0 for o in options]

    def reason(prompt, prefix, n, t):
        sure = "Provided answer: Beatrice Stone" in prompt
        why = " The path says Beatrice Stone is the mother." if sure else " Sara Dylan is\nnot on the path."
        return why + "\n\nSo the score for the provided answer should be 0.5"

    llm = ScriptedLLM(rules=[(ANSWER_EVAL, reason)], score=rate)
    values = ValueFunction(llm, machine, constrained=True, reasoning=True)
    query = "Who is Bob Dylan's mother?"
    right = await machine.transition(node, Action(ActionType.ANSWER, "Beatrice Stone"), u)
    wrong = await machine.transition(node, Action(ActionType.ANSWER, "Sara Dylan"), u)
    assert await values.evaluate(query, right, u) > 0.95
    assert await values.evaluate(query, wrong, u) < 0.05
    gen = llm.generate_calls
    assert [c.prefix for c in gen] == ["Reasoning:", "Reasoning:"] and "So the score" in gen[0].stop
    assert "Give reasoning" in gen[0].prompt  # F.5's instruction, as the paper asks it
    # the score is read after the reasoning, which stopped before the model's own number
    scored = llm.score_calls
    assert scored[0].prefix == "Reasoning: The path says Beatrice Stone is the mother.\n" + ANSWER_SCORE_PREFIX
    assert scored[1].prefix.startswith("Reasoning: Sara Dylan is not on the path.")  # one line
    assert "value reasoning: The path says Beatrice Stone is the mother." in right.note
    # the same answer on the same path is not reasoned about twice
    again = await machine.transition(node, Action(ActionType.ANSWER, "Beatrice Stone"), u)
    await values.evaluate(query, again, u)
    assert len(llm.generate_calls) == 2 and len(llm.score_calls) == 2
    assert "value reasoning: The path says" in again.note


def films_kg() -> DictKG:
    """Actor X starred in films A and B; their genres."""
    return DictKG([("a", "starring", "x"), ("b", "starring", "x"), ("a", "has_genre", "comedy"),
                   ("a", "has_genre", "drama"), ("b", "has_genre", "drama"), ("b", "has_genre", "mystery")],
                  labels={"x": "Actor X", "a": "Film A", "b": "Film B", "comedy": "Comedy", "drama": "Drama",
                          "mystery": "Mystery"}, relation_labels={})


async def test_a_selection_offers_what_the_latest_expansion_reached_as_one_option():
    # the paper's LLM may select "E2, E3"; option scoring offers what the machine lists
    kg = films_kg()
    u = Usage()
    for group_option in (True, False):
        machine = Machine(KGSet([kg]), group_option=group_option)
        films = await expand(machine, machine.root(Subgraph().with_entities([kg.entities["x"]])), kg.entities["x"],
                             "~starring", u)
        selecting = await machine.transition(films, Action(ActionType.EXPAND_KG, "go"), u)
        options = machine.options(selecting)
        singles = [a.entities for _, a in options if len(a.entities) == 1]
        assert sorted(e.label for (e,) in singles) == ["Film A", "Film B"]  # Actor X: exhausted
        groups = [(t, a.entities) for t, a in options if len(a.entities) > 1]
        if not group_option:
            assert groups == []
            continue
        # first, the question's own entity left out; the prompt lists it among the options
        (text, entities), = groups
        assert options[0][1].entities == entities and {e.label for e in entities} == {"Film A", "Film B"}
        handles = ", ".join(selecting.subgraph.handle(e) for e in entities)
        assert text == handles  # the IDs, as the paper's LLM writes a selection of several
        assert text in machine.prompt("what genres are the films of [Actor X]", selecting)
        # selected, its relation options are the films' own together
        chosen = await machine.transition(selecting, options[0][1], u)
        assert chosen.selected == entities and {r.key for r in chosen.relation_options} >= {"has_genre"}
        # after one film's genres, the group is what that expansion reached, not the films
        one = await expand(machine, films, kg.entities["a"], "has_genre", u)
        again = await machine.transition(one, Action(ActionType.EXPAND_KG, "go"), u)
        assert [{e.label for e in a.entities} for _, a in machine.options(again) if len(a.entities) > 1] in (
            [], [{"Comedy", "Drama"}])


async def test_a_chain_that_selects_the_group_answers_with_the_union_of_its_targets():
    # "what are the genres of the films X starred in", scored options: the group preferred
    kg = films_kg()

    def score(prompt, options, prefix):
        hops = sum(ln.startswith("SELECT RELATION") for ln in history(prompt)) if "Previous Actions:" in prompt else 0
        table = {"EXPAND_KG": -0.1 if hops < 2 else -3.0, "THINK": -3.0, "ANSWER": -2.0 if hops < 2 else -0.1,
                 "~starring": -0.1, "has_genre": -0.1}
        out = []
        for o in options:
            if prefix.startswith(("RATING", "So the score")):
                out.append(0.0 if o == "1.0" else -5.0)
            elif ENTITIES in prompt.rsplit("Current task", 1)[-1]:
                out.append(-0.5 if "," in o else -1.0 if "Actor X" in o and "already" not in o else -2.0)
            else:
                out.append(table.get(o, -6.0))
        return out

    llm = scripted(score=score, extra=[
        (lambda text: text.endswith("ANSWER:"), " Drama"),
        (lambda text: text.endswith("EXPAND_KG:"), " the genres"),
    ])
    for group_selection in (True, False):
        s = build_solver("chain", llm, [kg], SearchConfig(decoding="constrained", group_selection=group_selection))
        answer = await s.ask("what are the genres of the films [Actor X] starred in", topic_entities=["Actor X"])
        nodes = answer.trace["nodes"]
        selections = [[e["label"] for e in n["action"]["entities"]] for n in nodes
                      if n["action"] and n["action"]["type"] == "SELECT_ENTITIES"]
        if group_selection:  # the second hop starts from both films: their genres, the commonest first
            assert selections == [["Actor X"], ["Film A", "Film B"]] and answer.text == "[Drama, Comedy, Mystery]"
        else:  # one film at a time: the second hop reaches one film's genres
            assert selections[1] in (["Film A"], ["Film B"]) and answer.text != "[Drama, Comedy, Mystery]"


async def test_answers_sets_how_many_distinct_answers_an_answer_action_proposes():
    # with the LLM value an ANSWER proposes its favourite only, unless asked for more
    score = table_score({"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "Q392 (Bob Dylan)": -0.2,
                         "Q62519478 (Beatrice Stone)": -0.1})
    for answers, expected in ((None, 1), (2, 2)):
        llm = scripted(score=score, extra=[
            (lambda text: text.endswith("ANSWER:"), " Florence Stone"),
            (lambda text: text.endswith("EXPAND_KG:"), " look up the mother"),
        ])
        s = build_solver("chain", llm, [dylan_kg()], SearchConfig(decoding="constrained", max_depth=6, answers=answers))
        answer = await s.ask("Who is Bob Dylan's maternal grandmother?")
        done = [n for n in answer.trace["nodes"] if n["state"] == "done"]
        assert len(done) == expected and all(n["value"] is not None for n in done)
        assert len({n["action"]["text"] for n in done}) == expected  # distinct
    with pytest.raises(BadInput, match="--answers"):
        build_solver("chain", llm, [dylan_kg()], SearchConfig(answers=0))


async def test_a_tree_with_the_llm_value_proposes_one_answer_per_answer_action_whatever_its_k():
    # the default is one answer with the LLM value (each costs a rating call), not k: a k = 3
    # tree's ANSWER action where the KG offers Beatrice Stone beside the free text still
    # proposes one answer. States are rated 1.0 once Dylan's mother is walked, else 0.5.
    table = table_score({"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "Q392 (Bob Dylan)": -0.2,
                         "Q62519478 (Beatrice Stone)": -0.1})

    def score(prompt, options, prefix):
        if prefix.startswith("RATING"):
            best = "1.0" if "SELECT RELATION: P25" in prompt else "0.5"
            return [0.0 if o == best else -5.0 for o in options]
        return table(prompt, options, prefix)

    llm = scripted(score=score, extra=[
        (lambda text: text.endswith("ANSWER:"), " Florence Stone"),
        (lambda text: text.endswith("EXPAND_KG:"), " look up the mother"),
        (lambda text: text.endswith("THINK:"), " the mother first"),
    ])
    s = build_solver("tree", llm, [dylan_kg()], SearchConfig(k=3, decoding="constrained", max_expansions=8))
    answer = await s.ask("Who is Bob Dylan's maternal grandmother?")
    nodes = {n["id"]: n for n in answer.trace["nodes"]}
    done = [n for n in nodes.values() if n["state"] == "done"]
    parents = [n["parent"] for n in done]
    assert len(parents) == len(set(parents))  # one answer per ANSWER action
    # among them one at the state that walked to Beatrice Stone, where the KG offered her
    assert any((nodes[p]["action"] or {}).get("relation", {}).get("key") == "P25" for p in parents)


async def test_calibrated_answers_rank_the_kgs_candidates_by_what_the_query_adds():
    # By probability alone the model names the first hop's Beatrice Stone, who is easy to
    # copy; without the query it names her just as readily, while Florence Stone owes
    # her probability to the query: ranked by what the query adds, Florence comes first.
    raw = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "Q62519478 (Beatrice Stone)": -0.1,
           "Q392 (Bob Dylan)": -0.2, "Beatrice Stone": -0.5, "Florence Stone": -1.0, "Two grandmothers": -6.0}

    def score(prompt, options, prefix):
        table = dict(raw)
        if NEUTRAL_TASK in prompt:
            table.update({"Beatrice Stone": -0.5, "Florence Stone": -3.0})
        return [table.get(o, -0.1 if o.startswith("P25") else -4.0) for o in options]

    async def ask(free, calibrate_answers):
        llm = scripted(score=score, extra=[
            (lambda text: text.endswith("ANSWER:"), free),
            (lambda text: text.endswith("EXPAND_KG:"), " look up the mother"),
        ])
        s = build_solver("chain", llm, [dylan_kg()], SearchConfig(decoding="constrained", max_depth=6,
                                                                  calibrate_answers=calibrate_answers))
        return (await s.ask("Who is Bob Dylan's maternal grandmother?")).text, llm

    assert (await ask(" Beatrice Stone", False))[0] == "Beatrice Stone"
    text, llm = await ask(" Beatrice Stone", True)
    assert text == "Florence Stone"
    neutral = [c for c in llm.score_calls if NEUTRAL_TASK in c.prompt]
    assert len(neutral) == 1 and neutral[0].transient and "maternal grandmother" not in neutral[0].prompt
    assert "Beatrice Stone" in neutral[0].options and "Florence Stone" in neutral[0].options
    # a free text that names no entity of the subgraph (a count) keeps first place when it is the favourite
    raw["Two grandmothers"] = -0.01
    assert (await ask(" Two grandmothers", True))[0] == "Two grandmothers"
    # ... and not when it only restates an entity the KG offers
    assert (await ask(" It is Beatrice Stone.", True))[0] == "Florence Stone"


COMPARE = "Which candidate answers the question?"


async def test_compared_answers_choose_the_group_the_query_asks_for_in_both_orders():
    # By probability the answer step names the first hop's Beatrice Stone. Asked which
    # group of reached entities answers the query, the model prefers the two-hop path a
    # little and the last line a lot: one order alone would measure the position, both
    # orders summed choose Florence Stone.
    raw = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "Q62519478 (Beatrice Stone)": -0.1,
           "Q392 (Bob Dylan)": -0.2, "Beatrice Stone": -0.5, "Florence Stone": -1.0, "Two grandmothers": -6.0}
    seen: list[list[str]] = []

    def score(prompt, options, prefix):
        if COMPARE in prompt:
            lines = [ln for ln in prompt.splitlines() if ln[:3] in {f"{x}. " for x in "ABCDEFGH"}]
            seen.append(lines)
            assert options == [f" {ln[0]}" for ln in lines]
            return [(-1.0 if "mother -> mother" in ln else -1.5) + (1.0 if i == len(lines) - 1 else 0.0)
                    for i, ln in enumerate(lines)]
        return [raw.get(o, -0.1 if o.startswith("P25") else -4.0) for o in options]

    async def ask(free, compare):
        seen.clear()
        llm = scripted(score=score, extra=[
            (lambda text: text.endswith("ANSWER:"), free),
            (lambda text: text.endswith("EXPAND_KG:"), " look up the mother"),
        ])
        s = build_solver("chain", llm, [dylan_kg()], SearchConfig(decoding="constrained", max_depth=6,
                                                                  compare_answers=compare))
        return (await s.ask("Who is Bob Dylan's maternal grandmother?")).text, llm

    assert (await ask(" Beatrice Stone", False))[0] == "Beatrice Stone"
    text, llm = await ask(" Beatrice Stone", True)
    assert text == "Florence Stone"
    compared = [c for c in llm.score_calls if COMPARE in c.prompt]
    assert len(compared) == 2 and all(c.transient for c in compared)
    assert "Bob Dylan's maternal grandmother" in compared[0].prompt
    # each group is a line with its entities and the relation path that reached them, in both orders
    first, second = ([ln[3:] for ln in lines] for lines in seen)
    assert first == second[::-1] and len(first) >= 2
    assert "Florence Stone (reached by Bob Dylan -> mother -> mother)" in first
    assert "Beatrice Stone (reached by Bob Dylan -> mother)" in first
    # a free text that names no entity of the subgraph (a count) keeps first place when it is the favourite
    raw["Two grandmothers"] = -0.01
    assert (await ask(" Two grandmothers", True))[0] == "Two grandmothers"
    assert (await ask(" It is Beatrice Stone.", True))[0] == "Florence Stone"


def test_reached_groups_group_entities_by_the_relation_path_that_reached_them():
    from traversals.kg.base import Entity, Relation
    from traversals.search.machine import Node
    from traversals.search.provenance import reached_groups
    from traversals.search.subgraph import Fact

    x, a, b, drama, war = (Entity(i, label, kg="kg") for i, label in
                           (("x", "X"), ("a", "Film A"), ("b", "Film B"), ("d", "Drama"), ("w", "War")))
    directed = Relation("directed_by", "directed by", "directed", inverse=True, kg="kg")
    genre = Relation("has_genre", "has genre", kg="kg")
    root = Node(id=0, state=State.DEFAULT, subgraph=Subgraph().with_entities([x]))
    hop1 = root.subgraph.extend([Fact(x, directed, a), Fact(x, directed, b)])
    n1 = Node(id=1, state=State.DEFAULT, subgraph=hop1, parent=root)
    hop2 = hop1.extend([Fact(a, genre, drama), Fact(b, genre, war), Fact(b, genre, drama)])
    n2 = Node(id=2, state=State.DEFAULT, subgraph=hop2, parent=n1)
    groups = reached_groups(n2)
    # newest path first; in a group the entity most facts reached first
    assert list(groups) == ["X -> directed -> has genre", "X -> directed"]
    assert groups["X -> directed -> has genre"] == ("Drama", "War")
    assert groups["X -> directed"] == ("Film A", "Film B")


def test_two_kgs_of_one_name_are_refused_not_mixed_up():
    a = DictKG([("France", "capital", "Paris")], name="kb")
    b = DictKG([("Peru", "capital", "Lima")], name="kb")
    with pytest.raises(BadInput, match="two knowledge graphs are named 'kb'"):
        KGSet([a, b])
    with pytest.raises(BadInput, match="named 'kb'"):
        build_solver("chain", ScriptedLLM([]), [a, b])
    assert KGSet([a, DictKG([("Peru", "capital", "Lima")], name="kb-2")]).multi


@pytest.mark.parametrize("change, says", [({"threshold": float("nan")}, "--threshold"), ({"threshold": -1.0}, "--threshold"),
                                          ({"max_depth": 0}, "--max-depth"), ({"max_expansions": -5}, "--max-expansions")])
def test_search_settings_out_of_range_are_refused(change, says):
    kg = DictKG([("France", "capital", "Paris")])
    with pytest.raises(BadInput, match=says):
        build_solver("tree", ScriptedLLM([]), [kg], SearchConfig(**change))
    with pytest.raises(BadInput, match=r"pass \[kg\]"):
        build_solver("tree", ScriptedLLM([]), kg)
    assert build_solver("tree", ScriptedLLM([]), [kg], SearchConfig(threshold=1.01))  # over 1: never stops early


def test_numpy_numbers_and_a_path_are_settings_of_the_right_kind():
    import numpy as np
    from pathlib import Path

    kg = DictKG([("France", "capital", "Paris")])
    assert build_solver("tree", ScriptedLLM([]), [kg], SearchConfig(k=np.int64(2), threshold=np.float32(0.8),
                                                                    prompts=Path("default")))


@pytest.mark.parametrize("strategy, change, says", [
    ("chain", {"max_expansions": float("nan")}, "SearchConfig.max_expansions is a whole number, got nan"),
    ("tree", {"k": 2.5}, "SearchConfig.k is a whole number or None, got 2.5"),
    ("chain", {"max_expansions": "5"}, "SearchConfig.max_expansions is a whole number, got '5'"),
    ("chain", {"threshold": None}, "SearchConfig.threshold is a number, got None"),
    ("chain", {"kg_timeout": "5"}, "SearchConfig.kg_timeout is a number or None, got '5'"),
    ("beam", {"max_edges": 0}, "SearchConfig.max_edges must be at least 1, got 0"),
    ("mcts", {"max_relations": -1}, "SearchConfig.max_relations must be at least 1, got -1"),
    ("tree", {"diverse_temperature": "1"}, "SearchConfig.diverse_temperature is a number, got '1'"),
    ("tree", {"both_orders": "yes"}, "SearchConfig.both_orders is True or False, got 'yes'"),
    ("tree", {"prompts": 5}, "SearchConfig.prompts is a string, got 5"),
])
def test_settings_of_the_wrong_kind_are_refused_when_the_solver_is_built(strategy, change, says):
    """They had crippled the search in silence (a NaN max_expansions answered nothing with no
    LLM call, max_edges 0 walked nothing) or failed with a TypeError after calls were spent."""
    from traversals.embed import open_embedder

    kg = DictKG([("France", "capital", "Paris")])
    with pytest.raises(BadInput, match=re.escape(says)):
        build_solver(strategy, ScriptedLLM([]), [kg], SearchConfig(**change), embedder=open_embedder("lexical"))


def test_an_async_event_callback_is_refused_as_it_would_never_run():
    async def sink(event):  # pragma: no cover - never called
        pass

    with pytest.raises(BadInput, match="on_event is called synchronously"):
        build_solver("tree", ScriptedLLM([]), [DictKG([("France", "capital", "Paris")])], on_event=sink)


async def test_an_entity_found_in_both_kgs_is_linked_once_each_way():
    wiki = DictKG([("Q2", "P1", "Q3")], labels={"Q2": "Omaha", "Q3": "Nebraska"}, name="wiki")
    mb = DictKG([("mb-omaha", "capacity", "18975")], labels={"mb-omaha": "Omaha"}, name="mb")
    kgs = KGSet([wiki, mb])
    omaha_wiki, omaha_mb = wiki.entities["Q2"], mb.entities["mb-omaha"]
    await kgs.link([omaha_wiki, omaha_mb], Usage())  # both in one step: each finds the other
    assert kgs.copies(omaha_wiki, mb) == [omaha_mb] and kgs.copies(omaha_mb, wiki) == [omaha_wiki]


def test_option_probabilities_never_come_out_nan():
    import math

    from traversals.search.choices import softmax

    assert softmax([-math.inf] * 4) == [0.25] * 4  # an endpoint that scored no option: uniform
    assert softmax([math.nan, 0.0]) == [0.0, 1.0]  # NaN counts as impossible
    assert softmax([0.0, math.log(3)]) == pytest.approx([0.25, 0.75])


def test_the_cot_answer_is_what_follows_the_last_answer_mark_a_list_below_it_included():
    from traversals.search.cot import extract_answer

    assert extract_answer("Let me think.\nANSWER: Rome, Oslo") == "Rome, Oslo"
    assert extract_answer("Answer: first try\nNo wait.\nAnswer:  Paris ") == "Paris"
    # the answer on the lines under "Answer:" (it had been the first of them only)
    assert extract_answer("Thinking...\nAnswer:\nRome\nOslo\n\nThat is all.") == "Rome, Oslo"
    assert extract_answer("Answer:\n- The Gumball Rally\n- Cleopatra Jones\n") == "The Gumball Rally, Cleopatra Jones"
    assert extract_answer("Answer:\n1. Rome\n2) Oslo") == "Rome, Oslo"
    assert extract_answer("no mark here\n\nlast line ") == "last line"
    assert extract_answer("ANSWER:") == "" and extract_answer("") == ""


def past_context_once_beatrice_is_seen(forced: str = "EXPAND_KG: look up his mother"):
    """A chain LLM that expands Bob Dylan's mother, and whose context the subgraph with
    Beatrice Stone overflows; ``forced`` is its reply when the search asks for an answer."""
    from traversals.errors import PromptTooLong

    def respond(prompt, prefix, n, temperature):
        text = prompt + prefix
        if "So the next action should be:" in text:
            if "Beatrice Stone" in prompt:
                raise PromptTooLong("the prompt has 9000 tokens but the context window is 8192")
            if "The search is over" in prompt:
                return forced
            return "EXPAND_KG: look up his mother"
        if "entities to expand" in text:
            return "Q392"
        if "selecting property" in text:
            return "P25"
        return "0.5"

    return respond


async def test_a_prompt_past_the_llms_context_ends_its_branch_not_the_question():
    """A subgraph grown past the context (a hub of long labels): the next prompt's 400 failed
    the whole question, even with an answer found; now that node is not expanded (a note
    says why) and the search goes on, or ends with what it has."""
    solver = build_solver("tree", ScriptedLLM(past_context_once_beatrice_is_seen()), [dylan_kg()],
                          SearchConfig(k=1, decoding="sampled"))
    answer = await solver.ask("who is the mother of [Bob Dylan]")
    assert answer.stopped == "frontier_empty"
    last = answer.trace["nodes"][-1]
    assert "not expanded: its prompt does not fit the LLM's context" in last["note"]


async def test_a_first_prompt_past_the_context_is_an_error_not_a_quiet_no_answer():
    """When not even the root's prompt fits (--n-ctx too small), the question had ended in
    "Cannot find answer": an eval scored it as an answer, and no error stopped the run."""
    from traversals.errors import PromptTooLong

    def respond(prompt, prefix, n, temperature):
        raise PromptTooLong("the prompt has 2100 tokens but the context window is 2048 (raise n_ctx)")

    solver = build_solver("tree", ScriptedLLM(respond), [dylan_kg()], SearchConfig(k=1, decoding="sampled"))
    with pytest.raises(PromptTooLong, match="raise n_ctx"):
        await solver.ask("who is the mother of [Bob Dylan]")


def test_a_relation_key_with_brackets_quotes_stops_or_a_dash_is_chosen_as_shown():
    """Sampled decoding stripped "()'\\".[]" from the reply, so the key "directed by (film)" as the
    option line shows it was no choice (the docs allow any id), nor '"directed"', "dir.", "dir - film"."""
    from traversals.kg.base import Relation

    kg = dylan_kg()
    machine = Machine(KGSet([kg]))
    root = machine.root(Subgraph().with_entities([kg.entities["Q392"]]))
    for key in ("directed by (film)", '"directed"', "dir.", "[dir]", "dir - film"):
        rels = (Relation(id=key, label="directed by", kg="test"), Relation(id="P25", label="mother", kg="test"))
        node = root.__class__(id=10, state=State.SELECTING_RELATION, subgraph=root.subgraph,
                              relation_options=rels, relation_keys=(key, "P25"))
        for reply in (key, f"{key} - directed by"):
            assert machine.parse(node, reply).relation_key == key, reply
        assert machine.parse(node, "[P25].").relation_key == "P25"  # punctuation around a key still goes


# -- replies cut at max_tokens ------------------------------------------------------------

async def test_an_answer_rating_cut_at_max_tokens_is_asked_its_score_after_its_reasoning():
    """A chat model's F.5 reasoning runs past the 200 tokens of the rating: its number was
    cut off and the answer valued 0.0, noted "no number in the evaluator's output"."""
    reasoning = "Reasoning: " + " ".join(["The path shows Bob Dylan's mother Beatrice Stone and her mother."] * 25)

    def answer_value(prompt, prefix, n, t):
        if prefix.endswith("So the score for the provided answer should be "):
            return "0.9"
        return reasoning + "\nSo the score for the provided answer should be 0.9"

    llm = ScriptedLLM(rules=[EXTRACT, (ANSWER_EVAL, answer_value), (RATING, "0.5"), (RELATION, "P25"),
                             (ENTITIES, lambda p, *_: "Q62519478" if "SELECT RELATION" in p else "Q392"),
                             (DEFAULT, grandmother_policy)], cut_at_max_tokens=True)
    answer = await solver(llm, k=1).ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.text == "Florence Stone" and answer.value == 0.9
    node = next(n for n in answer.trace["nodes"] if n["id"] == answer.trace["answer_node"])
    assert "the evaluator's reasoning was cut at max_tokens (200); its score asked for after it" in node["note"]
    again = [c for c in llm.generate_calls if c.prefix.endswith("should be ")]
    assert len(again) == 1 and again[0].prefix.startswith("Reasoning: The path shows")  # the reasoning, continued


@pytest.mark.parametrize("words_before,stated,value,asked", [
    (100, "0.9.", 0.9, 0),  # stated, then ran on past the 200 tokens
    (189, "0.9", 0.3, 1),  # cut right after it: the number may be unfinished ("0.9" of "0.95"), asked again
])
async def test_an_answer_rating_that_states_its_score_before_the_cut_keeps_it(words_before, stated, value, asked):
    """A rating that stated its score and ran on past max_tokens was asked its score again:
    an extra call, whose number (here 0.3) replaced the 0.9 it had stated."""

    def answer_value(prompt, prefix, n, t):
        if prefix.endswith("So the score for the provided answer should be "):
            return "0.3"
        return (f"Reasoning: {' '.join(['path'] * words_before)} So the score for the provided answer should be "
                f"{stated} " + "Additional commentary follows here " * 60)

    llm = ScriptedLLM(rules=[EXTRACT, (ANSWER_EVAL, answer_value), (RATING, "0.5"), (RELATION, "P25"),
                             (ENTITIES, lambda p, *_: "Q62519478" if "SELECT RELATION" in p else "Q392"),
                             (DEFAULT, grandmother_policy)], cut_at_max_tokens=True)
    answer = await solver(llm, k=1).ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.text == "Florence Stone" and answer.value == value
    assert len([c for c in llm.generate_calls if c.prefix.endswith("should be ")]) == asked


async def test_an_answer_cut_at_max_tokens_is_noted():
    llm = scripted(default=lambda p, *a: grandmother_policy(p, *a).replace(
        "Florence Stone", "Florence Stone, " + "who was born in Duluth " * 30))
    llm.cut_at_max_tokens = True
    answer = await solver(llm, k=1).ask("Who is Bob Dylan's maternal grandmother?")
    node = next(n for n in answer.trace["nodes"] if n["id"] == answer.trace["answer_node"])
    assert "the LLM's output was cut at max_tokens" in node["note"]


async def test_a_selection_cut_at_max_tokens_does_not_read_its_unfinished_last_item():
    """"P1" cut from "P19" selected the relation P1."""
    kg = DictKG([("Q392", "P1", "Q5"), ("Q392", "P19", "Q485708")],
                labels={"Q392": "Bob Dylan", "Q5": "Sara Dylan", "Q485708": "Duluth"},
                relation_labels={"P1": ("spouse", ""), "P19": ("place of birth", "")})

    class Cut(ScriptedLLM):  # a backend whose relation choice stopped mid-key
        async def generate(self, prompt, **kw):
            got = await super().generate(prompt, **kw)
            if RELATION in prompt:
                got.texts, got.finish_reasons = ["P1"], ["length"]
            return got

    llm = Cut(rules=[EXTRACT, (ANSWER_EVAL, "So the score for the provided answer should be 0.9"), (RATING, "0.5"),
                     (RELATION, "P19"), (ENTITIES, "Q392"),
                     (DEFAULT, lambda p, *_: "ANSWER: Duluth" if len(history(p)) > 3 else "EXPAND_KG: birth place")])
    answer = await solver(llm, kg, k=1, max_expansions=4).ask("Where was Bob Dylan born?")
    chosen = [n for n in answer.trace["nodes"] if (n.get("action") or {}).get("type") == "SELECT_RELATION"]
    assert not chosen  # P1 was never walked
    cut = [n for n in answer.trace["nodes"] if "cut at max_tokens" in n.get("note", "")]
    assert cut and all(n["invalid"] for n in cut)


def test_a_cut_selection_is_read_to_its_last_whole_item():
    from traversals.search.policy import whole_items

    assert whole_items("E2, E5, E1") == "E2, E5" and whole_items("E2, E5,") == "E2, E5,"
    assert whole_items("Beatrice Stone, Florence St") == "Beatrice Stone"
    assert whole_items("E2 because she is the mother") == "E2 because she is the" and whole_items("P1") == ""


async def test_a_trace_names_the_chosen_relations_predicate_iri(tmp_path):
    """A relation's key (``directedBy``, a local name) cannot look its predicate up again:
    the trace's relation choice carries the full IRI too, as an edge's JSON does."""
    from traversals.kg.factory import open_kg

    path = tmp_path / "films.ttl"
    path.write_text(
        "@prefix ex: <http://example.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        'ex:heat rdfs:label "Heat" ; ex:directedBy ex:mann .\nex:mann rdfs:label "Michael Mann" .\n'
    )
    kg = open_kg(str(path))
    llm = scripted(
        default=lambda p, *_: "ANSWER: Michael Mann" if "SELECT RELATION" in p else "EXPAND_KG: the director",
        entities="E1",
        relation="directedBy",
        extra=[("Find the names in a text", "Heat")],
    )
    answer = await solver(llm, kg, k=1).ask("Who directed [Heat]?")
    chosen = [n["action"]["relation"] for n in answer.trace["nodes"] if (n["action"] or {}).get("relation")]
    assert chosen and chosen[0] == {
        "key": "directedBy", "label": "directed by", "kg": kg.name, "iri": "http://example.org/directedBy",
    }


async def test_a_forced_answer_whose_prompt_does_not_fit_falls_back_to_a_shallower_state():
    """No answer was proposed and the frontier emptied: the deepest state is made to answer,
    but its prompt (the grown subgraph) does not fit the context. A shallower state, whose
    prompt fits, answers instead of the search returning "Cannot find answer"."""
    policy = past_context_once_beatrice_is_seen(forced="ANSWER: Beatrice Stone")
    solver = build_solver("tree", ScriptedLLM(policy), [dylan_kg()], SearchConfig(k=1, decoding="sampled"))
    answer = await solver.ask("who is the mother of [Bob Dylan]")
    assert answer.text == "Beatrice Stone" and answer.stopped == "frontier_empty"
    notes = [n.get("note") or "" for n in answer.trace["nodes"]]
    assert any("no answer forced here: its prompt does not fit" in n for n in notes)
    assert any("answered when the frontier ran out" in n for n in notes)
