"""A cancelled call to the in-process model stops at its next batch instead of running to
the end (Ctrl-C waits for one batch of ``n_batch`` tokens). No model needed: a stand-in for
llama.cpp's ``Llama.eval`` takes its place."""

from __future__ import annotations

import asyncio
import threading

import pytest

from traversals.llm.local import LlamaCppLLM


class Evaluating:
    """``Llama.eval``'s stand-in: records each batch; the first one holds until released."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.started, self.release = threading.Event(), threading.Event()

    def eval(self, tokens):
        self.batches.append(list(tokens))
        if len(self.batches) == 1:
            self.started.set()
            self.release.wait(10)


def model(tmp_path, stub: Evaluating) -> LlamaCppLLM:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")  # loaded on first use only: the stand-in is that use
    llm = LlamaCppLLM(path, n_batch=4)
    llm._llm = stub
    return llm


async def test_a_prompt_is_evaluated_in_the_batches_llama_makes_itself(tmp_path):
    stub = Evaluating()
    stub.release.set()
    llm = model(tmp_path, stub)
    await llm._run(llm._eval, list(range(10)))
    assert stub.batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]  # Llama.eval's own n_batch split


async def test_a_cancelled_prompt_stops_at_the_next_batch(tmp_path):
    stub = Evaluating()
    llm = model(tmp_path, stub)
    task = asyncio.create_task(llm._run(llm._eval, list(range(20))))
    assert await asyncio.to_thread(stub.started.wait, 10)
    task.cancel()  # what Ctrl-C does to the question's task
    with pytest.raises(asyncio.CancelledError):
        await task
    stub.release.set()
    await asyncio.to_thread(llm._thread_lock.acquire)  # the worker thread has finished
    llm._thread_lock.release()
    assert stub.batches == [[0, 1, 2, 3]]  # 1 of the 5 batches; before, all 20 tokens were evaluated
