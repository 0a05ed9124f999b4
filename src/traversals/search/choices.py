"""Choosing among closed options by the model's probabilities (constrained decoding).

``option_probs`` scores every option as the continuation of a prompt (one LLM call that
shares the prompt's KV cache) and normalises the log-probabilities into a distribution —
the policy prior P(s, a) that MCTS needs too. ``pick`` draws k *distinct* options from it:
the argmax first, then sampling without replacement (Gumbel top-k) among the options whose
probability is at least ``min_prob``; with ``temperature == 0`` it takes the top k.
``calibrated_probs`` corrects the model's preference for some option strings (relations);
``geometric_mean`` pools the distributions of one choice asked with the options listed in
different orders (a small model's choice depends on the order the options are listed in).
"""

from __future__ import annotations

import math
import random
from typing import Sequence

from ..llm.base import LLM, Usage
from ..aio import gather

RATINGS = tuple(f"{i / 10:.1f}" for i in range(11))


def softmax(logprobs: Sequence[float]) -> list[float]:
    """Probabilities of options from their log-probabilities. A NaN counts as impossible
    (``-inf``); when every option is impossible (an endpoint that scored none of them) the
    choice is uniform rather than NaN everywhere."""
    if not logprobs:
        return []
    logprobs = [-math.inf if math.isnan(lp) else lp for lp in logprobs]
    top = max(logprobs)
    if top == -math.inf:
        return [1.0 / len(logprobs)] * len(logprobs)
    exps = [math.exp(lp - top) for lp in logprobs]
    total = sum(exps)
    return [x / total for x in exps]


async def option_probs(
    llm: LLM, prompt: str, options: Sequence[str], usage: Usage, *, prefix: str = "", transient: bool = False
) -> list[float]:
    scores = await llm.score(prompt, list(options), prefix=prefix, transient=transient)
    usage.add_scores(scores)
    return softmax(scores.logprobs)


def _log(p: float) -> float:
    """log p, floored: an option the model gave no probability stays comparable."""
    return math.log(max(p, 1e-12))


def calibrate(probs: Sequence[float], neutral: Sequence[float], weight: float = 1.0) -> list[float]:
    """``p(o | prompt) / p(o | neutral prompt) ** weight``, renormalised (weight 1: Zhao et al.'s
    division, pointwise mutual information with what the neutral prompt left out)."""
    return softmax([_log(p) - weight * _log(q) for p, q in zip(probs, neutral)])


async def calibrated_probs(
    llm: LLM,
    prompt: str,
    neutral_prompt: str,
    options: Sequence[str],
    usage: Usage,
    *,
    weight: float = 1.0,
    transient: bool = False,
) -> list[float]:
    """Contextual calibration (Zhao et al., 2021, "Calibrate before use").

    A small model prefers some option strings whatever the question: at the second hop the
    1.5B model takes the relation the query named for the first ("directed_by" for "who
    wrote the films directed by X"). Dividing each option's probability by its probability
    under a *neutral* prompt — the same prompt with the query taken out — removes that bias
    (second-hop relation choice on 30 MetaQA 2-hop probes: right 19 -> 26 times; first hop
    unchanged). ``weight`` < 1 divides by a power of it (``--calibrate-weight``); 0.5 chose
    better single relations on MetaQA dev but made no measurable difference to whole chains
    (docs/decisions.md).

    The neutral prompt is scored as ``transient``: the KV cache keeps the real prompt's
    context, which the next call continues from (llama.cpp would otherwise recompute it
    from the query on); ``transient`` scores the real prompt that way too.
    """
    probs, neutral = await gather(
        option_probs(llm, prompt, options, usage, transient=transient),
        option_probs(llm, neutral_prompt, options, usage, transient=True),
    )
    return calibrate(probs, neutral, weight)


def geometric_mean(distributions: Sequence[Sequence[float]]) -> list[float]:
    """The renormalised geometric mean of distributions over the same options: the mean of
    their log-probabilities, so an option wins by being probable under every one of them."""
    n = len(distributions)
    logs = [sum(_log(p) for p in column) / n for column in zip(*distributions)]
    return softmax(logs)


def pick(
    probs: Sequence[float], k: int, *, temperature: float, rng: random.Random, min_prob: float = 0.02
) -> list[int]:
    """Indices of up to ``k`` distinct options."""
    order = sorted(range(len(probs)), key=lambda i: -probs[i])
    if k <= 0 or not order:
        return []
    if temperature <= 0 or k == 1:
        return order[:k]
    chosen = [order[0]]
    pool = [i for i in order[1:] if probs[i] >= min_prob]
    keys = []
    for i in pool:
        u = min(max(rng.random(), 1e-12), 1 - 1e-12)
        keys.append((math.log(probs[i]) / temperature - math.log(-math.log(u)), i))
    keys.sort(reverse=True)
    chosen.extend(i for _, i in keys[: k - 1])
    return chosen


async def expected_rating(llm: LLM, prompt: str, usage: Usage, *, prefix: str) -> float:
    """A value read as the expectation of the rating tokens 0.0 … 1.0 (not one sample)."""
    probs = await option_probs(llm, prompt, RATINGS, usage, prefix=prefix)
    return round(sum(p * float(r) for p, r in zip(probs, RATINGS)), 4)
