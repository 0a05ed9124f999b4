"""``traversals model check``: does this LLM work for the search, and how fast is it here?

Before an evaluation of hours, a user connecting a model wants to know four things, each
answered by one call to the model:

1. **It replies**: a one-word question gets a non-empty answer (a base model behind a chat
   endpoint, or a wrong chat template, often returns nothing).
2. **Which decoding the search will use**: constrained (the model's log-probabilities of
   each option: valid actions only) or sampled (free text, parsed), and why. When it can
   score, a test that it ranks the right option first.
3. **Prompt speed**: prompt tokens evaluated a second (a fresh prompt of a few hundred
   tokens, one token generated). On a CPU this is what a search's time is made of.
4. **Generation speed**: tokens generated a second.

From the two speeds it estimates a MetaQA 1-hop chain's seconds a question, from what such
a chain was measured to compute (:data:`CHAIN_1HOP`). Figures, not a benchmark: one call
each, on whatever else the machine is doing.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from ..errors import TraversalsError
from .base import LLM

#: a MetaQA 1-hop chain with the LLM value and the default flags, per question, on the
#: default model with llama.cpp's prefix reuse (docs/results.md, fifty-second and
#: fifty-ninth sessions: 1,162 and 1,277): prompt tokens computed, tokens generated
CHAIN_1HOP = {"computed": 1_200, "generated": 41}

REPLY_PROMPT = "What is the capital of France? Answer with one word."
#: filler for the prompt-speed call: a subgraph as the search renders one, repeated
_FILLER = ("- Heat (Q1):\n    directed by: Michael Mann (Q2)\n    starred actors: Al Pacino (Q3), Robert De Niro (Q4)\n"
           "    release year: 1995 (Q5)\n")


@dataclass
class Check:
    """One check: its name, whether it passed, what it found, and its seconds."""

    name: str
    ok: bool
    detail: str
    seconds: float | None = None


@dataclass
class Report:
    llm: str
    checks: list[Check] = field(default_factory=list)
    decoding: str = ""
    prompt_tokens_per_second: float | None = None
    generated_tokens_per_second: float | None = None
    chain_1hop_seconds: float | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def format(self) -> str:
        lines = [f"LLM {self.llm}"]
        for c in self.checks:
            took = f" ({c.seconds:.1f} s)" if c.seconds is not None else ""
            lines.append(f"  {'ok  ' if c.ok else 'FAIL'}  {c.name}: {c.detail}{took}")
        if self.chain_1hop_seconds is not None:
            lines.append(f"  a MetaQA 1-hop chain (LLM value) would take about {self.chain_1hop_seconds:.0f} s a question "
                         "here (from the tokens one was measured to use; docs/results.md)")
        return "\n".join(lines)


async def check_llm(llm: LLM, *, prompt_tokens: int = 400, clock: Callable[[], float] = time.perf_counter) -> Report:
    """Run the checks of the module docstring on ``llm`` (already open and probed);
    a failing call is a failed check, never an exception."""
    report = Report(llm=str(getattr(llm, "name", type(llm).__name__)))

    async def timed(name: str, call) -> tuple[Any, float] | None:
        start = clock()
        try:
            got = await call()
        except TraversalsError as exc:
            report.checks.append(Check(name, False, str(exc), round(clock() - start, 3)))
            return None
        return got, clock() - start

    # 1. a reply; a call that fails (an endpoint down, a wrong key) would fail the same way
    # for the speeds, each after its retries: they are not run
    report.decoding = "constrained" if getattr(llm, "can_score", False) else "sampled"
    got = await timed("reply", lambda: llm.generate(REPLY_PROMPT, max_tokens=8))
    if got is None:
        report.checks.extend(Check(name, False, "not run: the reply call failed")
                             for name in ("prompt speed", "generation speed"))
        return report
    gen, took = got
    text = (gen.texts[0] if gen.texts else "").strip()
    report.checks.append(Check("reply", bool(text), repr(text) if text else
                               "empty: a base (not instruct) model, or a chat template the server does not apply "
                               "(--llm-template, the server's --chat_format)", round(took, 3)))

    # 2. decoding
    if report.decoding == "constrained":
        if got := await timed("option scoring", lambda: llm.score(REPLY_PROMPT, [" Paris", " Lyon"], prefix="Answer:")):
            scores, took = got
            right = len(scores.logprobs) == 2 and scores.logprobs[0] > scores.logprobs[1]
            report.checks.append(Check(
                "option scoring", right,
                "constrained decoding: it ranks ' Paris' over ' Lyon'" if right else
                f"constrained decoding, but it ranks ' Lyon' over ' Paris' ({scores.logprobs}): the log-probabilities "
                "may be misaligned (a server's /completions echo; --decoding sampled avoids them)", round(took, 3)))
    else:
        why = getattr(llm, "scoring_reason", "") or "the LLM gives no log-probabilities"
        report.checks.append(Check("option scoring", True, f"sampled decoding (free text, parsed): {why}"))

    # 3. prompt speed: a prompt no cache holds (a fresh first line), one token generated
    unique = f"Check {uuid.uuid4().hex}.\n"
    filler = (_FILLER * (1 + prompt_tokens // 30))[: prompt_tokens * 3]  # ~3 characters a token here
    if got := await timed("prompt speed", lambda: llm.generate(unique + filler + "\nHow many films are listed?",
                                                               max_tokens=1)):
        gen, took = got
        computed = gen.computed_tokens
        if computed and took > 0:
            report.prompt_tokens_per_second = round(computed / took, 1)
        report.checks.append(Check("prompt speed", True, f"{computed} prompt tokens, "
                                   f"{report.prompt_tokens_per_second or '?'} tokens/s" if computed else
                                   "the server reports no token counts: speed unknown", round(took, 3)))

    # 4. generation speed: a reply of a few dozen tokens after a short prompt, fresh too (a
    # prefix the server reuses but does not report would make the prompt's share too big)
    fresh = f"Check {uuid.uuid4().hex}.\n"
    if got := await timed("generation speed", lambda: llm.generate(
            f"{fresh}Count from 1 to 30, the numbers separated by spaces.", max_tokens=48)):
        gen, took = got
        prompt_time = gen.computed_tokens / report.prompt_tokens_per_second if report.prompt_tokens_per_second else 0.0
        at_least = ""
        if gen.completion_tokens and took > prompt_time:
            report.generated_tokens_per_second = round(gen.completion_tokens / (took - prompt_time), 1)
        elif gen.completion_tokens and took > 0:
            # the prompt's estimated share is all of the call (a busy machine measured the
            # prompt speed low): the whole call as generation time, a lower bound
            report.generated_tokens_per_second = round(gen.completion_tokens / took, 1)
            at_least = "at least "
        replied = any(t.strip() for t in gen.texts)
        if gen.completion_tokens:
            detail = (f"{gen.completion_tokens} tokens generated, "
                      f"{at_least}{report.generated_tokens_per_second or '?'} tokens/s")
        else:  # a server that reports no token counts (no "usage"): it works, its speed is unknown
            detail = "it replied, but the server reports no token counts: speed unknown" if replied else "no reply"
        report.checks.append(Check("generation speed", replied or gen.completion_tokens > 0, detail, round(took, 3)))

    if report.prompt_tokens_per_second and report.generated_tokens_per_second:
        report.chain_1hop_seconds = round(CHAIN_1HOP["computed"] / report.prompt_tokens_per_second
                                          + CHAIN_1HOP["generated"] / report.generated_tokens_per_second, 1)
    return report
