"""The in-process model's context window holds a prompt and its reply's room together (no
model needed: a stand-in for ``llama_cpp.Llama`` whose ``create_completion`` handles
``max_tokens`` as llama-cpp-python 0.3.36 does, llama.py:1344-1358)."""

from __future__ import annotations

import numpy as np
import pytest

from traversals.errors import PromptTooLong
from traversals.llm.local import LlamaCppLLM


class Completing:
    """``Llama``'s stand-in: one token a character; the model would write ``reply``."""

    def __init__(self, n_ctx: int, reply: str) -> None:
        self.n_ctx, self.reply = n_ctx, reply
        self.input_ids = np.zeros(10_000, dtype=np.intc)
        self.n_tokens = 0
        self._requires_eval = False

    @property
    def _input_ids(self):
        return self.input_ids[: self.n_tokens]

    def tokenize(self, text: bytes, add_bos: bool, special: bool) -> list[int]:
        return list(text)

    def eval(self, tokens) -> None:
        self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)

    def reset(self) -> None:
        self.n_tokens = 0

    def create_completion(self, tokens, max_tokens, **kw):
        # llama-cpp-python's own handling: a prompt that fits but leaves less room than
        # max_tokens has its max_tokens cut, in silence
        if len(tokens) >= self.n_ctx:
            raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {self.n_ctx}")
        if max_tokens + len(tokens) >= self.n_ctx:
            max_tokens = self.n_ctx - len(tokens)
        text = self.reply[:max_tokens]
        finish = "length" if len(text) < len(self.reply) else "stop"
        return {"choices": [{"text": text, "finish_reason": finish}], "usage": {"completion_tokens": len(text)}}


def model(tmp_path, n_ctx: int, reply: str) -> LlamaCppLLM:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")  # loaded on first use only: the stand-in is that use
    llm = LlamaCppLLM(path, n_ctx=n_ctx)
    llm._llm = Completing(n_ctx, reply)
    llm._formatter = lambda prompt: prompt
    return llm


async def test_a_prompt_that_leaves_less_than_max_tokens_of_room_is_too_long(tmp_path):
    llm = model(tmp_path, 2048, "0.9")
    prefix = "RATING [0.0-1.0]: "
    fits = "x" * (2048 - 6 - len(prefix))  # prompt + prefix + max_tokens = n_ctx
    assert (await llm.generate(fits, prefix=prefix, max_tokens=6)).texts == ["0.9"]
    # 2 tokens of room for a 6-token reply: llama.cpp would write "0." (read 0.0)
    with pytest.raises(PromptTooLong, match=r"2046 tokens and its reply room \(max_tokens\) 6, 2052 together"):
        await llm.generate("x" * (2046 - len(prefix)), prefix=prefix, max_tokens=6)


async def test_an_answer_is_not_cut_to_the_room_left(tmp_path):
    llm = model(tmp_path, 2048, " Beatrice Stone, Florence Stone")
    assert (await llm.generate("x" * 1848, max_tokens=96)).texts == [" Beatrice Stone, Florence Stone"]
    with pytest.raises(PromptTooLong, match="--n-ctx"):  # " Beatrice St" before
        await llm.generate("x" * 2036, max_tokens=96)


async def test_a_reply_cut_at_max_tokens_says_so(tmp_path):
    llm = model(tmp_path, 2048, " Beatrice Stone, Florence Stone")
    cut = await llm.generate("x" * 100, max_tokens=12, n=2)
    assert cut.texts == [" Beatrice St"] * 2 and cut.finish_reasons == ["length", "length"] and cut.cut(1)
    whole = await llm.generate("x" * 100, max_tokens=96)
    assert whole.finish_reasons == ["stop"] and not whole.cut()
    stopped = await llm.generate("x" * 100, max_tokens=20, stop=[","])  # ends at the stop sequence: whole
    assert stopped.texts == [" Beatrice Stone"] and not stopped.cut()
