"""A trained value function for Tree-of-Traversals: RwT's roll-out model
(:class:`~.rwt.valuemodel.ValueModel`, trained by ``traversals train-value``) rates the
tree's nodes in place of the LLM's F.4 / F.5 prompts.

The model scores a relation path from the question's entities, so a node is read as the
paths its subgraph walked:

- an **answer** is worth the model's *stop* head on the path to the entity it names (the
  best walk that reached it, :func:`~.provenance.reaching_paths`); a list answer
  ``[A, B]`` is worth its worst entity (:func:`list_value`), so a list that pads the
  answer with what a longer walk reached is worth less than the answer alone; an answer
  that names no entity an expansion reached (free text, or the question's own entity
  where :func:`~.provenance.reached_back` rules it out) is worth 0 — the model cannot
  rate it;
- any other node is worth the *search* value ``max(stop, 0.9 · go)`` of the paths its
  latest expansion walked (the root, before any expansion: the empty path), so best-first
  search follows the expansion the model rates best and backtracks when an expansion
  walks somewhere worse. The go head is discounted because a shallow node's THINK,
  EXPAND_KG and re-selection children inherit its value: undiscounted, a 2-hop question's
  first hop (go 0.998) kept out-ranking the second (stop 0.996) and the tree spent its 20
  expansions on the first hop's siblings;
- a **selection** (the state after SELECT_ENTITIES, whose relation options the KG has
  already listed) is worth the best search value among the paths its options would walk
  from the selected entities — a one-step look-ahead at no LLM or KG cost. Without it a
  selection inherited its parent's value, so which entity the next hop starts from was
  left to tie-breaking: on MetaQA 3-hop the tree re-selected the question's own entity
  for the second hop (``[Bombshell]`` → ``written_by``, then ``[Bombshell]`` →
  ``has_tags``) and spent its 20 expansions backtracking.

A value that promises an option must let the search walk it, so with the look-ahead the
model also *proposes* (:meth:`TrainedValue.suggest`, one child each, noted in the trace):
at a selection, the relation option it rates best when the LLM's k did not include it
(the 3-hop traces had a film whose ``in_language`` the model rated 0.97 while the LLM
offered ``has_tags``, ``has_genre``, ``release_year``); where entities are selected, all
the entities the latest expansion reached at once, whose relation options are the union
of theirs (most MetaQA films have no language; one of a director's films usually has).
``lookahead=False`` turns both off.

The LLM's own preference among the options is not mixed into the value: the tree's
frontier order weighs the two (``TreeConfig.prior_weight``, on by default with a trained
value; :func:`~.tree.frontier_key`).

No LLM call, so every node is rated (intermediate ones too, also for k = 1), and an
answer that crosses τ ends the search as in Algorithm 1. The LLM still proposes every
action, entity, relation and answer; the look-ahead's suggestions come on top. A model
belongs to one KG schema: its features are the KG's relation keys.
"""

from __future__ import annotations

from ..llm.base import Usage
from .machine import Action, ActionType, Node, State, latest_targets, selection_group
from .provenance import answer_reaching_paths, reached_back, walked_paths
from .rwt.valuemodel import ValueModel, question_words
from .subgraph import Fact

#: what the go head's promise is worth against a state in hand (see TrainedValue.search_value)
GO_DISCOUNT = 0.9


def _keys(path: list[Fact]) -> tuple[str, ...]:
    return tuple(f.relation.key for f in path)


def selected_paths(node: Node) -> set[tuple[str, ...]]:
    """The relation paths from the question's entities to the node's selected entities
    (``()`` for a question entity itself, even when an expansion reached it again)."""
    roots = node.path()[0].subgraph.entities
    paths: set[tuple[str, ...]] = {() for e in node.selected if e in roots}
    others = [e for e in node.selected if e not in roots]
    paths |= {_keys(p) for p in walked_paths(node.subgraph, others, roots)}
    return paths or {()}


def latest_paths(node: Node) -> set[tuple[str, ...]]:
    """The relation paths of the entities the node's latest expansion reached; ``{()}``
    before any expansion."""
    targets = latest_targets(node)
    return {_keys(p) for p in walked_paths(node.subgraph, targets, node.path()[0].subgraph.entities)} or {()}


def list_value(answer: str, rated: dict[str, float]) -> float:
    """The value of an answer naming the entities whose casefolded labels ``rated`` maps
    to their values (each at the best walk that reached it): for a list answer ``[A, B,
    ...]``, the least value among the entities it names as whole items — a list is right
    when each of its entities is: "[Ken Scott, Martin Petit]" for the writer of one film,
    where Martin Petit is Ken Scott's co-writer on another, is worth Martin Petit's
    path —; otherwise the best of them. Items that name no rated entity are left out, so
    a label with ", " in it stays one entity."""
    best = max(rated.values())
    if not (answer.startswith("[") and answer.endswith("]")):
        return best
    items = f", {answer[1:-1].casefold()}, "
    listed = [v for label, v in rated.items() if f", {label}, " in items]
    return min(listed) if listed else best


