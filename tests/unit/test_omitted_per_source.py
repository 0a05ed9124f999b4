"""Edges a KG left out, counted per source entity (``Edges.omitted_by_source``).

Before, ``Edges.omitted`` was one total per ``get_edges`` call and the rendered subgraph
marked every source with the whole of it: two sources expanded together, 40 edges cut
between them, each showed "(40 more not shown)". Now each back end says how many each
source lost where it can know, the search marks each source with its own count, and a
total whose split is not known is said once for the sources together."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest
import yaml

from traversals.errors import KGError
from traversals.kg.base import Edges, Entity, Relation
from traversals.kg.factory import open_kg
from traversals.llm.base import Usage
from traversals.search.kgset import KGSet
from traversals.search.subgraph import Fact, Subgraph, omitted_marks

from .kgdouble import DictKG


def two_sources(tmp_path: Path, alpha: int = 60, beta: int = 30, relation: str = "made") -> Path:
    """"Alpha" and "Beta" with ``alpha`` and ``beta`` edges along ``relation``."""
    p = tmp_path / "kb.txt"
    lines = [f"Alpha|{relation}|a{i:03d}\n" for i in range(alpha)] + [f"Beta|{relation}|b{i:03d}\n" for i in range(beta)]
    p.write_text("".join(lines), encoding="utf-8")
    return p


# ------------------------------------------------------------------- the embedded store


def test_the_store_counts_what_each_source_lost_when_the_cap_cuts_both(tmp_path):
    kg = open_kg(str(two_sources(tmp_path)))
    (alpha,), (beta,) = kg.search_sync("Alpha", limit=1), kg.search_sync("Beta", limit=1)
    (made,) = kg.get_relations_sync([alpha]).items
    got = kg.get_edges_sync([alpha, beta], made, limit=50)
    # sorted by the source's label: Alpha's first 50 of 60, none of Beta's 30
    assert len(got.edges) == 50 and got.omitted == 40
    assert dict(got.omitted_by_source) == {alpha.id: 10, beta.id: 30}
    assert got.omitted_of(alpha.id) == 10 and got.omitted_of(beta.id) == 30
    # both shown in part: each loses its own
    got = kg.get_edges_sync([alpha, beta], made, limit=70)
    assert got.omitted == 20 and dict(got.omitted_by_source) == {beta.id: 20}
    assert got.omitted_of(alpha.id) == 0
    # nothing cut: nothing to say
    got = kg.get_edges_sync([alpha, beta], made, limit=100)
    assert got.omitted == 0 and dict(got.omitted_by_source) == {}
    # one source: all of it is its own
    got = kg.get_edges_sync([beta], made, limit=5)
    assert got.omitted == 25 and dict(got.omitted_by_source) == {beta.id: 25}


def test_the_store_counts_each_source_of_an_inverse_relation(tmp_path):
    p = tmp_path / "kb.txt"
    p.write_text("".join([f"a{i:03d}|in|Alpha\n" for i in range(12)] + [f"b{i:03d}|in|Beta\n" for i in range(8)]),
                 encoding="utf-8")
    kg = open_kg(str(p))
    (alpha,), (beta,) = kg.search_sync("Alpha", limit=1), kg.search_sync("Beta", limit=1)
    (back,) = kg.get_relations_sync([alpha]).items
    assert back.inverse
    got = kg.get_edges_sync([beta, alpha], back, limit=15)
    assert got.omitted == 5 and dict(got.omitted_by_source) == {beta.id: 5}
    assert sum(e.object == alpha for e in got.edges) == 12


# ------------------------------------------------------------------------ the KG set


async def test_the_kg_set_passes_each_sources_count_on(tmp_path):
    kg = open_kg(str(two_sources(tmp_path)))
    alpha, beta = (await kg.search("Alpha", 1))[0], (await kg.search("Beta", 1))[0]
    kgs = KGSet([kg], max_edges=50)
    (made,) = (await kgs.get_relations([alpha], Usage())).items
    got = await kgs.get_edges([alpha, beta], made, Usage())
    assert got.omitted == 40 and dict(got.omitted_by_source) == {alpha.id: 10, beta.id: 30}


class TotalOnlyKG(DictKG):
    """A KG as a library user wrote it before ``omitted_by_source``: the total only."""

    async def get_edges(self, entities: Sequence[Entity], relation: Relation, limit: int = 50) -> Edges:
        got = await super().get_edges(entities, relation, limit)
        return Edges(got.edges, got.new_entities, got.omitted)


class UnboundedKG(DictKG):
    """A KG that ignores ``limit``: the KG set cuts, and knows whose edges it cut."""

    async def get_edges(self, entities: Sequence[Entity], relation: Relation, limit: int = 50) -> Edges:
        return await super().get_edges(entities, relation, 10_000)


def fan(kind: type[DictKG] = DictKG, a: int = 6, b: int = 4) -> DictKG:
    return kind([("A", "r", f"a{i}") for i in range(a)] + [("B", "r", f"b{i}") for i in range(b)])


async def test_the_kg_set_splits_what_it_cuts_itself():
    kg = fan(UnboundedKG)
    got = await KGSet([kg], max_edges=5).get_edges([kg.entities["A"], kg.entities["B"]], kg.relations["r"], Usage())
    assert got.omitted == 5 and dict(got.omitted_by_source) == {"A": 1, "B": 4}


async def test_a_kg_that_gives_the_total_only():
    kg = fan(TotalOnlyKG)
    kgs = KGSet([kg], max_edges=5)
    a, b = kg.entities["A"], kg.entities["B"]
    both = await kgs.get_edges([a, b], kg.relations["r"], Usage())
    assert both.omitted == 5 and dict(both.omitted_by_source) == {} and both.omitted_of("A") is None
    alone = await kgs.get_edges([a], kg.relations["r"], Usage())
    assert alone.omitted == 1 and dict(alone.omitted_by_source) == {"A": 1}


async def test_several_kgs_name_each_loss_by_the_entity_as_the_search_has_it():
    wiki = DictKG([("Q1", "P1", "Q9"), ("Q2", "P1", "Q9")], labels={"Q1": "Alpha", "Q2": "Beta"}, name="wiki")
    mb = DictKG([("mb-a", "r", f"a{i}") for i in range(6)] + [("mb-b", "r", f"b{i}") for i in range(4)],
                labels={"mb-a": "Alpha", "mb-b": "Beta"}, name="mb")
    kgs = KGSet([wiki, mb], max_edges=5)
    alpha, beta = wiki.entities["Q1"], wiki.entities["Q2"]
    usage = Usage()
    await kgs.link([alpha, beta], usage)
    got = await kgs.get_edges([alpha, beta], mb.relations["r"], usage)
    assert got.omitted == 5 and dict(got.omitted_by_source) == {"Q1": 1, "Q2": 4}


async def test_one_entity_with_a_copy_in_a_total_only_kg_lost_all_of_it():
    wiki = DictKG([("Q1", "P1", "Q9"), ("Q2", "P1", "Q9")], labels={"Q1": "Alpha", "Q2": "Beta"}, name="wiki")
    mb = TotalOnlyKG([("mb-a", "r", f"a{i}") for i in range(8)], labels={"mb-a": "Alpha"}, name="mb")
    kgs = KGSet([wiki, mb], max_edges=5)
    alpha, beta = wiki.entities["Q1"], wiki.entities["Q2"]
    usage = Usage()
    await kgs.link([alpha, beta], usage)
    got = await kgs.get_edges([alpha, beta], mb.relations["r"], usage)  # Beta has no copy in mb
    assert got.omitted == 3 and dict(got.omitted_by_source) == {"Q1": 3}


@pytest.mark.parametrize("split, why", [
    ({"A": 1}, "adds up to 1, with omitted=5"),
    ({"A": -1, "B": 6}, "an int of 0 or more"),
    ([("A", 5)], "a mapping of entity id"),
])
async def test_a_split_that_does_not_add_up_is_refused(split, why):
    class Wrong(DictKG):
        async def get_edges(self, entities, relation, limit=50):
            got = await super().get_edges(entities, relation, limit)
            return Edges(got.edges, got.new_entities, got.omitted, split)

    kg = fan(Wrong)
    with pytest.raises(KGError, match=why):
        await KGSet([kg], max_edges=5).get_edges([kg.entities["A"], kg.entities["B"]], kg.relations["r"], Usage())


def test_edges_made_the_old_way_still_work():
    e = Edges((), (), 3)
    assert e.omitted == 3 and dict(e.omitted_by_source) == {} and e.omitted_of("x") is None
    assert Edges(()) == Edges((), (), 0, {}) and hash(Edges((), (), 2)) == hash(Edges((), (), 2, {"x": 2}))


# ------------------------------------------------------------------------- rendering

NOLAN = Entity("Q25191", "Christopher Nolan")
DIRECTOR = Relation("P57", "director")
FILMS = [Entity(f"Q{i}", f"Film {i}") for i in range(3)]


def test_one_source_renders_as_before_byte_for_byte():
    """Measured prompts depend on it: one source keeps "(N more not shown)" exactly."""
    walked = DIRECTOR.reversed()
    facts = [Fact(NOLAN, walked, f) for f in FILMS]
    got = Edges(tuple(f.edge() for f in facts), tuple(FILMS), 7)  # the total only
    omitted, together = omitted_marks(got, [NOLAN], walked.key)
    assert (omitted, together) == ([("Q25191", "~P57", 7, "")], [])
    new = Subgraph().with_entities([NOLAN]).extend(facts, omitted, together)
    old = Subgraph().with_entities([NOLAN]).extend(facts, [("Q25191", "~P57", 7)])
    split = Edges(got.edges, got.new_entities, 7, {"Q25191": 7})
    assert omitted_marks(split, [NOLAN], walked.key) == (omitted, together)
    expected = (
        "Knowledge Graph Entities:\n"
        "  Q25191: Christopher Nolan\n"
        "  Q0: Film 0\n"
        "  Q1: Film 1\n"
        "  Q2: Film 2\n"
        "Knowledge Graph Edges:\n"
        "  Christopher Nolan:\n"
        "    is director of:\n"
        "      - Film 0\n"
        "      - Film 1\n"
        "      - Film 2\n"
        "      - (7 more not shown)"
    )
    assert new.render() == old.render() == expected


def two_directors() -> tuple[Entity, Entity, list[Fact]]:
    a, b = Entity("Q10", "Alpha"), Entity("Q20", "Beta")
    walked = DIRECTOR.reversed()
    return a, b, [Fact(a, walked, FILMS[0]), Fact(a, walked, FILMS[1]), Fact(b, walked, FILMS[2])]


def test_two_sources_each_show_their_own_count():
    a, b, facts = two_directors()
    got = Edges(tuple(f.edge() for f in facts), tuple(FILMS), 300, {"Q10": 100, "Q20": 200})
    omitted, together = omitted_marks(got, [a, b], "~P57")
    assert (omitted, together) == ([("Q10", "~P57", 100, ""), ("Q20", "~P57", 200, "")], [])
    sg = Subgraph().with_entities([a, b]).extend(facts, omitted, together)
    assert yaml.safe_load("\n".join(sg.render_edges())) == {
        "Alpha": {"is director of": ["Film 0", "Film 1", "(100 more not shown)"]},
        "Beta": {"is director of": ["Film 2", "(200 more not shown)"]},
    }
    assert sg.cut_short("Q10", "~P57") and sg.cut_short("Q20", "~P57") and not sg.cut_short("Q10", "P57")


def test_a_source_that_lost_none_shows_no_marker_and_one_that_lost_all_shows_only_its_marker():
    a, b, _ = two_directors()
    walked = DIRECTOR.reversed()
    facts = [Fact(a, walked, f) for f in FILMS]
    got = Edges(tuple(f.edge() for f in facts), tuple(FILMS), 30, {"Q20": 30})
    omitted, together = omitted_marks(got, [a, b], walked.key)
    sg = Subgraph().with_entities([a, b]).extend(facts, omitted, together)
    assert yaml.safe_load("\n".join(sg.render_edges())) == {
        "Alpha": {"is director of": ["Film 0", "Film 1", "Film 2"]},
        "Beta": {"is director of": "(30 more not shown)"},
    }
    assert not sg.cut_short("Q10", "~P57") and sg.cut_short("Q20", "~P57")


def test_a_plain_mark_is_shown_only_beside_the_sources_edges_as_before():
    """A plain ``(source, relation, n)`` tuple (what the expansion wrote before counts were
    per source) may be a total of several sources: never shown for a source alone."""
    a, b, _ = two_directors()
    walked = DIRECTOR.reversed()
    facts = [Fact(a, walked, f) for f in FILMS]
    sg = Subgraph().with_entities([a, b]).extend(facts, [("Q10", "~P57", 30), ("Q20", "~P57", 30)])
    assert yaml.safe_load("\n".join(sg.render_edges())) == {
        "Alpha": {"is director of": ["Film 0", "Film 1", "Film 2", "(30 more not shown)"]},
    }


def test_a_total_not_split_is_said_once_for_the_sources_together():
    a, b, facts = two_directors()
    got = Edges(tuple(f.edge() for f in facts), tuple(FILMS), 300)  # the KG does not say whose
    omitted, together = omitted_marks(got, [a, b], "~P57")
    assert (omitted, together) == ([], [(("Q10", "Q20"), "~P57", 300, "")])
    sg = Subgraph().with_entities([a, b]).extend(facts, omitted, together)
    text = "\n".join(sg.render_edges())
    assert text.count("more not shown") == 1
    assert yaml.safe_load(text) == {
        "Alpha": {"is director of": ["Film 0", "Film 1", "(300 more not shown among Alpha, Beta)"]},
        "Beta": {"is director of": "Film 2"},
    }
    assert sg.cut_short("Q10", "~P57") and sg.cut_short("Q20", "~P57")
    # kept by later steps
    later = sg.with_entities([Entity("Q99", "Other")]).extend([Fact(FILMS[0], DIRECTOR, a)])
    assert later.omitted_together == sg.omitted_together


def test_a_label_that_looks_like_a_marker_is_told_apart():
    a, b, facts = two_directors()
    odd = Entity("Q7", "(300 more not shown among Alpha, Beta)")
    facts = facts + [Fact(b, DIRECTOR.reversed(), odd)]
    sg = Subgraph().with_entities([a, b]).extend(facts, [], [(("Q10", "Q20"), "~P57", 300)])
    data = yaml.safe_load("\n".join(sg.render_edges()))
    assert data["Beta"]["is director of"] == ["Film 2", "(300 more not shown among Alpha, Beta) [Q7]"]


def test_a_long_group_names_its_first_sources():
    sources = [Entity(f"Q{100 + i}", f"S{i}") for i in range(8)]
    walked = DIRECTOR.reversed()
    facts = [Fact(s, walked, FILMS[0]) for s in sources]
    sg = Subgraph().with_entities(sources).extend(facts, [], [(tuple(s.id for s in sources), walked.key, 9)])
    data = yaml.safe_load("\n".join(sg.render_edges()))
    assert data["S0"]["is director of"] == ["Film 0", "(9 more not shown among S0, S1, S2, S3, S4 and 3 other sources)"]
    assert all(data[f"S{i}"]["is director of"] == "Film 0" for i in range(1, 8))


# ------------------------------------------------------------------ through the search


async def expanded_together(kg, entities: Sequence[Entity], max_edges: int = 5) -> dict:
    """The rendered subgraph after one expansion from ``entities`` together along the one
    relation they have, through the state machine (at most ``max_edges`` edges)."""
    from traversals.search.machine import Action, ActionType, Machine

    machine = Machine(KGSet([kg], max_edges=max_edges), screen_limit=0)
    node = machine.root(Subgraph().with_entities(list(entities)))
    usage = Usage()
    node = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), usage)
    node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=tuple(entities)), usage)
    (rel,), (key,) = node.relation_options, node.relation_keys
    node = await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=rel, relation_key=key), usage)
    return yaml.safe_load("\n".join(node.subgraph.render_edges()))


async def test_an_expansion_of_two_sources_shows_each_ones_own_count():
    kg = fan(a=6, b=4)
    # the KG's order: A's six, then B's four, the first five kept: A lost 1, B all 4
    assert await expanded_together(kg, [kg.entities["A"], kg.entities["B"]]) == {
        "A": {"r": ["a0", "a1", "a2", "a3", "a4", "(1 more not shown)"]},
        "B": {"r": "(4 more not shown)"},
    }


async def test_relations_a_kg_gave_past_the_limit_are_cut_and_counted_as_omitted():
    """A KG that ignores ``limit`` in get_relations: the KG set shows ``max_relations`` and
    counts the rest, one KG or several."""
    class Unbounded(DictKG):
        async def get_relations(self, entities, limit=100):
            return await super().get_relations(entities, 10_000)

    kg = Unbounded([("x", f"r{i}", f"y{i}") for i in range(5)], labels={"x": "X"}, name="k")
    got = await KGSet([kg], max_relations=2).get_relations([kg.entities["x"]], Usage())
    assert [r.key for r in got.items] == ["r0", "r1"] and got.omitted == 3
