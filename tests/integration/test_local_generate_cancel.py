"""A generation's prompt is evaluated batch by batch where Ctrl-C can stop it, in the
batches llama-cpp-python would make itself: the replies are the same as when
``create_completion`` evaluates the whole prompt, and a cancelled prompt stops at its next
batch, leaving a KV cache the next call goes on from. The real (small) model, with
``n_batch=32`` so that short prompts span several batches."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import threading

import pytest

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason="llama-cpp-python is not installed (pip install 'llama-cpp-python[server]==0.3.36')",
    ),
    pytest.mark.model,
]

N_BATCH = 32
FACTS = "\n".join(f"Fact {i}: entity Q{i} is related to entity Q{i + 1}." for i in range(12))
FIRST = f"Here is some context.\n{FACTS}\nMore context: Q7 is a city, Q8 is a river, Q9 is a mountain.\nWhich facts mention Q8? Answer briefly."
SECOND = f"Here is some context.\n{FACTS}\nOther context: Q3 is a painter, Q4 is a poet, Q5 is a film.\nWhat is Q4? Answer briefly."
LONG = "Here is a long list.\n" + "\n".join(
    f"Item {i}: entity Q{i} was founded in year {1800 + i}." for i in range(14)
) + "\nWhich entity was founded in 1805? Answer with its name."


@pytest.fixture(scope="module")
def llm(small_model_path):
    from traversals.llm.local import LlamaCppLLM

    llm = LlamaCppLLM(small_model_path, n_ctx=1024, n_batch=N_BATCH, seed=0)
    yield llm
    asyncio.run(llm.close())


@contextlib.contextmanager
def decodes(llm):
    """Every batch llama.cpp decodes meanwhile, as (first position, tokens)."""
    ctx = llm._llm._ctx
    seen: list[tuple[int, int]] = []
    real = ctx.decode

    def decode(batch):
        seen.append((batch.batch.pos[0], batch.batch.n_tokens))
        return real(batch)

    ctx.decode = decode
    try:
        yield seen
    finally:
        del ctx.decode


def kv_end(llm) -> int:
    """One past the last position sequence 0 of the KV cache holds."""
    import llama_cpp

    return llama_cpp.llama_memory_seq_pos_max(llm._llm._ctx.memory, 0) + 1


async def test_prefilled_generations_are_the_ones_create_completion_gives_alone(llm, monkeypatch):
    await llm.load()
    n_first = await llm.count_tokens(FIRST)
    runs = {}
    for mode in ("prefilled", "whole"):
        if mode == "whole":  # as before: create_completion evaluates the whole prompt
            monkeypatch.setattr(llm, "_prefill", lambda tokens, reused: None)
        llm._llm.reset()
        calls: list[int] = []
        real_eval = llm._llm.eval
        llm._llm.eval = lambda toks: (calls.append(len(toks)), real_eval(toks))[1]
        try:
            with decodes(llm) as seen:
                gens = [
                    await llm.generate(FIRST, max_tokens=12),  # from an empty cache
                    await llm.generate(SECOND, max_tokens=12),  # reuses the shared head
                    await llm.generate(FIRST, n=2, temperature=0.9, seed=7, max_tokens=12),  # seeded sampling
                ]
        finally:
            del llm._llm.eval
            monkeypatch.undo()
        runs[mode] = gens, seen, calls
    (pre, pre_seen, pre_calls), (whole, whole_seen, whole_calls) = runs["prefilled"], runs["whole"]
    for a, b in zip(pre, whole):
        assert a.texts == b.texts
        assert (a.prompt_tokens, a.computed_prompt_tokens, a.completion_tokens) == (
            b.prompt_tokens, b.computed_prompt_tokens, b.completion_tokens
        )
    assert len(pre[2].texts) == 2
    assert pre[0].computed_prompt_tokens == n_first
    assert N_BATCH < pre[1].computed_prompt_tokens < pre[1].prompt_tokens  # a cached head, a tail of batches
    # llama.cpp decoded the very same batches at the same positions: the prompt is only
    # split between two callers
    assert pre_seen == whole_seen
    # ... but the batches before a prompt's last one went through the cancellable _eval
    assert pre_calls[: (n_first - 1) // N_BATCH] == [N_BATCH] * ((n_first - 1) // N_BATCH)
    assert whole_calls[0] == n_first
    assert pre_calls.count(N_BATCH) > whole_calls.count(N_BATCH)


async def test_a_generation_cancelled_during_its_prompt_stops_at_the_next_batch(llm):
    """Ctrl-C during a generation's long prompt waited for the whole prompt (inside
    create_completion, where no stopping criterion acts); it now waits for one batch, and
    the cache keeps that batch for the next call."""
    await llm.load()
    tokens = llm._tokenize(llm.format_prompt(LONG))
    assert len(tokens) > 6 * N_BATCH
    llm._llm.reset()
    expected = await llm.generate(LONG, max_tokens=8)  # from an empty cache, uncancelled

    llm._llm.reset()
    started, release = threading.Event(), threading.Event()
    evals: list[int] = []
    completions: list[int] = []
    real_eval, real_completion = llm._llm.eval, llm._llm.create_completion

    def eval(toks):
        evals.append(len(toks))
        started.set()
        release.wait(30)  # the first batch is "running" when Ctrl-C comes
        return real_eval(toks)

    def create_completion(*a, **kw):
        completions.append(1)
        return real_completion(*a, **kw)

    llm._llm.eval, llm._llm.create_completion = eval, create_completion
    try:
        task = asyncio.create_task(llm.generate(LONG, max_tokens=8))
        assert await asyncio.to_thread(started.wait, 60)
        task.cancel()  # what Ctrl-C does to the question's task
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        await llm.load()  # waits until the thread lets go of the model
    finally:
        release.set()
        del llm._llm.eval, llm._llm.create_completion
    assert evals == [N_BATCH]  # one batch of the prompt's 7+, then it stopped
    assert completions == []
    # the cache holds exactly that batch: n_tokens, input_ids and the KV cells agree
    assert llm._llm.n_tokens == N_BATCH == kv_end(llm)
    assert list(llm._llm._input_ids) == tokens[:N_BATCH]

    again = await llm.generate(LONG, max_tokens=8)  # goes on from the cached batch
    assert again.computed_prompt_tokens == len(tokens) - N_BATCH
    assert again.texts == expected.texts
    assert kv_end(llm) == llm._llm.n_tokens  # prompt + reply (but the last sampled token)
