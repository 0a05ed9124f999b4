"""``--embedder openai:MODEL``: the client of OpenAI-compatible ``/embeddings`` endpoints
against fake servers (an httpx.MockTransport for the protocol, a stdlib HTTP server on
127.0.0.1 for real sockets), its spec and flags, and how its failures reach the eval runner
and the HTTP service. The real llama.cpp server: tests/integration/test_embedder.py."""

from __future__ import annotations

import argparse
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from traversals.embed import EMBEDDER_FORMS, OpenAIEmbedder, cosine, open_embedder
from traversals.errors import BadInput, EmbedderError, EmbedderUnavailable
from traversals.kg.base import Entity
from traversals.search.rwt import CriticalModel
from traversals.search.rwt.state import PathNode

URL = "http://emb.test/v1"


def vector_of(text: str) -> list[float]:
    """A deterministic 3-d vector per text (the fake server's model)."""
    return [float(len(text)), float(sum(map(ord, text)) % 7), 1.0]


class FakeServer:
    """Records requests; ``respond(request, body)`` returns an httpx.Response."""

    def __init__(self, respond=None):
        self.respond = respond or (
            lambda request, body: httpx.Response(200, json=reply(body["input"]))
        )
        self.requests: list[dict] = []
        self.headers: list[httpx.Headers] = []
        self.paths: list[str] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        self.requests.append(body)
        self.headers.append(request.headers)
        self.paths.append(request.url.path)
        return self.respond(request, body)


def reply(texts, *, order=None, vectors=None):
    """An OpenAI-shaped reply for ``texts``; ``order`` lists the indices in reply order."""
    vectors = vectors or [vector_of(t) for t in texts]
    order = order if order is not None else range(len(texts))
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": vectors[i]} for i in order
        ],
        "model": "emb",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }


class Sleeps:
    def __init__(self):
        self.delays: list[float] = []

    async def __call__(self, d: float) -> None:
        self.delays.append(d)


def make(server: FakeServer, **kw) -> tuple[OpenAIEmbedder, Sleeps]:
    sleeps = Sleeps()
    kw.setdefault("api_key", "sk-test")
    return OpenAIEmbedder(
        URL, "emb", transport=httpx.MockTransport(server.handler), sleep=sleeps, **kw
    ), sleeps


# --- the request and the reply's order ------------------------------------------------


async def test_vectors_come_back_in_input_order_by_index():
    texts = ["Bob Dylan", "Robert Allen Zimmerman", "The Gumball Rally"]
    server = FakeServer(
        lambda r, b: httpx.Response(200, json=reply(b["input"], order=[2, 0, 1]))
    )
    async with make(server)[0] as emb:
        assert emb.name == "openai:emb"
        vectors = await emb.embed(texts)
    assert vectors == [vector_of(t) for t in texts]
    assert server.paths == ["/v1/embeddings"]
    assert server.requests == [{"model": "emb", "input": texts}]
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert emb.dimensions == 3


async def test_a_reply_without_indices_keeps_its_order():
    def respond(request, body):
        return httpx.Response(
            200, json={"data": [{"embedding": vector_of(t)} for t in body["input"]]}
        )

    emb, _ = make(FakeServer(respond))
    assert await emb.embed(["a", "bb"]) == [vector_of("a"), vector_of("bb")]
    await emb.aclose()


async def test_vectors_are_returned_as_the_server_gives_them():
    """No normalisation: the cosine divides by the norms itself."""
    big = [[3.0, 4.0], [30.0, 40.0], [0.0, -2.0]]
    emb, _ = make(
        FakeServer(
            lambda r, b: httpx.Response(200, json=reply(b["input"], vectors=big))
        )
    )
    a, b, c = await emb.embed(["x", "y", "z"])
    assert (a, b, c) == (big[0], big[1], big[2])
    assert cosine(a, b) == pytest.approx(1.0) and cosine(a, c) == pytest.approx(-0.8)
    await emb.aclose()


async def test_long_inputs_are_batched_and_reassembled_in_order():
    texts = [f"text {i}" for i in range(7)]
    server = FakeServer(
        lambda r, b: httpx.Response(
            200, json=reply(b["input"], order=range(len(b["input"]))[::-1])
        )
    )
    emb, _ = make(server, batch_size=3)
    assert await emb.embed(texts) == [vector_of(t) for t in texts]
    assert sorted(len(b["input"]) for b in server.requests) == [1, 3, 3]
    assert sorted(t for b in server.requests for t in b["input"]) == sorted(texts)
    assert await emb.embed([]) == [] and len(server.requests) == 3  # nothing to ask
    await emb.aclose()


