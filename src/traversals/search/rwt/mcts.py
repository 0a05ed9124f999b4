"""Reasoning with Trees: Monte Carlo Tree Search over KG relations (RwT §3, Algorithm 1).

Each simulation:

1. **Selection** — from the root, follow the child maximising
   ``Q(s, a) + c_puct · P(s, a) · sqrt(N(s)) / (1 + N(s, a))`` (PUCT), down to a state not
   yet expanded or a leaf;
2. **Expansion** — the state's relations get their priors ``P(s, a)`` from the LLM
   (one scoring call) and become children (their edges are walked only when selected);
3. **Evaluation** — the selected child walks its relation and is valued with Eq. 4
   (roll-out and critical models);
4. **Backpropagation** — the value is added to ``W`` and ``N`` of every state on the path.

``Q`` is read on the paper's scale, [-1, 1]: a value ``v`` in [0, 1] (Eq. 4's parts are
probabilities and similarities) counts as ``2v - 1``, and an unvisited child has ``Q = 0``,
the neutral middle, so the LLM's preference orders the first visits, and a child valued
below 0.5 gives way to its unvisited siblings (``RwTConfig.signed_q``; without it an
unvisited child would have the lowest value and the first child valued at all would keep
the search).
"""

from __future__ import annotations

import math
import time
from typing import Sequence

from ..result import Answer
from .engine import RwTSearch
from .state import PathNode


class MonteCarloTreeSearch(RwTSearch):
    name = "mcts"

    def puct(self, parent: PathNode, child: PathNode) -> float:
        q = (2 * child.q - 1 if child.visits else 0.0) if self.config.signed_q else child.q
        return q + self.config.c_puct * child.prior * math.sqrt(max(1, parent.visits)) / (1 + child.visits)

    async def search(self, question: str, topic_entities: Sequence[str] | None) -> Answer:
        started = time.perf_counter()
        root, guesses, _ = await self.start(question, topic_entities)
        nodes = [root]
        simulations = 0
        while simulations < self.config.simulations and not self.exhausted(root):
            # 1. selection: down through evaluated, expanded states
            node = root
            while (node is root or node.value is not None) and not self.leaf(node) and node.actions is not None \
                    and node.children:
                parent = node
                node = max(parent.children, key=lambda c: (self.puct(parent, c), c.prior, -c.id))
            if node is not root and node.value is None:
                value = await self.evaluate(question, guesses, node)  # 3. evaluation
            elif self.leaf(node) or node.actions is not None:
                value = node.value or 0.0  # a leaf (or a state without relations): its value again
            else:
                # 2. expansion, then evaluate the child the prior prefers
                actions = await self.expand(question, node)
                if not actions:
                    node.note = node.note or "no relations to follow"
                    value = node.value or 0.0
                else:
                    for relation, prior in actions:
                        self.child(node, relation, prior, nodes)
                    node = max(node.children, key=lambda c: (c.prior, -c.id))
                    value = await self.evaluate(question, guesses, node)
            self.backup(node, value)  # 4. backpropagation
            simulations += 1
        stopped = "exhausted" if self.exhausted(root) else "simulations"
        return self.answer(question, nodes, guesses, started, {"simulations": simulations}, stopped)

    def leaf(self, node: PathNode) -> bool:
        return node.depth >= self.config.max_hops or (node.parent is not None and not node.entities)

    def exhausted(self, node: PathNode) -> bool:
        """Nothing new can be learnt below: a leaf, a state without relations, or every
        child exhausted."""
        if node.parent is not None and node.value is None:
            return False
        if self.leaf(node):
            return True
        return node.actions is not None and all(self.exhausted(c) for c in node.children)

    @staticmethod
    def backup(node: PathNode | None, value: float) -> None:
        while node is not None:
            node.visits += 1
            node.total += value
            node = node.parent
