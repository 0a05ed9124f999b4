"""Hop-level beam search (RwT Appendix C, Algorithm 2): the fast alternative to MCTS.

Hop by hop: every kept state offers its ``B2`` most probable relations (the policy's
priors), each is walked and valued with Eq. 4, and the ``B1`` best new states are kept for
the next hop; it stops after ``max_hops`` or when no state has a relation left. The answer
is the best-valued state reached at any hop (see :mod:`.engine`).
"""

from __future__ import annotations

import time
from typing import Sequence

from ..result import Answer
from .engine import RwTSearch
from .state import PathNode
from ...aio import gather


class HopBeamSearch(RwTSearch):
    name = "beam"

    async def search(self, question: str, topic_entities: Sequence[str] | None) -> Answer:
        started = time.perf_counter()
        root, guesses, _ = await self.start(question, topic_entities)
        nodes = [root]
        beam = [root]
        hops = 0  # hops walked: the depth of the deepest states kept (not a hop that reached nothing)
        while beam and hops < self.config.max_hops:
            candidates: list[PathNode] = []
            for state in beam:  # the LLM runs one call at a time locally; states in order
                actions = await self.expand(question, state)
                top = sorted(actions, key=lambda a: -a[1])[: self.config.beam_branch]
                children = [self.child(state, relation, prior, nodes) for relation, prior in top]
                # walked and rated at once; the critical model then values them one by one,
                # in order: which of them embeds a text they share (and counts it) does not
                # follow which walk or rating came back first
                rated = await gather(*(self.walk_and_rate(question, c) for c in children))
                for c in (c for c, ok in zip(children, rated) if ok):
                    await self.value_with_critical(question, guesses, c)
                candidates.extend(c for c in children if c.entities)
            beam = sorted(candidates, key=lambda n: (-(n.value or 0.0), n.id))[: self.config.beam_width]
            hops += bool(beam)
        stopped = "exhausted" if not beam else "max_hops"
        return self.answer(question, nodes, guesses, started, {"hops": hops}, stopped)
