"""``traversals.aio.gather``: when one awaitable fails, its siblings are cancelled before the
error comes out (``asyncio.gather`` left them running: a tree step whose value call failed
went on calling the LLM after the question had ended, its cost counted short)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from traversals.aio import LoopClients, LoopLock, SharedSemaphore, gather
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



def test_a_shared_semaphore_caps_holders_across_threads_each_running_its_own_loop():
    """One client used by threads that each run asyncio.run got one asyncio.Semaphore per
    loop: each loop had the whole cap (4 threads, a cap of 2: 8 requests in flight)."""
    sem = SharedSemaphore(2)
    held, peak, guard = [0], [0], threading.Lock()

    async def hold() -> None:
        async with sem:
            with guard:
                held[0] += 1
                peak[0] = max(peak[0], held[0])
            await asyncio.sleep(0.01)
            with guard:
                held[0] -= 1

    async def burst() -> None:
        await asyncio.gather(*(hold() for _ in range(5)))

    threads = [threading.Thread(target=asyncio.run, args=(burst(),)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads)
    assert peak[0] == 2 and held[0] == 0
    assert sem._free == 2  # every place came back


async def test_a_shared_semaphore_waiter_cancelled_passes_its_place_on():
    sem = SharedSemaphore(1)
    await sem.acquire()
    first = asyncio.ensure_future(sem.acquire())
    second = asyncio.ensure_future(sem.acquire())
    await asyncio.sleep(0)
    sem.release()  # hands the place to first ...
    first.cancel()  # ... which is cancelled before it runs: second gets it
    await asyncio.wait_for(second, 5)
    assert first.cancelled()
    waiting = asyncio.ensure_future(sem.acquire())
    await asyncio.sleep(0)
    waiting.cancel()  # cancelled while still in line: it takes no place
    await asyncio.gather(waiting, return_exceptions=True)
    sem.release()
    await asyncio.wait_for(sem.acquire(), 5)
    sem.release()
    assert sem._free == 1


def test_a_place_held_by_a_loop_closed_meanwhile_is_taken_back():
    """A task of a loop closed without its tasks cancelled (new_event_loop, an asyncio.wait
    with a timeout that left it pending, close) kept its place for good: with a cap of 1
    every later request of the object hung, one asking afresh or one already waiting."""
    sem = SharedSemaphore(1)
    sem.RECLAIM_SECONDS = 0.05
    loop = asyncio.new_event_loop()
    loop.run_until_complete(sem.acquire())  # held, never released
    loop.close()

    async def later() -> None:
        await asyncio.wait_for(sem.acquire(), 5)
        sem.release()

    asyncio.run(later())  # asks after the close
    assert sem._free == 1

    held, close_it = threading.Event(), threading.Event()

    def other_thread() -> None:
        other = asyncio.new_event_loop()
        other.run_until_complete(sem.acquire())
        held.set()
        close_it.wait(5)
        other.close()

    thread = threading.Thread(target=other_thread)
    thread.start()
    assert held.wait(5)

    async def waiting() -> None:
        asyncio.get_running_loop().call_later(0.1, close_it.set)
        await asyncio.wait_for(sem.acquire(), 5)  # waits while the other loop closes
        sem.release()

    asyncio.run(waiting())
    thread.join(5)
    assert sem._free == 1 and not sem._held


def test_loop_clients_close_each_loops_client_as_the_loop_shuts_down():
    """A client made anew in each asyncio.run was dropped unclosed with its loop: its
    connections stayed open until a garbage collection ("ResourceWarning: unclosed transport")."""
    made: list[object] = []
    closed: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    async def close(client: object) -> None:
        await asyncio.sleep(0)  # the loop still runs
        closed.append(client)

    clients: LoopClients[object] = LoopClients(make, close)

    async def use() -> object:
        one = await clients.get()
        assert await clients.get() is one  # one per loop
        return one

    used = [asyncio.run(use()) for _ in range(3)]
    assert used == made and closed == made
    assert len(clients) == 1  # the closed loops' entries are dropped

    async def use_and_close() -> None:
        await use()
        await clients.aclose()
        assert closed[-1] is made[-1]

    asyncio.run(use_and_close())
    assert closed == made and len(clients) == 0


def test_loop_clients_aclose_in_one_loop_closes_another_running_loops_client():
    """aclose() from another loop than the last one used did nothing."""
    closed: list[str] = []

    async def close(client: str) -> None:
        closed.append(client)

    clients: LoopClients[str] = LoopClients(lambda: f"client of {threading.current_thread().name}", close)
    other = asyncio.new_event_loop()
    runner = threading.Thread(target=other.run_forever, name="other")
    runner.start()
    try:
        assert asyncio.run_coroutine_threadsafe(clients.get(), other).result(5) == "client of other"

        async def main() -> None:
            await clients.get()
            await clients.aclose()

        asyncio.run(main())
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), other).result(5)  # the other loop has turned
        assert sorted(closed) == ["client of MainThread", "client of other"]
    finally:
        other.call_soon_threadsafe(other.stop)
        runner.join(5)
        other.close()
