"""A scripted LLM for unit tests of the search logic (no model, no I/O).

Three ways to script it (checked in this order):

- ``ScriptedLLM(fn)``: a callable ``fn(prompt, prefix, n, temperature)`` returning a
  ``str`` (repeated ``n`` times) or a ``list[str]`` (returned as is);
- ``ScriptedLLM(rules=[(pattern, response), ...])``: the first rule whose pattern matches
  ``prompt + prefix`` answers. A pattern is a substring (``str``), a compiled regex
  (``re.compile(...)``, searched) or a predicate ``(text) -> bool``; a response is a
  ``str``, a ``list[str]`` or a callable like ``fn`` above;
- ``ScriptedLLM(["reply 1", ["sample a", "sample b"], ...])``: replies in call order.

No match (or no reply left) raises :class:`LLMError` naming the prefix and the end of the
prompt. Every call is recorded in ``.calls``; token counts are ``len(text.split())``.
Stop sequences cut the replies as a real backend would. With ``cut_at_max_tokens=True`` a
reply longer than ``max_tokens`` tokens (words) is cut after that many, as a real backend
cuts it, and the :class:`~.base.Generation` tells each text's finish reason (``"length"``
for a cut one, ``"stop"`` otherwise); without it, replies are whole and no reason is told.

Scoring: pass ``score=`` a callable ``(prompt, options, prefix) -> list[float]`` or a
mapping ``option -> logprob`` (missing options get ``default_logprob``); without it,
``can_score`` is false and :meth:`score` raises :class:`ScoringNotSupported`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence, Union

from traversals.errors import LLMError, ScoringNotSupported
from traversals.llm.base import Generation, Scores
from traversals.llm.chat import apply_stop

__all__ = ["ScriptedCall", "ScriptedLLM"]

Responder = Callable[[str, str, int, float], Union[str, Sequence[str]]]
Response = Union[str, Sequence[str], Responder]
Pattern = Union[str, "re.Pattern[str]", Callable[[str], bool]]
ScoreFn = Callable[[str, Sequence[str], str], Sequence[float]]


@dataclass
class ScriptedCall:
    """One recorded call: ``kind`` is ``"generate"`` or ``"score"``."""

    kind: str
    prompt: str
    prefix: str
    n: int = 1
    temperature: float = 0.0
    max_tokens: int | None = None
    stop: list[str] | None = None
    seed: int | None = None
    options: list[str] | None = None
    #: score: the prompt was marked transient (a one-off, e.g. calibration)
    transient: bool = False
    #: the texts (generate) or log-probabilities (score) returned
    result: list = field(default_factory=list)
    #: index of the rule that answered (rules mode)
    rule: int | None = None


def _tokens(text: str) -> int:
    return len(text.split())


def _cut(text: str, max_tokens: int) -> tuple[str, bool]:
    """``text`` cut after its first ``max_tokens`` tokens (words), and whether it was."""
    words = list(re.finditer(r"\S+", text))
    if len(words) <= max_tokens:
        return text, False
    return (text[: words[max_tokens - 1].end()] if max_tokens > 0 else ""), True


class ScriptedLLM:
    def __init__(
        self,
        responses: Sequence[str | Sequence[str]] | Responder | None = None,
        *,
        rules: Sequence[tuple[Pattern, Response]] | None = None,
        score: ScoreFn | Mapping[str, float] | None = None,
        default_logprob: float = -100.0,
        name: str = "scripted",
        cut_at_max_tokens: bool = False,
    ) -> None:
        if responses is None and rules is None:
            raise ValueError("ScriptedLLM needs responses, a callable or rules")
        self.name = name
        self.cut_at_max_tokens = cut_at_max_tokens
        self._fn: Responder | None = responses if callable(responses) else None
        self._queue: list[str | Sequence[str]] | None = (
            None if responses is None or callable(responses) else list(responses)
        )
        self._rules = [(self._compile(p), r) for p, r in (rules or [])]
        self._rule_src = [p for p, _ in (rules or [])]
        self._score = score
        self.default_logprob = default_logprob
        self.can_score = score is not None
        self.calls: list[ScriptedCall] = []
        self.closed = False

    @staticmethod
    def _compile(p: Pattern) -> Callable[[str], bool]:
        if isinstance(p, str):
            return lambda text: p in text
        if isinstance(p, re.Pattern):
            return lambda text: p.search(text) is not None
        if callable(p):
            return p
        raise TypeError(f"rule pattern must be str, re.Pattern or callable, not {type(p)}")

    @property
    def generate_calls(self) -> list[ScriptedCall]:
        return [c for c in self.calls if c.kind == "generate"]

    @property
    def score_calls(self) -> list[ScriptedCall]:
        return [c for c in self.calls if c.kind == "score"]

    def _no_match(self, why: str, prompt: str, prefix: str) -> LLMError:
        tail = prompt[-300:]
        return LLMError(
            f"ScriptedLLM: {why} (call #{len(self.calls) + 1}); prefix={prefix!r}; "
            f"last 300 chars of the prompt:\n{tail}"
        )

    def _respond(
        self, prompt: str, prefix: str, n: int, temperature: float
    ) -> tuple[list[str], int | None]:
        def expand(r: Response) -> list[str]:
            if callable(r):
                r = r(prompt, prefix, n, temperature)
            if isinstance(r, str):
                return [r] * n
            return list(r)

        if self._fn is not None:
            return expand(self._fn), None
        if self._rules:
            text = prompt + prefix
            for i, (match, response) in enumerate(self._rules):
                if match(text):
                    return expand(response), i
            if self._queue is None:
                raise self._no_match(
                    f"no rule matches (patterns: {[_short(p) for p in self._rule_src]})",
                    prompt,
                    prefix,
                )
        if self._queue:
            return expand(self._queue.pop(0)), None
        raise self._no_match("no scripted response left", prompt, prefix)

    async def generate(
        self,
        prompt: str,
        *,
        prefix: str = "",
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> Generation:
        if self.closed:
            raise LLMError("ScriptedLLM is closed")
        texts, rule = self._respond(prompt, prefix, n, temperature)
        texts = [apply_stop(t, stop) for t in texts]
        reasons: list[str | None] | None = None
        if self.cut_at_max_tokens:
            cut = [_cut(t, max_tokens) for t in texts]
            texts = [t for t, _ in cut]
            reasons = ["length" if was_cut else "stop" for _, was_cut in cut]
        self.calls.append(
            ScriptedCall(
                kind="generate",
                prompt=prompt,
                prefix=prefix,
                n=n,
                temperature=temperature,
                max_tokens=max_tokens,
                stop=list(stop) if stop else None,
                seed=seed,
                result=list(texts),
                rule=rule,
            )
        )
        pt = _tokens(prompt + " " + prefix)
        return Generation(
            texts=texts,
            prompt_tokens=pt,
            completion_tokens=sum(_tokens(t) for t in texts),
            computed_prompt_tokens=pt,
            finish_reasons=reasons,
        )

    async def score(
        self, prompt: str, options: Sequence[str], *, prefix: str = "", transient: bool = False
    ) -> Scores:
        if self._score is None:
            raise ScoringNotSupported("ScriptedLLM was built without a score function")
        options = list(options)
        if isinstance(self._score, Mapping):
            lps = [float(self._score.get(o, self.default_logprob)) for o in options]
        else:
            lps = [float(x) for x in self._score(prompt, options, prefix)]
        if len(lps) != len(options):
            raise LLMError(
                f"ScriptedLLM score function returned {len(lps)} values for {len(options)} options"
            )
        self.calls.append(
            ScriptedCall(
                kind="score", prompt=prompt, prefix=prefix, options=options, result=lps, transient=transient
            )
        )
        pt = _tokens(prompt + " " + prefix) + sum(_tokens(o) for o in options)
        return Scores(logprobs=lps, prompt_tokens=pt, computed_prompt_tokens=pt)

    async def close(self) -> None:
        self.closed = True


def _short(p: object) -> str:
    if isinstance(p, re.Pattern):
        return f"re:{p.pattern[:40]}"
    if isinstance(p, str):
        return p[:40]
    return getattr(p, "__name__", "predicate")
