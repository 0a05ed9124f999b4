"""OpenAICompatibleLLM against fake servers: an httpx.MockTransport (no sockets) for the
protocol details, and one real stdlib HTTP server on 127.0.0.1 for sockets/timeouts."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from traversals.errors import BadInput, LLMError, LLMUnavailable, ScoringNotSupported, TraversalsWarning
from traversals.llm.base import LLM
from traversals.llm.factory import open_llm
from traversals.llm.openai import OpenAICompatibleLLM

URL = "http://llm.test/v1"


def chat_reply(*texts, prompt_tokens=10, completion_tokens=3, **usage_extra):
    return {
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
            for i, t in enumerate(texts)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            **usage_extra,
        },
    }


class FakeServer:
    """Records requests; ``respond(request, body)`` returns an httpx.Response."""

    def __init__(self, respond):
        self.respond = respond
        self.requests: list[dict] = []
        self.paths: list[str] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        self.requests.append(body)
        self.paths.append(request.url.path)
        return self.respond(request, body)


class Sleeps:
    def __init__(self):
        self.delays: list[float] = []

    async def __call__(self, d: float) -> None:
        self.delays.append(d)


def make(server: FakeServer, **kw) -> tuple[OpenAICompatibleLLM, Sleeps]:
    sleeps = Sleeps()
    llm = OpenAICompatibleLLM(
        URL, "test-model", api_key="sk-test", transport=httpx.MockTransport(server.handler),
        sleep=sleeps, **kw,
    )
    return llm, sleeps


async def test_generate_sends_chat_request_and_strips_repeated_prefix():
    server = FakeServer(lambda r, b: httpx.Response(200, json=chat_reply("SELECT ENTITIES: Q1, Q2")))
    llm, _ = make(server)
    assert isinstance(llm, LLM)
    g = await llm.generate(
        "Pick entities.", prefix="SELECT ENTITIES:", max_tokens=50, stop=["\n"], seed=3
    )
    assert g.texts == [" Q1, Q2"]
    assert g.prompt_tokens == 10 and g.completion_tokens == 3
    assert g.computed_prompt_tokens is None  # server did not say what it cached
    body = server.requests[0]
    assert server.paths == ["/v1/chat/completions"]
    assert body["model"] == "test-model"
    assert body["messages"] == [
        {"role": "user", "content": 'Pick entities.\n\nStart your reply with "SELECT ENTITIES:".'}
    ]
    assert body["max_tokens"] == 50 + len("SELECT ENTITIES:") and body["stop"] == ["\n"] and body["seed"] == 3
    assert body["temperature"] == 0.0
    await llm.close()


async def test_authorization_header_and_cached_tokens():
    seen = {}

    def respond(request, body):
        seen["auth"] = request.headers.get("authorization")
        return httpx.Response(
            200, json=chat_reply("ok", prompt_tokens=100, prompt_tokens_details={"cached_tokens": 80})
        )

    llm, _ = make(FakeServer(respond))
    g = await llm.generate("q")
    assert seen["auth"] == "Bearer sk-test"
    assert g.computed_prompt_tokens == 20
    await llm.close()


async def test_prefill_mode_sends_assistant_message():
    server = FakeServer(lambda r, b: httpx.Response(200, json=chat_reply(" Paris")))
    llm, _ = make(server, prefill=True)
    g = await llm.generate("Capital?", prefix="Answer:")
    assert g.texts == [" Paris"]
    assert server.requests[0]["messages"][-1] == {"role": "assistant", "content": "Answer:"}
    await llm.close()


async def test_more_than_four_stops_are_applied_client_side():
    server = FakeServer(lambda r, b: httpx.Response(200, json=chat_reply("a b c|d e")))
    llm, _ = make(server)
    g = await llm.generate("q", stop=["1", "2", "3", "4", "|"])
    assert server.requests[0]["stop"] == ["1", "2", "3", "4"]
    assert g.texts == ["a b c"]
    await llm.close()


async def test_server_ignoring_n_is_topped_up_with_distinct_seeds():
    counter = iter(range(100))
    server = FakeServer(lambda r, b: httpx.Response(200, json=chat_reply(f"s{next(counter)}")))
    llm, _ = make(server)
    g = await llm.generate("q", n=3, temperature=0.8, seed=100)
    assert len(g.texts) == 3 and len(set(g.texts)) == 3
    assert len(server.requests) == 3
    assert server.requests[0]["n"] == 3
    assert sorted(b["seed"] for b in server.requests) == [100, 101, 102]
    assert g.prompt_tokens == 30 and g.completion_tokens == 9
    assert llm.supports_n is False
    # now known: the next call goes straight to n concurrent single requests
    server.requests.clear()
    g = await llm.generate("q", n=2, temperature=0.8)
    assert len(g.texts) == 2 and len(server.requests) == 2
    assert all("n" not in b for b in server.requests)
    assert len({b["seed"] for b in server.requests}) == 2
    await llm.close()


async def test_server_honouring_n_needs_one_request():
    server = FakeServer(
        lambda r, b: httpx.Response(200, json=chat_reply(*[f"t{i}" for i in range(b.get("n", 1))]))
    )
    llm, _ = make(server)
    g = await llm.generate("q", n=4, temperature=1.0)
    assert g.texts == ["t0", "t1", "t2", "t3"]
    assert len(server.requests) == 1 and llm.supports_n is True
    await llm.close()


async def test_choices_are_read_by_their_index_and_cut_to_n():
    """A server may list its choices out of order, or send more than asked for."""
    shuffled = {"choices": [{"index": 1, "message": {"content": "B"}, "finish_reason": "stop"},
                            {"index": 0, "message": {"content": "A"}, "finish_reason": "length"}]}
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=shuffled)))
    g = await llm.generate("q", n=2, temperature=0.7, seed=5)
    assert (g.texts, g.finish_reasons) == (["A", "B"], ["length", "stop"])
    await llm.close()
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=chat_reply("a", "b", "c"))))
    g = await llm.generate("q", n=2, temperature=0.7, seed=5)
    assert g.texts == ["a", "b"] and g.finish_reasons == ["stop", "stop"]
    await llm.close()


async def test_one_empty_sample_cut_at_max_tokens_beside_an_answer_is_no_error():
    """Only when every sample is empty and cut at max_tokens is the reply a reasoning model
    out of tokens (an error); an empty sample beside one that stopped is an answer."""
    reply = {"choices": [{"index": 0, "message": {"content": ""}, "finish_reason": "length"},
                         {"index": 1, "message": {"content": "Paris"}, "finish_reason": "stop"}]}
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=reply)))
    assert (await llm.generate("q", n=2, temperature=0.7, seed=1)).texts == ["", "Paris"]
    await llm.close()
    reply["choices"][1]["message"]["content"] = ""  # both empty, one of them ended by the model itself
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=reply)))
    assert (await llm.generate("q", n=2, temperature=0.7, seed=1)).texts == ["", ""]
    await llm.close()


async def test_greedy_n_asks_once():
    server = FakeServer(lambda r, b: httpx.Response(200, json=chat_reply("same")))
    llm, _ = make(server)
    g = await llm.generate("q", n=3, temperature=0.0)
    assert g.texts == ["same"] * 3
    assert len(server.requests) == 1 and "n" not in server.requests[0]
    assert (g.prompt_tokens, g.completion_tokens) == (10, 3)  # one reply's tokens, spent once, not per copy
    await llm.close()


async def test_cached_tokens_beyond_the_prompt_leave_no_negative_computed_count():
    """A server whose cached_tokens exceed its prompt_tokens (counted in other units, or
    with its own template): no negative count of computed tokens reaches the totals."""
    reply = chat_reply("ok", prompt_tokens=10, prompt_tokens_details={"cached_tokens": 12})
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=reply)))
    g = await llm.generate("q")
    assert (g.prompt_tokens, g.computed_prompt_tokens) == (10, 0)
    await llm.close()


async def test_429_honours_retry_after_then_succeeds():
    replies = iter(
        [
            httpx.Response(429, headers={"Retry-After": "2"}, json={"error": {"message": "slow down"}}),
            httpx.Response(503, json={"error": {"message": "busy"}}),
            httpx.Response(200, json=chat_reply("done")),
        ]
    )
    llm, sleeps = make(FakeServer(lambda r, b: next(replies)), backoff_base=0.5)
    g = await llm.generate("q")
    assert g.texts == ["done"]
    assert sleeps.delays[0] == 2.0  # Retry-After
    assert 0.5 <= sleeps.delays[1] <= 1.0  # backoff step 2 * 0.5 with 50-100 % jitter
    await llm.close()


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])  # written out: http_json's RETRY_STATUS
async def test_every_transient_status_is_retried_then_succeeds(status):
    """408 (a proxy's timeout), 409 (a lock), 429, 5xx and 529 (Anthropic's "overloaded") are
    a busy server, not the request's fault: waited out, not an error."""
    replies = iter([httpx.Response(status, json={"error": {"message": "busy"}}),
                    httpx.Response(200, json=chat_reply("ok"))])
    server = FakeServer(lambda r, b: next(replies))
    llm, sleeps = make(server)
    assert (await llm.generate("q")).texts == ["ok"]
    assert len(server.requests) == 2 and len(sleeps.delays) == 1
    await llm.close()


