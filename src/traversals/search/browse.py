"""The KG interface as a person or an agent browses it, one step at a time.

What the search itself sees, with the same cuts (``max_relations``, ``max_edges``) and
the same relation keys (``P25``, ``~P25`` for a relation walked backwards): entities by
label, an entity's relations, the edges along one of them. ``traversals kg search |
relations | edges`` print these; ``traversals mcp`` offers them as tools. Each returns a
JSON-ready dict; an entity or relation the KGs do not have is a :class:`BadInput` that
says what to call instead.
"""

from __future__ import annotations

from typing import Any

from ..errors import BadInput
from ..kg.base import Entity, Relation, Relations
from ..llm.base import Usage
from .kgset import KGSet


def entity_json(e: Entity) -> dict[str, Any]:
    return {"id": e.id, "label": e.label, "description": e.description, "kg": e.kg}


def entity_ref(kgset: KGSet, entity_id: str, kg: str | None = None) -> Entity:
    """The entity ``entity_id`` of the KG named ``kg`` (default: the first)."""
    names = [k.name for k in kgset.kgs]
    if not entity_id.strip():
        raise BadInput("an entity id is needed (from a search, a relation's edges, or the KG itself)")
    if kg is not None and kg not in names:
        raise BadInput(f"unknown kg {kg!r}; the KGs are {', '.join(names)}")
    name = kg or names[0]
    ident = entity_id.strip()
    # the id the KG itself gives the entity ("Q42" for Wikidata's full entity IRI), so that
    # what its edges reach meets the entity given, not a second node of another spelling
    canonical = getattr(kgset.kgs[names.index(name)], "canonical_id", None)
    if callable(canonical):
        ident = canonical(ident)
    return Entity(id=ident, label=ident, kg=name)


async def entity_of_id(kgset: KGSet, entity_id: str, kg: str | None = None, *, give: str) -> Entity | None:
    """The entity ``entity_id`` is the id of: in the KG named ``kg``, else in whichever KG of
    the set has relations for it (each is asked: an id of a later KG is no id of the first);
    None when none has (a label, a mistyped id). An id of several KGs (two triple files mint
    one IRI for "Alice") is a :class:`BadInput` asking for the KG as ``give`` (``--in-kg
    NAME`` of ``traversals kg``, ``its kg`` of the MCP tools). Its label is its id
    (:meth:`~.kgset.KGSet.described` gives the KG's)."""
    names = [k.name for k in kgset.kgs]
    ids: list[Entity] = []
    for name in names if kg is None else [kg]:
        entity = entity_ref(kgset, entity_id, name)
        try:
            # relations from its own KG: with several KGs, those of another KG's entity of that
            # label come too (its copy), and would make any label of it pass for an id here.
            # Asked of a fresh set: what asking one KG linked must not change what the next
            # KG, or the caller's own listing, sees
            if any(r.kg == entity.kg for r in (await kgset.fresh().get_relations([entity], Usage())).items):
                ids.append(entity)
        except BadInput:  # not an id this KG can take ("Charles Bail" is no IRI)
            pass
    if len(ids) > 1:
        raise BadInput(f"{entity_id!r} is an entity of {len(ids)} KGs ({', '.join(e.kg for e in ids)}): give {give}")
    return ids[0] if ids else None


async def find(kgset: KGSet, text: str, limit: int = 5) -> dict[str, Any]:
    """Entities whose label matches ``text`` (exact, then case-insensitive, then partial), in every KG."""
    found = await kgset.search(text, Usage(), limit=max(1, min(limit, 50)))
    return {"entities": [entity_json(e) for e in found]}


async def relations(kgset: KGSet, entity: Entity) -> dict[str, Any]:
    """The entity's relations in both directions, the most frequent first, each with the key
    :func:`edges` takes; ``omitted`` counts those past the list."""
    entity = await kgset.described(entity, Usage())
    rels = await kgset.get_relations([entity], Usage())
    if not rels.items and not rels.omitted:  # every entity is in a triple, one way or the other
        raise BadInput(f"{entity.id!r} has no relations in kg {entity.kg}: is it an id (not a label) of this kg? "
                       "Search its label for its id (kg_search, traversals kg search)")
    keys = kgset.option_keys(rels.items)
    return {
        "relations": [{"key": k, "label": r.display, "kg": r.kg} for k, r in zip(keys, rels.items)],
        "omitted": rels.omitted,
    }


async def edges(kgset: KGSet, entity: Entity, key: str) -> dict[str, Any]:
    """The edges along the relation ``key`` (from :func:`relations`) from the entity, and the
    entities they reach; ``omitted`` counts the edges past ``max_edges``."""

    def pick(rels: Relations) -> Relation | None:
        return next((r for k, r in zip(kgset.option_keys(rels.items), rels.items) if k == key.strip()), None)

    entity = await kgset.described(entity, Usage())  # the edges name it by its label
    rels = await kgset.get_relations([entity], Usage())
    chosen = pick(rels)
    if chosen is None and rels.omitted:  # a relation past the listed ones is still the entity's
        rels = await kgset.get_relations([entity], Usage(), limit=rels.omitted + len(rels.items))
        chosen = pick(rels)
    if chosen is None:
        raise BadInput(f"{entity.id} has no relation {key!r}; list its relations for their keys")
    got = await kgset.get_edges([entity], chosen, Usage())
    return {
        "edges": [e.to_json() for e in got.edges],
        "entities": [entity_json(e) for e in got.new_entities],
        "omitted": got.omitted,
    }
