"""What a question spent, whatever became of it (``llm.base.spending``): the meter an
evaluation keeps per question, so that an error row counts the calls made before it."""

from __future__ import annotations

import asyncio

import pytest

from traversals.errors import LLMError
from traversals.llm.base import Generation, Usage, spending

from .test_search import scripted, solver


@pytest.mark.parametrize("k", [1, 2])
async def test_the_meter_agrees_with_a_finished_searchs_own_account(k):
    """A reply recorded in a node's usage and again in a total counts once."""
    llm = scripted()
    with spending() as spent:
        answer = await solver(llm, k=k).ask("Who is Bob Dylan's maternal grandmother?")
    assert answer.text == "Florence Stone"
    assert spent.to_json() == answer.usage.to_json() and spent.llm_calls == len(llm.calls) > 0


async def test_a_failed_search_still_counts_what_it_spent():
    llm = scripted()
    real = llm.generate

    async def generate(prompt, **kw):
        if len(llm.calls) >= 3:
            raise LLMError("the reply was cut")
        return await real(prompt, **kw)

    llm.generate = generate  # type: ignore[method-assign]
    with pytest.raises(LLMError), spending() as spent:
        await solver(llm, k=1).ask("Who is Bob Dylan's maternal grandmother?")
    assert spent.llm_calls == 3 and spent.prompt_tokens > 0 and spent.kg_calls > 0


async def test_each_task_meters_its_own_question():
    async def question(calls: int) -> Usage:
        with spending() as spent:
            for _ in range(calls):
                await asyncio.sleep(0)
                Usage().add_generation(Generation(["x"], prompt_tokens=10))
        return spent

    a, b = await asyncio.gather(question(2), question(5))
    assert (a.llm_calls, b.llm_calls) == (2, 5) and b.prompt_tokens == 50
    Usage().add_generation(Generation(["x"]))  # outside any meter: nothing to count it


@pytest.mark.parametrize("strategy", ["beam", "mcts", "cot", "retrieve"])
async def test_the_meter_agrees_with_every_strategys_own_account(strategy):
    from traversals.api import SearchConfig, build_solver
    from traversals.kg.factory import open_kgs
    from traversals.llm.scripted import ScriptedLLM

    from .test_rwt import QUESTION, llm as rwt_llm

    if strategy in ("beam", "mcts"):
        llm, topics = rwt_llm(), ["Bob Dylan"]
    else:
        llm, topics = ScriptedLLM(rules=[("Find the names", "Bob Dylan"), ("", "ANSWER: Florence Stone")]), None
    solver = build_solver(strategy, llm, open_kgs(["demo"]), SearchConfig(embedder="lexical", simulations=8, max_hops=2))
    with spending() as spent:
        answer = await solver.ask(QUESTION, topic_entities=topics)
    assert spent.to_json() == answer.usage.to_json() and spent.llm_calls > 0
    # the embedder's calls too (RwT's critical model, retrieve's ranking): an error row counts them
    assert (spent.embedder_calls > 0) == (strategy != "cot") and spent.embedded_texts >= spent.embedder_calls


def test_a_usage_counts_the_prompt_tokens_a_reply_computed_not_all_it_sent():
    """computed_prompt_tokens is what the server did not take from its cache: 20 of 100."""
    usage = Usage()
    usage.add_generation(Generation(["a"], prompt_tokens=100, completion_tokens=5, computed_prompt_tokens=20))
    assert (usage.llm_calls, usage.prompt_tokens, usage.computed_prompt_tokens) == (1, 100, 20)


def test_the_meter_counts_a_reply_once_and_a_reply_recorded_into_it_once():
    reply = Generation(["a"], prompt_tokens=100, completion_tokens=5)
    with spending() as spent:
        node, total = Usage(), Usage()
        node.add_generation(reply)  # one reply in a node's usage and in the run's total
        total.add_generation(reply)
    assert (spent.llm_calls, spent.prompt_tokens, spent.completion_tokens) == (1, 100, 5)
    with spending() as spent:
        spent.add_generation(reply)  # into the meter itself: not a second time as its own meter
    assert (spent.llm_calls, spent.prompt_tokens) == (1, 100)


def test_merging_keeps_every_count():
    part = Usage(llm_calls=1, prompt_tokens=10, completion_tokens=2, computed_prompt_tokens=4, kg_calls=3,
                 llm_cache_hits=2, embedder_calls=1, embedded_texts=3, embedding_tokens=7)
    whole = Usage()
    whole.merge(part)
    whole.merge(part)
    assert whole.to_json() == {"llm_calls": 2, "prompt_tokens": 20, "completion_tokens": 4,
                               "computed_prompt_tokens": 8, "kg_calls": 6, "llm_cache_hits": 4,
                               "embedder_calls": 2, "embedded_texts": 6, "embedding_tokens": 14}
