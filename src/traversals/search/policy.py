"""Proposing the k actions of a node (Algorithm 1, ``sample_actions``; Appendix B.1).

Two decodings:

* ``sampled`` — the paper's black-box path: sample from the state's prompt; in the
  selection states sample 2k outputs and keep the first k unique valid ones (diversity
  oversampling); temperature 0 when one sample is needed, 1.0 otherwise.
* ``constrained`` — for backends that expose token log-probabilities: every valid option
  (action type, entity, relation) is scored, k distinct ones are drawn from that
  distribution, so no invalid or invented choice can appear. Free text (a thought, an
  answer) is then generated greedily after the chosen action word; an EXPAND_KG right
  after a THINK carries that thought (it is the expansion's goal) instead of a generated
  text, and a greedy thought that repeats an earlier one is replaced by the next-ranked
  action type or, when every type is proposed already, sampled again.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Sequence

from ..llm.base import LLM, Usage
from .choices import calibrated_probs, geometric_mean, option_probs, pick
from .machine import (
    Action,
    ActionType,
    Machine,
    Node,
    State,
    allowed_default_actions,
    entity_key,
    find_labels,
    last_thought,
    mentions_label,
    repeats_thought,
)
from .provenance import answerable_facts, reached_groups
from .subgraph import MAX_SHOWN, Fact, shown
from ..aio import gather

STOP = ["\nTHINK", "\nEXPAND_KG", "\nANSWER", "\nSELECT", "\nOriginal Query"]


@dataclass
class Proposal:
    actions: list[Action]
    #: option text -> probability, when the options were scored (policy prior)
    priors: dict[str, float] | None = None
    #: the probability of each of ``actions`` among the scored options (selection states only)
    action_priors: list[float] | None = None


_BARE_ACTION = re.compile(r"^\W*(THINK|EXPAND[ _]KG|ANSWER)\W*$", re.I)
ANSWER_PREFIX = "ANSWER: "
MAX_ANSWER_CANDIDATES = 60
MAX_LIST_ANSWER = 20
#: sampled retries of a greedy thought that repeats an earlier one (see Policy._fresh_thoughts)
THOUGHT_RETRIES = 2
#: ``calibrate_answers``: weight of the neutral prompt's log-probability (1: PMI; chosen on
#: MetaQA dev 1-hop and 2-hop chains, checked on 3-hop: docs/decisions.md)
ANSWER_PMI_WEIGHT = 0.5
#: ``compare_answers``: at most this many groups of reached entities are offered, the
#: newest first (letters A-H)
MAX_COMPARED = 8


def answer_candidates(node: Node) -> dict[str, tuple[str, ...]]:
    """Entity answers the subgraph supports, each with the entity labels it names: the
    targets each expansion reached by one relation from several entities, as one list
    (:func:`step_unions`), newest first; then each group of targets reached by one relation
    from one entity (as a list, when several) and each single target, newest first. The
    question's own entities (the root's) are left out where a step reached them back among
    others ("co-writers of X" meets X) or along edges stored the same way (MetaQA); reached
    alone by an edge stored the other way ("the wife of X's husband") or by a self-loop
    (PathQuestion's "what is the Lost 's tracks 's tracks": album and track share one
    label, hence one IRI) they are answers (:func:`~.provenance.reached_back`)."""
    path = node.path()
    # an entity with a blank label cannot be named by an answer
    kept = [f for f in answerable_facts(node) if f.target.label.strip()]
    groups: dict[tuple[str, str], list[str]] = {}
    for fact in kept:
        groups.setdefault((fact.source.id, fact.relation.key), []).append(fact.target.label)
    out: dict[str, tuple[str, ...]] = {}
    answerable = set(kept)
    for step in reversed(path):
        for targets in step_unions(step, answerable):
            out.setdefault(_as_list(targets), targets)
    for group in reversed(list(groups.values())):
        distinct = list(dict.fromkeys(group))
        if 1 < len(distinct) <= MAX_LIST_ANSWER:
            out.setdefault(_as_list(distinct), tuple(distinct))
        for t in reversed(distinct):
            out.setdefault(t, (t,))
    return dict(list(out.items())[:MAX_ANSWER_CANDIDATES])


def _as_list(labels) -> str:
    return "[" + ", ".join(labels) + "]"


def shown_answer(answer: str, names: Sequence[str] | None = None) -> str:
    """An answer as a prompt shows it: the label :func:`~.subgraph.shown` (one line, no
    invisible characters, clipped), a list answer ``"[A, B]"`` item by item. ``names``: the
    labels the answer names (:func:`answer_candidates`); without them a bracketed answer is
    read as a list. Only the prompt changes: the answer stays the whole label."""
    if names is None:
        listed = len(answer) > 2 and answer.startswith("[") and answer.endswith("]")
        names = answer[1:-1].split(", ") if listed else [answer]
    return _as_list(shown(x) for x in names) if len(names) > 1 else shown(answer)


def shown_candidates(node: Node, named: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Each of :func:`answer_candidates` as the answer scoring shows it (:func:`shown_answer`):
    a 10,000-character label is scored as its first :data:`~.subgraph.MAX_SHOWN` characters
    and a marker, not as one long continuation. A label that shows like another candidate
    (the two differ only past the clip or by invisible characters) is followed by its
    entity's handle (``"Paris [E3]"``, as the prompt's entity list names it), so the scoring
    can tell them apart."""
    out = {c: shown_answer(c, names) for c, names in named.items()}
    alike = Counter(out.values())
    handles: dict[str, str] = {}
    for e in node.subgraph.entities:
        handles.setdefault(e.label, node.subgraph.handle(e))
    return {
        c: f"{text} [{handles[c]}]" if alike[text] > 1 and len(named[c]) == 1 and c in handles else text
        for c, text in out.items()
    }