async def test_the_tokens_an_endpoint_reports_count_in_the_searchs_usage():
    """An endpoint's embeddings cost money: each reply's ``usage`` counts in the search's
    ``embedding_tokens``, the calls and texts in ``embedder_calls`` and ``embedded_texts``."""
    from traversals.api import SearchConfig, build_solver
    from traversals.embed import embed_counted
    from traversals.kg.factory import open_kgs
    from traversals.llm.base import Usage

    from .test_rwt import QUESTION, llm

    def respond(request, body):
        got = reply(body["input"])
        got["usage"] = {"prompt_tokens": 10 * len(body["input"]), "total_tokens": 10 * len(body["input"])}
        return httpx.Response(200, json=got)

    server = FakeServer(respond)
    emb, _ = make(server, batch_size=2)
    usage = Usage()
    await embed_counted(emb, ["a", "b", "c"], usage)  # two requests: 2 texts and 1
    assert (usage.embedder_calls, usage.embedded_texts, usage.embedding_tokens) == (1, 3, 30)
    assert usage.to_json()["embedding_tokens"] == 30
    await emb.embed(["d"])  # outside a search's call: counted nowhere
    answer = await build_solver("beam", llm(), open_kgs(["demo"]), SearchConfig(max_hops=2), embedder=emb).ask(
        QUESTION, topic_entities=["Bob Dylan"])
    sent = sum(len(b["input"]) for b in server.requests[3:])  # the search's requests (after 2 + 1)
    assert answer.text == "Florence Stone" and answer.usage.embedding_tokens == 10 * sent > 0
    assert answer.usage.embedded_texts == sent  # no empty label here
    # a server that reports no usage counts calls and texts, no token
    plain, _ = make(FakeServer(lambda r, b: httpx.Response(200, json={"data": reply(b["input"])["data"]})))
    usage = Usage()
    await embed_counted(plain, ["a", "b"], usage)
    assert (usage.embedder_calls, usage.embedded_texts, usage.embedding_tokens) == (1, 2, 0)
    assert "embedding_tokens" not in usage.to_json()
    await emb.aclose()
    await plain.aclose()


async def test_empty_texts_are_not_sent_and_get_zero_vectors():
    server = FakeServer()
    emb, _ = make(server)
    vectors = await emb.embed(["", "Paris", "  "])
    assert server.requests == [
        {"model": "emb", "input": ["Paris"]}
    ]  # OpenAI refuses empty strings
    assert vectors == [[0.0, 0.0, 0.0], vector_of("Paris"), [0.0, 0.0, 0.0]]
    assert cosine(vectors[0], vectors[1]) == 0.0
    await emb.aclose()


async def test_token_vectors_are_mean_pooled_and_then_asked_one_text_a_request():
    """llama-cpp-python's server gives a model without pooling one vector per token, and
    misplaces those of every input but the first: such texts are asked again one by one."""
    tokens = {"car": [[1.0, 3.0]], "red car": [[2.0, 0.0], [4.0, 2.0]]}

    def respond(request, body):
        texts = body["input"]
        rows = [
            tokens[t] if k == 0 else [[9.0, 9.0]] for k, t in enumerate(texts)
        ]  # wrong after the first
        return httpx.Response(
            200,
            json={"data": [{"index": k, "embedding": r} for k, r in enumerate(rows)]},
        )

    server = FakeServer(respond)
    emb, _ = make(server)
    assert await emb.embed(["car", "red car"]) == [[1.0, 3.0], [3.0, 1.0]]
    assert emb.one_per_request
    assert [b["input"] for b in server.requests] == [
        ["car", "red car"],
        ["car"],
        ["red car"],
    ]
    server.requests.clear()
    assert await emb.embed(["red car", "car"]) == [[3.0, 1.0], [1.0, 3.0]]
    assert sorted(b["input"] for b in server.requests) == [
        ["car"],
        ["red car"],
    ]  # straight to one a request
    await emb.aclose()


# --- replies that are not vectors ------------------------------------------------------


