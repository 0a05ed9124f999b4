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