async def test_a_connect_timeout_is_retried_then_succeeds():
    """A connect timeout sent nothing (a server starting up, a dropped SYN): it is retried,
    unlike a read timeout, whose request the server may be working on."""
    calls = []

    def respond(request, body):
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ConnectTimeout("connect timed out", request=request)
        return httpx.Response(200, json=chat_reply("ok"))

    llm, sleeps = make(FakeServer(respond))
    assert (await llm.generate("q")).texts == ["ok"]
    assert len(calls) == 2 and len(sleeps.delays) == 1
    await llm.close()


@pytest.mark.parametrize("ms", ["-5", "nan", "inf", "-inf"])
async def test_a_retry_after_ms_that_is_no_wait_falls_back_to_retry_after(ms):
    """A negative, NaN or infinite retry-after-ms is no number of milliseconds: the
    Retry-After beside it says how long to wait."""
    replies = iter([httpx.Response(429, headers={"retry-after-ms": ms, "retry-after": "7"}),
                    httpx.Response(200, json=chat_reply("ok"))])
    llm, sleeps = make(FakeServer(lambda r, b: next(replies)))
    assert (await llm.generate("q")).texts == ["ok"]
    assert sleeps.delays == [7.0]
    await llm.close()


async def test_retry_after_is_capped_and_http_date_understood():
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 3600))
    replies = iter(
        [
            httpx.Response(429, headers={"Retry-After": date}),
            httpx.Response(200, json=chat_reply("ok")),
        ]
    )
    llm, sleeps = make(FakeServer(lambda r, b: next(replies)), backoff_max=7.0)
    await llm.generate("q")
    assert sleeps.delays == [7.0]
    await llm.close()