@pytest.mark.parametrize(
    "body, message",
    [
        ({"object": "error"}, "no 'data' list of vectors"),
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}]}, "1 vectors in the reply for 2 texts"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}, "indices [0, 0] are not 0..1"),
        ({"data": [{"index": 0, "embedding": [1.0, "x"]}, {"index": 1, "embedding": [2.0, 1.0]}]},
         'vector 0 holds "x", not a finite number'),
        ({"data": [{"index": 0, "embedding": [1.0, True]}, {"index": 1, "embedding": [2.0, 1.0]}]},
         "vector 0 holds true, not a finite number"),
        ({"data": [{"index": 0, "embedding": [1.0, 1.0]}, {"index": 1, "embedding": "AACAPwAAAEA="}]},
         'vector 1 is not a list of numbers ("AACAPwAAAEA=")'),
        ({"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": [2.0]}]}, "vector 0 is not a list of numbers"),
        ({"data": [{"index": 0}, {"index": 1, "embedding": [2.0]}]}, "vector 0 is not a list of numbers (null)"),
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [2.0]}]},
         "vectors of different lengths ([1, 2])"),
        ({"data": ["x", "y"]}, "'data' holds something other than objects"),
    ],
)  # fmt: skip
async def test_a_reply_without_usable_vectors_is_a_named_one_line_error(body, message):
    emb, _ = make(FakeServer(lambda r, b: httpx.Response(200, json=body)))
    with pytest.raises(EmbedderError) as ei:
        await emb.embed(["first", "second"])
    assert message in str(ei.value) and not isinstance(ei.value, EmbedderUnavailable)
    assert "\n" not in str(ei.value) and str(ei.value).startswith(
        f"openai:emb: {URL}/embeddings"
    )
    await emb.aclose()


async def test_non_finite_numbers_and_a_changed_dimension_are_errors():
    emb, _ = make(
        FakeServer(
            lambda r, b: httpx.Response(
                200, text='{"data": [{"index": 0, "embedding": [NaN]}]}'
            )
        )
    )
    with pytest.raises(EmbedderError, match="holds NaN, not a finite number"):
        await emb.embed(["x"])
    await emb.aclose()
    dims = iter([2, 3])
    emb, _ = make(
        FakeServer(
            lambda r, b: httpx.Response(
                200, json=reply(b["input"], vectors=[[1.0] * next(dims)])
            )
        )
    )
    await emb.embed(["x"])
    with pytest.raises(
        EmbedderError, match=r"different lengths \(\[2, 3\]\)"
    ):  # the served model changed
        await emb.embed(["y"])
    await emb.aclose()


# --- HTTP failures: the LLM client's plumbing ------------------------------------------


async def test_unauthorised_says_check_the_api_key():
    server = FakeServer(
        lambda r, b: httpx.Response(
            401, json={"error": {"message": "Incorrect API key provided"}}
        )
    )
    emb, sleeps = make(server)
    with pytest.raises(
        EmbedderUnavailable,
        match=r"HTTP 401: Incorrect API key provided \(check the API key\)",
    ):
        await emb.embed(["x"])
    assert len(server.requests) == 1 and sleeps.delays == []
    await emb.aclose()


async def test_busy_server_is_retried_honouring_retry_after_then_gives_up_with_its_message():
    replies = iter(
        [
            httpx.Response(429, headers={"Retry-After": "2"}),
            httpx.Response(200, json=reply(["x"])),
        ]
    )
    emb, sleeps = make(FakeServer(lambda r, b: next(replies)))
    assert await emb.embed(["x"]) == [vector_of("x")]
    assert sleeps.delays == [2.0]
    await emb.aclose()
    server = FakeServer(
        lambda r, b: httpx.Response(
            500, json={"error": {"message": "model not loaded"}}
        )
    )
    emb, sleeps = make(server, max_retries=2)
    with pytest.raises(
        EmbedderUnavailable, match=r"HTTP 500: model not loaded \(gave up after 3 attempts\)"
    ):
        await emb.embed(["x"])
    assert len(server.requests) == 3 and len(sleeps.delays) == 2
    await emb.aclose()


