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


# --- a generation's prompt ---------------------------------------------------------------


class Generating(Evaluating):
    """``Llama``'s stand-in for a generation: ``eval`` keeps ``n_tokens``/``input_ids`` as
    llama-cpp-python does; ``create_completion`` records the prompt it is given and how
    much of it was cached then (it would evaluate the rest before its first token)."""

    def __init__(self, prompt: list[int], cached: list[int] | None = None) -> None:
        super().__init__()
        import numpy as np

        self.prompt = prompt
        cached = cached or []
        self.input_ids = np.zeros(100, dtype=np.intc)
        self.input_ids[: len(cached)] = cached
        self.n_tokens = len(cached)
        self._requires_eval = False
        self.completions: list[tuple[list[int], int]] = []

    @property
    def _input_ids(self):
        return self.input_ids[: self.n_tokens]

    def tokenize(self, text: bytes, add_bos: bool, special: bool) -> list[int]:
        return list(self.prompt)

    def eval(self, tokens):
        self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        super().eval(tokens)

    def create_completion(self, tokens, **kw):
        self.completions.append((list(tokens), self.n_tokens))
        return {"choices": [{"text": "ok"}], "usage": {"completion_tokens": 1}}


def generating(tmp_path, stub: Generating) -> LlamaCppLLM:
    llm = model(tmp_path, stub)
    llm._formatter = lambda prompt: prompt
    return llm


async def test_a_generation_prompt_is_evaluated_in_llamas_batches_but_its_last(tmp_path):
    """create_completion is left the last batch of the prompt (what it would have
    evaluated last anyway), the batches before it are evaluated here, cancellably."""
    prompt = list(range(100, 120))
    stub = Generating(prompt)
    stub.release.set()
    llm = generating(tmp_path, stub)
    g = await llm.generate("q")
    assert stub.batches == [prompt[0:4], prompt[4:8], prompt[8:12], prompt[12:16]]
    assert stub.completions == [(prompt, 16)]  # evaluates prompt[16:20] itself
    assert g.texts == ["ok"] and g.computed_prompt_tokens == 20

    # a cached prefix of 6: the batches start there, as generate's own would
    stub = Generating(prompt, cached=prompt[:6])
    stub.release.set()
    llm = generating(tmp_path, stub)
    g = await llm.generate("q")
    assert stub.batches == [prompt[6:10], prompt[10:14], prompt[14:18]]
    assert stub.completions == [(prompt, 18)]
    assert g.computed_prompt_tokens == 14

    # a cache that has gone another way after 6 tokens is cut back to those 6
    stub = Generating(prompt, cached=prompt[:6] + [7, 7, 7])
    stub.release.set()
    llm = generating(tmp_path, stub)
    g = await llm.generate("q")
    assert stub.batches == [prompt[6:10], prompt[10:14], prompt[14:18]]
    assert list(stub._input_ids) == prompt[:18]
    assert g.computed_prompt_tokens == 14


async def test_a_prompt_of_one_batch_or_cached_is_left_to_create_completion(tmp_path):
    prompt = list(range(100, 120))
    for cached in (prompt[:16], prompt, prompt + [5, 6]):  # 4 tokens left, none, the whole prompt
        stub = Generating(prompt, cached=cached)
        llm = generating(tmp_path, stub)
        await llm.generate("q")
        assert stub.batches == []
        assert stub.completions == [(prompt, len(cached))]
    stub = Generating(prompt[:4])
    llm = generating(tmp_path, stub)
    await llm.generate("q")
    assert stub.batches == [] and stub.completions == [(prompt[:4], 0)]


async def test_a_cancelled_generation_stops_during_its_prompt(tmp_path):
    """Ctrl-C while a generation's long prompt is evaluated waited for the whole prompt
    (inside create_completion); it now waits for the batch being evaluated."""
    prompt = list(range(100, 120))
    stub = Generating(prompt)
    llm = generating(tmp_path, stub)
    task = asyncio.create_task(llm.generate("q", max_tokens=50))
    assert await asyncio.to_thread(stub.started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stub.release.set()
    await asyncio.to_thread(llm._thread_lock.acquire)
    llm._thread_lock.release()
    assert stub.batches == [prompt[:4]]
    assert stub.completions == []  # never reached
    assert stub.n_tokens == 4 and list(stub._input_ids) == prompt[:4]  # the cache holds that batch

    g = await llm.generate("q")  # the next call goes on from the cached batch
    assert stub.batches[1:] == [prompt[4:8], prompt[8:12], prompt[12:16]]
    assert stub.completions == [(prompt, 16)]
    assert g.computed_prompt_tokens == 16