async def test_persistent_5xx_gives_up_after_bounded_attempts():
    server = FakeServer(lambda r, b: httpx.Response(500, json={"error": {"message": "boom"}}))
    llm, sleeps = make(server, max_retries=3)
    with pytest.raises(LLMUnavailable) as ei:  # an outage: an evaluation stops, to resume later
        await llm.generate("q")
    msg = str(ei.value)
    assert "HTTP 500" in msg and "boom" in msg and URL in msg and "4 attempts" in msg
    assert "\n" not in msg
    assert len(server.requests) == 4 and len(sleeps.delays) == 3
    # exponential: each step at least the previous step's lower bound
    assert sleeps.delays[2] >= 1.0
    await llm.close()


async def test_client_errors_are_not_retried():
    server = FakeServer(lambda r, b: httpx.Response(400, json={"error": {"message": "bad stop"}}))
    llm, sleeps = make(server)
    with pytest.raises(LLMError, match="HTTP 400: bad stop"):
        await llm.generate("q")
    assert len(server.requests) == 1 and sleeps.delays == []
    await llm.close()


async def test_a_wrong_path_or_model_is_unavailable():
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(404, json={"error": {"message": "model 'x' not found"}})))
    with pytest.raises(LLMUnavailable, match="not found.*check the base URL and the model name"):
        await llm.generate("q")
    await llm.close()