async def test_a_model_that_does_not_embed_is_an_error_with_the_servers_words():
    server = FakeServer(
        lambda r, b: httpx.Response(
            400, json={"error": {"message": "model does not support embeddings"}}
        )
    )
    emb, _ = make(server)
    with pytest.raises(
        EmbedderError, match="HTTP 400: model does not support embeddings"
    ):
        await emb.embed(["x"])
    await emb.aclose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_nothing_listening_is_unavailable():
    port = free_port()
    emb = OpenAIEmbedder(
        f"http://127.0.0.1:{port}/v1", "emb", max_retries=1, backoff_base=0.01
    )
    with pytest.raises(
        EmbedderUnavailable,
        match=rf"cannot reach http://127.0.0.1:{port}/v1/embeddings after 2 attempts",
    ):
        await emb.embed(["x"])
    await emb.aclose()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.server.seen.append((self.path, self.headers.get("authorization"), body))  # type: ignore[attr-defined]
        payload = json.dumps(
            reply(body["input"], order=range(len(body["input"]))[::-1])
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *a):
        pass


@pytest.fixture
def http_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.seen = []  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


async def test_real_socket_roundtrip_through_the_factory_and_the_critical_model(
    http_server,
):
    url = f"http://127.0.0.1:{http_server.server_address[1]}/v1/"
    emb = open_embedder("openai:emb", url=url, api_key="sk-real")
    assert isinstance(emb, OpenAIEmbedder) and emb.base_url == url.rstrip("/")
    try:
        assert await emb.embed(["a", "bcd"]) == [vector_of("a"), vector_of("bcd")]
        critical = CriticalModel(emb)
        same = PathNode(1, (Entity("x", "Bob Dylan"),))
        other = PathNode(2, (Entity("y", "Gumball"),))
        assert await critical.value(["Bob Dylan"], same) == pytest.approx(1.0)
        assert await critical.value(["Bob Dylan"], other) < 0.99
    finally:
        await emb.aclose()
    assert http_server.seen[0] == (
        "/v1/embeddings",
        "Bearer sk-real",
        {"model": "emb", "input": ["a", "bcd"]},
    )


# --- the spec, the flags, the recorded command line ------------------------------------


def test_factory_openai_form_and_its_errors():
    assert any(f.startswith("openai:MODEL") for f in EMBEDDER_FORMS)
    with pytest.raises(BadInput, match="openai:MODEL"):
        open_embedder("word2vec")  # the forms listed include the new one
    with pytest.raises(BadInput) as ei:
        open_embedder("openai:nomic-embed-text")
    assert (
        "--embedder-url" in str(ei.value)
        and "--llm-url" in str(ei.value)
        and "OPENAI_BASE_URL" in str(ei.value)
    )
    with pytest.raises(BadInput, match="model's name"):
        open_embedder("openai:", url=URL)
    with pytest.raises(BadInput, match="http"):
        open_embedder("openai:m", url="localhost:8000/v1")


def test_a_url_where_the_embedding_model_name_belongs_says_where_the_url_goes():
    with pytest.raises(BadInput, match=r"takes the embedding model's name.*--embedder-url https://emb.example/v1"):
        open_embedder("openai:https://emb.example/v1", url=URL)


async def test_factory_keeps_colons_in_model_names():
    emb = open_embedder("openai:nomic-embed-text:latest", url=URL, timeout=7)
    assert (
        emb.name == "openai:nomic-embed-text:latest"
        and emb.model == "nomic-embed-text:latest"
    )
    assert emb.timeout == 7
    await emb.aclose()


def parser() -> argparse.ArgumentParser:
    from traversals.options import add_llm_flags, add_value_flags

    p = argparse.ArgumentParser()
    add_llm_flags(p)
    add_value_flags(p)
    return p


@pytest.mark.parametrize(
    "argv, environ, url, key",
    [
        (["--embedder-url", "http://e/v1", "--embedder-api-key", "k1", "--llm-url", "http://l/v1"],
         {"OPENAI_BASE_URL": "http://env/v1", "OPENAI_API_KEY": "k0"}, "http://e/v1", "k1"),
        (["--llm-url", "http://l/v1"], {"OPENAI_BASE_URL": "http://env/v1", "OPENAI_API_KEY": "k0"}, "http://l/v1", "k0"),
        ([], {"OPENAI_BASE_URL": "http://env/v1"}, "http://env/v1", None),
    ],
)  # fmt: skip
async def test_embedder_url_and_key_default_to_the_llms(argv, environ, url, key):
    from traversals.options import open_embedder_from_args

    args = parser().parse_args(
        ["--embedder", "openai:emb", "--llm-timeout", "9", *argv]
    )
    emb = open_embedder_from_args(args, environ=environ)
    assert (
        isinstance(emb, OpenAIEmbedder) and emb.base_url == url and emb.timeout == 9.0
    )
    assert emb._http._headers.get("authorization") == (
        f"Bearer {key}" if key else None
    )
    await emb.aclose()


