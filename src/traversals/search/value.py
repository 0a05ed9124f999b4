"""The LLM value function (§2.3, Appendix F.4 for intermediate states, F.5 for answers).

Constrained decoding reads a value as the expectation of the rating tokens 0.0 … 1.0
under the model's distribution; sampled decoding parses the number the model writes
(for answers after its reasoning, as in F.5; a reasoning cut at ``max_tokens`` before its
number is continued: the score is asked for after it; a score stated before the cut
stands). An output with no number gives ``UNPARSEABLE_INTERMEDIATE`` (0.5, "unsure") for
an intermediate node and 0.0 for an answer, and is noted in the trace.
"""

from __future__ import annotations

import re
import string
from typing import Protocol

from ..errors import BadInput
from ..llm.base import LLM, Usage
from .choices import expected_rating
from .machine import Action, Machine, Node, State, find_labels, folded_text, names
from .policy import YES_NO, is_yes_no_question, shown_answer
from .templates import PromptSet
from .provenance import answer_paths, reached_back, render_paths, render_walk

RATING_PREFIX = "RATING [0.0-1.0]: "
ANSWER_SCORE_PREFIX = "So the score for the provided answer should be "
#: where F.5's answer rating says its score (the prompt's own words, however the sentence starts)
SCORE_PHRASE = ANSWER_SCORE_PREFIX.removeprefix("So the ").strip()
REASONING_PREFIX = "Reasoning:"
#: the F.5 instruction when the rating reasons first (sampled decoding, or ``reasoning``)
REASONED_INSTRUCTION = (
    "Give reasoning to get to the correct answer. Then provide a score.\ne.g.,\n"
    "Reasoning...\nSo the score for the provided answer should be..."
)
#: constrained decoding with ``reasoning``: the longest reasoning generated before the score
REASONED_TOKENS = 100
UNPARSEABLE_INTERMEDIATE = 0.5
UNCONFIRMED_SCALE = 0.7
#: a question that asks for a count ("count" alone is no cue: "The Count of Monte Cristo"),
#: and an answer that is one ("3", "about 12", "1,200")
_COUNT_QUESTION = re.compile(r"\b(?:how many|how much|number of)\b", re.IGNORECASE)
_COUNT = re.compile(r"\s*(?:about |around |approximately )?\d[\d,]*(?:\.\d+)?\b", re.IGNORECASE)
#: what joins two of the question's entities into a choice between them, after the first's
#: closing bracket or quote and before the second's opening one: "[A] or [B]", "[A], or [B]";
#: "and" only after "which of" ("Which of [A] and [B] …"); a comma only in a question that
#: asks which is first, older, more … ("Which came out earlier: [A], [B]?")
_OPENS, _CLOSES = r"[\s\[\"'(]*", r"[\]\"')]*"
_JOINED_BY_OR = re.compile(rf"{_CLOSES},?\s+or\s+{_OPENS}", re.IGNORECASE)
_JOINED_BY_AND = re.compile(rf"{_CLOSES},?\s+and\s+{_OPENS}", re.IGNORECASE)
_JOINED_BY_COMMA = re.compile(rf"{_CLOSES}\s*,\s*{_OPENS}")
_WHICH_OF = re.compile(r"\bwhich (?:one )?of(?:\s+the two)?" + _OPENS + r"\Z", re.IGNORECASE)
#: "which" then a comparative or superlative word: a question that asks for one of a list
_WHICH_COMPARES = re.compile(
    r"\bwhich\b.*\b(?:first|last|earlier|earliest|later|latest|older|oldest|younger|"
    r"youngest|longer|longest|shorter|shortest|more|most|less|fewer|bigger|biggest|larger|largest|smaller|smallest|"
    r"higher|highest|lower|lowest|taller|tallest)\b",
    re.IGNORECASE,
)


def offers_a_choice(query: str, labels: list[str]) -> bool:
    """Does the question offer a choice between two of the entities labelled ``labels``:
    two of them named (:func:`~.machine.find_labels`) side by side, joined by "or" ("Which was
    released first, [A] or [B]?"), by "and" right after "which of" ("Which of [A] and [B] is
    older?"), or by a comma where "which" asks for a comparative ("Which came out earlier:
    [A], [B]?")? An "or", a "which of" or a "more" elsewhere offers none ("Which singer born
    in [A] recorded a song with [B] or covered one?", "Which of the people born in [A] worked
    with [B]?", "Which musician born in [A] was more famous than [B]?")."""
    folded = folded_text(query)
    spans = sorted((m.start(), m.end(), i) for i, label in enumerate(labels) for m in find_labels(query, label))
    compares = _WHICH_COMPARES.search(folded) is not None
    for (first, end, i), (start, _, j) in zip(spans, spans[1:]):
        if i == j or start < end:  # the same entity twice, or labels that overlap
            continue
        between = folded[end:start]
        if (_JOINED_BY_OR.fullmatch(between)
                or _JOINED_BY_AND.fullmatch(between) and _WHICH_OF.search(folded, 0, first)
                or compares and _JOINED_BY_COMMA.fullmatch(between)):
            return True
    return False


