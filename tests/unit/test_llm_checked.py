"""A user's LLM checked at the boundary (traversals.llm.checked): the wrong shape of reply
is one LLMError naming the LLM and the method, through build_solver's search."""

from __future__ import annotations

import math

import pytest

from traversals.api import SearchConfig, build_solver
from traversals.errors import LLMError, LLMUnavailable
from traversals.llm.base import Generation, Scores
from traversals.llm.checked import CheckedLLM, checked
from traversals.llm.scripted import ScriptedLLM

from .kgdouble import dylan_kg


class Mine:
    """A user's LLM: ``reply`` is what generate returns, ``scores`` what score returns."""

    name = "mine"
    can_score = True

    def __init__(self, reply=None, scores=None, raises=None):
        self.reply, self.scores, self.raises = reply, scores, raises

    async def generate(self, prompt, **kw):
        if self.raises:
            raise self.raises
        return self.reply

    async def score(self, prompt, options, **kw):
        if self.raises:
            raise self.raises
        return self.scores(options) if callable(self.scores) else self.scores

    async def close(self):
        pass


@pytest.mark.parametrize("llm, says", [
    (Mine(reply=None), "LLM 'mine': generate() returned NoneType, not a Generation"),
    (Mine(reply=Generation([None])), "generate() returned texts [None]: a list of strings belongs there"),
    (Mine(raises=RuntimeError("CUDA out of memory")), "LLM 'mine': generate() raised RuntimeError: CUDA out of memory"),
    (Mine(reply=Generation([])), "generate() returned no text for n=1: one text per sample belongs there"),
])
async def test_a_user_llm_that_breaks_is_one_error_naming_it(llm, says):
    solver = build_solver("cot", llm, [])
    with pytest.raises(LLMError) as err:
        await solver.ask("Who is Bob Dylan's mother?")
    assert says in str(err.value)


async def test_scores_of_the_wrong_length_fail_instead_of_choosing_the_wrong_option():
    short = Mine(reply=Generation(["x"]), scores=Scores([0.0]))
    with pytest.raises(LLMError, match=r"score\(\) returned 1 log-probabilities for 3 options"):
        await CheckedLLM(short).score("p", ["a", "b", "c"])
    solver = build_solver("beam", short, [dylan_kg()], SearchConfig(embedder="lexical"))
    with pytest.raises(LLMError, match="log-probabilities for"):
        await solver.ask("Who is Bob Dylan's mother?", topic_entities=["Bob Dylan"])


async def test_scores_as_a_tuple_or_an_array_are_read_and_another_shape_is_named():
    """A tuple or a NumPy array of the right length was refused as "returned tuple log-probabilities
    for 3 options", which reads as a wrong count."""
    import numpy as np

    for given in ((-1.0, -0.5, -2.0), np.array([-1.0, -0.5, -2.0])):
        got = await CheckedLLM(Mine(scores=Scores(given))).score("p", ["a", "b", "c"])
        assert got.logprobs == [-1.0, -0.5, -2.0]
    with pytest.raises(LLMError, match=r"score\(\) returned logprobs as dict: a list of one log-probability per "
                                       r"option \(3\) belongs there"):
        await CheckedLLM(Mine(scores=Scores({"a": -1.0}))).score("p", ["a", "b", "c"])


async def test_nan_scores_read_as_impossible_and_the_librarys_own_errors_pass_through():
    with pytest.raises(LLMError, match=r"\+inf is no log-probability"):
        await CheckedLLM(Mine(scores=lambda options: Scores([math.inf] + [-1.0] * (len(options) - 1)))).score("p", ["a", "b"])
    nan = CheckedLLM(Mine(scores=lambda options: Scores([math.nan] + [-1.0] * (len(options) - 1))))
    assert (await nan.score("p", ["a", "b"])).logprobs == [-math.inf, -1.0]
    with pytest.raises(LLMUnavailable, match="server down"):
        await CheckedLLM(Mine(raises=LLMUnavailable("server down"))).generate("p")

    class SyncGenerate(Mine):
        def generate(self, prompt, **kw):
            return Generation(["x"])

    with pytest.raises(LLMError, match=r"generate\(\) is not async"):
        await CheckedLLM(SyncGenerate()).generate("p")


def test_the_wrapper_is_transparent_and_applied_once():
    llm = ScriptedLLM(responses=["x"])
    wrapped = checked(llm)
    assert checked(wrapped) is wrapped and wrapped.name == "scripted" and wrapped.can_score is False
    llm.can_score = True  # a probe that finds scoring works is seen through the wrapper
    assert wrapped.can_score is True and wrapped.calls is llm.calls


async def test_token_counts_are_checked_and_none_counts_zero():
    """A user's LLM whose server sent no usage (prompt_tokens=None) failed later with
    "unsupported operand type(s) for +=: 'int' and 'NoneType'"; token_counts shorter than the
    options with an IndexError; numpy's float32 log-probabilities were refused as no numbers."""
    import numpy as np

    llm = CheckedLLM(Mine(reply=Generation(["x"], prompt_tokens=None, completion_tokens=None)))  # type: ignore[arg-type]
    got = await llm.generate("p")
    assert (got.prompt_tokens, got.completion_tokens, got.computed_prompt_tokens) == (0, 0, None)
    with pytest.raises(LLMError, match=r"generate\(\) returned prompt_tokens='12': a count of tokens"):
        await CheckedLLM(Mine(reply=Generation(["x"], prompt_tokens="12"))).generate("p")  # type: ignore[arg-type]
    with pytest.raises(LLMError, match=r"returned completion_tokens=-1"):
        await CheckedLLM(Mine(reply=Generation(["x"], completion_tokens=-1))).generate("p")
    short = Mine(scores=lambda options: Scores([-1.0] * len(options), token_counts=[1]))
    with pytest.raises(LLMError, match=r"token_counts \[1\]: one count of 1 or more per option \(2\)"):
        await CheckedLLM(short).score("p", ["a", "b"])
    numpy = Mine(scores=lambda options: Scores([np.float32(-0.5)] * len(options), prompt_tokens=None))
    got = await CheckedLLM(numpy).score("p", ["a", "b"])
    assert got.logprobs == [-0.5, -0.5] and got.prompt_tokens == 0


async def test_finish_reasons_are_one_per_text_or_none():
    got = await CheckedLLM(Mine(reply=Generation(["x", "y"], finish_reasons=["length", None]))).generate("p", n=2)
    assert got.cut(0) and not got.cut(1)
    assert (await CheckedLLM(Mine(reply=Generation(["x"]))).generate("p")).finish_reasons is None  # not told
    with pytest.raises(LLMError, match=r"returned finish_reasons \['length'\]: one per text"):
        await CheckedLLM(Mine(reply=Generation(["x", "y"], finish_reasons=["length"]))).generate("p", n=2)