async def test_auth_error_is_unavailable():
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(401, json={"error": "no key"})))
    with pytest.raises(LLMUnavailable, match="API key"):
        await llm.generate("q")
    await llm.close()


async def test_connection_errors_retry_then_unavailable():
    calls = []

    def respond(request, body):
        calls.append(1)
        raise httpx.ConnectError("Connection refused", request=request)

    llm, sleeps = make(FakeServer(respond), max_retries=2)
    with pytest.raises(LLMUnavailable) as ei:
        await llm.generate("q")
    assert URL in str(ei.value) and "3 attempts" in str(ei.value)
    assert len(calls) == 3 and len(sleeps.delays) == 2
    await llm.close()


async def test_read_timeout_is_an_error_not_retried():
    def respond(request, body):
        raise httpx.ReadTimeout("timed out", request=request)

    server = FakeServer(respond)
    llm, sleeps = make(server, timeout=5)
    with pytest.raises(LLMError, match="timed out") as ei:
        await llm.generate("q")
    assert URL in str(ei.value)
    assert len(server.requests) == 1 and sleeps.delays == []
    await llm.close()


async def test_reply_without_choices_is_an_error():
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json={"object": "error"})))
    with pytest.raises(LLMError, match="no choices"):
        await llm.generate("q")
    await llm.close()


@pytest.mark.parametrize(
    "reply, says",
    [
        ({"choices": ["hello"]}, "a choice is not an object"),
        ({"choices": [{"message": "hello"}]}, "message is not an object"),
        ({"choices": [{"message": {"content": 42}}]}, "content is int, not text"),
    ],
)
async def test_a_reply_of_another_shape_is_one_llm_error(reply, says):
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=reply)))
    with pytest.raises(LLMError, match=says):
        await llm.generate("q")
    await llm.close()


async def test_odd_usage_blocks_cost_the_counts_not_the_answer():
    """Content as a list of text parts is read; a usage that is not counts reads as 0."""
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": "Par"}, {"type": "text", "text": "is"}]}}],
             "usage": "lots"}
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=parts)))
    g = await llm.generate("q")
    assert g.texts == ["Paris"] and g.prompt_tokens == 0
    await llm.close()
    odd = chat_reply("Paris", prompt_tokens="ten", completion_tokens=2.0, prompt_tokens_details="none")
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=odd)))
    g = await llm.generate("q")
    assert g.texts == ["Paris"] and (g.prompt_tokens, g.completion_tokens) == (0, 2)
    await llm.close()


# --- scoring: off by default, on after a successful probe ----------------------------


def echo_completion(text: str, token_len: int = 4, logprob: float = -1.0):
    """A /completions reply echoing ``text`` in fixed-size tokens, ``logprob`` each."""
    toks = [text[i : i + token_len] for i in range(0, len(text), token_len)] + ["<gen>"]
    offsets, pos = [], 0
    for t in toks:
        offsets.append(pos)
        pos += len(t)
    lps = [None] + [logprob] * (len(toks) - 1)
    return {
        "choices": [
            {
                "text": text + "<gen>",
                "logprobs": {"tokens": toks, "text_offset": offsets, "token_logprobs": lps},
            }
        ],
        "usage": {"prompt_tokens": len(toks) - 1, "completion_tokens": 1},
    }


