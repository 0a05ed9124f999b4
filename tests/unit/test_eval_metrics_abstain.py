"""A yes/no question: an abstention that starts with "No" is not the answer no."""

from __future__ import annotations

import pytest

from traversals.eval.datasets import Gold
from traversals.eval.metrics import polarity, score

NO, YES = [Gold("no", ("false",))], [Gold("yes", ("true",))]


@pytest.mark.parametrize("prediction", ["No answer", "No answer found.", "No information is available",
                                        "no data", "No results"])
def test_no_answer_is_an_abstention_not_a_no(prediction):
    """CoT's extract_answer returns "No answer" from "Answer: No answer"; polarity read its
    first word and scored it right against every gold "no" (2WikiMultiHopQA, QALD-10 ASK)."""
    assert polarity(prediction) is None
    assert score(prediction, NO) == {"hits@1": 0.0, "em_in": 0.0, "f1": 0.0}
    assert score(prediction, YES)["em_in"] == 0.0


def test_a_no_that_answers_still_counts():
    for prediction in ("No", "No, there is no answer to that", "No one did", "No. No evidence of it",
                       "No answer is certain, but no"):
        assert polarity(prediction) is False, prediction
        assert score(prediction, NO)["em_in"] == 1.0
    assert polarity("No information, but yes") is True
