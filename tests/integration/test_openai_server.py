"""OpenAICompatibleLLM against a real ``python -m llama_cpp.server`` on 127.0.0.1."""

from __future__ import annotations

import importlib.util

import pytest

from traversals.errors import ScoringNotSupported
from traversals.llm.factory import open_llm
from traversals.llm.openai import OpenAICompatibleLLM

pytestmark = [
    pytest.mark.server,
    pytest.mark.model,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason="llama-cpp-python[server] is not installed",
    ),
]


async def test_generate_against_llama_cpp_server(llama_server):
    llm = open_llm("openai:qwen-small", url=llama_server, timeout=120)
    assert isinstance(llm, OpenAICompatibleLLM)
    try:
        g = await llm.generate(
            "What is the capital of France? Answer with one word.", max_tokens=8
        )
        assert "paris" in g.texts[0].lower()
        assert g.prompt_tokens > 10 and g.completion_tokens >= 1
    finally:
        await llm.close()


async def test_prefix_and_n_top_up_against_llama_cpp_server(llama_server):
    llm = OpenAICompatibleLLM(llama_server, "qwen-small", timeout=120)
    try:
        g = await llm.generate(
            "What is the capital of France? Answer in the form 'ANSWER: city'.",
            prefix="ANSWER:",
            max_tokens=10,
            stop=["\n"],
        )
        assert "paris" in g.texts[0].lower()
        assert "ANSWER" not in g.texts[0]  # the repeated prefix was stripped
        # llama_cpp.server ignores n: the client tops up with more requests
        g = await llm.generate("Name a fruit.", n=2, temperature=1.0, max_tokens=5, seed=7)
        assert len(g.texts) == 2
        assert llm.supports_n is False
    finally:
        await llm.close()


async def test_scoring_probe_against_llama_cpp_server(llama_server):
    llm = OpenAICompatibleLLM(llama_server, "qwen-small", timeout=120)
    try:
        # no completion template: scoring stays off and says why
        assert await llm.probe_scoring() is False
        with pytest.raises(ScoringNotSupported):
            await llm.score("q", ["a"])
    finally:
        await llm.close()
    llm = OpenAICompatibleLLM(
        llama_server, "qwen-small", timeout=120, completion_template="chatml"
    )
    try:
        # llama-cpp-python 0.3.x's server misaligns echoed logprobs (each token gets the
        # distribution after it); the probe must notice and keep scoring off, and if a
        # later version fixes it, scoring must rank the right answer first.
        if await llm.probe_scoring():
            s = await llm.score("Capital of France? One word.", ["Paris", "Rome"])
            assert s.logprobs[0] > s.logprobs[1]
        else:
            assert "misaligned" in llm.scoring_reason, llm.scoring_reason
            with pytest.raises(ScoringNotSupported):
                await llm.score("q", ["a"])
    finally:
        await llm.close()


def test_model_check_against_llama_cpp_server(llama_server, capsys):
    """`traversals model check` on a real endpoint: it replies, sampled decoding with the
    probe's reason (--llm-template chatml: this server's echo is misaligned), speeds > 0."""
    import json

    from traversals.cli import main

    assert main(["model", "check", "--llm", "openai:qwen-small", "--llm-url", llama_server, "--llm-template", "chatml",
                 "--llm-timeout", "300", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["ok"] and got["llm"] == "openai:qwen-small"
    assert got["prompt_tokens_per_second"] > 0 and got["generated_tokens_per_second"] > 0
    if got["decoding"] == "sampled":
        [scoring] = [c for c in got["checks"] if c["name"] == "option scoring"]
        assert "misaligned" in scoring["detail"]
