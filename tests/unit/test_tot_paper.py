"""Tree-of-Traversals against the paper (Algorithm 1, Appendix B.1, F.4/F.5): regressions
found in a review of the search against the paper's method."""

from traversals.search.value import parse_rating

from .test_search import scripted, solver


def test_a_rating_that_ends_a_sentence_is_read():
    # F.5 ends "So the score for the provided answer should be...": models finish the
    # sentence with a full stop, which is not part of a longer number
    assert parse_rating("So the score for the provided answer should be 0.9.") == 0.9
    assert parse_rating("1.0. The KG confirms it.") == 1.0
    assert parse_rating("0.8.1") is None and parse_rating("1.05") is None and parse_rating("10") is None


async def test_an_answer_rated_with_a_full_stop_after_its_score_ends_the_search():
    answer = await solver(scripted(answer_value="0.9."), k=1).ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.text == "Florence Stone" and answer.value == 0.9 and answer.stopped == "threshold"
