"""One or several KGs behind one door, with call counting and cross-KG linking (§2.4).

* ``get_relations`` asks every KG about the selected entities (each KG sees its own
  copy of an entity, found by linking) and merges the answers; relation keys are made
  unique by prefixing the KG name when two KGs use the same id.
* ``get_edges`` goes to the KG the relation came from.
* ``link`` finds, for entities newly added from one KG, the same entity in the others.
  Explicit links first (§2.4: "the use of explicit links between common KGs if
  available"): the same IRI, or owl:sameAs / skos:exactMatch / schema:sameAs stated by
  either KG (backends with :class:`~traversals.kg.base.IdentityLinks`). Only for a KG
  where that finds nothing, an exact (normalised) label match from ``search`` -- the
  paper's fallback of re-running ``initialize`` on the label, without an LLM call.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Sequence

from ..kg.base import (
    DEFAULT_MAX_EDGES,
    DEFAULT_MAX_RELATIONS,
    Edge,
    Edges,
    Entity,
    EntitySampler,
    IdentityLinks,
    KnowledgeGraph,
    Relation,
    Relations,
)
from ..errors import BadInput
from ..llm.base import Usage


def _norm(text: str) -> str:
    return " ".join(text.replace("_", " ").casefold().split())


class KGSet:
    def __init__(
        self,
        kgs: Sequence[KnowledgeGraph],
        *,
        max_relations: int = DEFAULT_MAX_RELATIONS,
        max_edges: int = DEFAULT_MAX_EDGES,
        max_links_per_step: int = 20,
    ) -> None:
        if not kgs:
            raise ValueError("KGSet needs at least one knowledge graph")
        self.kgs = list(kgs)
        names = [getattr(kg, "name", None) for kg in self.kgs]
        if not all(isinstance(n, str) and n for n in names):
            raise BadInput("every knowledge graph needs a non-empty `name` (entities name their KG by it)")
        twice = sorted({str(n) for n in names if names.count(n) > 1})
        if twice:  # entities and relations name their KG: one name for two KGs mixes them up
            raise BadInput(f"two knowledge graphs are named {', '.join(map(repr, twice))}: give each its own "
                           "name (open_kg(spec, name=...), or NAME=SPEC on the command line)")
        self.by_name = {kg.name: kg for kg in self.kgs}
        self.max_relations = max_relations
        self.max_edges = max_edges
        self.max_links_per_step = max_links_per_step
        # entity (kg, id) -> same entity in other KGs
        self._links: dict[tuple[str, str], list[Entity]] = {}

    @property
    def multi(self) -> bool:
        return len(self.kgs) > 1

    def _kg_of(self, name: str) -> KnowledgeGraph:
        return self.by_name.get(name) or self.kgs[0]

    def copies(self, entity: Entity, kg: KnowledgeGraph) -> list[Entity]:
        """The entity as ``kg`` knows it: itself, or its linked copies there."""
        if entity.kg in ("", kg.name):
            return [entity]
        return [e for e in self._links.get((entity.kg, entity.id), []) if e.kg == kg.name]

    async def search(self, text: str, usage: Usage, limit: int = 5) -> list[Entity]:
        async def one(kg: KnowledgeGraph) -> list[Entity]:
            usage.kg_calls += 1
            return [e if e.kg else replace(e, kg=kg.name) for e in await kg.search(text, limit=limit)]

        results = await asyncio.gather(*(one(kg) for kg in self.kgs))
        return [e for r in results for e in r]

    async def get_relations(self, entities: Sequence[Entity], usage: Usage, *, limit: int | None = None) -> Relations:
        """The entities' relations in every KG, at most ``limit`` a KG (default
        ``max_relations``, what a prompt shows)."""
        cap = self.max_relations if limit is None else limit

        async def one(kg: KnowledgeGraph) -> Relations:
            mine = [c for e in entities for c in self.copies(e, kg)]
            if not mine:
                return Relations(())
            usage.kg_calls += 1
            rels = await kg.get_relations(mine, limit=cap)
            return Relations(tuple(r if r.kg else replace(r, kg=kg.name) for r in rels.items), rels.omitted)

        answers = await asyncio.gather(*(one(kg) for kg in self.kgs))
        items: list[Relation] = []
        omitted = 0
        for a in answers:
            items.extend(a.items)
            omitted += a.omitted
        if len(items) > cap:
            omitted += len(items) - cap
            items = items[:cap]
        return Relations(tuple(items), omitted)

    async def get_edges(self, entities: Sequence[Entity], relation: Relation, usage: Usage) -> Edges:
        kg = self._kg_of(relation.kg)
        mine = [c for e in entities for c in self.copies(e, kg)]
        if not mine:
            return Edges(())
        usage.kg_calls += 1
        got = await kg.get_edges(mine, relation, limit=self.max_edges)
        name = kg.name

        def stamp(e: Entity) -> Entity:
            return e if e.kg else replace(e, kg=name)

        edges = tuple(
            Edge(stamp(e.subject), e.relation if e.relation.kg else replace(e.relation, kg=name), stamp(e.object))
            for e in got.edges
        )
        return Edges(edges, tuple(stamp(e) for e in got.new_entities), got.omitted)

    async def sample_entities(self, n: int, usage: Usage, seed: int = 0) -> list[Entity]:
        """Up to ``n`` entities drawn at random, shared among the KGs that can draw them
        (:class:`~traversals.kg.base.EntitySampler`)."""
        samplers = [kg for kg in self.kgs if isinstance(kg, EntitySampler)]
        if not samplers:
            raise BadInput(
                f"cannot draw entities at random from {', '.join(kg.name for kg in self.kgs)}: "
                "embedded KGs (RDF or triple files) and SPARQL endpoints can, this one cannot"
            )
        out: list[Entity] = []
        for i, kg in enumerate(samplers):
            share = n // len(samplers) + (i < n % len(samplers))
            usage.kg_calls += 1
            out.extend(e if e.kg else replace(e, kg=kg.name) for e in await kg.sample_entities(share, seed + i))
        return out

    async def link(self, entities: Sequence[Entity], usage: Usage) -> None:
        """Record same-entity links into the other KGs (no-op with one KG): explicit
        links in one batched call per KG, the label fallback per entity left unlinked."""
        if not self.multi:
            return
        todo = list({(e.kg, e.id): e for e in entities if (e.kg, e.id) not in self._links}.values())
        todo = todo[: self.max_links_per_step]
        if not todo:
            return
        # the ids each entity goes by: its own, and those its own KG states are the same
        ids: dict[tuple[str, str], list[str]] = {(e.kg, e.id): [e.id] for e in todo}
        for kg in self.kgs:
            mine = [e for e in todo if e.kg == kg.name]
            if mine and isinstance(kg, IdentityLinks):
                usage.kg_calls += 1
                stated = await kg.same_as([e.id for e in mine])
                for e in mine:
                    ids[(e.kg, e.id)] += [s.id for s in stated.get(e.id, []) if s.id != e.id]

        async def in_kg(kg: KnowledgeGraph) -> dict[tuple[str, str], list[Entity]]:
            others = [e for e in todo if e.kg != kg.name]
            same: dict[tuple[str, str], list[Entity]] = {}
            if others and isinstance(kg, IdentityLinks):
                usage.kg_calls += 1
                got = await kg.same_as(list(dict.fromkeys(i for e in others for i in ids[(e.kg, e.id)])))
                for e in others:
                    found = {s.id: s for i in ids[(e.kg, e.id)] for s in got.get(i, [])}
                    same[(e.kg, e.id)] = list(found.values())

            async def by_label(e: Entity) -> None:
                usage.kg_calls += 1
                hits = [c for c in await kg.search(e.label, limit=3) if _norm(c.label) == _norm(e.label)]
                same[(e.kg, e.id)] = hits[:1]

            await asyncio.gather(*(by_label(e) for e in others if not same.get((e.kg, e.id))))
            return {k: [x if x.kg else replace(x, kg=kg.name) for x in v] for k, v in same.items()}

        per_kg = await asyncio.gather(*(in_kg(kg) for kg in self.kgs))
        def add(key: tuple[str, str], entity: Entity) -> None:  # each copy once, whichever side found it
            copies = self._links.setdefault(key, [])
            if all((c.kg, c.id) != (entity.kg, entity.id) for c in copies):
                copies.append(entity)

        for e in todo:
            self._links.setdefault((e.kg, e.id), [])
            for other in (x for got in per_kg for x in got.get((e.kg, e.id), [])):
                add((e.kg, e.id), other)
                add((other.kg, other.id), e)

    def option_keys(self, relations: Sequence[Relation]) -> list[str]:
        """Keys shown to the LLM, unique across KGs (``mb:~artist`` on a clash)."""
        counts: dict[str, int] = {}
        for r in relations:
            counts[r.key] = counts.get(r.key, 0) + 1
        return [f"{r.kg}:{r.key}" if counts[r.key] > 1 else r.key for r in relations]

    async def close(self) -> None:
        for kg in self.kgs:
            await kg.close()
