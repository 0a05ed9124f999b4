"""Provenance: which KG edges support an answer, and how to show them as paths."""

from __future__ import annotations

from typing import Iterable

from ..kg.base import Edge, Entity
from .machine import Node, names
from .subgraph import Fact, Subgraph, shown


def reached_back(fact: Fact, root: Subgraph, subgraph: Subgraph) -> bool:
    """Does the fact reach a question entity (one of the root's) back from elsewhere in a
    way that makes it no answer? It is no answer

    - as one of several targets of its step: "co-writers of X" walks X's films' writers and
      meets X among them (a step whose edges the KG cut short, ``omitted``, counts as
      several);
    - alone, when the KG stores the edges between the two entities one way only: MetaQA
      stores ``film -> person`` facts, so ``F -directed_by-> D -~directed_by-> F`` or
      ``D -~directed_by-> F -written_by-> D`` come back along edges that point the same
      way, and MetaQA leaves the question's entity out of its answers.

    It is an answer when the walk came back by an edge that points the other way: "the
    wife of X's husband" is X (``X -spouse-> H``, ``H -spouse-> X``; PathQuestion stores
    such pairs both ways and asks round trips, 6 % of PQ-2H), as is a self-loop on it
    ("what is the Lost 's tracks 's tracks" → Lost)."""
    if fact.target not in root or fact.source in root:
        return False
    step = (fact.source.kg, fact.source.id, fact.relation.key)
    if subgraph.cut_short(fact.source.id, fact.relation.key, fact.relation.kg):
        return True
    if any((f.source.kg, f.source.id, f.relation.key) == step and f.target != fact.target for f in subgraph.facts):
        return True
    subject, obj = _ends(fact)
    return not any(_ends(f) == (obj, subject) for f in subgraph.facts)


def answerable_facts(node: Node) -> list[Fact]:
    """The node's walked facts whose targets can be answers: all but those that reach a
    question entity back (:func:`reached_back`)."""
    root = node.path()[0].subgraph
    return [f for f in node.subgraph.facts if not reached_back(f, root, node.subgraph)]


def reached_groups(node: Node) -> dict[str, tuple[str, ...]]:
    """The entities the search reached, grouped by the relation path that first reached
    them from a question entity — ``{"Eytan Fox -> directed": ("Yossi", "Walk on Water")}``
    —, the newest path first; in a group the entities reached by most facts come first,
    then in the order reached. What a step reached back among the question's entities is
    left out (:func:`answerable_facts`)."""
    reached: dict[tuple[str, str], int] = {}
    entity: dict[tuple[str, str], Entity] = {}
    for f in answerable_facts(node):
        key = (f.target.kg, f.target.id)
        reached[key] = reached.get(key, 0) + 1
        entity.setdefault(key, f.target)
    groups: dict[str, list[tuple[str, str]]] = {}
    for path in walked_paths(node.subgraph, entity.values(), node.path()[0].subgraph.entities):
        name = " -> ".join([path[0].source.label] + [f.relation.display for f in path])
        groups.setdefault(name, []).append((path[-1].target.kg, path[-1].target.id))
    out: dict[str, tuple[str, ...]] = {}
    for name in reversed(list(groups)):
        keys = sorted(groups[name], key=lambda k: -reached[k])  # stable: ties keep the order
        out[name] = tuple(dict.fromkeys(entity[k].label for k in keys))
    return out


def _ends(fact: Fact) -> tuple[tuple[str, str], tuple[str, str]]:
    """(subject, object) of the stored edge a fact walks, whichever way it walks it."""
    e = fact.edge()
    return (e.subject.kg, e.subject.id), (e.object.kg, e.object.id)


def walked_paths(subgraph: Subgraph, entities: Iterable[Entity], roots: Iterable[Entity]) -> list[list[Fact]]:
    """For each entity an expansion reached, the walked facts from a question entity (one
    of ``roots``) to it: the facts that first reached each entity on the way, back to a
    question entity. Entities no fact reached (the question's own, unless an expansion
    reached them again) have none and are left out."""
    walk = _FirstWalks(subgraph, roots)
    return [path for path in (walk.to((e.kg, e.id)) for e in entities) if path]


