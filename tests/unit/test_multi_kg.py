"""Several KGs searched together (paper §2.4): linking, merged relations, limits.

The KGs are the dict-backed doubles of ``kgdouble`` (no I/O); the embedded-store and
SPARQL-server versions of these scenarios are in tests/integration/test_multi_kg.py."""

from __future__ import annotations

from traversals.llm.base import Usage
from traversals.search.kgset import KGSet

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