def _words(query: str, node: Node) -> list[str]:
    """The model's question words, the question's own entities masked."""
    return question_words(query, [e.label for e in node.path()[0].subgraph.entities])


class TrainedValue:
    """A :class:`~.value.NodeValue` backed by a trained :class:`ValueModel`. Stateless:
    one instance serves any number of questions."""

    def __init__(self, model: ValueModel, *, lookahead: bool = True) -> None:
        self.model = model
        #: rate a selection by the best path its relation options would walk (module docstring)
        self.lookahead = lookahead

    def settings(self) -> dict[str, object]:
        """What a trace records of this value function's settings."""
        return {"value_lookahead": self.lookahead}

    async def evaluate(self, query: str, node: Node, usage: Usage) -> float:
        if node.invalid:
            return 0.0
        return self.model_value(query, node)

    def model_value(self, query: str, node: Node) -> float:
        """The trained model's rating of the node alone (no LLM prior)."""
        words = _words(query, node)
        if node.state is State.DONE:
            root = node.path()[0].subgraph
            # the same entities answer_candidates offers (provenance.reached_back)
            # every walk that reached a named entity: one reached again later answers by the later walk
            walked = [p for p in answer_reaching_paths(node) if not reached_back(p[-1], root, node.subgraph)]
            # a sentence that restates the question's entity beside another answers with the
            # other: "Tasha Tudor's mother is William Burgess" is no round trip to Tasha Tudor
            others = [p for p in walked if p[-1].target not in root]
            if not (others or walked):
                node.add_note("value 0: the answer names no entity an expansion reached")
                return 0.0
            stop: dict[tuple[str, ...], float] = {}
            rated: dict[str, float] = {}  # entity label -> the best stop value of a path to it
            for p in others or walked:
                keys = _keys(p)
                if keys not in stop:
                    stop[keys] = self.model.stop_value(words, list(keys))
                label = p[-1].target.label.casefold()
                rated[label] = max(rated.get(label, 0.0), stop[keys])
            return round(list_value(node.answer or "", rated), 4)
        if self.lookahead and node.state is State.SELECTING_RELATION and node.relation_options:
            return self.lookahead_value(words, node)
        return round(max(self.search_value(words, p) for p in latest_paths(node)), 4)

    def suggest(self, query: str, node: Node) -> list[Action]:
        """With the look-ahead, what the tree should try at ``node`` even when the LLM did
        not propose it: at a selection, the relation option the model rates best (the
        selection's value is that option's, so it has to be walked for the value to
        hold); when entities are to be selected, all the entities the latest expansion
        reached at once (their relation options are the union of theirs — MetaQA's films
        of one director have a language between them, rarely each). Nothing otherwise."""
        if not self.lookahead or node.invalid:
            return []
        if node.state is State.SELECTING_RELATION and node.relation_options:
            _, i = self._best_option(_words(query, node), node)
            return [Action(ActionType.SELECT_RELATION, relation=node.relation_options[i], relation_key=node.relation_keys[i])]
        if node.state is State.SELECTING_ENTITIES:
            group = selection_group(node, limit=None)
            return [Action(ActionType.SELECT_ENTITIES, entities=group)] if group else []
        return []

    def answer_now(self, query: str, node: Node, threshold: float) -> bool:
        """Whether the model's *stop* head rates a path the latest expansion walked above
        ``threshold`` (τ) at ``node``, a default state after an expansion: the answer is
        in hand, so the tree asks for it at once instead of letting the LLM choose. The
        1.5B model rarely chooses ANSWER there: MetaQA 1-hop chains rated 0.98 after
        ``~directed_by`` went on to THINK, EXPAND_KG and a second relation (~5 LLM calls)
        before answering (``TreeConfig.answer_when_rated``)."""
        if node.invalid or node.state is not State.DEFAULT or not latest_targets(node):
            return False
        words = _words(query, node)
        return max(self.model.stop_value(words, list(p)) for p in latest_paths(node)) > threshold

    def lookahead_value(self, words: list[str], node: Node) -> float:
        """The best search value among the paths the selection's relation options would
        walk; the trace notes which option it was."""
        best, i = self._best_option(words, node)
        node.add_note(f"look-ahead: best option {node.relation_options[i].key}")
        return round(best, 4)

    def _best_option(self, words: list[str], node: Node) -> tuple[float, int]:
        """(value, index) of the selection's best relation option; ties: the first listed."""
        paths = selected_paths(node)
        scored = [max(self.search_value(words, p + (r.key,)) for p in paths) for r in node.relation_options]
        best = max(range(len(scored)), key=lambda i: (scored[i], -i))
        return scored[best], best

    def search_value(self, words: list[str], path: tuple[str, ...]) -> float:
        """``max(stop, GO_DISCOUNT · go)``: a state in hand is worth a little more than the
        same promise one expansion further (so best-first search takes the deeper state
        instead of re-expanding the siblings of the shallower one)."""
        heads = self.model.predict(words, list(path))
        return max(heads["stop"], GO_DISCOUNT * heads["go"])
