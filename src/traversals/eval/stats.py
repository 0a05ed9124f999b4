"""How sure a score is: confidence intervals and paired comparisons of runs.

Hits@1 is right or wrong per question, so a run's Hits@1 is a binomial proportion: the
**Wilson score interval** gives its 95 % range (sane at n = 10 and at 0 or 100 %, unlike
the normal approximation). Two strategies run on the same questions are compared
**paired**: the questions only one of them gets right decide, and the exact **McNemar**
test (a two-sided binomial test on those discordant questions) says how likely a split at
least that uneven is if neither strategy were better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

__all__ = ["Paired", "mcnemar_p", "paired", "wilson_interval"]


def wilson_interval(successes: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion (fractions in [0, 1]); ``(0, 1)`` for n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p = min(max(successes / n, 0.0), 1.0)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_p(only_a: int, only_b: int) -> float:
    """Exact two-sided McNemar p-value: P(a split at least this uneven | no difference)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Paired:
    """Two runs on the questions both were asked (right = Hits@1 of 1; an error is wrong)."""

    n: int
    both: int
    only_a: int
    only_b: int
    neither: int
    #: ids both runs answered that name another question in each (another question text:
    #: runs of two files of your own questions, whose ids ``questions:1`` ... coincide); left out
    other: int = 0

    @property
    def p_value(self) -> float:
        return mcnemar_p(self.only_a, self.only_b)


def paired(a: Iterable[Mapping], b: Iterable[Mapping], metric: str = "hits@1") -> Paired:
    """Compare two runs' result rows on their shared questions: the same id with the same
    question text (an id whose text differs is another question, counted in ``other``). A
    row with an error counts as wrong, as it does in the run's Hits@1
    (:func:`~.runfiles.summarize`), and the first row of an id is the one read, as there too."""

    def read(rows: Iterable[Mapping]) -> dict:
        """id -> (right?, the question's text with its spaces normalised, None without one)"""
        out: dict = {}
        for r in rows:
            if r["id"] not in out:
                text = r.get("question")
                out[r["id"]] = (not r.get("error") and (r.get(metric) or 0.0) >= 0.5,
                                " ".join(text.split()) if isinstance(text, str) else None)
        return out

    def same(i: object) -> bool:
        ta, tb = seen_a[i][1], seen_b[i][1]
        return ta is None or tb is None or ta == tb  # a row without its text: as the id says

    seen_a, seen_b = read(a), read(b)
    common = [i for i in seen_a if i in seen_b]
    shared = [i for i in common if same(i)]
    right_a = {i: seen_a[i][0] for i in shared}
    right_b = {i: seen_b[i][0] for i in shared}
    both = sum(right_a[i] and right_b[i] for i in shared)
    only_a = sum(right_a[i] and not right_b[i] for i in shared)
    only_b = sum(right_b[i] and not right_a[i] for i in shared)
    return Paired(len(shared), both, only_a, only_b, len(shared) - both - only_a - only_b,
                  other=len(common) - len(shared))