@pytest.mark.parametrize("embedder", [[], ["--embedder", "lexical"], ["--embedder", "sbert:/models/mini"]])
@pytest.mark.parametrize("flag", [["--embedder-url", "http://e/v1"], ["--embedder-api-key", "k1"],
                                  ["--embedder-header", "api-key: k1"]])
def test_endpoint_flags_with_an_embedder_run_in_this_process_are_refused(embedder, flag):
    """They would be ignored in silence, and a run recorded as if its embedder used them."""
    from traversals.options import refuse_unused_llm_flags

    with pytest.raises(BadInput, match=f"{flag[0]} is for an embeddings endpoint: it goes with --embedder openai:MODEL") as e:
        refuse_unused_llm_flags(parser().parse_args([*embedder, *flag]), {})
    assert f"--embedder {embedder[1] if embedder else 'sbert'} runs in this process" in str(e.value)
    refuse_unused_llm_flags(parser().parse_args(["--embedder", "openai:emb", *flag]), {})  # its endpoint's: accepted


def test_embedder_flags_without_a_url_say_which_flag_to_pass():
    from traversals.options import open_embedder_from_args

    with pytest.raises(BadInput, match="pass --embedder-url"):
        open_embedder_from_args(
            parser().parse_args(["--embedder", "openai:emb"]), environ={}
        )
    # the other forms ignore the URL flags
    lexical = open_embedder_from_args(
        parser().parse_args(["--embedder", "lexical"]), environ={}
    )
    assert lexical.name == "lexical"
    assert (
        open_embedder_from_args(parser().parse_args([]), environ={}).name
        == "sbert:all-minilm-l6-v2"
    )


def test_api_keys_are_redacted_from_recorded_command_lines():
    from traversals.options import redact_secrets

    argv = ["traversals", "eval", "--embedder-api-key", "sk-1", "--embedder-api-key=sk-2", "--embedder-a", "sk-3",
            "--embedder-api=sk-4", "--embedder", "openai:m", "--embedder-url", "http://x/v1"]  # fmt: skip
    assert redact_secrets(argv) == [
        "traversals", "eval", "--embedder-api-key", "***", "--embedder-api-key=***", "--embedder-a", "***",
        "--embedder-api=***", "--embedder", "openai:m", "--embedder-url", "http://x/v1",
    ]  # fmt: skip
    # argparse takes an abbreviation of the flag, so the redaction does too
    args = parser().parse_args(["--embedder-a", "sk-3"])
    assert args.embedder_api_key == "sk-3"


# --- failures reach the runner and the service as the other back ends' do -------------


async def test_an_unreachable_endpoint_stops_an_evaluation_and_is_a_503(tmp_path):
    from traversals.eval.datasets import Dataset, Gold, Question
    from traversals.eval.runner import ABORT_ERRORS, run_eval
    from traversals.service import status_for

    assert issubclass(EmbedderUnavailable, ABORT_ERRORS)
    emb = OpenAIEmbedder(f"http://127.0.0.1:{free_port()}/v1", "emb", max_retries=0)

    class Solver:
        name = "rwt"

        async def ask(self, question, *, topic_entities=None):
            await CriticalModel(emb).value(
                ["guess"], PathNode(1, (Entity("x", "label"),))
            )

    dataset = Dataset(
        name="toy",
        split="dev",
        questions=[Question(id="toy:dev:0", text="Who?", gold=[Gold.from_json("A")])],
    )
    with pytest.raises(EmbedderUnavailable, match="cannot reach"):
        await run_eval(dataset, Solver(), tmp_path / "run", progress=False)
    await emb.aclose()
    assert status_for(EmbedderUnavailable("down")) == 503
    assert status_for(EmbedderError("bad reply")) == 502


async def test_the_service_and_close_all_close_the_embedder():
    from contextlib import asynccontextmanager

    from traversals.api import close_all
    from traversals.llm.scripted import ScriptedLLM
    from traversals.service import create_app

    class FakeKG:
        name = "demo"

        async def close(self):
            pass

    emb = OpenAIEmbedder(
        URL, "emb", transport=httpx.MockTransport(FakeServer().handler)
    )
    app = create_app(ScriptedLLM([]), [FakeKG()], embedder=emb)

    @asynccontextmanager
    async def serving():
        async with app.router.lifespan_context(app):
            yield

    async with serving():
        served = await emb._http._clients.get()  # the client requests go out on in this loop
        assert not served.is_closed
    assert served.is_closed
    other = OpenAIEmbedder(URL, "emb")
    used = await other._http._clients.get()
    await close_all(ScriptedLLM([]), [], other)
    assert used.is_closed


