"""examples/dict_kg.py, the back end docs/library.md teaches from, says whose edges it cut
(``Edges.omitted_by_source``): two sources with more edges than the limit each get their
own "(N more not shown)" in the rendered subgraph, not one mark for both."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Sequence


from traversals import Edges, Entity, Relation
from traversals.llm.base import Usage
from traversals.search.kgset import KGSet

from .test_omitted_per_source import expanded_together

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dict_kg.py"


def example() -> Any:
    spec = importlib.util.spec_from_file_location("example_dict_kg", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and annotations look the module up
    spec.loader.exec_module(module)
    return module


DictKG = example().DictKG
LABELS = {"alpha": "Alpha", "beta": "Beta"}


def makers(kind: type = DictKG, a: int = 6, b: int = 4) -> Any:
    """Alpha made ``a`` things, Beta ``b``."""
    graph = {"alpha": {"made": [f"a{i}" for i in range(a)]}, "beta": {"made": [f"b{i}" for i in range(b)]}}
    return kind(graph, LABELS, {"made": ("made", "made by")}, name="makers")


async def test_the_example_counts_what_each_source_lost():
    kg = makers()
    alpha, beta, made = kg.entity("alpha"), kg.entity("beta"), kg.relation("made")
    got = await kg.get_edges([alpha, beta], made, limit=5)
    assert [e.object.id for e in got.edges] == ["a0", "a1", "a2", "a3", "a4"]
    assert got.omitted == 5 and dict(got.omitted_by_source) == {"alpha": 1, "beta": 4}
    got = await kg.get_edges([alpha, beta], made, limit=8)
    assert got.omitted == 2 and dict(got.omitted_by_source) == {"beta": 2} and got.omitted_of("alpha") == 0
    got = await kg.get_edges([alpha, beta], made, limit=10)
    assert got.omitted == 0 and dict(got.omitted_by_source) == {}
    got = await kg.get_edges([beta], made, limit=0)
    assert got.edges == () and got.omitted == 4 and dict(got.omitted_by_source) == {"beta": 4}


async def test_the_example_counts_each_source_of_a_relation_walked_backward():
    graph = {**{f"a{i}": {"by": ["alpha"]} for i in range(6)}, **{f"b{i}": {"by": ["beta"]} for i in range(3)}}
    kg = DictKG(graph, LABELS, {"by": ("made by", "made")}, name="makers")
    back = kg.relation("by", inverse=True)
    got = await kg.get_edges([kg.entity("beta"), kg.entity("alpha")], back, limit=4)
    assert {e.object.id for e in got.edges} == {"alpha"}
    assert got.omitted == 5 and dict(got.omitted_by_source) == {"alpha": 2, "beta": 3}


async def test_the_kg_set_accepts_the_examples_counts_as_they_are():
    kg = makers()
    got = await KGSet([kg], max_edges=5).get_edges([kg.entity("alpha"), kg.entity("beta")], kg.relation("made"),
                                                    Usage())
    assert got.omitted == 5 and dict(got.omitted_by_source) == {"alpha": 1, "beta": 4}


class TotalOnly(DictKG):  # type: ignore[misc, valid-type]
    """The example as it was: the total only."""

    async def get_edges(self, entities: Sequence[Entity], relation: Relation, limit: int = 50) -> Edges:
        got = await super().get_edges(entities, relation, limit)
        return Edges(got.edges, got.new_entities, got.omitted)


async def expanded(kg: Any) -> dict[str, Any]:
    """The rendered subgraph after one expansion from Alpha and Beta along ``made``."""
    return await expanded_together(kg, [kg.entity("alpha"), kg.entity("beta")])


async def test_two_sources_each_show_their_own_count_in_the_subgraph():
    assert await expanded(makers()) == {
        "Alpha": {"made": ["a0", "a1", "a2", "a3", "a4", "(1 more not shown)"]},
        "Beta": {"made": "(4 more not shown)"},
    }


async def test_without_the_split_the_two_share_one_mark():
    """What docs/library.md says happens to a back end that gives the total only."""
    assert await expanded(makers(TotalOnly)) == {
        "Alpha": {"made": ["a0", "a1", "a2", "a3", "a4", "(5 more not shown among Alpha, Beta)"]},
    }
