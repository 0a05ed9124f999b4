"""A trained value function for Tree-of-Traversals: RwT's roll-out model
(:class:`~.rwt.valuemodel.ValueModel`, trained by ``traversals train-value``) rates the
tree's nodes in place of the LLM's F.4 / F.5 prompts.

The model scores a relation path from the question's entities, so a node is read as the
paths its subgraph walked:

- an **answer** is worth the model's *stop* head on the path to the entity it names (the
  best one when it names several); an answer that names no entity an expansion reached
  (free text, or the question's own entity reached back) is worth 0 — the model cannot rate it;
- any other node is worth the *search* value ``max(stop, 0.9 · go)`` of the paths its
  latest expansion walked (the root, before any expansion: the empty path), so best-first
  search follows the expansion the model rates best and backtracks when an expansion
  walks somewhere worse. The go head is discounted because a shallow node's THINK,
  EXPAND_KG and re-selection children inherit its value: undiscounted, a 2-hop question's
  first hop (go 0.998) kept out-ranking the second (stop 0.996) and the tree spent its 20
  expansions on the first hop's siblings.

No LLM call, so every node is rated (intermediate ones too, also for k = 1), and an
answer that crosses τ ends the search as in Algorithm 1. The LLM still proposes every
action, entity, relation and answer. A model belongs to one KG schema: its features are
the KG's relation keys.
"""

from __future__ import annotations

from ..llm.base import Usage
from .machine import Node, State
from .provenance import answer_paths, reached_back, walked_paths
from .rwt.valuemodel import ValueModel, question_words
from .subgraph import Fact

#: what the go head's promise is worth against a state in hand (see TrainedValue.search_value)
GO_DISCOUNT = 0.9


def _keys(path: list[Fact]) -> tuple[str, ...]:
    return tuple(f.relation.key for f in path)


def latest_paths(node: Node) -> set[tuple[str, ...]]:
    """The relation paths of the entities the node's latest expansion reached (on its
    path from the root); ``{()}`` before any expansion."""
    for n in reversed(node.path()):
        if n.new_facts:
            targets = list(dict.fromkeys(f.target for f in n.new_facts))
            return {_keys(p) for p in walked_paths(node.subgraph, targets, node.path()[0].subgraph.entities)} or {()}
    return {()}


class TrainedValue:
    """A :class:`~.value.NodeValue` backed by a trained :class:`ValueModel`. Stateless:
    one instance serves any number of questions."""

    def __init__(self, model: ValueModel) -> None:
        self.model = model

    async def evaluate(self, query: str, node: Node, usage: Usage) -> float:
        if node.invalid:
            return 0.0
        words = question_words(query, [e.label for e in node.path()[0].subgraph.entities])
        if node.state is State.DONE:
            root = node.path()[0].subgraph
            # the same entities answer_candidates offers: not the question's own reached back
            paths = {_keys(p) for p in answer_paths(node) if not reached_back(p[-1], root)}
            if not paths:
                node.note = (node.note + "; " if node.note else "") + "value 0: the answer names no entity an expansion reached"
                return 0.0
            return round(max(self.model.stop_value(words, list(p)) for p in paths), 4)
        return round(max(self.search_value(words, p) for p in latest_paths(node)), 4)

    def search_value(self, words: list[str], path: tuple[str, ...]) -> float:
        """``max(stop, GO_DISCOUNT · go)``: a state in hand is worth a little more than the
        same promise one expansion further (so best-first search takes the deeper state
        instead of re-expanding the siblings of the shallower one)."""
        heads = self.model.predict(words, list(path))
        return max(heads["stop"], GO_DISCOUNT * heads["go"])