def test_cli_eval_rwt_records_the_embedder_spec_and_url_never_the_key(
    tmp_path, monkeypatch, capsys
):
    import traversals.kg.factory as kg_factory
    import traversals.llm.factory as llm_factory
    from traversals import api
    from traversals.cli import main

    from .test_runner import SHARED_DATA, Closable, FakeSolver

    if not (SHARED_DATA / "metaqa").is_dir():
        pytest.skip("../shared/data not present")
    embedders = []

    def build_solver(strategy, llm, kgs, config=None, *, embedder=None, **kw):
        embedders.append(embedder)
        return FakeSolver(answers={}, raises={})

    monkeypatch.setattr(
        llm_factory, "open_llm", lambda spec="local", **kw: Closable("llm")
    )
    monkeypatch.setattr(kg_factory, "open_kg", lambda spec, **kw: Closable("kg"))
    monkeypatch.setattr(api, "build_solver", build_solver)
    closed = []
    aclose = OpenAIEmbedder.aclose

    async def recorded_aclose(self):
        closed.append(self)
        await aclose(self)

    monkeypatch.setattr(OpenAIEmbedder, "aclose", recorded_aclose)
    monkeypatch.setattr(OpenAIEmbedder, "close", recorded_aclose)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = tmp_path / "e"
    args = ["eval", "metaqa-1hop", "--data", str(SHARED_DATA / "metaqa"), "--limit", "2", "--strategy", "beam",
            "--out", str(out), "--no-progress", "--embedder", "openai:nomic-embed-text",
            "--embedder-url", "http://127.0.0.1:9/v1/", "--embedder-api-key", "sk-flag-secret"]  # fmt: skip
    monkeypatch.setattr("sys.argv", ["traversals", *args])
    assert main(args) == 0
    [emb] = embedders
    assert isinstance(emb, OpenAIEmbedder) and emb.base_url == "http://127.0.0.1:9/v1"
    assert emb._http._headers["authorization"] == "Bearer sk-flag-secret"
    assert closed == [emb]  # closed with the LLM and the KG
    text = (out / "run.json").read_text()
    run = json.loads(text)
    assert (
        run["embedder"] == "openai:nomic-embed-text"
        and run["embedder_url"] == "http://127.0.0.1:9/v1"
    )
    assert "sk-flag-secret" not in text and "sk-env-secret" not in text, [
        l for l in text.splitlines() if "secret" in l
    ]
    assert "--embedder-api-key '***'" in run["command"]
    # the embedder must match on resume, like the rest of the search's settings
    assert main([*args[:-6], "--embedder", "lexical", "--resume"]) == 2
    assert "embedder" in capsys.readouterr().err
    # a chain search has no critical model: --embedder is refused before anything is opened
    assert main(["eval", "metaqa-1hop", "--data", str(SHARED_DATA / "metaqa"), "--limit", "1", "--strategy", "chain",
                 "--out", str(tmp_path / "c"), "--no-progress", "--embedder", "openai:x"]) == 2  # fmt: skip
    assert "--embedder is used by --strategy mcts/beam/retrieve only" in capsys.readouterr().err
    assert embedders[1:] == [] and not (tmp_path / "c").exists()


@pytest.mark.parametrize("given", ["http://emb.test/v1/chat/completions", "http://emb.test/v1/embeddings/",
                                   "http://emb.test/v1"])
async def test_an_endpoint_path_in_the_url_is_cut_back_to_the_api_root_as_the_llms_is(given):
    """--embedder openai:MODEL at the LLM's URL given as .../v1/chat/completions posted to
    .../v1/chat/completions/embeddings (a 404); the LLM client cut it back, the embedder did not."""
    server = FakeServer()
    emb = OpenAIEmbedder(given, "emb", api_key="k", transport=httpx.MockTransport(server.handler), sleep=Sleeps())
    try:
        await emb.embed(["a"])
    finally:
        await emb.aclose()
    assert server.paths == ["/v1/embeddings"]