def reaching_paths(subgraph: Subgraph, entities: Iterable[Entity], roots: Iterable[Entity]) -> list[list[Fact]]:
    """Every walk that reached each of ``entities``: for each fact whose target it is, that
    fact after the walk that first reached the fact's source (:func:`walked_paths`). An
    entity reached twice has two: the writer of the question's film reached again as an
    actor of the films he wrote answers "who acted in the films written by the writer of
    [X]" by the second walk, not the first."""
    walk = _FirstWalks(subgraph, roots)
    wanted = {(e.kg, e.id) for e in entities}
    paths = []
    for f in subgraph.facts:
        if (f.target.kg, f.target.id) not in wanted:
            continue
        source = (f.source.kg, f.source.id)
        if source in walk.start_keys:
            paths.append([f])
        elif before := walk.to(source):
            paths.append(before + [f])
    return paths


class _FirstWalks:
    """The facts that first reached each entity of a subgraph, walked back to the roots."""

    def __init__(self, subgraph: Subgraph, roots: Iterable[Entity]) -> None:
        self.introduced: dict[tuple[str, str], Fact] = {}
        for f in subgraph.facts:
            self.introduced.setdefault((f.target.kg, f.target.id), f)
        self.start_keys = {(r.kg, r.id) for r in roots}

    def to(self, key: tuple[str, str]) -> list[Fact]:
        """The first walk from a root to the entity ``key`` ([] when none reached it)."""
        path: list[Fact] = []
        seen: set[tuple[str, str]] = set()
        while key in self.introduced and key not in seen and (not path or key not in self.start_keys):
            seen.add(key)
            fact = self.introduced[key]
            path.append(fact)
            key = (fact.source.kg, fact.source.id)
        return path[::-1]


def named_entities(node: Node) -> list[Entity]:
    """The subgraph's entities whose labels the node's answer text holds."""
    text = node.answer or ""
    # whole words ("Go" is not in "Gone Girl"), not inside a longer name ("The Dark Knight Rises")
    # a literal value also written another way ("March 31, 1999" for 1999-03-31: `names`)
    return [e for e in node.subgraph.entities if names(text, e)]


def answer_paths(node: Node) -> list[list[Fact]]:
    """For each entity the answer names, the walked facts from a question entity to it."""
    return walked_paths(node.subgraph, named_entities(node), node.path()[0].subgraph.entities)


def answer_reaching_paths(node: Node) -> list[list[Fact]]:
    """Every walk from a question entity to each entity the answer names
    (:func:`reaching_paths`; :func:`answer_paths` keeps the first walk to each)."""
    return reaching_paths(node.subgraph, named_entities(node), node.path()[0].subgraph.entities)


def render_paths(node: Node, limit: int = 3) -> str:
    """``  Bob Dylan -> mother -> Beatrice Stone -> mother -> Florence Stone``"""
    lines = []
    for path in answer_paths(node)[:limit]:
        hops = [shown(path[0].source.label)] + [f"{shown(f.relation.display)} -> {shown(f.target.label)}" for f in path]
        lines.append("  " + " -> ".join(hops))
    return "\n".join(lines) or "  (no path in the knowledge graph)"


def render_walk(node: Node, limit: int = 10) -> str:
    """The facts the node's path added, a line each (``  Bob Dylan -> mother -> Beatrice
    Stone``): the evidence for an answer that names no entity (a yes/no, a count), which no
    path reaches; the first ``limit``, then how many more."""
    facts = list(dict.fromkeys(f for n in node.path() for f in n.new_facts))
    lines = [f"  {shown(f.source.label)} -> {shown(f.relation.display)} -> {shown(f.target.label)}" for f in facts[:limit]]
    if len(facts) > limit:
        lines.append(f"  ({len(facts) - limit} more facts)")
    return "\n".join(lines) or "  (no path in the knowledge graph)"


def supporting_edges(node: Node, *, names_no_reached: bool = False) -> list[Edge]:
    """The subgraph edges on every walk from the query entities to the entities the answer
    names (:func:`reaching_paths`: an actor reached as the question's director's protégé
    and again as an actor of his films shows both walks, whichever the question asked
    for), each walk from the answer back. An answer no walk reaches by its kind
    (``names_no_reached``: a yes/no, a count, the question's own entity a comparison chose,
    :func:`~.value.names_no_reached_entity`) is supported by the edges its path added, as
    its rating shows them (:func:`render_walk`); any other answer that names no entity the
    walks reached has none: "Carol Double Space", never reached, was "supported" by every
    edge to the question's city."""
    out = [f.edge() for path in answer_reaching_paths(node) for f in reversed(path)]
    if not out and names_no_reached:
        out = [f.edge() for n in node.path() for f in n.new_facts]
    return list(dict.fromkeys(out))
