"""A knowledge graph of your own: the KnowledgeGraph protocol over a plain Python dict.

Four async methods and a ``name`` are all the search needs. Run this file to try them:
``python examples/dict_kg.py``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Sequence

from traversals import Edge, Edges, Entity, Relation, Relations

#: subject id -> relation id -> object ids
GRAPH: dict[str, dict[str, list[str]]] = {
    "inception": {"directed_by": ["nolan"], "starring": ["dicaprio"]},
    "interstellar": {"directed_by": ["nolan"], "starring": ["mcconaughey"]},
    "nolan": {"born_in": ["london"]},
    "dicaprio": {"born_in": ["los_angeles"]},
    "mcconaughey": {"born_in": ["uvalde"]},
}
LABELS = {
    "inception": "Inception", "interstellar": "Interstellar", "nolan": "Christopher Nolan",
    "dicaprio": "Leonardo DiCaprio", "mcconaughey": "Matthew McConaughey",
    "london": "London", "los_angeles": "Los Angeles", "uvalde": "Uvalde",
}
#: relation id -> (forward label, backward label)
RELATIONS = {
    "directed_by": ("directed by", "director of"),
    "starring": ("starring", "acted in"),
    "born_in": ("born in", "birthplace of"),
}


class DictKG:
    """Entities are the dict's keys; a relation walked backward has ``inverse=True``."""

    def __init__(self, graph: dict[str, dict[str, list[str]]], labels: dict[str, str],
                 relations: dict[str, tuple[str, str]], name: str = "movies") -> None:
        self.name = name  # required: entities and relations name the KG they come from
        self.embedded = True  # optional: calls are free, so the search may make extra ones
        self.graph, self.labels, self.relations = graph, labels, relations
        self.triples = [(s, r, o) for s, rels in graph.items() for r, objs in rels.items() for o in objs]

    def entity(self, id: str) -> Entity:
        return Entity(id, self.labels.get(id, id), kg=self.name)

    def relation(self, id: str, inverse: bool = False) -> Relation:
        label, back = self.relations.get(id, (id, ""))
        return Relation(id, label, back, inverse=inverse, kg=self.name)

    async def search(self, text: str, limit: int = 10) -> list[Entity]:
        """Entities whose label matches ``text``: exact (ignoring case) first, then containing it."""
        t = text.casefold().strip()
        exact = [i for i, label in self.labels.items() if label.casefold() == t]
        partial = [i for i, label in self.labels.items() if t in label.casefold() and i not in exact]
        return [self.entity(i) for i in (exact + partial)[:limit]]

    async def get_relations(self, entities: Sequence[Entity], limit: int = 100) -> Relations:
        """The relations the entities take part in, forward and backward, most frequent first."""
        ids = {e.id for e in entities}
        counts: Counter[tuple[str, bool]] = Counter()
        for s, r, o in self.triples:
            counts.update([(r, False)] * (s in ids) + [(r, True)] * (o in ids))
        ranked = [self.relation(r, inv) for (r, inv), _ in counts.most_common()]
        return Relations(tuple(ranked[:limit]), omitted=max(0, len(ranked) - limit))

    async def get_edges(self, entities: Sequence[Entity], relation: Relation, limit: int = 50) -> Edges:
        """Edges along ``relation`` out of the entities (into them when it is inverse). Each
        edge is stored as the KG states it: (subject, forward relation, object). At most
        ``limit``: ``omitted`` counts the rest, ``omitted_by_source`` how many of them each
        entity asked about lost (its id -> the count), so each gets its own "(N more not shown)"."""
        ids = {e.id for e in entities}
        found = [(s, o) for s, r, o in self.triples
                 if r == relation.id and (o if relation.inverse else s) in ids]
        edges = tuple(Edge(self.entity(s), self.relation(relation.id), self.entity(o)) for s, o in found[:limit])
        reached = tuple(dict.fromkeys(e.subject if relation.inverse else e.object for e in edges))
        cut = found[limit:]
        lost = Counter(o if relation.inverse else s for s, o in cut)  # source id -> its edges left out
        return Edges(edges, reached, omitted=len(cut), omitted_by_source=dict(lost))

    async def close(self) -> None:
        pass  # release connections or files here


def movies_kg() -> DictKG:
    return DictKG(GRAPH, LABELS, RELATIONS)


async def main() -> None:
    kg = movies_kg()
    [inception] = await kg.search("Inception")
    relations = await kg.get_relations([inception])
    print("relations:", [r.display for r in relations.items])
    directed_by = next(r for r in relations.items if r.id == "directed_by")
    edges = await kg.get_edges([inception], directed_by)
    print("edges:", [(e.subject.label, e.relation.label, e.object.label) for e in edges.edges])
    nolan = edges.new_entities[0]
    films = await kg.get_edges([nolan], directed_by.reversed(), limit=1)  # walked backward, cut at 1
    print("directed by Nolan:", [e.subject.label for e in films.edges],
          f"(+{films.omitted} more; by source: {dict(films.omitted_by_source)})")


if __name__ == "__main__":
    asyncio.run(main())
