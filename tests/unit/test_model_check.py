"""``traversals model check``: one call per check, a failing call a failed check (exit 1),
the decoding the search would use, and speeds read from the tokens and a clock."""

from __future__ import annotations

import json

from traversals.cli import main
from traversals.errors import LLMError
from traversals.llm.check import CHAIN_1HOP, check_llm
from traversals.llm.scripted import ScriptedLLM


class Clock:
    """Each call of the LLM takes as many seconds as the script says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def timed_llm(clock: Clock, *, score=None, reply="Paris") -> ScriptedLLM:
    def respond(prompt, prefix, n, t):
        if prompt.startswith("Check ") and "How many films" in prompt:
            clock.now += 10.0  # the prompt-speed call: ScriptedLLM counts words as tokens
        elif "Count from 1 to 30" in prompt:
            clock.now += 5.0
            return " ".join(str(i) for i in range(1, 31))
        return reply

    return ScriptedLLM(respond, score=score)


async def test_an_llm_that_scores_gets_constrained_decoding_and_speeds_from_its_tokens():
    clock = Clock()
    llm = timed_llm(clock, score={" Paris": -0.1, " Lyon": -3.0})
    report = await check_llm(llm, clock=clock)
    assert report.ok and report.decoding == "constrained"
    names = [c.name for c in report.checks]
    assert names == ["reply", "option scoring", "prompt speed", "generation speed"]
    prompt_call = next(c for c in llm.calls if "How many films" in c.prompt)
    words = len(prompt_call.prompt.split())
    assert report.prompt_tokens_per_second == round(words / 10.0, 1)
    count_call = next(c for c in llm.calls if "Count from" in c.prompt)
    prompt_part = len(count_call.prompt.split()) / report.prompt_tokens_per_second
    assert report.generated_tokens_per_second == round(30 / (5.0 - prompt_part), 1)
    assert report.chain_1hop_seconds == round(CHAIN_1HOP["computed"] / report.prompt_tokens_per_second
                                              + CHAIN_1HOP["generated"] / report.generated_tokens_per_second, 1)
    assert "ranks ' Paris' over ' Lyon'" in report.format()


async def test_scores_in_the_wrong_order_fail_the_check_and_say_why():
    report = await check_llm(timed_llm(Clock(), score={" Paris": -5.0, " Lyon": -0.5}))
    assert not report.ok
    [bad] = [c for c in report.checks if not c.ok]
    assert bad.name == "option scoring" and "misaligned" in bad.detail and "--decoding sampled" in bad.detail


async def test_an_llm_without_log_probabilities_is_sampled_and_says_why():
    llm = timed_llm(Clock())
    llm.scoring_reason = "the server returns no logprobs"  # type: ignore[attr-defined]
    report = await check_llm(llm)
    assert report.ok and report.decoding == "sampled"
    assert "sampled decoding (free text, parsed): the server returns no logprobs" in report.format()


async def test_an_empty_reply_and_a_failing_call_are_failed_checks_not_crashes():
    report = await check_llm(timed_llm(Clock(), reply=""))
    reply = report.checks[0]
    assert not reply.ok and "base (not instruct) model" in reply.detail

    class Down(ScriptedLLM):
        attempts = 0

        async def generate(self, prompt, **kw):
            self.attempts += 1
            raise LLMError("openai:m: cannot reach http://127.0.0.1:9/v1/chat/completions")

    down = Down(["x"])
    report = await check_llm(down)
    assert not report.ok and [c.name for c in report.checks if not c.ok] == ["reply", "prompt speed",
                                                                             "generation speed"]
    assert "cannot reach" in report.format() and report.chain_1hop_seconds is None
    # the speeds would fail the same way, each after its retries: not called
    assert "prompt speed: not run: the reply call failed" in report.format() and down.attempts == 1


def test_the_command_prints_the_checks_and_exits_1_on_a_failure(monkeypatch, capsys):
    from traversals.llm import factory as llm_factory

    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(
        lambda prompt, prefix, n, t: "1 2 3" if "Count" in prompt else "Paris", score={" Paris": -0.1}))
    assert main(["model", "check", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["ok"] and got["decoding"] == "constrained" and len(got["checks"]) == 4 and "open_seconds" in got
    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(lambda *a: ""))
    assert main(["model", "check"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  reply: empty" in out and "decoding: sampled" in out


def test_the_command_refuses_a_reply_cache(capsys, tmp_path):
    assert main(["model", "check", "--llm-cache", str(tmp_path / "c.sqlite3")]) == 2
    assert "drop it" in capsys.readouterr().err


async def test_a_generation_quicker_than_its_estimated_prompt_is_a_lower_bound_not_missing():
    """A prompt speed measured low (a busy machine) can put the generation call's prompt
    share above the whole call: the speed is then the whole call's, said to be a floor."""
    clock = Clock()

    def respond(prompt, prefix, n, t):
        if "How many films" in prompt:
            clock.now += 1000.0  # a very slow prompt-speed call
        elif "Count from 1 to 30" in prompt:
            clock.now += 2.0
            return " ".join(str(i) for i in range(1, 31))
        return "Paris"

    report = await check_llm(ScriptedLLM(respond), clock=clock)
    assert report.ok and report.generated_tokens_per_second == 15.0
    assert "30 tokens generated, at least 15.0 tokens/s" in report.format()
    assert report.chain_1hop_seconds is not None


async def test_a_server_that_reports_no_token_counts_passes_with_its_speeds_unknown():
    from traversals.llm.base import Generation

    class NoUsage(ScriptedLLM):
        async def generate(self, prompt, **kw):
            got = await super().generate(prompt, **kw)
            return Generation(got.texts)  # no prompt or completion tokens

    report = await check_llm(NoUsage(lambda prompt, prefix, n, t: "1 2 3" if "Count" in prompt else "Paris"))
    assert report.ok and report.generated_tokens_per_second is None and report.chain_1hop_seconds is None
    assert "the server reports no token counts: speed unknown" in report.format()