async def test_score_is_unsupported_until_probed():
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(404, json={"error": "nope"})))
    assert llm.can_score is False
    with pytest.raises(ScoringNotSupported):
        await llm.score("q", ["a", "b"])
    # no template configured: the probe does not even ask the server
    assert await llm.probe_scoring() is False
    assert "completion_template" in llm.scoring_reason
    await llm.close()


async def test_a_library_user_who_never_probed_is_told_how(recwarn):
    """open_llm(..., completion_template=) + build_solver never probed: the search sampled in
    silence, and decoding="constrained" said "(not probed)" without saying how to probe."""
    from traversals import SearchConfig, build_solver, open_kg

    def respond(request, body):
        return httpx.Response(200, json=echo_completion(body["prompt"], logprob=-0.1))

    kg = open_kg("demo")
    llm, _ = make(FakeServer(respond), completion_template="chatml")
    with pytest.raises(BadInput, match=r"cannot score options \(not probed: `await llm.probe_scoring\(\)`"):
        build_solver("chain", llm, [kg], SearchConfig(decoding="constrained"))
    with pytest.raises(ScoringNotSupported, match=r"await llm.probe_scoring\(\)"):
        await llm.score("q", ["a"])
    with pytest.warns(TraversalsWarning, match=r"has a completion_template but cannot score.*probe_scoring.*samples"):
        build_solver("chain", llm, [kg], SearchConfig())
    assert await llm.probe_scoring() is True
    recwarn.clear()
    build_solver("chain", llm, [kg], SearchConfig(decoding="constrained"))
    build_solver("chain", llm, [kg], SearchConfig())
    assert not [w for w in recwarn if issubclass(w.category, TraversalsWarning)]
    plain, _ = make(FakeServer(respond))  # no template: sampling is what was asked for, no warning
    build_solver("chain", plain, [kg], SearchConfig())
    assert not [w for w in recwarn if issubclass(w.category, TraversalsWarning)]
    for closing in (llm, plain, kg):
        await closing.close()


async def test_probe_fails_cleanly_when_completions_missing():
    server = FakeServer(lambda r, b: httpx.Response(404, json={"error": {"message": "Not Found"}}))
    llm, _ = make(server, completion_template="chatml")
    with pytest.warns(TraversalsWarning, match="cannot score options.*sampled decoding instead"):
        assert await llm.probe_scoring() is False  # a template asked for scoring: say why it is off
    assert llm.can_score is False
    with pytest.raises(ScoringNotSupported, match="cannot score"):
        await llm.score("q", ["a"])
    await llm.close()


async def test_probe_and_score_with_echoed_logprobs():
    def respond(request, body):
        assert request.url.path == "/v1/completions"
        assert body["echo"] is True and body["logprobs"] == 1 and body["max_tokens"] == 1
        return httpx.Response(200, json=echo_completion(body["prompt"]))

    server = FakeServer(respond)
    llm, _ = make(server, completion_template="raw")
    assert await llm.probe_scoring() is True and llm.can_score
    server.requests.clear()
    s = await llm.score("Q", ["abcd", "abcdefghijkl"], prefix="Answer:")
    # prompt text is "Q\n\nAnswer:" (10 chars): tokens end past it and start inside the
    # option count, so the straddling token is included
    assert [b["prompt"] for b in server.requests] == ["Q\n\nAnswer:abcd", "Q\n\nAnswer:abcdefghijkl"]
    assert s.logprobs[1] < s.logprobs[0] < 0
    assert s.logprobs == [-2.0, -4.0]
    await llm.close()


async def test_probe_rejects_misaligned_logprobs():
    server = FakeServer(
        lambda r, b: httpx.Response(200, json=echo_completion(b["prompt"], logprob=-10.0))
    )
    llm, _ = make(server, completion_template="chatml")
    with pytest.warns(TraversalsWarning, match="misaligned"):
        assert await llm.probe_scoring() is False
    assert "misaligned" in llm.scoring_reason
    await llm.close()