def names_no_entity(query: str, answer: str) -> bool:
    """Is the answer of a kind no KG entity is: a yes or a no to a yes/no question, or a
    count for a question that asks for one? No walk reaches such an answer, so "not among the entities reached" says
    nothing about it (a count the KG holds as a literal is reached, and confirmed, anyway)."""
    if is_yes_no_question(query):  # "No one in the graph…", "No Country for Old Men" answer other questions
        return bool(YES_NO.match(answer))
    return bool(_COUNT_QUESTION.search(query) and _COUNT.match(answer))


def names_a_choice(query: str, node: Node) -> bool:
    """Does the answer name (:func:`~.machine.names`) one of the question's own
    entities, in the subgraph, where the question offers a choice between two or more of
    them ("Which was released first, [A] or [B]?" answered "A")? No walk reaches a question's
    own entity, yet the facts that decide between them are the ones the expansions gathered
    from them, so "not among the entities reached" says nothing about it either."""
    question_entities = node.path()[0].subgraph.entities
    if len(question_entities) < 2 or not offers_a_choice(query, [e.label for e in question_entities]):
        return False
    answer = node.answer or ""
    return any(e in node.subgraph and names(answer, e) for e in question_entities)


def names_no_reached_entity(query: str, node: Node) -> bool:
    """Is the answer one no walk reaches by its kind: a yes/no or a count
    (:func:`names_no_entity`), or one of the question's entities it chose between
    (:func:`names_a_choice`)? Its rating is not scaled as unconfirmed, and its rating prompt
    shows the facts its path added instead of a path to it."""
    return names_no_entity(query, node.answer or "") or names_a_choice(query, node)


def confirmed_by_kg(node: Node) -> bool:
    """Does the answer name an entity that an expansion on this path reached: not one of
    the question's own entities, unless the walk came back to it as an answer ("the wife
    of X's husband" is X: :func:`~.provenance.reached_back`)?"""
    root = node.path()[0].subgraph
    return any(path and (path[-1].target not in root or not reached_back(path[-1], root, node.subgraph))
               for path in answer_paths(node))


#: a rating in [0, 1]: "0.8", "1.0", ".7", "1", "0,8" (a decimal comma), "-0.5" (read as 0)
#: — not part of a longer number ("10", "0.8.1", "1.05"), but a full stop after it ends a
#: sentence: "should be 0.8." reads 0.8
_NUMBER = re.compile(r"(?<![\d.,])(-?)(0(?:[.,]\d+)?|1(?:\.0+)?|\.\d+)(?!\d|[.,]\d)")
#: a rating as a ratio: "8/10", "0.0/1.0", "1 out of 10"
_RATIO = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+(?:\.\d+)?)(?![\d.]*\d)")
#: what says a number is the rating ("score", "rating", "value", "confidence"), within a few words before it
_CUE = re.compile(r"\b(?:scores?|ratings?|rated?|values?|confidence)\b[^.\n\d]{0,40}$", re.IGNORECASE)


def _ratings(text: str) -> list[tuple[int, float]]:
    """Every rating in ``text`` with its position: ratios ("8/10": 0.8), then the numbers
    outside them, each clamped to [0, 1]."""
    found: list[tuple[int, float]] = []
    spans: list[tuple[int, int]] = []
    for m in _RATIO.finditer(text):
        whole = float(m.group(2))
        if whole > 0:
            found.append((m.start(), float(m.group(1)) / whole))
            spans.append(m.span())
    for m in _NUMBER.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            value = float(m.group(2).replace(",", "."))
            found.append((m.start(), -value if m.group(1) else value))
    return sorted((at, min(1.0, max(0.0, v))) for at, v in found)


def parse_rating(text: str, *, last: bool = False, cued: bool = False) -> float | None:
    """The first (``last``: the last) rating in ``text``, None when there is none. With
    ``cued``, only a rating said to be one (after "score", "rating", ... a few words
    before it), or the text's only content: in free prose a "1" is as likely a count
    ("has 1 hop") as a score."""
    found = _ratings(text)
    if cued and not (len(found) == 1 and not re.sub(r"[\d.,/\s-]|out of", "", text)):
        found = [(at, v) for at, v in found if _CUE.search(text[:at])]
    if not found:
        return None
    return found[-1][1] if last else found[0][1]