def fuller_lists(answers: Sequence[str], candidates: dict[str, tuple[str, ...]]) -> list[str]:
    """For each of ``answers`` that is one of ``candidates`` (:func:`answer_candidates`),
    the candidate naming the most entities among those that name all of its entities and
    more (the first such when several are as long), once each, in the answers' order. A
    value that rates the path an answer was reached by (a trained one) rates the list as
    the answer, so :func:`~.tree.choose_answer` can return every entity the path reached
    where the LLM proposed one of them."""
    held = {c: set(names) for c, names in candidates.items()}
    out: list[str] = []
    for answer in answers:
        if answer not in held:
            continue
        longer = [c for c in held if held[c] > held[answer]]
        best = max(longer, key=lambda c: len(held[c]), default=None)
        if best is not None and best not in out:
            out.append(best)
    return out


def ranked_lists(answers: Sequence[str], candidates: dict[str, tuple[str, ...]]) -> list[str]:
    """``answers`` (the most probable first) with each entity list among ``candidates``
    naming first the entities that earlier answers named, in their order: "Documentary"
    then "[Animation, Documentary]" give "[Documentary, Animation]". A list's order is a
    ranking (Hits@1 reads its first item), and the LLM ranked those entities higher."""
    out: list[str] = []
    ranked: list[str] = []  # labels in the order the answers named them
    for answer in answers:
        names = candidates.get(answer, ())
        if len(names) > 1:
            first = [x for x in ranked if x in names]
            answer = _as_list(first + [x for x in names if x not in first])
        out.append(answer)
        ranked += [x for x in names if x not in ranked]
    return out


def grounded_sets(node: Node) -> set[frozenset[str]]:
    """The answers at ``node`` that are grounded, as :func:`listed_labels` reads them: one
    of :func:`answer_candidates` in any order (:func:`ranked_lists` reorders lists)."""
    return {listed_labels(text) for text in answer_candidates(node)}


def listed_labels(answer: str) -> frozenset[str]:
    """The entity labels an answer of :func:`answer_candidates` names: the items of a list
    answer ``"[A, B]"``, else the answer itself. A label with ", " in it reads as several
    inside a list, so a list naming it does not contain the answer naming it alone; the
    comparison this serves (:func:`~.tree.choose_answer`) then keeps its first choice."""
    if answer.startswith("[") and answer.endswith("]"):
        return frozenset(answer[1:-1].split(", "))
    return frozenset((answer,))


