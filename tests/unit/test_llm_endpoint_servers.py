"""OpenAICompatibleLLM against a real HTTP server on 127.0.0.1 (stdlib, in a thread) that
answers the way vLLM, Ollama, llama.cpp's server and hosted APIs do when something is
wrong: each case ends in the right behaviour (a retry, a fallback, a parameter left out)
or in one named, one-line error that names the server and says what to do."""

from __future__ import annotations

import json
import socket
import threading
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from traversals.errors import LLMError, LLMUnavailable, PromptTooLong, ScoringNotSupported, TraversalsWarning
from traversals.llm.openai import NOT_PROBED, OpenAICompatibleLLM

#: (status, body: dict = JSON, str = text, None = close without answering, headers)
Reply = tuple[int, Any, dict[str, str]]
Respond = Callable[[str, dict[str, Any]], Reply]


def chat(*texts: str | None, finish: str = "stop", **message: Any) -> dict[str, Any]:
    return {
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": t, **message}, "finish_reason": finish}
            for i, t in enumerate(texts)
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
    }


def error(message: Any, **extra: Any) -> dict[str, Any]:
    return {"error": {"message": message, **extra}}


class Server:
    """A misbehaving OpenAI-compatible server: ``respond(path, body)`` decides each reply;
    ``requests`` records (path, body) of every request."""

    def __init__(self, keep_alive: bool = False) -> None:
        self.respond: Respond = lambda path, body: (200, chat("ok"), {})
        self.requests: list[tuple[str, dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                outer.requests.append((self.path, body))
                status, payload, headers = outer.respond(self.path, body)
                if payload is None:  # a crashed worker: the connection closes, no answer
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = (json.dumps(payload) if isinstance(payload, dict) else payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json" if isinstance(payload, dict) else
                                 headers.pop("content-type", "text/plain"))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a: Any) -> None:
                pass

        if keep_alive:  # HTTP/1.1: the connection stays open for the next request, as real servers keep it
            Handler.protocol_version = "HTTP/1.1"

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def params(self, key: str) -> list[Any]:
        return [body.get(key) for _, body in self.requests]


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


async def no_sleep(_: float) -> None:
    pass


def client(server: Server, path: str = "/v1", **kw: Any) -> OpenAICompatibleLLM:
    kw.setdefault("max_retries", 2)
    kw.setdefault("sleep", no_sleep)
    kw.setdefault("timeout", 5)
    return OpenAICompatibleLLM(server.root + path, "m", api_key=kw.pop("api_key", "sk-test"), **kw)


# --- the failure matrix: the right class, the server named, what to do, bounded requests ----

CONTEXT_LLAMA_CPP = error("the request exceeds the available context size, try increasing it",
                          type="exceed_context_size_error", code=400)
CONTEXT_OPENAI = error("This model's maximum context length is 4096 tokens. However, your messages resulted in "
                       "5012 tokens. Please reduce the length of the messages.", code="context_length_exceeded")
CONTEXT_VLLM = {"object": "error", "type": "BadRequestError", "code": 400,
                "message": "'max_tokens' or 'max_completion_tokens' is too large: 256. This model's maximum context "
                           "length is 2048 tokens and your request has 1900 input tokens (256 > 2048 - 1900)."}
CONTEXT_LLAMA_CPP_500 = error("input is too large to process. increase the physical batch size", type="server_error",
                              code=500)
CONTEXT_TGI = {"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 "
                        "`inputs` tokens and 256 `max_new_tokens`", "error_type": "validation"}
CONTEXT_GROQ = error("Please reduce the length of the messages or completion.", type="invalid_request_error",
                     code="context_length_exceeded")
NGINX_502 = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"

MATRIX = [
    # (id, path, reply, error class, the message says, requests made with max_retries=2)
    ("context-llama.cpp", "/v1", (400, CONTEXT_LLAMA_CPP, {}), LLMError, "this request: a prompt of", 1),
    ("context-openai", "/v1", (400, CONTEXT_OPENAI, {}), LLMError, "this request: a prompt of", 1),
    ("context-vllm", "/v1", (400, CONTEXT_VLLM, {}), LLMError, "this request: a prompt of", 1),
    # llama.cpp's server says a prompt past its batch is too large with a 500: the request's own, not retried
    ("context-llama.cpp-500", "/v1", (500, CONTEXT_LLAMA_CPP_500, {}), LLMError, "this request: a prompt of", 1),
    ("context-tgi", "/v1", (422, CONTEXT_TGI, {}), LLMError, "this request: a prompt of", 1),
    ("context-groq", "/v1", (400, CONTEXT_GROQ, {}), LLMError, "this request: a prompt of", 1),
    ("401", "/v1", (401, error("Incorrect API key provided"), {}), LLMUnavailable, "check the API key", 1),
    ("403", "/v1", (403, error("forbidden"), {}), LLMUnavailable, "check the API key", 1),
    ("404-model", "/v1", (404, {"object": "error", "message": "The model `m` does not exist.", "code": 404}, {}),
     LLMUnavailable, "check the base URL and the model name", 1),
    ("404-no-v1", "", (404, "404 page not found", {}), LLMUnavailable, "base URL usually ends with /v1", 1),
    ("429", "/v1", (429, error("Rate limit reached"), {}), LLMUnavailable, "gave up after 3 attempts", 3),
    ("429-retry-after", "/v1", (429, error("slow down"), {"retry-after": "0"}), LLMUnavailable,
     "gave up after 3 attempts", 3),
    ("500", "/v1", (500, error("CUDA out of memory"), {}), LLMUnavailable, "HTTP 500: CUDA out of memory", 3),
    ("502-html", "/v1", (502, NGINX_502, {"content-type": "text/html"}), LLMUnavailable,
     "an HTML page: 502 Bad Gateway", 3),
    ("503", "/v1", (503, "Service Unavailable", {}), LLMUnavailable, "HTTP 503", 3),
    ("no-answer", "/v1", (200, None, {}), LLMUnavailable, "cannot reach", 3),
    # a model the server does not serve, said with a 422 (a pydantic-validated gateway): every request would fail
    ("422-no-such-model", "/v1", (422, error("The model `gpt-x` does not exist"), {}), LLMUnavailable,
     "does not exist (check the model name)", 1),
    # a proxy's bare 413 page says nothing of a context, yet the request is too big: this request's own
    ("413-proxy-html", "/v1", (413, "<html><head><title>413 Request Entity Too Large</title></head></html>",
                               {"content-type": "text/html"}), PromptTooLong, "this request: a prompt of", 1),
    # FastAPI-style error objects carry "detail", not "message": the message is the server's words
    ("400-detail", "/v1", (400, {"error": {"detail": "temperature must be <= 2"}}, {}), LLMError,
     "HTTP 400: temperature must be <= 2", 1),
    ("not-json", "/v1", (200, "OK", {}), LLMError, "returned non-JSON ('OK')", 1),
    ("html-200", "", (200, "<!DOCTYPE html><html><title>Open WebUI</title></html>", {"content-type": "text/html"}),
     LLMError, "the API root (e.g. .../v1)", 1),
    ("no-choices", "/v1", (200, {"choices": []}, {}), LLMError, "reply has no choices", 1),
    ("error-in-200", "/v1", (200, error("model is loading"), {}), LLMError, "model is loading", 1),
    ("reasoning-out-of-tokens", "/v1", (200, chat(None, finish="length", reasoning_content="Hmm, " * 50), {}),
     LLMError, "reached max_tokens", 1),
]


@pytest.mark.parametrize("path,reply,cls,says,requests", [m[1:] for m in MATRIX], ids=[m[0] for m in MATRIX])
async def test_a_failing_server_is_one_named_line_after_bounded_attempts(server, path, reply, cls, says, requests):
    server.respond = lambda p, b: (reply[0], reply[1], dict(reply[2]))
    llm = client(server, path)
    with pytest.raises(cls) as ei:
        await llm.generate("Who directed Inception?", max_tokens=64)
    msg = str(ei.value)
    assert says in msg and msg.startswith("openai:m: ") and "\n" not in msg and "sk-test" not in msg
    if issubclass(cls, LLMError) and not issubclass(cls, LLMUnavailable):
        assert not isinstance(ei.value, LLMUnavailable)  # the question's own error: an evaluation goes on
    assert len(server.requests) == requests
    await llm.close()


async def test_a_transient_429_is_waited_out(server):
    replies = iter([(429, error("Rate limit reached"), {"retry-after": "1"}), (503, "loading", {}),
                    (200, chat("Christopher Nolan"), {})])
    server.respond = lambda p, b: next(replies)
    waits: list[float] = []

    async def sleep(d: float) -> None:
        waits.append(d)

    llm = client(server, sleep=sleep, backoff_base=0.25)
    assert (await llm.generate("Who directed Inception?")).texts == ["Christopher Nolan"]
    assert waits[0] == 1.0 and 0.125 <= waits[1] <= 0.5  # Retry-After honoured, then backoff
    await llm.close()


async def test_openais_retry_after_ms_is_honoured(server):
    replies = iter([(429, error("Rate limit reached"), {"retry-after-ms": "250", "retry-after": "1"}),
                    (200, chat("Christopher Nolan"), {})])
    server.respond = lambda p, b: next(replies)
    waits: list[float] = []

    async def sleep(d: float) -> None:
        waits.append(d)

    llm = client(server, sleep=sleep)
    assert (await llm.generate("Who directed Inception?")).texts == ["Christopher Nolan"] and waits == [0.25]
    await llm.close()


async def test_a_refusal_carries_the_servers_status_and_message(server):
    server.respond = lambda p, b: (422, error("temperature must be > 0"), {})
    llm = client(server)
    with pytest.raises(LLMError) as ei:
        await llm.generate("q", max_tokens=8)
    assert (ei.value.status, ei.value.detail) == (422, "temperature must be > 0")
    await llm.close()


async def test_a_reply_cut_at_max_tokens_keeps_its_text(server):
    server.respond = lambda p, b: (200, chat("ANSWER: Christopher", finish="length"), {})
    llm = client(server)
    assert (await llm.generate("q", max_tokens=3)).texts == ["ANSWER: Christopher"]
    await llm.close()


# --- parameters a server refuses: left out, renamed, or asked differently ---------------


async def test_a_server_refusing_n_is_asked_for_one_sample_at_a_time(server):
    """Groq and Anthropic's OpenAI-compatible API answer n > 1 with HTTP 400."""
    def respond(path: str, body: dict[str, Any]) -> Reply:
        if body.get("n", 1) != 1:
            return 400, error("'n' : number must be at most 1", type="invalid_request_error"), {}
        return 200, chat(f"sample {body['seed']}"), {}

    server.respond = respond
    llm = client(server)
    got = await llm.generate("q", n=3, temperature=1.0, seed=7)
    assert got.texts == ["sample 7", "sample 8", "sample 9"] and llm.supports_n is False
    assert server.params("n") == [3, None, None, None]
    await llm.generate("q", n=2, temperature=1.0, seed=1)  # later calls: straight to one sample each
    assert server.params("n")[4:] == [None, None]
    await llm.close()


async def test_a_request_refused_for_another_reason_is_not_taken_for_n(server):
    server.respond = lambda p, b: (400, CONTEXT_OPENAI, {})
    llm = client(server)
    with pytest.raises(LLMError, match="maximum context length"):
        await llm.generate("q", n=3, temperature=1.0)
    assert llm.supports_n is None and len(server.requests) == 2  # with n, then once without
    await llm.close()


MISTRAL_SEED = {"object": "error", "type": "invalid_request_message_error",
                "message": {"detail": [{"type": "extra_forbidden", "loc": ["body", "seed"],
                                        "msg": "Extra inputs are not permitted", "input": 7}]}}


async def test_a_server_refusing_seed_gets_requests_without_it_and_a_warning(server):
    """Mistral's API has no `seed` (it is `random_seed`) and refuses unknown fields with 422."""
    server.respond = lambda p, b: (422, MISTRAL_SEED, {}) if "seed" in b else (200, chat("ok"), {})
    llm = client(server)
    with pytest.warns(TraversalsWarning, match="refuses the parameter 'seed'.*does not repeat"):
        assert (await llm.generate("q", temperature=1.0, seed=7)).texts == ["ok"]
    assert server.params("seed") == [7, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        assert (await llm.generate("q", temperature=1.0, seed=8)).texts == ["ok"]
    assert server.params("seed") == [7, None, None] and llm.refused_params == {"seed"}
    await llm.close()


async def test_openai_reasoning_models_get_max_completion_tokens_and_no_stop(server):
    """o1/o3/gpt-5 refuse `max_tokens` (asking for `max_completion_tokens`) and `stop`."""
    def respond(path: str, body: dict[str, Any]) -> Reply:
        if "max_tokens" in body:
            return 400, error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                              "Use 'max_completion_tokens' instead.", param="max_tokens"), {}
        if "stop" in body:
            return 400, error("Unsupported parameter: 'stop' is not supported with this model.", param="stop"), {}
        return 200, chat("ANSWER: Nolan\nObservation: more"), {}

    server.respond = respond
    llm = client(server)
    with pytest.warns(TraversalsWarning, match="'stop'.*applied to the reply instead"):
        got = await llm.generate("q", max_tokens=64, stop=["\nObservation"])
    assert got.texts == ["ANSWER: Nolan"]  # the stop applied here
    assert server.requests[-1][1]["max_completion_tokens"] == 64 and len(server.requests) == 3
    await llm.generate("q", max_tokens=32, stop=["\n"])
    assert len(server.requests) == 4 and server.requests[-1][1]["max_completion_tokens"] == 32
    await llm.close()


async def test_a_context_error_naming_max_tokens_changes_no_parameter(server):
    """vLLM's context-length 400 quotes 'max_tokens' and 'max_completion_tokens': it is the
    prompt's size, not a parameter the server refuses."""
    server.respond = lambda p, b: (400, CONTEXT_VLLM, {})
    llm = client(server)
    with pytest.raises(LLMError, match="maximum context length"):
        await llm.generate("q", max_tokens=256)
    assert len(server.requests) == 1 and llm.refused_params == set()
    await llm.close()


# --- replies with no text -------------------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_a_reply_that_is_all_reasoning_is_an_error_not_an_empty_answer(server, field):
    """vLLM's reasoning parser with thinking turned off (or a model that never closes
    </think>) returns content null and the whole reply as reasoning."""
    server.respond = lambda p, b: (200, chat(None, **{field: "The director is Nolan. ANSWER: Nolan"}), {})
    llm = client(server)
    with pytest.raises(LLMError, match=rf"no content, only reasoning \(message.{field}.*reasoning-parser"):
        await llm.generate("q")
    await llm.close()


async def test_reasoning_beside_the_content_is_left_out(server):
    server.respond = lambda p, b: (200, chat("Nolan", reasoning="Let me think."), {})
    llm = client(server)
    assert (await llm.generate("q")).texts == ["Nolan"]
    await llm.close()


# --- scoring: log-probabilities missing, null, or shaped differently -------------------

ECHO_TOKENS = ["1", ",", " 2", ",", " 3", ",", " 4", ",", " 5", ",", " 6", ",", " 7", ",", " 8", "\n"]


def completions(logprobs: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": "\n", "logprobs": logprobs, "finish_reason": "length"}],
            "usage": {"prompt_tokens": len(ECHO_TOKENS) - 1, "completion_tokens": 1}}


LOGPROBS = [
    ("missing", {"choices": [{"index": 0, "text": "\n", "finish_reason": "length"}]}, False),
    ("null", completions(None), False),
    ("chat-content-null", completions({"content": None}), False),
    ("generated-only", completions({"tokens": ["\n"], "token_logprobs": [-0.1]}), False),
    ("no-top_logprobs", completions({"tokens": ECHO_TOKENS, "token_logprobs": [None] + [-0.01] * 15}), True),
    ("chat-format", completions({"content": [{"token": t, "logprob": -0.01} for t in ECHO_TOKENS]}), True),
]


@pytest.mark.parametrize("reply,scores", [c[1:] for c in LOGPROBS], ids=[c[0] for c in LOGPROBS])
async def test_logprobs_of_any_shape_score_or_fall_back_to_sampling(server, reply, scores):
    server.respond = lambda p, b: (200, reply if p.endswith("/completions") and "prompt" in b else chat("ok"), {})
    llm = client(server, completion_template="chatml")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert await llm.probe_scoring() is scores
    assert llm.can_score is scores
    if not scores:
        [w] = seen
        assert issubclass(w.category, TraversalsWarning) and "sampled decoding instead" in str(w.message)
        assert str(w.message).count("openai:m") == 1  # the name said once, not nested
        with pytest.raises(ScoringNotSupported):
            await llm.score("q", ["a"])
    assert (await llm.generate("q")).texts == ["ok"]  # generation works either way
    await llm.close()


async def test_constrained_decoding_without_a_template_says_which_flag_is_missing(server):
    llm = client(server)
    assert "--llm-template" in llm.scoring_reason and "chatml" in llm.scoring_reason
    with pytest.raises(ScoringNotSupported, match="--llm-template"):
        await llm.score("q", ["a"])
    assert server.requests == []
    await llm.close()


async def test_a_probe_refused_by_status_still_falls_back_to_sampling(server):
    """A gateway may refuse /completions (403) and serve /chat/completions."""
    server.respond = lambda p, b: (403, error("endpoint not allowed"), {}) if p.endswith("/v1/completions") else \
        (200, chat("ok"), {})
    llm = client(server, completion_template="chatml")
    with pytest.warns(TraversalsWarning, match="HTTP 403: endpoint not allowed"):
        assert await llm.probe_scoring() is False
    assert (await llm.generate("q")).texts == ["ok"]
    await llm.close()


PROBE_DOWN = [
    ("503-loading", (503, error("model is loading"), {}), LLMUnavailable, "model is loading"),
    ("429", (429, error("Rate limit reached"), {}), LLMUnavailable, "gave up after 3 attempts"),
    ("no-answer", (200, None, {}), LLMUnavailable, "cannot reach"),
    ("no-such-model", (400, error("The model `m` does not exist."), {}), LLMUnavailable, "check the model name"),
]


@pytest.mark.parametrize("reply,cls,says", [c[1:] for c in PROBE_DOWN], ids=[c[0] for c in PROBE_DOWN])
async def test_a_probe_of_a_server_that_cannot_answer_now_raises_instead_of_sampling(server, reply, cls, says):
    """A server still loading its model said "cannot score", and a whole eval run was sampled."""
    server.respond = lambda p, b: (reply[0], reply[1], dict(reply[2]))
    llm = client(server, completion_template="chatml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "sampled decoding instead" warning either
        with pytest.raises(cls, match=says):
            await llm.probe_scoring()
    assert llm.can_score is False and llm.scoring_reason == NOT_PROBED
    await llm.close()


async def test_a_probe_that_runs_out_of_time_raises_the_timeout(server):
    import time

    from traversals.errors import LLMTimeout

    server.respond = lambda p, b: (time.sleep(0.5), (200, chat("ok"), {}))[1]
    llm = client(server, completion_template="chatml", timeout=0.1)
    with pytest.raises(LLMTimeout, match="timed out"):
        await llm.probe_scoring()
    assert llm.can_score is False
    await llm.close()


PROBE_CANNOT_SCORE = [
    ("400-echo", (400, error("echo is not supported with logprobs"), {}), "HTTP 400: echo is not supported"),
    ("422", (422, {"detail": [{"msg": "extra fields not permitted", "loc": ["body", "echo"]}]}, {}), "HTTP 422"),
    ("404", (404, error("Not Found"), {}), "no /completions endpoint (HTTP 404)"),
    ("error-in-200", (200, error("model overloaded, try later", type="server_error"), {}),
     "the server answered with an error: model overloaded, try later"),
    ("not-json", (200, "OK", {}), "returned non-JSON"),
    # llama.cpp's llama-server refuses echo with a 500 (a runtime_error), not a 4xx
    ("llama-server-500", (500, {"error": {"code": 500, "message": "Only no echo is supported", "type": "server_error"}},
                          {}), "HTTP 500: Only no echo is supported"),
    ("501", (501, error("Not Implemented"), {}), "HTTP 501"),
    # a gateway whose key is good for chat only: /completions refused with a 401/403 that names
    # nothing unsupported is no outage, as the chat request after it shows
    ("401-completions", (401, error("Unauthorized"), {}), "HTTP 401: Unauthorized"),
    ("403-chat-only", (403, error("this key may call chat completions only"), {}), "HTTP 403: this key may call"),
]


@pytest.mark.parametrize("reply,says", [c[1:] for c in PROBE_CANNOT_SCORE], ids=[c[0] for c in PROBE_CANNOT_SCORE])
async def test_a_probe_refused_or_answered_in_another_shape_falls_back_to_sampling(server, reply, says):
    server.respond = lambda p, b: (reply[0], reply[1], dict(reply[2])) if p.endswith("/v1/completions") else \
        (200, chat("ok"), {})
    llm = client(server, completion_template="chatml")
    with pytest.warns(TraversalsWarning, match="sampled decoding instead"):
        assert await llm.probe_scoring() is False
    assert says in llm.scoring_reason
    assert (await llm.generate("q")).texts == ["ok"]
    await llm.close()


def test_a_model_name_written_after_a_space_is_the_model():
    from traversals.llm.factory import open_llm

    llm = open_llm("openai: qwen2.5:7b ", url="http://127.0.0.1:9/v1")
    assert llm.model == "qwen2.5:7b" and llm.name == "openai:qwen2.5:7b"


def test_a_url_where_the_model_name_belongs_says_where_the_url_goes():
    from traversals.errors import BadInput
    from traversals.llm.factory import open_llm

    with pytest.raises(BadInput, match=r"takes the served model's name.*--llm-url http://127.0.0.1:8000/v1"):
        open_llm("openai:http://127.0.0.1:8000/v1", url="http://127.0.0.1:9/v1")


def test_one_llm_serves_one_asyncio_run_after_another() -> None:
    """A library user's script calling asyncio.run per question: the kept-alive connection
    of the first run belonged to its closed loop ("Event loop is closed" on the second)."""
    import asyncio

    server = Server(keep_alive=True)
    try:
        llm = client(server)
        texts = [asyncio.run(llm.generate("hello", max_tokens=4)).texts for _ in range(3)]
        asyncio.run(llm.close())  # in yet another loop: no error
    finally:
        server.stop()
    assert texts == [["ok"]] * 3 and len(server.requests) == 3


def test_max_concurrency_holds_across_threads_each_running_its_own_loop() -> None:
    """One LLM shared by threads that each run asyncio.run: each loop got a semaphore of its
    own, so 4 threads with max_concurrency=2 had 8 requests in flight at the server."""
    import asyncio
    import time

    server = Server(keep_alive=True)
    in_flight, peak, guard = [0], [0], threading.Lock()

    def respond(path: str, body: dict[str, Any]) -> Reply:
        with guard:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.02)  # long enough for the threads' requests to meet
        with guard:
            in_flight[0] -= 1
        return 200, chat("ok"), {}

    server.respond = respond
    llm = client(server, max_concurrency=2)
    answers: list[list[str]] = []

    async def burst() -> None:
        replies = await asyncio.gather(*(llm.generate(f"q{i}", max_tokens=4) for i in range(5)))
        answers.extend(r.texts for r in replies)

    try:
        threads = [threading.Thread(target=asyncio.run, args=(burst(),)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        asyncio.run(llm.close())
    finally:
        server.stop()
    assert answers == [["ok"]] * 20
    assert peak[0] <= 2, f"{peak[0]} requests in flight with max_concurrency=2"


def test_one_llm_over_many_asyncio_runs_leaves_no_connection_open() -> None:
    """Each asyncio.run's client was dropped unclosed when the next loop made its own: its
    kept-alive connection stayed open until a garbage collection ("ResourceWarning: unclosed
    transport", a file descriptor each). Each is closed as its loop shuts down."""
    import asyncio
    import gc

    server = Server(keep_alive=True)
    try:
        llm = client(server)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            texts = [asyncio.run(llm.generate("hello", max_tokens=4)).texts for _ in range(5)]
            gc.collect()
        unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        asyncio.run(llm.close())
    finally:
        server.stop()
    assert texts == [["ok"]] * 5
    assert unclosed == []


async def test_a_reply_quoting_the_key_or_a_bare_bearer_token_shows_neither(server: Server) -> None:
    server.respond = lambda path, body: (200, {"detail": "invalid api key sk-test-SECRET-123"}, {})
    llm = client(server, api_key="sk-test-SECRET-123")
    with pytest.raises(LLMError) as e:
        await llm.generate("q")
    assert "SECRET" not in str(e.value) and "invalid api key ***" in str(e.value)
    await llm.close()
    server.respond = lambda path, body: (401, error("token tok-ABCDEFGH-999 is expired"), {})
    llm = client(server, api_key=None, headers={"Authorization": "Bearer tok-ABCDEFGH-999"})
    with pytest.raises(LLMError) as e:
        await llm.generate("q")
    assert "tok-ABCDEFGH" not in str(e.value) and "token *** is expired" in str(e.value)
    await llm.close()