async def test_score_offsets_are_counted_from_the_end():
    """Servers render special tokens as '' so their offsets do not match our text."""

    def respond(request, body):
        text = body["prompt"].replace("<|im_start|>", "").replace("<|im_end|>", "")
        return httpx.Response(200, json=echo_completion(text))

    llm, _ = make(FakeServer(respond), completion_template="chatml")
    assert await llm.probe_scoring()
    s = await llm.score("Q", ["abcd", "", "abcdefgh"])
    assert s.logprobs[1] == 0.0
    assert s.logprobs[0] > s.logprobs[2]
    await llm.close()


#: words (with their leading space) and single digits, as a BPE tokeniser splits them
_WORDS = re.compile(r"\s?[A-Za-z]+|\d|\s?[^\sA-Za-z\d]|\s+")


def echo_words(text: str, logprob: dict[str, float], default: float = -0.05, *, generated: bool = True,
               usage: bool = True, chat_format: bool = False, decoy: float | None = None) -> dict:
    """A vLLM-like /completions reply echoing ``text`` in word and digit tokens, each with
    its ``logprob`` (``default`` for the rest), plus one generated token (none if not
    ``generated``). ``usage=False`` leaves the usage block out; ``chat_format`` writes the
    logprobs as ``content: [{token, logprob, top_logprobs}]``; ``decoy`` gives every token
    a ``top_logprobs`` entry " the" with that logprob (the likeliest token, not the echoed one)."""
    toks = _WORDS.findall(text) + ([" X"] if generated else [])
    offsets, pos = [], 0
    for t in toks:
        offsets.append(pos)
        pos += len(t)
    lps = [None] + [logprob.get(t, default) for t in toks[1:]]
    if chat_format:
        top = [[{"token": " the", "logprob": decoy}] if decoy is not None else [] for _ in toks]
        lp: dict = {"content": [{"token": t, "logprob": v, "top_logprobs": tl} for t, v, tl in zip(toks, lps, top)]}
    else:
        lp = {"tokens": toks, "text_offset": offsets, "token_logprobs": lps}
        if decoy is not None:
            lp["top_logprobs"] = [None] + [{" the": decoy} for _ in toks[1:]]
    reply: dict = {"choices": [{"text": text + (" X" if generated else ""), "logprobs": lp}]}
    if usage:
        reply["usage"] = {"prompt_tokens": len(toks) - (1 if generated else 0), "completion_tokens": 1}
    return reply


async def test_scores_count_each_options_echoed_tokens(tmp_path):
    """Without the counts, answers were compared per ~4 characters: ' Paris' (one token,
    -0.9) came last behind '12' (two tokens, -0.6 each), the ranking per token inverted."""
    from traversals.llm.cache import CachedLLM
    from traversals.llm.checked import checked

    table = {" Paris": -0.9, "1": -0.6, "2": -0.6, " Christopher": -1.5, " Nolan": -1.5}
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=echo_words(b["prompt"], table))),
                  completion_template="raw")
    assert await llm.probe_scoring(), llm.scoring_reason
    options = [" Paris", " 12", " Christopher Nolan"]
    s = await checked(llm).score("Q?", options, prefix="ANSWER:")
    assert s.logprobs == pytest.approx([-0.9, -1.2 - 0.05, -3.0])  # ' 12' is ' ', '1', '2'
    assert s.token_counts == [1, 3, 2]
    per_token = s.per_token(options)
    assert sorted(options, key=lambda o: -per_token[options.index(o)]) == [" 12", " Paris", " Christopher Nolan"]
    cache = CachedLLM(llm, tmp_path / "c.sqlite3")
    await cache.score("Q?", options, prefix="ANSWER:")
    hit = await cache.score("Q?", options, prefix="ANSWER:")
    assert hit.cached and hit.token_counts == [1, 3, 2]  # the cache keeps them
    await cache.close()


