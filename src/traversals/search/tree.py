"""Tree-of-Traversals best-first search (Algorithm 1, §2.3, Appendix B.1–B.2).

Loop: choose the unexplored node with the highest value (ties: the deepest, then the
newest — depth first; with ``TreeConfig.prior_weight`` the value's log-odds plus that
weight times the log of the LLM's probability of the node's action, :func:`frontier_key`),
propose k actions with the node's state prompt, apply each
transition, evaluate every child with the LLM value function (children concurrently;
or with a trained model, :mod:`.trained_value`),
collect answers (a trained value may add children of its own:
:meth:`~.trained_value.TrainedValue.suggest`). Stop when an answer's value exceeds τ,
when the frontier is empty, or after ``max_expansions`` expansions. k = 1 is Chain-of-Traversals.

With a trained value the search is a *graph* search: a child whose KG state
(:func:`kg_state`) equals a node's already in the tree is a duplicate and is not queued —
the model would rate it the same and expanding it again would only repeat that node's
children (a second EXPAND_KG of the same subgraph, the same two relations walked in the
other order). A THINK child is the exception: its KG state is its parent's by definition,
and the thought is what it adds (with k = 1 it is the only child). The LLM value rates the history too, so there the tree is the
paper's tree (``TreeConfig.merge_duplicates``). It also ends a walk where the model says
the answer is in hand: a default state whose stop head is above τ is asked for its answer
at once (``TreeConfig.answer_when_rated``) instead of letting the LLM choose THINK or
EXPAND_KG there.

Return value: the answer whose value crossed τ. When none did, the search still answers
(with a value, so callers can threshold it): by default the best-valued answer found,
Algorithm 1's choice, or, opt-in, the answer with the most *support* — the proposals naming
the same answer pool their values (``TreeConfig.answer_choice``, :func:`choose_answer`).
At equal value an entity list holding the chosen answer's entities and more is returned
instead (a trained value rates the path, so every entity it reached answers alike).
When there is no answer at all it is "Cannot find answer"
(:data:`~traversals.search.result.NO_ANSWER`).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Sequence

from ..errors import PromptTooLong
from ..llm.base import LLM, Usage
from . import events
from .events import EventSink
from .kgset import KGSet
from .linking import Linker
from .machine import DEFAULT_SCREEN_LIMIT, ActionType, Machine, Node, State
from .policy import Policy, grounded_sets, listed_labels
from .provenance import supporting_edges
from .result import NO_ANSWER, Answer
from .subgraph import Subgraph
from .templates import PromptSet, default_prompts
from .value import NodeValue, ValueFunction, names_no_reached_entity
from ..aio import gather


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
    #: constrained decoding: calibrate relation choices against a neutral prompt, whose
    #: log-probabilities weigh this much (0: off; 1: the division ``--calibrate`` makes)
    calibrate: float = 0.0
    #: constrained decoding: rank the KG's answer candidates by what the query adds to their
    #: probability (:meth:`~.policy.Policy._calibrated_order`)
    calibrate_answers: bool = False
    #: constrained decoding: ask each relation choice with its options listed in both orders
    #: and take the geometric mean of the two distributions (:meth:`~.policy.Policy._relation_probs`)
    both_orders: bool = False
    #: constrained decoding: an answer step chooses among the groups of entities the search
    #: reached (one group per relation path) by asking which one answers the query, the
    #: groups listed in both orders (:meth:`~.policy.Policy._compared_answers`)
    compare_answers: bool = False
    #: the LLM value's answer prompt (F.5) shows worked examples (``prompts/answer_value_examples.txt``)
    value_examples: bool = False
    #: constrained decoding: the LLM value's answer rating generates F.5's reasoning first and
    #: reads the expected score after it (:meth:`~.value.ValueFunction._reasoned_rating`)
    value_reasoning: bool = False
    #: entities an expansion reached that are checked at once for dead ends, so that no
    #: selection offers them (:meth:`Machine._dead_ends`; 0: none, each is caught when selected)
    screen_dead_ends: int = DEFAULT_SCREEN_LIMIT
    #: constrained decoding: distinct answers an ANSWER action proposes, the most probable
    #: first. None: with a trained value k, at least :data:`RATED_ANSWERS` (it tells a right
    #: answer from the LLM's favourite at no LLM cost, so a chain's k = 1 walk keeps one
    #: action per state but its answer is picked among three), 1 with the LLM value
    answers: int | None = None
    #: do not queue a child whose KG state equals an earlier node's (:func:`kg_state`).
    #: None: on with a trained value (equal states get equal values), off with the LLM value
    merge_duplicates: bool | None = None
    #: do not queue a child that only adds a side walk to an earlier node of another branch
    #: (:func:`detour_of`: its walked facts are that node's and more, in the same state, and
    #: it is rated no higher). None: on with a trained value, whose rating then says the side
    #: walk added nothing, off with the LLM value
    drop_detours: bool | None = None
    #: when the expansions run out and an unexpanded default state is rated above every
    #: answer found, answer from it (one more proposal). None: on with a trained value
    #: (a state's value and an answer's are on one scale), off with the LLM value
    answer_at_budget: bool | None = None
    #: ask for the answer at once at a default state whose value function says the answer
    #: is in hand (:meth:`~.value.NodeValue.answer_now`: a trained model's stop head above
    #: τ), instead of the policy's action choice; if no answer then crosses τ the state is
    #: queued again and expanded as usual. None: on with a trained value
    answer_when_rated: bool | None = None
    #: constrained decoding: with each entity answer an ANSWER proposes, also propose the
    #: fullest entity list among the subgraph's answer candidates that holds it
    #: (:func:`~.policy.fuller_lists`; no LLM call to find it). None: on with a trained
    #: value, which rates the list as the answer so :func:`choose_answer` returns it
    #: (docs/decisions.md), off with the LLM value (one more rating call per answer)
    fuller_answers: bool | None = None
    #: frontier order: 0 ranks nodes by value alone (the paper); w > 0 ranks them by
    #: logit(value) + w·log(prior / best prior), the prior being the LLM's probability of
    #: the node's action and the best that of its favourite option at the parent
    #: (constrained decoding; 0 for the favourite, so an uncertain parent costs its
    #: children nothing against other branches). The value and the LLM are experts that
    #: fail on different cases (a trained value rating ~directed_by for "what did X
    #: write"): w = 1 is their product. None: 1 with a trained value (measured: MetaQA
    #: 1/2-hop, docs/results.md), 0 with the LLM value (the paper's tree)
    prior_weight: float | None = None
    #: the answer returned when no answer's value crossed τ (:func:`choose_answer`):
    #: "value", the best-valued answer (Algorithm 1), or "support", the answer whose
    #: proposals' values sum highest — better on MetaQA 1-hop with the 1.5B model's flat
    #: ratings, worse on 2-hop, where the first hop's entities are proposed most often
    #: (docs/decisions.md)
    answer_choice: str = "value"
    #: constrained decoding: a selection offers all the entities the latest expansion
    #: reached as one option besides each alone (:func:`~.machine.selection_group`; the
    #: paper's LLM may select several IDs, option scoring otherwise offers one at a time)
    group_selection: bool = False

    def __post_init__(self) -> None:
        if self.answer_choice not in ANSWER_CHOICES:
            raise ValueError(f"unknown answer choice {self.answer_choice!r}; choose one of {', '.join(ANSWER_CHOICES)}")


#: the ways of choosing the answer when none crossed τ (``TreeConfig.answer_choice``)
ANSWER_CHOICES = ("value", "support")


def answer_key(text: str) -> str:
    """What makes two proposed answers the same answer: the text, case and spacing aside."""
    return " ".join(text.casefold().split())


def choose_answer(answers: Sequence[tuple[str, float | None]], how: str = "value",
                  grounded: Sequence[bool] = ()) -> int | None:
    """Index of the answer to return among ``(text, value)`` proposals (None if empty).

    "value": the best-valued proposal (ties: an answer made of the subgraph's entities —
    ``grounded[i]``, :func:`~.policy.answer_candidates` — before free text, then the first).
    "support": proposals naming the same answer (:func:`answer_key`) pool their values —
    self-consistency over the tree: an answer reached on several branches is better
    supported than one rated a little higher once — and the best-valued proposal of the
    answer with the largest sum is returned (ties between answers: the one proposed first;
    between its proposals: as with "value"). A trained value rates a state, so a sentence
    the LLM wrote about the state's entities gets the value of the entity list beside it:
    the list, which names the answers one by one with their edges, is returned.

    Completeness: when a grounded answer naming more of the reached entities — all of
    the chosen one's and others (:func:`~.policy.listed_labels`) — has exactly the same
    value, the fullest of them is returned. A trained value rates the path, so "Amber
    Tamblyn" and the whole cast it reached tie; the LLM's favourite single entity was
    returned for 60 % of MetaQA questions with several gold answers (docs/decisions.md)."""
    if how not in ANSWER_CHOICES:
        raise ValueError(f"unknown answer choice {how!r}; choose one of {', '.join(ANSWER_CHOICES)}")
    if not answers:
        return None
    if how == "support":
        pooled: dict[str, float] = {}
        for text, value in answers:
            key = answer_key(text)
            pooled[key] = pooled.get(key, 0.0) + (value or 0.0)
        top = max(pooled.values())
        winner = next(answer_key(t) for t, _ in answers if pooled[answer_key(t)] == top)
        candidates = [i for i, (t, _) in enumerate(answers) if answer_key(t) == winner]
    else:
        candidates = list(range(len(answers)))
    best = max(candidates, key=lambda i: (answers[i][1] or 0.0, i < len(grounded) and grounded[i], -i))
    if not (best < len(grounded) and grounded[best]):
        return best
    # the same value for a grounded answer naming more of the reached entities: the fuller one
    labels = {i: listed_labels(answers[i][0]) for i in candidates if i < len(grounded) and grounded[i]}
    fuller = [i for i in labels if answers[i][1] == answers[best][1] and labels[i] > labels[best]]
    return max(fuller, key=lambda i: (len(labels[i]), -i), default=best)


#: answers an ANSWER action proposes with a trained value when ``TreeConfig.answers`` is None
#: (at least; k when larger). One was too few for a chain: on MetaQA 3-hop, 24 of its 51
#: failures answered a state rated above 0.8 with the LLM's favourite rated under 0.2, mostly
#: the previous hop's films just after their genres, languages or actors were expanded
#: (docs/decisions.md; with three, 3-hop 49.0 -> 61.0 on the same 100)
RATED_ANSWERS = 3

#: values and priors are clipped to [EPS, 1 - EPS] before taking logs
EPS = 1e-6


def frontier_key(node: Node, prior_weight: float = 0.0) -> tuple:
    """Sort key of a frontier node (largest first): its value (an unrated node counts as
    1.0), or with ``prior_weight`` > 0 its value's log-odds plus ``prior_weight`` times
    the log of its prior relative to the best prior among its parent's options (a node
    without a prior — no scored choice made it — adds nothing); ties go to the deepest,
    then the newest node."""
    value = node.value if node.value is not None else 1.0
    if not prior_weight:
        return (value, node.depth, node.id)
    value = min(max(value, EPS), 1.0 - EPS)
    score = math.log(value / (1.0 - value))
    if node.prior is not None:
        options = node.parent.priors if node.parent is not None and node.parent.priors else {}
        best = max([node.prior, *options.values()])
        score += prior_weight * math.log(max(node.prior, EPS) / max(best, EPS))
    return (score, node.depth, node.id)


def _mergeable(node: Node) -> bool:
    """A node that may be a duplicate: an expandable one, not a THINK child (whose KG
    state is its parent's by definition — the thought is what it adds)."""
    thought = node.action is not None and node.action.type is ActionType.THINK
    return node.state is not State.DONE and not node.invalid and not thought


def detour_of(node: Node, earlier: Sequence[Node]) -> Node | None:
    """The earlier node ``node`` is a detour of, if any: a node of another branch (not an
    ancestor) in the same state with the same selection, whose walked facts are a strict
    subset of ``node``'s, rated at least as high. Walking A, then B from where A started
    (a film's release year, then its director) reaches what walking B alone reached, plus
    A's facts; when the value rates both the same, A added nothing but a deeper state with
    less depth left and more entities to answer from. Found on MetaQA 3-hop, where the
    LLM's favourite first relation was a side walk and the relation the question needed
    became its favourite only after it, so the detour outranked the direct branch."""
    if not _mergeable(node) or node.value is None:
        return None
    ancestors = {n.id for n in node.path()}
    facts, selected = frozenset(node.subgraph.facts), frozenset(node.selected)
    for other in earlier:
        if (other.state is node.state and other.id not in ancestors and not other.duplicate and _mergeable(other)
                and other.value is not None and other.value >= node.value
                and frozenset(other.selected) == selected and frozenset(other.subgraph.facts) < facts):
            return other
    return None


def kg_state(node: Node) -> tuple:
    """What a node's future holds apart from the LLM's history (its thoughts): the state,
    the subgraph's entities and walked facts, the entities selected, and what this path
    already expanded. Two nodes with equal KG states have the same options and, with a
    trained value, the same value."""
    return (
        node.state,
        frozenset(node.subgraph.entities),
        frozenset(node.subgraph.facts),
        frozenset(node.selected),
        node.expanded,
        node.exhausted,
    )


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
        prompts: PromptSet | None = None,
    ) -> None:
        self.llm = llm
        self.kgs = kgs
        self.config = config or TreeConfig()
        self.name = name or ("chain" if self.config.k == 1 else "tree")
        #: called with each search event as it happens (see :mod:`traversals.search.events`)
        self.on_event = on_event
        #: rates the nodes (e.g. a :class:`~.trained_value.TrainedValue`); None: the LLM (F.4/F.5)
        self.value = value
        #: the templates the prompts are rendered from (:func:`~.templates.load_prompts`)
        self.prompts = prompts or default_prompts()

    @property
    def constrained(self) -> bool:
        return self.config.constrained and bool(getattr(self.llm, "can_score", False))

    async def ask(self, question: str, *, topic_entities: Sequence[str] | None = None) -> Answer:
        cfg = self.config
        started = time.perf_counter()
        kgs = self.kgs.fresh()  # this question's links only
        machine = Machine(
            kgs, max_depth=cfg.max_depth, screen_limit=cfg.screen_dead_ends, group_option=cfg.group_selection,
            prompts=self.prompts,
        )
        policy = Policy(
            self.llm,
            machine,
            constrained=self.constrained,
            diverse_temperature=cfg.diverse_temperature,
            max_tokens=cfg.max_tokens,
            rng=random.Random(cfg.seed),
            sample_options=cfg.sample_options,
            calibrate=cfg.calibrate,
            calibrate_answers=cfg.calibrate_answers,
            both_orders=cfg.both_orders,
            compare_answers=cfg.compare_answers,
            answers=cfg.answers if cfg.answers is not None else (max(cfg.k, RATED_ANSWERS) if self.value is not None else 1),
            fuller_answers=self.value is not None if cfg.fuller_answers is None else cfg.fuller_answers,
        )
        value_fn: NodeValue = self.value or ValueFunction(
            self.llm, machine, constrained=self.constrained, examples=cfg.value_examples,
            reasoning=cfg.value_reasoning,
        )
        linker = Linker(self.llm, kgs, constrained=self.constrained, prompts=self.prompts)

        # A given value function (a trained model) costs no LLM call: rate every node.
        default_intermediate = cfg.k > 1 or self.value is not None
        evaluate_intermediate = default_intermediate if cfg.evaluate_intermediate is None else cfg.evaluate_intermediate
        merge = self.value is not None if cfg.merge_duplicates is None else cfg.merge_duplicates
        answer_when_rated = self.value is not None if cfg.answer_when_rated is None else cfg.answer_when_rated
        drop_detours = self.value is not None if cfg.drop_detours is None else cfg.drop_detours
        prior_weight = (1.0 if self.value is not None else 0.0) if cfg.prior_weight is None else cfg.prior_weight
        asked_early: set[int] = set()  # ids of the states answer_when_rated asked for the answer
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
        seen: dict[tuple, Node] = {kg_state(root): root}  # with merge: KG state -> first node
        expansions = 0
        finished = False
        fitted = False  # some node's prompt fitted the LLM's context

        async def rate(child: Node) -> None:
            """The value of ``child``; 0 when its rating prompt does not fit the LLM's context."""
            try:
                child.value = await value_fn.evaluate(question, child, child.usage)
            except PromptTooLong as exc:
                child.value = 0.0
                child.add_note(f"value: its prompt does not fit the LLM's context ({exc})")

        while frontier and not finished and expansions < cfg.max_expansions:
            node = max(frontier, key=lambda n: frontier_key(n, prior_weight))
            frontier.remove(node)
            expansions += 1
            node.expansion = expansions
            emit(events.expansion(node))
            early = (answer_when_rated and node.state is State.DEFAULT and node.id not in asked_early
                     and not machine.must_answer(node) and value_fn.answer_now(question, node, cfg.threshold))
            try:
                if early:
                    asked_early.add(node.id)
                    node.add_note("answer asked at once: the value function rates the state above τ")
                    proposal = await policy.propose(question, node, cfg.k, node.usage, force_answer=True)
                    suggested = []
                else:
                    proposal = await policy.propose(question, node, cfg.k, node.usage)
                    suggested = [a for a in value_fn.suggest(question, node) if a not in proposal.actions]
            except PromptTooLong as exc:  # a subgraph grown past the LLM's context: this branch ends here
                if not fitted:  # not even the first prompt fits: the context is too small, said as an error
                    raise
                node.add_note(f"not expanded: its prompt does not fit the LLM's context ({exc})")
                continue
            fitted = True
            actions = [*proposal.actions, *suggested]
            children = list(await gather(*(machine.transition(node, a, Usage()) for a in actions)))
            node.priors = proposal.priors
            for child, prior in zip(children, proposal.action_priors or ()):
                child.prior = prior
            if suggested:  # the LLM's probability of a suggested option, where it scored it
                texts = {a: t for t, a in machine.options(node)}
                for child in children[len(proposal.actions):]:
                    child.add_note("proposed by the trained value's look-ahead, not the LLM")
                    child.prior = (proposal.priors or {}).get(texts.get(child.action, "")) if child.action else None
            for child in children:
                if merge and _mergeable(child) and (first := seen.setdefault(kg_state(child), child)) is not child:
                    child.add_note(f"duplicate of node {first.id}: not expanded")
                    child.duplicate = True

            async def score(child: Node) -> None:
                if child.duplicate:
                    return
                if child.state is State.DONE or child.invalid or evaluate_intermediate:
                    await rate(child)

            await gather(*(score(c) for c in children))
            for child in children if drop_detours else ():
                if not child.duplicate and (shorter := detour_of(child, nodes)) is not None:
                    child.add_note(f"a detour of node {shorter.id} (its walks and a side walk, rated no higher): not expanded")
                    child.duplicate = True
            offered = grounded_sets(node) if any(c.state is State.DONE for c in children) else set()
            for child in children:
                node.children.append(child)
                nodes.append(child)
                emit(events.node(child))
                if child.state is State.DONE and not child.invalid:
                    child.grounded = listed_labels(child.answer or "") in offered
                    answers.append(child)
                    if (child.value or 0.0) > cfg.threshold:
                        finished = True
                elif child.duplicate or (child.invalid and node.invalid):  # an invalid output is retried once
                    continue
                else:
                    frontier.append(child)
            if early and not finished:  # no answer crossed τ: the state is expanded as usual later
                frontier.append(node)

        async def answer_from(last: Node, why: str) -> bool:
            """Force the answers of ``last`` (one LLM proposal) and rate them; one rated over
            τ ends the search as any answer over τ does (``stopped`` says "threshold").
            False when ``last``'s prompt does not fit the LLM's context (nothing asked)."""
            nonlocal finished
            try:
                proposal = await policy.propose(question, last, 1, last.usage, force_answer=True)
            except PromptTooLong as exc:
                last.add_note(f"no answer forced here: its prompt does not fit the LLM's context ({exc})")
                return False
            offered = grounded_sets(last)
            for action in proposal.actions:
                child = await machine.transition(last, action, Usage())  # its own usage: the proposal was last's
                if child.state is not State.DONE:
                    continue
                await rate(child)
                child.grounded = listed_labels(child.answer or "") in offered
                child.add_note(why)
                last.children.append(child)
                nodes.append(child)
                emit(events.node(child))
                answers.append(child)
                if (child.value or 0.0) > cfg.threshold:
                    finished = True
            return True

        answer_at_budget = self.value is not None if cfg.answer_at_budget is None else cfg.answer_at_budget
        if not finished and answer_at_budget and expansions >= cfg.max_expansions:
            # The budget ran out with a state on the frontier rated above every answer
            # found: answer there (one proposal) instead of returning the worse answer.
            best_value = max((a.value or 0.0 for a in answers), default=0.0)
            pending = [n for n in frontier if n.state is State.DEFAULT and not n.invalid and (n.value or 0.0) > best_value]
            if pending:
                await answer_from(max(pending, key=lambda n: (n.value or 0.0, n.depth, n.id)),
                                  "answered when the expansions ran out")
        if not answers and (not frontier or expansions >= cfg.max_expansions):
            # No answer was proposed at all: "Cannot find answer" would throw away the facts
            # walked. The frontier emptied (every branch ended in invalid outputs or dead
            # ends): answer from the deepest state reached, as at max depth — every rated
            # state was expanded and its rating did not pan out, and the deepest holds the
            # most facts walked. The budget ran out (a chain whose states are not rated, a
            # small budget): from the best-rated, else deepest, state, as states on the
            # frontier were never expanded to test their ratings. The answer says the search
            # stopped under τ (Answer.stopped); `ask` notes it.
            rated = bool(frontier)  # False when the frontier emptied: no rating is left untested
            states = [n for n in nodes if n.state is State.DEFAULT and not n.invalid]
            # a state whose prompt does not fit the context gives way to the next one (a
            # shallower state's prompt is shorter): "Cannot find answer" only when none fits
            for last in sorted(states, key=lambda n: ((n.value or 0.0) if rated else 0.0, n.depth, n.id), reverse=True):
                if await answer_from(last, f"answered when the {'expansions' if rated else 'frontier'} ran out"):
                    break
        answers.sort(key=lambda n: n.id)
        # an answer over τ was returned at once (Algorithm 1); otherwise the configured choice
        chosen = choose_answer([(a.answer or "", a.value) for a in answers], "value" if finished else cfg.answer_choice,
                               [bool(a.grounded) for a in answers])
        best = answers[chosen] if chosen is not None else None
        usage = Usage()
        for n in nodes:
            usage.merge(n.usage)
        text = best.answer if best is not None and best.answer else NO_ANSWER
        stopped = "threshold" if finished else ("max_expansions" if expansions >= cfg.max_expansions else "frontier_empty")
        answer = Answer(
            question=question,
            text=text,
            value=best.value if best is not None else None,
            supporting_edges=supporting_edges(best, names_no_reached=names_no_reached_entity(question, best))
            if best is not None else [],
            usage=usage,
            seconds=time.perf_counter() - started,
            decoding="constrained" if self.constrained else "sampled",
            strategy=self.name,
            linked_entities=list(entities),
            stopped=stopped,
        )
        answer.trace = {
            "question": question,
            "answer": answer.text,
            "value": answer.value,
            "strategy": self.name,
            "decoding": answer.decoding,
            "value_function": "llm" if self.value is None else type(self.value).__name__,
            "prompts": self.prompts.identity(),
            **(settings() if (settings := getattr(self.value, "settings", None)) else {}),
            "config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
            "linked_entities": [e.ref() for e in entities],
            "prior_weight": prior_weight,
            "expansions": expansions,
            "duplicates": sum(n.duplicate for n in nodes),
            "stopped": stopped,
            "usage": usage.to_json(),
            "answer_node": best.id if best is not None else None,
            "nodes": [n.to_trace() for n in nodes],
        }
        return answer