def step_unions(step: Node, answerable: set[Fact]) -> list[tuple[str, ...]]:
    """The targets one expansion reached by one relation from several entities, as one
    list answer ("the genres of the films whose actors also appear in X" is the union of
    the films' genres): the targets most of the sources reached first, then in the order
    reached; none when one entity was the source or the union is longer than
    :data:`MAX_LIST_ANSWER`. Only the step's facts in ``answerable`` count (those
    :func:`answer_candidates` keeps)."""
    by_relation: dict[str, dict[str, set[str]]] = {}
    for fact in step.new_facts:
        if fact in answerable:
            by_relation.setdefault(fact.relation.key, {}).setdefault(fact.target.label, set()).add(fact.source.id)
    out = []
    for reached in by_relation.values():
        if len(set().union(*reached.values())) < 2 or not 1 < len(reached) <= MAX_LIST_ANSWER:
            continue
        out.append(tuple(sorted(reached, key=lambda t: -len(reached[t]))))  # stable: ties keep the order
    return out


_POLAR = re.compile(
    r"^\W*(is|are|was|were|am|do|does|did|can|could|has|have|had|will|would|shall|should|may|might|must)\b", re.I
)


def _names_nothing(node: Node, answer: str, candidates: list[str]) -> bool:
    """Does a free-text answer name no entity of the subgraph (a count, a yes/no, a date
    the KG lacks)? A sentence that names two of them ("X appears in the movie "Y"
    directed by Z") names something."""
    if reduce_to_entity(answer, candidates) in candidates:
        return False
    return not any(mentions_label(answer, e.label) for e in node.subgraph.entities)


#: an answer that says there is none ("No", "Not in the graph", "None of them", "Cannot tell", "Unknown")
_NEGATED = re.compile(r"\s*(?:no\b|not\b|none\b|nobody\b|nothing\b|cannot\b|can't\b|unknown\b|there is no\b)",
                      re.IGNORECASE)


#: an answer that starts with a yes or a no ("Yes, Beatrice Stone is his mother.")
YES_NO = re.compile(r"\s*(yes|no)\b", re.IGNORECASE)


def is_yes_no_question(query: str) -> bool:
    """"Is/Was/Did/Can … ?" — a question a bare yes or no can answer."""
    return bool(_POLAR.match(query))


def reduce_to_entity(answer: str, candidates: list[str]) -> str:
    """A sentence that names exactly one candidate entity becomes that entity's label
    ("Bob Dylan's grandmother is Florence Stone." -> "Florence Stone"); so does the label as
    the prompt showed it (:func:`~.subgraph.shown`: one line, clipped). A label names only
    whole words: "Go" is not named by "Gone with the Wind". A label named only inside a longer
    candidate's ("Frozen" in "Frozen II came out in 2019.") is not named on its own; one the
    answer also names elsewhere is ("Frozen II came out after Frozen." names two films)."""
    if answer in candidates:
        return answer
    as_shown = [c for c in candidates if shown(c) == answer]
    if len(as_shown) == 1:
        return as_shown[0]
    named = [
        c for c in candidates
        if c.strip() and not c.startswith("[") and mentions_label(answer, c)
    ]
    spans = {c: [m.span() for m in find_labels(answer, c)] for c in named}
    named = [c for c in named if not any(c != o and _all_within(spans[c], spans[o]) for o in named)]
    return named[0] if len(named) == 1 else answer


def _all_within(inner: list[tuple[int, int]], outer: list[tuple[int, int]]) -> bool:
    """Does every span of ``inner`` fall inside one of ``outer``? Before, a label that was a
    substring of another candidate's was dropped wherever it stood: "Alien and Aliens" was
    reduced to "Aliens", "Frozen II came out after Frozen." to "Frozen II"."""
    return all(any(s <= a and b <= e for s, e in outer) for a, b in inner)


