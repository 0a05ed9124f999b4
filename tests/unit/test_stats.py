"""Confidence intervals and paired comparisons (traversals.eval.stats) against values
computed by hand / by textbook formulas."""

from __future__ import annotations

import pytest

from traversals.eval.stats import mcnemar_p, paired, wilson_interval


@pytest.mark.parametrize(
    "k, n, lo, hi",
    [
        (0, 10, 0.0, 0.2775),  # no hit in 10: still up to 28 % plausible
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (66, 100, 0.5627, 0.7454),
    ],
)
def test_wilson_interval(k, n, lo, hi):
    got = wilson_interval(k, n)
    assert got == pytest.approx((lo, hi), abs=1e-4)


def test_wilson_interval_without_questions_says_nothing():
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    "a, b, p",
    [(0, 0, 1.0), (3, 0, 0.25), (6, 0, 0.03125), (1, 1, 1.0), (63, 1, 2 * 65 / 2**64)],
)
def test_mcnemar_exact(a, b, p):
    assert mcnemar_p(a, b) == pytest.approx(p) and mcnemar_p(b, a) == pytest.approx(p)


def test_paired_counts_shared_questions_and_errors_as_wrong():
    """q6 errored in run A and is right in B: B's win, as in the runs' Hits@1 (an error
    row scores 0 there); q1 is in A twice, its first row is read."""
    a = [{"id": "1", "hits@1": 1.0}, {"id": "2", "hits@1": 1.0}, {"id": "3", "hits@1": 0.0},
         {"id": "4", "hits@1": 0.0}, {"id": "5", "hits@1": 1.0}, {"id": "6", "hits@1": 1.0, "error": "KGTimeout"},
         {"id": "1", "hits@1": 0.0}]
    b = [{"id": "1", "hits@1": 1.0}, {"id": "2", "hits@1": 0.0}, {"id": "3", "hits@1": 1.0},
         {"id": "4", "hits@1": 0.0}, {"id": "6", "hits@1": 1.0}, {"id": "7", "hits@1": 1.0}]
    pc = paired(a, b)
    assert (pc.n, pc.both, pc.only_a, pc.only_b, pc.neither) == (5, 1, 1, 2, 1)
    assert pc.p_value == 1.0
    # both errored: neither is right
    both_err = paired([{"id": "x", "error": "boom"}], [{"id": "x", "error": "boom", "hits@1": None}])
    assert (both_err.n, both_err.neither) == (1, 1)
