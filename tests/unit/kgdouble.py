"""A tiny dict-backed KnowledgeGraph for unit tests of the search logic (no I/O).

The real store (pyoxigraph) is tested in tests/integration; here we only need a KG whose
answers are obvious from the test itself.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from traversals.kg.base import Edge, Edges, Entity, Relation, Relations


class DictKG:
    def __init__(self, triples: Sequence[tuple[str, str, str]], *, labels: dict[str, str] | None = None,
                 relation_labels: dict[str, tuple[str, str]] | None = None, name: str = "test") -> None:
        self.name = name
        labels = labels or {}
        rl = relation_labels or {}
        self.entities = {}
        for s, _, o in triples:
            for x in (s, o):
                self.entities.setdefault(x, Entity(x, labels.get(x, x), kg=name))
        self.relations = {r: Relation(r, rl.get(r, (r, ""))[0], rl.get(r, (r, ""))[1], kg=name) for _, r, _ in triples}
        self.triples = list(triples)
        self.calls: list[str] = []
        self.searched: list[str] = []  # the texts searched, in order

    async def search(self, text: str, limit: int = 10) -> list[Entity]:
        self.calls.append("search")
        self.searched.append(text)
        t = text.casefold()
        exact = [e for e in self.entities.values() if e.label.casefold() == t]
        part = [e for e in self.entities.values() if t in e.label.casefold() and e not in exact]
        return (exact + part)[:limit]

    async def get_relations(self, entities: Sequence[Entity], limit: int = 100) -> Relations:
        self.calls.append("get_relations")
        ids = {e.id for e in entities}
        counts: Counter = Counter()
        for s, r, o in self.triples:
            if s in ids:
                counts[(r, False)] += 1
            if o in ids:
                counts[(r, True)] += 1
        items = [
            (self.relations[r].reversed() if inv else self.relations[r])
            for (r, inv), _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
        return Relations(tuple(items[:limit]), max(0, len(items) - limit))

    async def get_edges(self, entities: Sequence[Entity], relation: Relation, limit: int = 50) -> Edges:
        self.calls.append("get_edges")
        ids = {e.id for e in entities}
        fwd = self.relations[relation.id]
        out = [
            Edge(self.entities[s], fwd, self.entities[o])
            for s, r, o in self.triples
            if r == relation.id and ((o in ids) if relation.inverse else (s in ids))
        ]
        new = tuple(dict.fromkeys(e.subject if relation.inverse else e.object for e in out[:limit]))
        lost = Counter((e.object if relation.inverse else e.subject).id for e in out[limit:])
        return Edges(tuple(out[:limit]), new, max(0, len(out) - limit), dict(lost))

    async def close(self) -> None:
        pass


def dylan_kg() -> DictKG:
    return DictKG(
        [
            ("Q392", "P25", "Q62519478"),
            ("Q62519478", "P25", "Q99"),
            ("Q392", "P19", "Q485708"),
            ("Q392", "P106", "Q177220"),
        ],
        labels={"Q392": "Bob Dylan", "Q62519478": "Beatrice Stone", "Q99": "Florence Stone",
                "Q485708": "Duluth", "Q177220": "singer"},
        relation_labels={"P25": ("mother", "is mother of"), "P19": ("place of birth", ""), "P106": ("occupation", "")},
    )


class GatedKG(DictKG):
    """A DictKG whose ``search`` waits for ``gate`` to open: calls made while it is shut
    overlap, deterministically. ``entered`` is set by each search as it starts waiting;
    ``fail`` searches raise ``ConnectionError`` once the gate opens (then no more)."""

    def __init__(self, *args, fail: int = 0, **kw) -> None:
        import asyncio

        super().__init__(*args, **kw)
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.fail = fail

    async def search(self, text: str, limit: int = 10) -> list[Entity]:
        self.entered.set()
        await self.gate.wait()
        if self.fail:
            self.fail -= 1
            self.calls.append("search")
            raise ConnectionError("refused")
        return await super().search(text, limit)