@pytest.mark.parametrize("shape", [
    dict(decoy=-0.01),  # top_logprobs name the likeliest token, not the echoed one
    dict(chat_format=True, decoy=-0.01),
    dict(usage=False),  # no usage block: one generated token at the end is assumed
    dict(generated=False),  # a server that generated nothing: every echoed token is the prompt's
], ids=["top-logprobs", "chat-format-top-logprobs", "no-usage", "nothing-generated"])
async def test_scores_read_each_echoed_tokens_own_logprob_whatever_else_the_reply_holds(shape):
    table = {" Paris": -0.9, "1": -0.6, "2": -0.6, " Christopher": -1.5, " Nolan": -1.5}
    llm, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=echo_words(b["prompt"], table, **shape))),
                  completion_template="raw")
    assert await llm.probe_scoring(), llm.scoring_reason
    s = await llm.score("Q?", [" Paris", " 12", " Christopher Nolan"], prefix="ANSWER:")
    assert s.logprobs == pytest.approx([-0.9, -1.2 - 0.05, -3.0]) and s.token_counts == [1, 3, 2]
    await llm.close()


async def test_scores_count_the_prompt_tokens_the_server_took_from_its_cache():
    """computed_prompt_tokens was None, all of them, though the server said how many it
    reused (generate honoured it); the one token an echo generates is no completion token."""
    from traversals.llm.base import Usage

    def respond(request, body):
        reply = echo_words(body["prompt"], {})
        if body["prompt"] != "1, 2, 3, 4, 5, 6, 7, 8":  # the probe's
            reply["usage"]["prompt_tokens_details"] = {"cached_tokens": 5}
        return httpx.Response(200, json=reply)

    llm, _ = make(FakeServer(respond), completion_template="raw")
    assert await llm.probe_scoring(), llm.scoring_reason
    s = await llm.score("Which city?", [" Paris", " Lyon"], prefix="A:")
    sent = len(_WORDS.findall("Which city?\n\nA: Paris")) * 2  # each option's echoed prompt
    assert (s.prompt_tokens, s.computed_prompt_tokens) == (sent, sent - 2 * 5)
    usage = Usage()
    usage.add_scores(s)
    assert (usage.prompt_tokens, usage.computed_prompt_tokens, usage.completion_tokens) == (sent, sent - 10, 0)
    await llm.close()


async def test_scores_of_a_server_that_says_nothing_of_its_cache_computed_all():
    def respond(request, body):
        reply = echo_words(body["prompt"], {})
        if "Lyon" in body["prompt"]:  # one of the two requests says, the other does not
            reply["usage"]["prompt_tokens_details"] = {"cached_tokens": 5}
        return httpx.Response(200, json=reply)

    llm, _ = make(FakeServer(respond), completion_template="raw")
    assert await llm.probe_scoring(), llm.scoring_reason
    s = await llm.score("Which city?", [" Paris", " Lyon"], prefix="A:")
    assert s.computed_prompt_tokens is None and s.computed_tokens == s.prompt_tokens > 0
    await llm.close()


def nan_json(reply: dict) -> httpx.Response:
    """``reply`` as a server writes a NaN: the bare literal JSON parsers accept."""
    return httpx.Response(200, content=json.dumps(reply).encode(), headers={"content-type": "application/json"})


async def test_a_server_echoing_nan_logprobs_fails_the_probe():
    """NaN passed `mean < -1.5`; every option then scored -inf: uniform choices, reported
    as constrained decoding."""
    llm, _ = make(FakeServer(lambda r, b: nan_json(echo_words(b["prompt"], {}, default=float("nan")))),
                  completion_template="raw")
    with pytest.warns(TraversalsWarning, match="not numbers: .*NaN or infinite.*sampled decoding"):
        assert await llm.probe_scoring() is False
    assert llm.can_score is False and "not numbers" in llm.scoring_reason
    await llm.close()


