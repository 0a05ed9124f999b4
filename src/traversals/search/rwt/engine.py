"""What RwT's two searches share: linking the question, expanding a state (its relations
and their priors), evaluating a state (walk the relation, Eq. 4), and the answer.

The answer is the entities of the best-valued state reached (its own value ``V̂``, or a
trained model's value as an answer; the root, the question's own entities, never
answers). Algorithm 1 reads the tree level by level, ranking paths by their ``Q``, and
returns the top-1 of the last level; with a value that rates how well a state's entities
fit the question, the best state is where the path should stop, so we return it directly
— this also lets a 1-hop question stop after one hop when the search may walk three. Not
by ``Q``: it averages a state with what was explored below it.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, fields
from typing import Sequence

from ...errors import PromptTooLong
from ...kg.base import Relation
from ...llm.base import LLM, Usage
from ..events import EventSink
from ..kgset import KGSet
from ..linking import Linker
from ..result import NO_ANSWER, Answer
from ..templates import PromptSet, default_prompts
from .policy import RelationPolicy
from .state import MemoEdges, PathNode, offered_relations, step
from .value import CriticalModel, LLMRollout, RolloutModel, mix


#: why an RwT search ended (:attr:`~..result.Answer.stopped`): MCTS used its simulations, or
#: found nothing left to learn (every path ends at ``max_hops`` or where no relation reaches
#: anything new); beam search walked ``max_hops`` hops, or no kept state had a relation
#: reaching anything new. None of them is a value threshold: RwT has none.
STOPPED = ("simulations", "exhausted", "max_hops")


@dataclass
class RwTConfig:
    """Hyper-parameters; defaults from the paper (Appendix B.3) where it gives them."""

    simulations: int = 16  # MCTS simulations per question (N)
    max_hops: int = 3  # T
    c_puct: float = 1.25
    #: PUCT's Q on the paper's [-1, 1] scale: a visited child's value v in [0, 1] counts as
    #: 2v - 1 and an unvisited child as 0, the neutral middle (AlphaZero's convention), so a
    #: child valued below 0.5 gives way to its unvisited siblings. False: Q = v, an unvisited
    #: child at 0, the *lowest* value (the MCTS figures before the fiftieth session)
    signed_q: bool = True
    lam: float = 0.15  # λ, the critical model's weight in Eq. 4
    max_actions: int = 30  # relations offered per state (the KG interface's most frequent first)
    beam_width: int = 3  # HBS: B1, states kept per hop (the paper's Table 6 finds 3 the best trade-off)
    beam_branch: int = 3  # HBS: B2, relations tried per state (the paper: 5; fewer states valued per hop)
    max_answer_entities: int = 10
    constrained: bool = True  # score relations by log-probability when the LLM can


class RwTSearch:
    name = "rwt"

    def __init__(
        self,
        llm: LLM,
        kgs: KGSet,
        config: RwTConfig | None = None,
        *,
        rollout: RolloutModel | None = None,
        critical: CriticalModel | None = None,
        on_event: EventSink | None = None,
        prompts: PromptSet | None = None,
    ) -> None:
        self.llm = llm
        self.kgs = kgs
        self.config = config or RwTConfig()
        self.prompts = prompts or default_prompts()
        self.constrained = self.config.constrained and bool(getattr(llm, "can_score", False))
        self.policy = RelationPolicy(llm, constrained=self.constrained, prompts=self.prompts)
        self.rollout = rollout or LLMRollout(llm, constrained=self.constrained, prompts=self.prompts)
        self.critical = critical or CriticalModel()
        self.on_event = on_event
        #: the KG walks, remembered: a reversing relation is walked to check it before it is
        #: offered (:func:`~.state.offered_relations`), and again when the search takes it;
        #: each question gets its own (:meth:`ask`)
        self.edges = MemoEdges(kgs)

    async def ask(self, question: str, *, topic_entities: Sequence[str] | None = None) -> Answer:
        """Answer ``question`` with its own links, walked relations and LLM ratings: what an
        earlier question linked, walked or rated never changes this one's search or its
        counted KG and LLM calls
        (an evaluation run answers and costs as its questions asked one by one do)."""
        one = copy.copy(self)
        one.kgs = self.kgs.fresh()
        one.edges = MemoEdges(one.kgs)
        if callable(fresh := getattr(self.rollout, "fresh", None)):  # the LLM rater's ratings: this question's
            one.rollout = fresh()
        return await one.search(question, topic_entities)

    async def search(self, question: str, topic_entities: Sequence[str] | None) -> Answer:
        """One question's search (MCTS or beam), on this object's own links and memo."""
        raise NotImplementedError

    # -- shared steps --------------------------------------------------------------------

    def _emit(self, node: PathNode) -> None:
        if self.on_event is not None:
            self.on_event({"event": "node", **node.to_trace()})

    async def expand(self, question: str, node: PathNode) -> list[tuple[Relation, float]]:
        """The node's relations that reach something new (:func:`~.state.offered_relations`)
        with their priors. A state below the root whose prompt does not fit the LLM's
        context (a path of many entities) offers none, with a note: the search gives up that
        state, not the question; the root's prompt not fitting is the question's error (the
        context is too small for any)."""
        if node.actions is None:
            rels = await self.kgs.get_relations(list(node.entities), node.usage)
            offered = await offered_relations(self.edges, node, rels.items, node.usage, self.config.max_actions)
            try:
                priors = await self.policy.priors(question, node, offered, node.usage)
            except PromptTooLong as exc:
                if node.parent is None:
                    raise
                node.actions = {}
                node.note = "; ".join(filter(None, [node.note, f"not expanded: its prompt does not fit the LLM's context ({exc})"]))
                return []
            node.actions = {f"{r.kg}:{r.key}": (r, p) for r, p in zip(offered, priors)}
        return list(node.actions.values())

    async def evaluate(self, question: str, guesses: Sequence[str], node: PathNode) -> float:
        """Walk the node's relation from its parent and value the state it reaches."""
        if await self.walk_and_rate(question, node):
            await self.value_with_critical(question, guesses, node)
        return node.value or 0.0

    async def walk_and_rate(self, question: str, node: PathNode) -> bool:
        """:meth:`evaluate`'s first part: the walk and the roll-out model's rating. False
        when the state is valued already (0: it reached nothing new, or its rating prompt
        does not fit the LLM's context), and emitted."""
        assert node.parent is not None and node.relation is not None
        node.entities, node.edges, node.omitted = await step(self.edges, node.parent, node.relation, node.usage)
        if not node.entities:
            node.value = 0.0
            node.note = "the relation reached no new entity"
            self._emit(node)
            return False
        hops_left = self.config.max_hops - node.depth
        try:
            node.rollout = await self.rollout.value(question, node, hops_left, node.usage)
        except PromptTooLong as exc:  # this state's own failure (many entities): valued 0, the search goes on
            node.value = 0.0
            node.note = f"value: its prompt does not fit the LLM's context ({exc})"
            self._emit(node)
            return False
        return True

    async def value_with_critical(self, question: str, guesses: Sequence[str], node: PathNode) -> float:
        """:meth:`evaluate`'s second part, after :meth:`walk_and_rate`: the critical model,
        and Eq. 4's mix of the two."""
        assert node.rollout is not None
        node.critical = await self.critical.value(guesses, node, node.usage)
        node.value = mix(node.rollout, node.critical, lam=self.config.lam)
        as_answer = self.rollout.answer_value(question, node)
        if as_answer is not None:  # a trained model values "answer here" on its own head
            node.answer_value = mix(as_answer, node.critical, lam=self.config.lam)
        self._emit(node)
        return node.value

    def child(self, parent: PathNode, relation: Relation, prior: float, nodes: list[PathNode]) -> PathNode:
        node = PathNode(id=len(nodes), entities=(), parent=parent, relation=relation, depth=parent.depth + 1, prior=prior)
        parent.children.append(node)
        nodes.append(node)
        return node

    async def start(self, question: str, topic_entities: Sequence[str] | None) -> tuple[PathNode, list[str], Usage]:
        usage = Usage()
        entities = await Linker(self.llm, self.kgs, constrained=self.constrained, prompts=self.prompts).initialize(question, usage, topic_entities)
        root = PathNode(id=0, entities=tuple(entities), usage=usage)
        guesses = await self.policy.guesses(question, root.usage)
        if self.on_event is not None:
            self.on_event({"event": "linked", "question": question,
                           "entities": [e.ref() for e in entities]})
        self._emit(root)
        return root, guesses, usage

    @staticmethod
    def answer_score(node: PathNode) -> float:
        return node.answer_value if node.answer_value is not None else (node.value or 0.0)

    def answer(self, question: str, nodes: list[PathNode], guesses: list[str], started: float, extra: dict,
               stopped: str | None = None) -> Answer:
        """The best-valued state's entities, its supporting edges and the whole tree as the
        trace; ``stopped`` says why the search ended (:data:`STOPPED`)."""
        reached = [n for n in nodes if n.parent is not None and n.value is not None and n.entities]
        best = max(reached, key=lambda n: (self.answer_score(n), -n.depth, -n.id), default=None)
        usage = Usage()
        for n in nodes:
            usage.merge(n.usage)
        shown = best.entities[: self.config.max_answer_entities] if best else ()
        text = ", ".join(e.label for e in shown) if shown else NO_ANSWER
        answer = Answer(
            question=question, text=text, value=self.answer_score(best) if best else None,
            # the edges to the entities the answer shows, not to those past max_answer_entities
            supporting_edges=best.supporting_edges(shown) if best else [], usage=usage,
            seconds=time.perf_counter() - started, decoding="constrained" if self.constrained else "sampled",
            strategy=self.name, linked_entities=list(nodes[0].entities), stopped=stopped,
        )
        answer.trace = {
            "question": question, "answer": text, "value": answer.value, "strategy": self.name,
            "decoding": answer.decoding, "prompts": self.prompts.identity(), "config": {f.name: getattr(self.config, f.name) for f in fields(self.config)},
            "rollout": getattr(self.rollout, "name", type(self.rollout).__name__),
            "embedder": getattr(self.critical.embedder, "name", type(self.critical.embedder).__name__),
            "guesses": guesses, "linked_entities": [e.ref() for e in nodes[0].entities],
            "usage": usage.to_json(), "answer_node": best.id if best else None,
            "nodes": [n.to_trace() for n in nodes], "stopped": stopped,
            # the best state's entities past max_answer_entities, which the answer does not list
            "answer_entities_left_out": len(best.entities) - len(shown) if best else 0, **extra,
        }
        return answer