def _stated_before_cut(text: str) -> float | None:
    """The score an answer rating cut at ``max_tokens`` states in the prompt's own words
    before the cut ("... should be 0.9. Additional commentary"), None when it states none.
    Its last word may be unfinished ("should be 0." of "0.9"), so it is not read; nor is a
    number outside the phrase, which a reasoning cut short may still take back."""
    whole = re.sub(r"\S+\Z", "", text)
    at = whole.find(SCORE_PHRASE)
    return None if at < 0 else parse_rating(whole[at + len(SCORE_PHRASE):])


class NodeValue(Protocol):
    """What rates a tree's nodes: the LLM (:class:`ValueFunction`) or a trained model
    (:class:`~.trained_value.TrainedValue`)."""

    async def evaluate(self, query: str, node: Node, usage: Usage) -> float: ...

    def suggest(self, query: str, node: Node) -> list[Action]:
        """Actions the value function wants tried at ``node`` (an entity or relation
        selection state) besides the policy's proposals (none for the LLM's; see
        :meth:`.trained_value.TrainedValue.suggest`)."""
        ...

    def answer_now(self, query: str, node: Node, threshold: float) -> bool:
        """Whether the tree should ask for the answer at ``node`` (a default state) instead
        of letting the policy pick THINK / EXPAND_KG / ANSWER (never for the LLM's; see
        :meth:`.trained_value.TrainedValue.answer_now`)."""
        ...


def check_examples_place(prompts: PromptSet) -> None:
    """:class:`BadInput` if the set's answer rating has no ``$preamble``, where the worked
    examples of ``--value-examples`` go (the paper set's F.5 has none): they would be
    dropped in silence."""
    if "preamble" not in string.Template(prompts.text("evaluate_answer")).get_identifiers():
        raise BadInput(f"--value-examples shows its examples in the answer rating's $preamble, which the "
                       f"{prompts.name!r} prompt set's evaluate_answer does not have: drop the flag, or use "
                       "a prompt set whose evaluate_answer has $preamble (the default one)")


