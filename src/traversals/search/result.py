"""What a strategy returns for one question."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from ..kg.base import Edge, Entity
from ..llm.base import Usage

NO_ANSWER = "Cannot find answer"


@dataclass
class Answer:
    """One question's answer, with its provenance and its cost."""

    question: str
    #: the answer as the LLM wrote it (several entities: comma-separated), or
    #: :data:`NO_ANSWER` ("Cannot find answer"; :attr:`found` is false then)
    text: str
    #: how sure the search is, in [0, 1] (the value function's rating); None: not rated (cot, retrieve)
    value: float | None = None
    #: provenance: the KG edges on every walk from the question's entities to the entities
    #: the answer names, each stored as its KG states it (subject, forward relation, object);
    #: tree and chain support a yes/no, a count or a comparison's chosen question entity by
    #: the edges its path walked (:func:`~.provenance.supporting_edges`); [] when the answer
    #: names no entity the search reached
    supporting_edges: list[Edge] = field(default_factory=list)
    #: LLM calls and tokens, KG calls, spent on this question
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    decoding: str = "sampled"  # "constrained" when options were scored by log-probability
    strategy: str = ""
    #: the KG entities the question was linked to (None: the strategy opens no KG, as cot);
    #: an empty list means the search started from nothing the KG knows
    linked_entities: list[Entity] | None = None
    #: why the search stopped. tree, chain: "threshold" (an answer was rated over τ),
    #: "max_expansions" or "frontier_empty" (no answer was: the one returned is the
    #: best-rated of those below τ); mcts: "simulations" (all used) or "exhausted" (nothing
    #: left to explore); beam: "max_hops" or "exhausted" (RwT has no threshold: it answers
    #: its best-valued state); None: not said (cot, retrieve)
    stopped: str | None = None
    #: the whole search tree: {"question", "answer", "nodes": [{id, parent, depth, state,
    #: action, value, ...}]}
    trace: dict = field(default_factory=dict)

    @property
    def found(self) -> bool:
        """Whether the search gave an answer (it may still be wrong: see :attr:`value` and
        :attr:`stopped`)."""
        return self.text != NO_ANSWER

    def to_json(self) -> dict:
        return {
            "question": self.question,
            "answer": self.text,
            "value": self.value,
            "supporting_edges": [e.to_json() for e in self.supporting_edges],
            **self.usage.to_json(),
            "seconds": round(self.seconds, 3),
            "decoding": self.decoding,
            "strategy": self.strategy,
            "linked_entities": None if self.linked_entities is None else [e.ref() for e in self.linked_entities],
            "stopped": self.stopped,
        }


class Solver(Protocol):
    """Anything that answers a question: Tree/Chain-of-Traversals, CoT, later MCTS."""

    name: str

    async def ask(self, question: str, *, topic_entities: Sequence[str] | None = None) -> Answer:
        """Answer ``question``. ``topic_entities`` are entity names given by a dataset
        (MetaQA's ``[...]``); when present they are linked directly instead of asking
        the LLM to extract mentions."""
        ...
