"""``traversals.aio.gather``: when one awaitable fails, its siblings are cancelled before the
error comes out (``asyncio.gather`` left them running: a tree step whose value call failed
went on calling the LLM after the question had ended, its cost counted short)."""

from __future__ import annotations

import asyncio
import time

import pytest

from traversals.aio import LoopLock, gather
from traversals.api import SearchConfig, build_solver
from traversals.errors import LLMError
from traversals.llm.base import spending
from traversals.llm.scripted import ScriptedLLM

from .kgdouble import dylan_kg


async def test_results_in_order_and_the_siblings_of_a_failure_are_cancelled() -> None:
    finished: list[str] = []

    async def slow(name: str) -> str:
        await asyncio.sleep(0.2)
        finished.append(name)
        return name

    async def fails() -> str:
        raise LLMError("refused")

    assert await gather(slow("a"), slow("b")) == ["a", "b"]
    with pytest.raises(LLMError, match="refused"):
        await gather(slow("c"), fails(), slow("d"))
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    await asyncio.sleep(0.3)
    assert finished == ["a", "b"]  # c and d never finished


async def test_a_tree_step_whose_value_call_fails_leaves_no_call_running() -> None:
    answer_eval, started = "Provided answer:", []

    class OneValueFails:
        name, can_score = "slow", False

        def __init__(self) -> None:
            self.inner = ScriptedLLM(rules=[("Find the names in a text", "Bob Dylan"),
                                            (answer_eval, "So the score for the provided answer should be 0.5"),
                                            ("So the next action should be:", ["ANSWER: Alpha", "ANSWER: Beta",
                                                                               "ANSWER: Gamma"])])

        async def generate(self, prompt, **kw):
            if answer_eval in prompt:
                if "Provided answer: Alpha" in prompt:
                    raise LLMError("the server refused this one")
                started.append(time.monotonic())
                await asyncio.sleep(0.5)
            return await self.inner.generate(prompt, **kw)

        async def score(self, *a, **k):
            raise NotImplementedError

        async def close(self) -> None:
            pass

    llm = OneValueFails()
    solver = build_solver("tree", llm, [dylan_kg()], SearchConfig(k=3, decoding="sampled"))
    with spending() as spent:
        with pytest.raises(LLMError, match="refused"):
            await solver.ask("Who is Bob Dylan's maternal grandmother?")
        calls = spent.llm_calls
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    await asyncio.sleep(0.7)
    assert spent.llm_calls == calls  # nothing was still calling the LLM


def test_a_loop_lock_serves_each_asyncio_run_and_excludes_within_one() -> None:
    # one asyncio.Lock is bound to the first loop that waits on it: a second asyncio.run's
    # waiting callers got "bound to a different event loop"
    lock = LoopLock()

    async def contend() -> list[str]:
        order: list[str] = []

        async def hold(name: str) -> None:
            async with lock:
                order.append(f"{name}+")
                await asyncio.sleep(0)
                order.append(f"{name}-")

        await asyncio.gather(hold("a"), hold("b"), hold("c"))
        return order

    for _ in range(2):
        assert asyncio.run(contend()) == ["a+", "a-", "b+", "b-", "c+", "c-"]


def test_a_loop_lock_keeps_no_lock_of_a_closed_loop():
    """A lock that was waited on holds its loop, so weak keys alone kept every loop a LoopLock
    served: one per asyncio.run, for a library user who runs one a question."""
    lock = LoopLock()

    async def one():
        async with lock:
            await asyncio.sleep(0)

    async def contended():
        await asyncio.gather(*(one() for _ in range(3)))

    for _ in range(5):
        asyncio.run(contended())
    assert len(lock._locks) == 1

