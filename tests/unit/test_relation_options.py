"""The relation options a selection offers are filled up to the cap (``max_relations``)
after the ones already expanded and the ones that only walk back are left out, for an
entity with more relations than the cap (embedded store, in memory)."""

from __future__ import annotations

import pytest

from traversals.kg.store import OxigraphKG
from traversals.llm.base import Usage
from traversals.search.kgset import KGSet
from traversals.search.machine import Action, ActionType, Machine, State
from traversals.search.subgraph import Subgraph

RELATIONS = 120  # the hub's own relations, one edge each
CAP = 100


@pytest.fixture()
def kg(tmp_path):
    # "Start" reaches the hub by `a_link`; from the hub, `~a_link` only walks back to it.
    # The hub's 120 relations r000 … r119 each lead to an item of their own.
    lines = ["Start|a_link|Hub"] + [f"Hub|r{i:03d}|item {i}" for i in range(RELATIONS)]
    path = tmp_path / "hub.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    kg = OxigraphKG.from_file(path, name="hub")
    yield kg
    kg.close_sync()


async def select(machine: Machine, node, entity):
    node = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), Usage())
    return await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=(entity,)), Usage())


async def follow(machine: Machine, node, entity, key: str):
    node = await select(machine, node, entity)
    rel = next(r for r, k in zip(node.relation_options, node.relation_keys) if k == key)
    return await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=rel, relation_key=key), Usage())


async def test_options_are_backfilled_to_the_cap_after_expanded_and_walking_back_ones_are_dropped(kg) -> None:
    machine = Machine(KGSet([kg], max_relations=CAP))
    start = (await kg.search("Start", limit=1))[0]
    node = await follow(machine, machine.root(Subgraph().with_entities([start])), start, "a_link")
    hub = next(e for e in node.subgraph.entities if e.label == "Hub")
    everything = await kg.get_relations([hub], limit=1000)
    assert len(everything.items) == RELATIONS + 1  # r000 … r119 and ~a_link
    assert sum(r.key == "~a_link" for r in everything.items[:CAP]) == 1  # within the first 100

    # ~a_link only walks back to Start: left out, and the next relation takes its place
    picking = await select(machine, node, hub)
    keys = list(picking.relation_keys)
    assert picking.state is State.SELECTING_RELATION
    assert len(keys) == CAP and "~a_link" not in keys
    assert picking.relations_omitted == RELATIONS - CAP
    assert keys == [r.key for r in everything.items if r.key != "~a_link"][:CAP]

    # expand five of the hub's relations: still 100 options, none of the five
    for key in keys[:5]:
        node = await follow(machine, node, hub, key)
    picking = await select(machine, node, hub)
    shown = list(picking.relation_keys)
    assert len(shown) == CAP and not set(shown) & set(keys[:5]) and "~a_link" not in shown
    assert shown == [r.key for r in everything.items if r.key not in {"~a_link", *keys[:5]}][:CAP]
    assert picking.relations_omitted == RELATIONS - 5 - CAP
    prompt = machine.prompt("what does the hub link to?", picking)
    assert f"({RELATIONS - 5 - CAP} more not shown)" in prompt

    # once fewer are left than the cap, all of them are offered and none is "more"
    for key in shown[:25]:  # 30 expanded in all: 90 left
        node = await follow(machine, node, hub, key)
    picking = await select(machine, node, hub)
    assert len(picking.relation_keys) == RELATIONS - 30 and picking.relations_omitted == 0
    assert "more not shown" not in machine.prompt("what does the hub link to?", picking)


async def test_fresh_relations_over_the_cap_show_exactly_the_cap_and_count_the_rest(tmp_path) -> None:
    # From the hub, ~a_link reverses the edge the walk came by but also reaches Other: it is
    # kept, so three relations are fresh for a cap of two. Exactly two are shown, and the
    # prompt says one more is not.
    path = tmp_path / "small.txt"
    path.write_text("Start|a_link|Hub\nOther|a_link|Hub\nHub|r1|item 1\nHub|r2|item 2\n", encoding="utf-8")
    kg = OxigraphKG.from_file(path, name="small")
    try:
        machine = Machine(KGSet([kg], max_relations=2))
        start = (await kg.search("Start", limit=1))[0]
        node = await follow(machine, machine.root(Subgraph().with_entities([start])), start, "a_link")
        hub = next(e for e in node.subgraph.entities if e.label == "Hub")
        everything = await kg.get_relations([hub], limit=10)
        assert {r.key for r in everything.items} == {"~a_link", "r1", "r2"}
        picking = await select(machine, node, hub)
        assert list(picking.relation_keys) == [r.key for r in everything.items][:2]
        assert picking.relations_omitted == 1
        assert "(1 more not shown)" in machine.prompt("what does the hub link to?", picking)
    finally:
        kg.close_sync()