def whole_items(text: str) -> str:
    """A selection cut at max_tokens without its last item, which may be unfinished ("E1"
    of "E12", "Florence St" of "Florence Stone"): the text up to its last comma, semicolon
    or line break, else without its last word; whole when it ends at one of those."""
    body = text.rstrip(" \t")
    if not body or body[-1] in ",;\n":
        return text
    at = max(body.rfind(c) for c in ",;\n")
    if at >= 0:
        return body[:at]
    words = body.split()
    return body[: body.rfind(words[-1])].rstrip() if len(words) > 1 else ""


def choice_key(action: Action) -> tuple:
    """What makes two sampled actions the same choice (diversity oversampling keeps the
    first k unique ones, App. B.1): a selection of entities is a set — "Q1, Q2" and
    "Q2, Q1" select the same entities and would expand alike."""
    return (replace(action, entities=()), frozenset(entity_key(e) for e in action.entities))


class Policy:
    def __init__(
        self,
        llm: LLM,
        machine: Machine,
        *,
        constrained: bool,
        diverse_temperature: float = 1.0,
        max_tokens: int = 96,
        rng: random.Random | None = None,
        sample_options: bool = False,
        calibrate: float = 0.0,
        answers: int = 1,
        calibrate_answers: bool = False,
        both_orders: bool = False,
        compare_answers: bool = False,
        fuller_answers: bool = False,
    ) -> None:
        self.llm = llm
        self.machine = machine
        self.constrained = constrained
        self.diverse_temperature = diverse_temperature
        self.max_tokens = max_tokens
        self.rng = rng or random.Random(0)
        #: constrained decoding: sample k distinct options (Gumbel top-k) instead of
        #: taking the k most probable. Off by default: with a small model the right
        #: relation is often 2nd or 3rd and sampling skipped it.
        self.sample_options = sample_options
        #: constrained decoding: calibrate the relation choice against a neutral prompt, whose
        #: log-probabilities weigh this much (0: off)
        self.calibrate = float(calibrate)
        #: constrained decoding: distinct answers an ANSWER proposes (the most probable first)
        self.answers = max(1, answers)
        #: constrained decoding: rank the KG's answer candidates by what the query adds to
        #: their probability (:meth:`_calibrated_order`)
        self.calibrate_answers = calibrate_answers
        #: constrained decoding: ask a relation choice with its options listed in both
        #: orders and take the geometric mean (:meth:`_relation_probs`)
        self.both_orders = both_orders
        #: constrained decoding: choose the answer among the groups of reached entities
        #: (one per relation path) by asking which one answers the query
        #: (:meth:`_compared_answers`)
        self.compare_answers = compare_answers
        #: constrained decoding: with each entity answer chosen, also propose the fullest
        #: entity list among the answer candidates that holds it (:func:`fuller_lists`)
        self.fuller_answers = fuller_answers

    async def propose(self, query: str, node: Node, k: int, usage: Usage, *, force_answer: bool = False) -> Proposal:
        prompt = self.machine.prompt(query, node, force_answer=force_answer)
        # A node reached by an invalid output is retried with sampling, not greedily again.
        temperature = self.diverse_temperature if (k > 1 or node.invalid) else 0.0
        if force_answer or self.machine.must_answer(node):
            if self.constrained:
                return Proposal(await self._grounded_answers(query, prompt, node, usage, forced=True))
            # one greedy answer; the retry of an invalid one samples (greedy, it would repeat it)
            forced = self.diverse_temperature if node.invalid else 0.0
            return Proposal([await self._free_text(prompt, node, ActionType.ANSWER, usage, temperature=forced)])
        if self.constrained:
            return await self._constrained(query, prompt, node, k, usage, temperature)
        return await self._sampled(prompt, node, k, usage, temperature)

    # -- constrained -------------------------------------------------------------
    async def _constrained(self, query: str, prompt: str, node: Node, k: int, usage: Usage, temperature: float) -> Proposal:
        if node.state is State.DEFAULT:
            kinds = allowed_default_actions(node)
            names = [a.value for a in kinds]
            probs = await option_probs(self.llm, prompt, names, usage)
            priors: dict[str, float] = dict(zip(names, probs))
            ranked = [kinds[i] for i in self._draw(probs, len(kinds), temperature)]
            acted = await gather(*(self._act(query, prompt, node, t, usage) for t in ranked[:k]))
            actions = [a for group in acted for a in group]
            # A greedy text that is empty or repeats an earlier thought would be an
            # invalid node: the next-ranked action type takes its place.
            rest = ranked[k:]
            while rest and any(self._unusable(node, a) for a in actions):
                actions = [a for a in actions if not self._unusable(node, a)]
                actions.extend(await self._act(query, prompt, node, rest.pop(0), usage))
            if any(self._unusable(node, a) for a in actions):
                actions = await self._fresh_thoughts(prompt, node, actions, usage)
            return Proposal(actions, priors)
        options = self.machine.options(node)
        if not options:
            return Proposal([Action(ActionType.INVALID, "no options")])
        if len(options) == 1:  # nothing to choose: no LLM call
            return Proposal([options[0][1]], {options[0][0]: 1.0}, [1.0])
        texts = [t for t, _ in options]
        if node.state is State.SELECTING_RELATION:
            probs = await self._relation_probs(query, prompt, node, texts, usage)
        else:
            probs = await option_probs(self.llm, prompt, texts, usage)
        idx = self._draw(probs, k, temperature)
        return Proposal([options[i][1] for i in idx], dict(zip(texts, probs)), [probs[i] for i in idx])

    async def _relation_probs(self, query: str, prompt: str, node: Node, texts: list[str], usage: Usage) -> list[float]:
        """The relation choice's distribution: calibrated against the neutral prompt when
        ``calibrate`` is set, and with ``both_orders`` the geometric mean of that
        distribution with the options listed first to last and last to first. The 1.5B
        model's favourite depends on the order the options are listed in (reversed, it
        changed in a third of the MetaQA dev choices probed); an option preferred in both
        orders wins on its own merit, not by its place (docs/decisions.md).
        The reversed prompt is scored beside the cached context (``transient``): it differs
        from the real one only from the option list on."""

        async def asked(reverse: bool) -> list[float]:
            real = self.machine.prompt(query, node, reverse_options=True) if reverse else prompt
            if self.calibrate:
                neutral = self.machine.neutral_prompt(node, reverse_options=reverse)
                return await calibrated_probs(
                    self.llm, real, neutral, texts, usage, weight=self.calibrate, transient=reverse
                )
            return await option_probs(self.llm, real, texts, usage, transient=reverse)

        if not self.both_orders:
            return await asked(False)
        # concurrently for endpoints that serve calls in parallel; a local model takes them
        # in this order, the real prompt first (the one its KV cache keeps)
        return geometric_mean(await gather(asked(False), asked(True)))

    async def _act(self, query: str, prompt: str, node: Node, kind: ActionType, usage: Usage) -> list[Action]:
        if kind is ActionType.ANSWER:
            return await self._grounded_answers(query, prompt, node, usage)
        thought = last_thought(node)
        if kind is ActionType.EXPAND_KG and thought:
            # The thought just written is the expansion's goal (machine.expansion_goal)
            # and the model's EXPAND_KG text mostly copies a thought: no call for it.
            return [Action(ActionType.EXPAND_KG, thought)]
        return [await self._free_text(prompt, node, kind, usage, temperature=0.0)]

    async def _fresh_thoughts(self, prompt: str, node: Node, actions: list[Action], usage: Usage) -> list[Action]:
        """Every action type is proposed already (k covers them all, as in a tree with
        k = 3) and a greedy thought repeats an earlier one: sample the thought again at
        ``diverse_temperature``, up to :data:`THOUGHT_RETRIES` times. A thought that
        still repeats is dropped while another action remains, so it never becomes an
        invalid node; other unusable outputs stay (visible and retried)."""
        out: list[Action] = []
        for a in actions:
            if not repeats_thought(node, a):
                out.append(a)
                continue
            for _ in range(THOUGHT_RETRIES):
                again = await self._free_text(prompt, node, ActionType.THINK, usage, temperature=self.diverse_temperature)
                if not self._unusable(node, again) and again not in actions and again not in out:
                    out.append(again)
                    break
        return out or actions

    @staticmethod
    def _unusable(node: Node, action: Action) -> bool:
        return action.type is ActionType.INVALID or repeats_thought(node, action)

    def _draw(self, probs: list[float], n: int, temperature: float) -> list[int]:
        """Indices of ``n`` distinct options: the top n unless ``sample_options``."""
        return pick(probs, n, temperature=temperature if self.sample_options else 0.0, rng=self.rng)

    async def _grounded_answers(
        self, query: str, prompt: str, node: Node, usage: Usage, *, forced: bool = False
    ) -> list[Action]:
        """Answers grounded in the KG: the free-text answer competes with the subgraph's
        entities and entity lists, scored by mean log-probability per token (free text
        still wins for counts, yes/no and comparisons); the ``answers`` best distinct ones,
        best first. A bare yes/no only competes when the query is a yes/no question: the
        small model otherwise copies the preamble's example ("ANSWER: No") for "when was
        X released". With ``calibrate_answers`` the KG's candidates are ranked by
        :meth:`_calibrated_order` instead; with ``compare_answers`` and at least two groups
        of reached entities the groups are compared (:meth:`_compared_answers`).
        ``forced``: the prompt is the answer-only one (max depth or the budget reached)."""
        free = await self._free_text(prompt, node, ActionType.ANSWER, usage, temperature=0.0)
        named = answer_candidates(node)
        candidates = list(named)
        keep_free = free.type is ActionType.ANSWER and not (
            candidates and YES_NO.match(free.text) and not is_yes_no_question(query)
        )
        # the candidates are scored as the prompt shows them (clipped: shown_candidates) and
        # answer as themselves; a free text that copies one as shown is that candidate
        displayed = shown_candidates(node, named)
        copied = {text: c for c, text in reversed(displayed.items())}
        first = [free.text if free.text in named else copied.get(free.text, free.text)] if keep_free else []
        options = list(dict.fromkeys(first + candidates))
        if not options:
            return [free]
        if len(options) == 1:
            return [Action(ActionType.ANSWER, options[0]) if options[0] in named else free]
        logprobs, per_token = await self._score_answers(prompt, [displayed.get(o, o) for o in options], usage)
        order = sorted(range(len(options)), key=lambda i: -per_token[i])  # stable: ties keep the order
        groups = reached_groups(node) if self.compare_answers else {}
        if len(groups) > 1:
            favourite = options[order[0]]
            free_first = favourite not in candidates and _names_nothing(node, favourite, candidates)
            return await self._compared_answers(query, groups, usage, free=favourite if free_first else None)
        if self.calibrate_answers and len(candidates) > 1:
            order = await self._calibrated_order(
                node, options, candidates, logprobs, order[0], usage, forced=forced, displayed=displayed
            )
        chosen: list[str] = []
        covered: set[str] = set()
        polar = is_yes_no_question(query)
        for i in order:
            # a sentence naming one entity is that entity, unless it answers yes or no, or
            # says the answer is not there ("Not in the graph: the mother of X" is not X)
            reduce = not polar and not _NEGATED.match(options[i])
            text = reduce_to_entity(options[i], candidates) if reduce else options[i]
            if polar and (said := YES_NO.match(options[i])):  # "Yes, Beatrice Stone is his mother." -> Yes
                text = said.group(1).capitalize()
            names = set(named.get(text, (text,)))
            if names <= covered:  # "Film A" after "[Film A, Film B]": nothing new to value
                continue
            chosen.append(text)
            covered |= names
            if len(chosen) == self.answers:
                break
        if self.fuller_answers:
            chosen += [t for t in fuller_lists(chosen, named) if t not in chosen]
        return [Action(ActionType.ANSWER, t) for t in ranked_lists(chosen, named)]

    async def _score_answers(
        self, prompt: str, texts: list[str], usage: Usage, *, transient: bool = False
    ) -> tuple[list[float], list[float]]:
        """The log-probabilities of ``texts`` as the answer after ``prompt`` and their means
        per token, one call that scores each distinct text once (two candidates may show
        alike: :func:`shown_candidates`)."""
        unique = list(dict.fromkeys(texts))
        scores = await self.llm.score(prompt, unique, prefix=ANSWER_PREFIX, transient=transient)
        usage.add_scores(scores)
        at = {text: i for i, text in enumerate(unique)}
        per_token = scores.per_token(unique)
        return [scores.logprobs[at[t]] for t in texts], [per_token[at[t]] for t in texts]

    async def _calibrated_order(
        self,
        node: Node,
        options: list[str],
        candidates: list[str],
        logprobs: list[float],
        favourite: int,
        usage: Usage,
        *,
        forced: bool,
        displayed: dict[str, str],
    ) -> list[int]:
        """Indices of ``options``, the KG's candidates ranked by log P(answer | prompt)
        − w · log P(answer | neutral prompt), the neutral prompt being the same prompt
        with the query taken out (:meth:`~.machine.Machine.neutral_prompt`) and w
        :data:`ANSWER_PMI_WEIGHT` (w = 1 is pointwise mutual information with the query,
        Holtzman et al. 2021, "Surface form competition"). By probability alone the 1.5B
        model names what is easy to copy — the first hop's films, a list — whatever the
        query; what the query adds to an answer's probability is what makes it the
        answer. Full PMI over-corrects: it took film lists over the years a query asked
        for (docs/decisions.md), hence half. The free text keeps first place
        when it was the favourite and names no entity of the subgraph (a count, a yes/no,
        a date the KG lacks); otherwise it comes last. One more scoring call (beside the
        cached context, like the relation calibration). ``displayed``: each candidate as
        the scoring shows it (:func:`shown_candidates`)."""
        entity_idx = [i for i, o in enumerate(options) if o in candidates]
        neutral, _ = await self._score_answers(
            self.machine.neutral_prompt(node, force_answer=forced),
            [displayed[options[i]] for i in entity_idx],
            usage,
            transient=True,
        )
        # raw log-probabilities, not choices.calibrate: its floor on probabilities would tie
        # the improbable long lists whose neutral probability is lower still
        gain = {i: logprobs[i] - ANSWER_PMI_WEIGHT * n for i, n in zip(entity_idx, neutral)}
        ranked = sorted(entity_idx, key=lambda i: -gain[i])  # stable: ties keep the order
        rest = [i for i in range(len(options)) if i not in gain]
        if favourite in rest and _names_nothing(node, options[favourite], candidates):
            return [favourite] + ranked + [i for i in rest if i != favourite]
        return ranked + rest

    async def _compared_answers(
        self, query: str, groups: dict[str, tuple[str, ...]], usage: Usage, *, free: str | None = None
    ) -> list[Action]:
        """The ``answers`` best groups of reached entities (:func:`~.provenance.reached_groups`,
        at most :data:`MAX_COMPARED`, the newest), chosen by asking which candidate answers
        the query: each group is a lettered line with up to three of its entities and the
        relation path that reached them (``compare_answers`` prompt), and the letters are
        scored with the lines in one order and in the reverse order, log-probabilities
        summed. The 1.5B model takes the last line far more often than the first (7 of 30
        MetaQA 1-hop answer steps right in one order, 24 in the other), so one order alone
        measures the position; the sum cancels it. The other way of answering names what
        the latest expansion reached, one hop too far for a 1-hop question and the first
        hop's films for a 2-hop one (docs/decisions.md). A group answers as the list of its
        entities (one entity: its label). ``free``: a free-text answer that names no
        entity (a count, a yes/no), which stays first."""
        names = list(groups)[:MAX_COMPARED]
        letters = [chr(ord("A") + i) for i in range(len(names))]

        async def asked(order: list[int]) -> list[float]:
            lines = "\n".join(
                f"{letter}. {', '.join(shown(x) for x in groups[names[i]][:3])} (reached by {shown(names[i], 3 * MAX_SHOWN)})"
                for letter, i in zip(letters, order)
            )
            scores = await self.llm.score(
                self.machine.prompts.render("compare_answers", query=query, options=lines), [" " + x for x in letters], transient=True
            )
            usage.add_scores(scores)
            out = [0.0] * len(names)
            for position, i in enumerate(order):
                out[i] = scores.logprobs[position]
            return out

        forward = list(range(len(names)))
        both = await gather(asked(forward), asked(forward[::-1]))
        total = [a + b for a, b in zip(*both)]
        ranked = sorted(range(len(names)), key=lambda i: -total[i])  # stable: ties keep the order
        chosen = [free] if free is not None else []
        for i in ranked[: self.answers - len(chosen)]:
            labels = groups[names[i]]
            chosen.append(labels[0] if len(labels) == 1 else _as_list(labels[:MAX_LIST_ANSWER]))
        return [Action(ActionType.ANSWER, t) for t in chosen]

    def _seed(self, temperature: float) -> int | None:
        """The sampling seed of a call that samples (from the search's seeded generator:
        ``--seed``, so a run with an endpoint's sampling is repeatable); None for greedy."""
        return self.rng.randrange(2**31) if temperature > 0 else None

    async def _free_text(self, prompt: str, node: Node, kind: ActionType, usage: Usage, *, temperature: float) -> Action:
        prefix = f"{kind.value}:"
        gen = await self.llm.generate(
            prompt, prefix=prefix, n=1, temperature=temperature, max_tokens=self.max_tokens, stop=STOP,
            seed=self._seed(temperature),
        )
        usage.add_generation(gen)
        return self._read(node, gen.texts[0] if gen.texts else "", gen.cut(0), prefix=prefix)

    def _read(self, node: Node, text: str, cut: bool, *, prefix: str = "") -> Action:
        """The action a generated ``text`` proposes. One ``cut`` at max_tokens is marked so
        (its node notes it); a selection's last item may be unfinished ("E1" of "E12",
        "Florence St") and is not read: :func:`whole_items`."""
        if not cut:
            return self.machine.parse(node, text, prefix=prefix)
        selecting = node.state in (State.SELECTING_ENTITIES, State.SELECTING_RELATION)
        action = self.machine.parse(node, whole_items(text) if selecting else text, prefix=prefix)
        if action.type is ActionType.INVALID:
            return Action(ActionType.INVALID, (prefix + text).strip(), cut=True)
        return replace(action, cut=True)

    # -- sampled (black box) ---------------------------------------------------
    async def _sampled(self, prompt: str, node: Node, k: int, usage: Usage, temperature: float) -> Proposal:
        oversample = node.state in (State.SELECTING_ENTITIES, State.SELECTING_RELATION) and k > 1
        n = 2 * k if oversample else k
        gen = await self.llm.generate(prompt, n=n, temperature=temperature, max_tokens=self.max_tokens, stop=STOP,
                                      seed=self._seed(temperature))
        usage.add_generation(gen)
        actions: list[Action] = []
        invalid: list[Action] = []
        for i, text in enumerate(gen.texts):
            a = self._read(node, text, gen.cut(i))
            bare = _BARE_ACTION.match(text)
            if a.type is ActionType.INVALID and bare and node.state is State.DEFAULT:
                # the model named an action but wrote nothing after it: ask for the text
                kind = ActionType(bare.group(1).upper().replace(" ", "_"))
                a = await self._free_text(prompt, node, kind, usage, temperature=temperature)
            if a.type is ActionType.INVALID:
                invalid.append(a)
            elif all(choice_key(a) != choice_key(b) for b in actions):
                actions.append(a)
            if len(actions) == k:
                break
        if not actions:  # keep one invalid node so the failure is visible and retried
            actions = invalid[:1] or [Action(ActionType.INVALID, "")]
        return Proposal(actions)