async def test_an_options_nan_logprob_scores_it_impossible_not_nan():
    import math

    llm, _ = make(FakeServer(lambda r, b: nan_json(echo_words(b["prompt"], {" Lyon": float("nan")}))),
                  completion_template="raw")
    assert await llm.probe_scoring(), llm.scoring_reason
    s = await llm.score("Which city?", [" Paris", " Lyon"], prefix="A:")  # the backend itself, unchecked
    assert s.logprobs[0] == pytest.approx(-0.05) and s.logprobs[1] == -math.inf
    await llm.close()


# --- a real socket: stdlib HTTP server on 127.0.0.1 ----------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(n))
        time.sleep(self.server.delay)  # type: ignore[attr-defined]
        content = body["messages"][0]["content"]
        payload = json.dumps(chat_reply(f"echo: {content[:20]}")).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left

    def log_message(self, *a):
        pass


@pytest.fixture
def http_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.delay = 0.0  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


async def test_real_socket_roundtrip_and_timeout(http_server):
    url = f"http://127.0.0.1:{http_server.server_address[1]}/v1"
    llm = OpenAICompatibleLLM(url, "m", timeout=0.5)
    g = await llm.generate("hello there", n=1)
    assert g.texts == ["echo: hello there"]
    http_server.delay = 1.5
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match="timed out"):
        await llm.generate("slow")
    assert time.perf_counter() - t0 < 1.4
    await llm.close()


async def test_nothing_listening_is_unavailable():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    llm = OpenAICompatibleLLM(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff_base=0.01)
    with pytest.raises(LLMUnavailable, match=f"127.0.0.1:{port}"):
        await llm.generate("q")
    await llm.close()


# --- factory ------------------------------------------------------------------------


def test_factory_openai_needs_url():
    with pytest.raises(BadInput) as ei:
        open_llm("openai:gpt-4o-mini")
    assert "--llm-url" in str(ei.value) and "OPENAI_BASE_URL" in str(ei.value)
    with pytest.raises(BadInput, match="model name"):
        open_llm("openai:", url=URL)
    with pytest.raises(BadInput, match="http"):
        open_llm("openai:m", url="localhost:8000")


async def test_factory_openai_builds_backend():
    llm = open_llm("openai:gpt-4o-mini", url=URL + "/", api_key="k", timeout=5)
    assert isinstance(llm, OpenAICompatibleLLM)
    assert llm.name == "openai:gpt-4o-mini" and llm.base_url == URL
    await llm.close()


def test_factory_openai_refuses_a_context_size_naming_the_flag():
    """--n-ctx sizes a model run in this process; a server's context is the server's own."""
    with pytest.raises(BadInput, match=r"n_ctx \(--n-ctx\) sets the context of a model run in this process"):
        open_llm("openai:m", url=URL, n_ctx=4096)


def test_factory_unknown_spec_lists_forms():
    with pytest.raises(BadInput) as ei:
        open_llm("gpt4")
    msg = str(ei.value)
    assert "local:PATH.gguf" in msg and "openai:MODEL" in msg


def test_llm_timeout_flag_reaches_the_client_and_rejects_nonsense():
    """A slow CPU server needs more than the default 120 s per request: --llm-timeout."""
    import argparse

    from traversals.options import add_llm_flags, open_llm_from_args

    p = argparse.ArgumentParser()
    add_llm_flags(p)
    args = p.parse_args(["--llm", "openai:m", "--llm-url", "http://127.0.0.1:9/v1", "--llm-timeout", "600"])
    llm = open_llm_from_args(args, environ={})
    assert isinstance(llm, OpenAICompatibleLLM) and llm.timeout == 600.0
    default = open_llm_from_args(p.parse_args(["--llm", "openai:m", "--llm-url", "http://127.0.0.1:9/v1"]), environ={})
    assert default.timeout == 120.0
    for bad in ("0", "-5", "soon"):
        with pytest.raises(SystemExit):
            p.parse_args(["--llm-timeout", bad])