class ValueFunction:
    """Values the nodes of one search. Constrained ratings are remembered by prompt: a tree
    proposes the same answer on the same path from many nodes (after a THINK the subgraph
    is unchanged), and the expected rating of a prompt is deterministic."""

    def __init__(
        self,
        llm: LLM,
        machine: Machine,
        *,
        constrained: bool,
        reasoning_tokens: int = 200,
        examples: bool = False,
        reasoning: bool = False,
    ) -> None:
        self.llm = llm
        self.machine = machine
        self.constrained = constrained
        self.reasoning_tokens = reasoning_tokens
        #: the answer prompt shows the worked examples of ``prompts/answer_value_examples.txt``
        self.examples = examples
        #: constrained decoding: an answer's rating reasons first (:meth:`_reasoned_rating`)
        self.reasoning = reasoning
        # The answer prompt starts with the same preamble as every ASM prompt only so that the
        # KV cache keeps it from one question to the next (~300 tokens not recomputed); the
        # examples (opt-in) follow it: a fixed text, before anything the node changes.
        prompts = machine.prompts
        self._answer_head = prompts.fixed("preamble")
        if examples:
            check_examples_place(prompts)
            self._answer_head += "\n\n" + prompts.fixed("answer_value_examples")
        self._ratings: dict[tuple[str, str], float] = {}
        #: reasoned ratings by prompt: (the reasoning, the value read after it)
        self._reasoned: dict[str, tuple[str, float]] = {}

    def prompt(self, query: str, node: Node) -> str:
        if node.state is State.DONE:
            instruction = "Provide a score." if self.constrained and not self.reasoning else REASONED_INSTRUCTION
            # Focused on the answer's own KG path rather than the whole subgraph: with the
            # full context the 1.5B model rated wrong answers as high as right ones; with
            # the path it ranks Florence Stone > Beatrice Stone > Sara Dylan (docs/decisions.md).
            # The answer is shown as the path shows its labels: one line, clipped (shown_answer).
            return self.machine.prompts.render(
                "evaluate_answer", **{**self.machine.parts(query, node), "preamble": self._answer_head},
                answer=shown_answer(node.answer or ""), instruction=instruction,
                path=render_walk(node) if names_no_reached_entity(query, node) and not answer_paths(node)
                else render_paths(node),
            )
        return self.machine.prompts.render("evaluate", **self.machine.parts(query, node))

    def suggest(self, query: str, node: Node) -> list[Action]:
        """The LLM's value adds nothing to the policy's proposals (Algorithm 1)."""
        return []

    def answer_now(self, query: str, node: Node, threshold: float) -> bool:
        """The LLM's value of a state says nothing about stopping (Algorithm 1)."""
        return False

    async def evaluate(self, query: str, node: Node, usage: Usage) -> float:
        if node.invalid:
            return 0.0
        value = await self._rate(query, node, usage)
        if node.state is State.DONE and not confirmed_by_kg(node) and not names_no_reached_entity(query, node):
            # F.5's rubric puts answers not confirmed in the KG at 0.7 at most; small
            # models do not apply it, so it is applied here, deterministically. Not to a
            # yes/no, a count, or the question's entity a comparison chose: scaled, the right
            # one could never pass τ = 0.8, and a wrong entity rated 0.75 beat it (its facts
            # are shown to the rating instead of a path).
            node.add_note(f"answer not among the entities reached: value × {UNCONFIRMED_SCALE}")
            value = round(value * UNCONFIRMED_SCALE, 4)
        return value

    async def _rate(self, query: str, node: Node, usage: Usage) -> float:
        prompt = self.prompt(query, node)
        answer = node.state is State.DONE
        if self.constrained and answer and self.reasoning:
            return await self._reasoned_rating(prompt, node, usage)
        if self.constrained:
            prefix = ANSWER_SCORE_PREFIX if answer else RATING_PREFIX
            if (prompt, prefix) not in self._ratings:
                self._ratings[prompt, prefix] = await expected_rating(self.llm, prompt, usage, prefix=prefix)
            return self._ratings[prompt, prefix]
        if answer:
            gen = await self.llm.generate(prompt, n=1, temperature=0.0, max_tokens=self.reasoning_tokens)
            usage.add_generation(gen)
            text = gen.texts[0] if gen.texts else ""
            if gen.cut(0):
                # a score stated before the cut stands (re-asked, it cost a call and was
                # replaced by whatever the continuation said); else it is asked for after it
                stated = _stated_before_cut(text)
                return stated if stated is not None else await self._score_after(prompt, text, node, usage)
            tail = text.split(SCORE_PHRASE)[-1]
            # the prompt's own phrase, else a number said to be the score, the last one
            value = parse_rating(tail) if tail != text else parse_rating(text, last=True, cued=True)
            if value is None:
                node.add_note("value: no number in the evaluator's output")
                return 0.0
            return value
        gen = await self.llm.generate(prompt, prefix=RATING_PREFIX, n=1, temperature=0.0, max_tokens=6)
        usage.add_generation(gen)
        value = parse_rating(gen.texts[0] if gen.texts else "")
        if value is None:
            node.add_note("value: no number in the evaluator's output")
            return UNPARSEABLE_INTERMEDIATE
        return value

    async def _score_after(self, prompt: str, reasoning: str, node: Node, usage: Usage) -> float:
        """The score of an answer whose rating was cut at ``max_tokens`` (a chat model's F.5
        reasoning runs past 200 tokens): its number, or all of it, is missing, so the
        score is asked for again after the reasoning, as its continuation."""
        node.add_note(f"value: the evaluator's reasoning was cut at max_tokens ({self.reasoning_tokens}); "
                      "its score asked for after it")
        at = reasoning.find(SCORE_PHRASE)
        words = (reasoning if at < 0 else reasoning[:at]).split()
        phrase = ANSWER_SCORE_PREFIX.casefold().split()
        for k in range(len(phrase), 0, -1):  # "... So the score for the" cut: the phrase's start goes
            if [w.casefold() for w in words[-k:]] == phrase[:k]:
                del words[-k:]
                break
        gen = await self.llm.generate(prompt, prefix=f"{' '.join(words)}\n{ANSWER_SCORE_PREFIX}", n=1, temperature=0.0,
                                      max_tokens=6)
        usage.add_generation(gen)
        value = parse_rating((gen.texts[0] if gen.texts else "").split(SCORE_PHRASE)[-1])  # a chat model echoes it
        if value is None:
            node.add_note("value: no number in the evaluator's output after its reasoning")
            return 0.0
        return value

    async def _reasoned_rating(self, prompt: str, node: Node, usage: Usage) -> float:
        """F.5 as the paper asks it — reasoning first, then the score — with the score read
        as the expectation of the rating tokens after the model's own (greedy) reasoning.
        Without the reasoning the 1.5B model rates every answer about the same (0.4 ± 0.05
        for the right hop and one hop too far alike); after it the ratings spread to both
        ends (docs/decisions.md). The reasoning goes into the node's notes (the trace)."""
        if prompt not in self._reasoned:
            gen = await self.llm.generate(
                prompt, prefix=REASONING_PREFIX, n=1, temperature=0.0, max_tokens=REASONED_TOKENS,
                stop=["So the score", "\n\n"],
            )
            usage.add_generation(gen)
            why = " ".join((gen.texts[0] if gen.texts else "").split())
            prefix = f"{REASONING_PREFIX} {why}\n{ANSWER_SCORE_PREFIX}"
            self._reasoned[prompt] = why, await expected_rating(self.llm, prompt, usage, prefix=prefix)
        why, value = self._reasoned[prompt]
        node.add_note(f"value reasoning: {why}")
        return value
