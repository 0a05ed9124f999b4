"""RwT's reasoning states: a relation path from the question's entities.

A state ``s_t`` is the set of entities reached by walking relations ``a_1 … a_t`` from the
question's entities (RwT's "current entity"; a relation can reach several). Its actions
are the relations of those entities, both directions; taking one fetches the edges and
gives the next state. Nodes keep the MCTS statistics ``P(s, a)`` (prior), ``N`` (visits)
and ``W`` (summed values), so ``Q = W / N``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from ...kg.base import Edge, Edges, Entity, Relation
from ...llm.base import Usage
from ..kgset import KGSet
from ..subgraph import shown


@dataclass(eq=False)
class PathNode:
    id: int
    entities: tuple[Entity, ...]
    parent: "PathNode | None" = None
    relation: Relation | None = None  # the action that led here
    edges: tuple[Edge, ...] = ()  # the edges walked from the parent's entities
    depth: int = 0
    prior: float = 1.0  # P(parent, relation)
    visits: int = 0  # N
    total: float = 0.0  # W
    value: float | None = None  # V̂(s), once evaluated
    answer_value: float | None = None  # V̂ as an answer, when the roll-out model tells it apart (trained)
    rollout: float | None = None  # V_rollout(s), the roll-out model's part of V̂ (Eq. 4)
    critical: float | None = None  # V_critical(s), the critical model's part of V̂ (Eq. 4)
    children: list["PathNode"] = field(default_factory=list)
    #: relations offered here with their priors, once expanded (key -> (relation, prior))
    actions: dict[str, tuple[Relation, float]] | None = None
    omitted: int = 0  # edges beyond the KG interface's bound
    usage: Usage = field(default_factory=Usage)
    note: str = ""

    @property
    def q(self) -> float:
        return self.total / self.visits if self.visits else 0.0

    def path(self) -> list["PathNode"]:
        out: list[PathNode] = []
        node: PathNode | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        return out[::-1]

    def path_text(self, arrow: str = " → ", per_step: int = 10) -> str:
        """``Qian Xuesen → Mentored → Theodore von Kármán`` (the paper's past reasoning path),
        at most ``per_step`` labels a step."""
        parts: list[str] = []
        for n in self.path():
            if n.relation is not None:
                parts.append(shown(n.relation.display))
            parts.append(labels(n.entities, limit=per_step))
        return arrow.join(parts)

    def reverses(self) -> set[tuple[str, str]]:
        """(relation key, kg) pairs that reverse a relation on the path: they may only walk
        back (:func:`offered_relations` checks)."""
        return {(n.relation.reversed().key, n.relation.kg) for n in self.path() if n.relation is not None}

    def seen(self) -> set[tuple[str, str]]:
        """(kg, id) of every entity on the path, this state's included."""
        return {(e.kg, e.id) for n in self.path() for e in n.entities}

    def supporting_edges(self, entities: Sequence[Entity] | None = None) -> list[Edge]:
        """The edges from the question's entities to this node's (or to ``entities`` of them:
        those an answer shows), last hop first (only the edges that lead to the entities kept
        at each step)."""
        out: list[Edge] = []
        keep = {(e.kg, e.id) for e in (self.entities if entities is None else entities)}
        node: PathNode | None = self
        while node is not None and node.parent is not None:
            step = [e for e in node.edges if (e.subject.kg, e.subject.id) in keep or (e.object.kg, e.object.id) in keep]
            out.extend(step)
            parents = {(e.kg, e.id) for e in node.parent.entities}
            keep = {(x.kg, x.id) for e in step for x in (e.subject, e.object) if (x.kg, x.id) in parents}
            node = node.parent
        return out

    def to_trace(self) -> dict:
        out: dict[str, Any] = {
            "id": self.id,
            "parent": self.parent.id if self.parent else None,
            "depth": self.depth,
            "state": "default",
            "action": None if self.relation is None else {
                "type": "SELECT_RELATION", "text": "",
                "relation": self.relation.choice_json(),
            },
            "value": None if self.value is None else round(self.value, 4),
            **({} if self.answer_value is None else {"answer_value": round(self.answer_value, 4)}),
            **{name: round(v, 4) for name, v in (("rollout", self.rollout), ("critical", self.critical)) if v is not None},
            "expansion": None,
            "invalid": False,
            "usage": self.usage.to_json(),
            "entities": [e.label for e in self.entities[:20]],
            "entity_count": len(self.entities),
            "prior": round(self.prior, 4),
            "visits": self.visits,
            "q": round(self.q, 4),
        }
        if self.edges:
            out["new_edges"] = [e.to_json() for e in self.edges[:50]]
        if self.note:
            out["note"] = self.note
        return out


def labels(entities: tuple[Entity, ...] | list[Entity], limit: int = 10) -> str:
    """At most ``limit`` labels for a prompt, each on one line and cut (:func:`~..subgraph.shown`)."""
    text = ", ".join(shown(e.label) for e in entities[:limit])
    return text + (f", … ({len(entities) - limit} more)" if len(entities) > limit else "")


class EdgeSource(Protocol):
    """What walking a relation needs: :class:`~..kgset.KGSet`, or :class:`MemoEdges` over it."""

    async def get_edges(self, entities: Sequence[Entity], relation: Relation, usage: Usage) -> Edges: ...


class MemoEdges:
    """A :class:`KGSet`'s ``get_edges`` remembered by (entities, relation): a reversing
    relation is walked to check it before it is offered and again when taken, and training
    walks the same relations from the same states in every tree and round. Only calls
    made are counted in ``usage``."""

    def __init__(self, kgs: KGSet, max_entries: int = 100_000) -> None:
        self.kgs = kgs
        self.max_entries = max_entries
        self._memo: dict[tuple, Edges] = {}

    async def get_edges(self, entities: Sequence[Entity], relation: Relation, usage: Usage) -> Edges:
        key = (tuple(sorted((e.kg, e.id) for e in entities)), relation.key, relation.kg)
        if key not in self._memo:
            if len(self._memo) >= self.max_entries:
                self._memo.clear()
            self._memo[key] = await self.kgs.get_edges(entities, relation, usage)
        return self._memo[key]


async def step(kgs: EdgeSource, node: PathNode, relation: Relation, usage: Usage) -> tuple[tuple[Entity, ...], tuple[Edge, ...], int]:
    """Walk ``relation`` from the node's entities: the entities reached that the path has
    not met yet, the edges, and how many edges the bound left out. Entities met earlier on
    the path are not reached again: "films written by the screenwriter of X" walks
    ``written_by`` then ``~written_by`` and reaches the writer's *other* films (MetaQA's
    answers leave X out too); a relation that only walks back reaches nothing. The
    exception is a round trip on a KG that stores the pair both ways (:func:`comes_back`):
    "the wife of X's husband" is X, as :func:`~..provenance.reached_back` has it for the
    tree."""
    got = await kgs.get_edges(list(node.entities), relation, usage)
    reached: dict[tuple[str, str], Entity] = {}
    seen = node.seen()
    back = comes_back(node, relation, got)
    for e in got.edges:
        for x in (e.subject, e.object):
            if (x.kg, x.id) not in seen or (x.kg, x.id) in back:
                reached.setdefault((x.kg, x.id), x)
    for x in got.new_entities:
        if (x.kg, x.id) not in seen:
            reached.setdefault((x.kg, x.id), x)
    return tuple(reached.values()), tuple(got.edges), got.omitted


def comes_back(node: PathNode, relation: Relation, got: Edges) -> set[tuple[str, str]]:
    """(kg, id) of the entities met earlier on the path that walking ``relation`` from the
    node reaches *as answers*: the only target of its source's step (the KG's bound cut
    nothing), by a stored edge whose reverse the path walked before (or a self-loop).
    PathQuestion stores ``X -spouse-> H`` and ``H -spouse-> X``, ``X -parents-> M`` and
    ``M -children-> X``, and asks "the spouse of X's spouse" (X) or "the child of the mom
    of X's son" (the son): 48 % of PQ-3H's questions. MetaQA stores ``film -> person``
    only, so ``directed_by`` then ``~directed_by`` walks one stored edge twice and never
    comes back; a target among several ("the children of X's parent" meets X among his
    siblings) is no answer either, nor is the target of a source whose edges the KG cut
    (it may have had others: ``Edges.omitted_of``). When the KG cut edges without saying
    whose, no source can be sure of its only target. The rule of
    :func:`~..provenance.reached_back`."""
    if got.omitted and not got.omitted_by_source:
        return set()
    seen = node.seen()
    steps = [((e.object, e.subject) if relation.inverse else (e.subject, e.object), e) for e in got.edges]
    if not any((t.kg, t.id) in seen for (_, t), _ in steps):
        return set()  # the usual case: nothing walked back, no need to read the path's edges
    fanout = Counter((s.kg, s.id) for (s, _), _ in steps)
    walked = {_ends(e) for n in node.path() for e in n.edges} | {_ends(e) for e in got.edges}
    # the only target of its source, by a pair stored both ways (or a self-loop)
    return {(t.kg, t.id) for (s, t), e in steps
            if (t.kg, t.id) in seen and fanout[(s.kg, s.id)] == 1 and not got.omitted_of(s.id)
            and _ends(e)[::-1] in walked}


def _ends(e: Edge) -> tuple[tuple[str, str], tuple[str, str]]:
    """An edge's (subject, object) as stored, each as (kg, id)."""
    return (e.subject.kg, e.subject.id), (e.object.kg, e.object.id)


async def offered_relations(kgs: EdgeSource, node: PathNode, relations: Sequence[Relation], usage: Usage,
                            limit: int) -> list[Relation]:
    """The first ``limit`` of the node's ``relations`` that can reach an entity the path has
    not met (or come back to one, :func:`comes_back`): a relation reversing one on the path
    (``~written_by`` after ``written_by``) is walked once to check (one KG call; most of them
    only walk back), the others are kept."""
    reverses = node.reverses()
    out: list[Relation] = []
    for r in relations:
        if len(out) >= limit:
            break
        if (r.key, r.kg) in reverses and not (await step(kgs, node, r, usage))[0]:
            continue
        out.append(r)
    return out
