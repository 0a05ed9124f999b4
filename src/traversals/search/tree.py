"""Tree-of-Traversals best-first search (Algorithm 1, §2.3, Appendix B.1–B.2).

Loop: choose the unexplored node with the highest value (ties: the deepest, then the
newest — depth first), propose k actions with the node's state prompt, apply each
transition, evaluate every child with the LLM value function (children concurrently;
or with a trained model, :mod:`.trained_value`),
collect answers. Stop when an answer's value exceeds τ, when the frontier is empty, or
after ``max_expansions`` expansions. k = 1 is Chain-of-Traversals.

Return value: the best-valued answer found. When no answer crossed τ the best one found
is still returned (with its value, so callers can threshold it); when there is none the
answer is "Cannot find answer" (:data:`~traversals.search.result.NO_ANSWER`).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Sequence

from ..llm.base import LLM, Usage
from . import events
from .events import EventSink
from .kgset import KGSet
from .linking import Linker
from .machine import Machine, Node, State
from .policy import Policy
from .provenance import supporting_edges
from .result import NO_ANSWER, Answer
from .subgraph import Subgraph
from .value import NodeValue, ValueFunction


@dataclass
class TreeConfig:
    k: int = 3
    max_depth: int = 7
    max_expansions: int = 20
    threshold: float = 0.8
    diverse_temperature: float = 1.0
    constrained: bool = True  # use option scoring when the LLM can score
    #: value intermediate nodes with the LLM (F.4). None: only when k > 1 — with k = 1
    #: the frontier never holds two valid nodes, so those values could change nothing.
    evaluate_intermediate: bool | None = None
    #: constrained decoding: sample k distinct options instead of taking the top k
    sample_options: bool = False
    seed: int = 0
    max_tokens: int = 96
    #: constrained decoding: calibrate relation choices against a neutral prompt
    calibrate: bool = False
    #: constrained decoding: distinct answers an ANSWER action proposes, the most probable
    #: first. None: k with a trained value (it tells a right answer from the LLM's favourite
    #: at no LLM cost), 1 with the LLM value
    answers: int | None = None


class TreeOfTraversals:
    """A :class:`~traversals.search.result.Solver`. Stateless between questions."""

    def __init__(
        self,
        llm: LLM,
        kgs: KGSet,
        config: TreeConfig | None = None,
        *,
        name: str | None = None,
        on_event: EventSink | None = None,
        value: NodeValue | None = None,
    ) -> None:
        self.llm = llm
        self.kgs = kgs
        self.config = config or TreeConfig()
        self.name = name or ("chain" if self.config.k == 1 else "tree")
        #: called with each search event as it happens (see :mod:`traversals.search.events`)
        self.on_event = on_event
        #: rates the nodes (e.g. a :class:`~.trained_value.TrainedValue`); None: the LLM (F.4/F.5)
        self.value = value

    @property
    def constrained(self) -> bool:
        return self.config.constrained and bool(getattr(self.llm, "can_score", False))

    async def ask(self, question: str, *, topic_entities: Sequence[str] | None = None) -> Answer:
        cfg = self.config
        started = time.perf_counter()
        machine = Machine(self.kgs, max_depth=cfg.max_depth)
        policy = Policy(
            self.llm,
            machine,
            constrained=self.constrained,
            diverse_temperature=cfg.diverse_temperature,
            max_tokens=cfg.max_tokens,
            rng=random.Random(cfg.seed),
            sample_options=cfg.sample_options,
            calibrate=cfg.calibrate,
            answers=cfg.answers if cfg.answers is not None else (cfg.k if self.value is not None else 1),
        )
        value_fn: NodeValue = self.value or ValueFunction(self.llm, machine, constrained=self.constrained)
        linker = Linker(self.llm, self.kgs, constrained=self.constrained)

        # A given value function (a trained model) costs no LLM call: rate every node.
        default_intermediate = cfg.k > 1 or self.value is not None
        evaluate_intermediate = default_intermediate if cfg.evaluate_intermediate is None else cfg.evaluate_intermediate
        init_usage = Usage()
        entities = await linker.initialize(question, init_usage, topic_entities)
        root = machine.root(Subgraph().with_entities(entities))
        root.usage = init_usage
        emit = self.on_event or (lambda event: None)
        emit(events.linked(question, entities))
        emit(events.node(root))
        nodes: list[Node] = [root]
        frontier: list[Node] = [root]
        answers: list[Node] = []
        expansions = 0
        finished = False
        while frontier and not finished and expansions < cfg.max_expansions:
            node = max(frontier, key=lambda n: (n.value if n.value is not None else 1.0, n.depth, n.id))
            frontier.remove(node)
            expansions += 1
            node.expansion = expansions
            emit(events.expansion(node))
            proposal = await policy.propose(question, node, cfg.k, node.usage)
            children = list(await asyncio.gather(*(machine.transition(node, a, Usage()) for a in proposal.actions)))

            async def score(child: Node) -> None:
                if child.state is State.DONE or child.invalid or evaluate_intermediate:
                    child.value = await value_fn.evaluate(question, child, child.usage)

            await asyncio.gather(*(score(c) for c in children))
            node.priors = proposal.priors
            for child in children:
                node.children.append(child)
                nodes.append(child)
                emit(events.node(child))
                if child.state is State.DONE and not child.invalid:
                    answers.append(child)
                    if (child.value or 0.0) > cfg.threshold:
                        finished = True
                elif not (child.invalid and node.invalid):  # an invalid output is retried once
                    frontier.append(child)

        if not answers and not frontier:
            # Every branch ended in invalid outputs or dead ends before the expansion
            # budget ran out: answer from the deepest state reached, as at max depth.
            last = max((n for n in nodes if n.state is State.DEFAULT and not n.invalid), key=lambda n: (n.depth, n.id))
            usage = Usage()
            proposal = await policy.propose(question, last, 1, usage, force_answer=True)
            child = await machine.transition(last, proposal.actions[0], usage)
            if child.state is State.DONE:
                child.value = await value_fn.evaluate(question, child, child.usage)
                child.note = (child.note + "; " if child.note else "") + "answered when the frontier ran out"
                last.children.append(child)
                nodes.append(child)
                emit(events.node(child))
                answers.append(child)
        best = max(answers, key=lambda n: (n.value or 0.0, -n.id), default=None)
        usage = Usage()
        for n in nodes:
            usage.merge(n.usage)
        text = best.answer if best is not None and best.answer else NO_ANSWER
        answer = Answer(
            question=question,
            text=text,
            value=best.value if best is not None else None,
            supporting_edges=supporting_edges(best) if best is not None else [],
            usage=usage,
            seconds=time.perf_counter() - started,
            decoding="constrained" if self.constrained else "sampled",
            strategy=self.name,
        )
        answer.trace = {
            "question": question,
            "answer": answer.text,
            "value": answer.value,
            "strategy": self.name,
            "decoding": answer.decoding,
            "value_function": "llm" if self.value is None else type(self.value).__name__,
            "config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
            "linked_entities": [{"id": e.id, "label": e.label, "kg": e.kg} for e in entities],
            "expansions": expansions,
            "stopped": "threshold" if finished else ("max_expansions" if expansions >= cfg.max_expansions else "frontier_empty"),
            "usage": usage.to_json(),
            "answer_node": best.id if best is not None else None,
            "nodes": [n.to_trace() for n in nodes],
        }
        return answer
