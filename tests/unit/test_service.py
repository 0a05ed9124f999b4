"""The HTTP API (traversals.service) through Starlette's ASGI interface: request
validation, overrides reaching the solver, error statuses, the busy gate, the time budget,
start-up and shut-down. A fake solver stands in for the search; one test runs the real
solver factory (cot) with a scripted LLM. The real-model, real-socket path is in
tests/integration/test_service.py."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from contextlib import asynccontextmanager

from traversals.api import SearchConfig
from traversals.errors import KGQueryError, KGTimeout, KGUnavailable, LLMError, LLMTimeout
from traversals.kg.base import Edge, Entity, Relation
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.result import Answer
from traversals.service import ServiceLimits, create_app

EDGE = Edge(Entity("Q1", "Alpha", kg="demo"), Relation("P57", "director", kg="demo"), Entity("Q2", "Ann Lee", kg="demo"))


class FakeKG:
    name = "demo"

    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class FakeSolver:
    def __init__(self, strategy, config, *, raises=None, gate=None, started=None, on_event=None):
        self.name = strategy
        self.config = config
        self.raises = raises
        self.gate = gate
        self.started = started
        self.on_event = on_event
        self.asked = None

    async def ask(self, question, *, topic_entities=None):
        self.asked = (question, topic_entities)
        if self.on_event is not None:
            self.on_event({"event": "linked", "question": question, "entities": []})
            self.on_event({"event": "node", "id": 0, "parent": None, "state": "default"})
        if self.started is not None:
            self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.raises is not None:
            raise self.raises
        return Answer(
            question, "Ann Lee", value=0.9, supporting_edges=[EDGE], usage=Usage(llm_calls=3, kg_calls=2),
            seconds=0.5, decoding="constrained", strategy=self.name, trace={"nodes": [{"id": 0}]},
        )


class Factory:
    """Records the solvers it builds (strategy, config) and hands out FakeSolvers."""

    def __init__(self, **solver_kwargs) -> None:
        self.kwargs = solver_kwargs
        self.built: list[FakeSolver] = []

    def __call__(self, strategy, llm, kgs, config, *, on_event=None):
        solver = FakeSolver(strategy, config, on_event=on_event, **self.kwargs)
        self.built.append(solver)
        return solver


@asynccontextmanager
async def serving(app):
    """The app's start-up and shut-down around an HTTP client talking to it in-process."""
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            yield c


def client(factory=None, **kwargs):
    kwargs.setdefault("defaults", SearchConfig(k=None))
    return serving(create_app(ScriptedLLM([]), [FakeKG()], solver_factory=factory or Factory(), **kwargs))


async def test_ask_returns_the_answer_with_provenance_usage_and_decoding():
    factory = Factory()
    async with client(factory) as c:
        r = await c.post("/v1/ask", json={"question": "  Who directed Alpha? ", "topic_entities": ["Alpha"]})
    assert r.status_code == 200
    out = r.json()
    assert out["answer"] == "Ann Lee" and out["value"] == 0.9 and out["decoding"] == "constrained"
    assert out["supporting_edges"][0]["object"]["label"] == "Ann Lee" and out["supporting_edges"][0]["kg"] == "demo"
    assert out["llm_calls"] == 3 and out["kg_calls"] == 2 and out["strategy"] == "tree"
    assert "trace" not in out
    assert factory.built[0].asked == ("Who directed Alpha?", ["Alpha"])


async def test_request_overrides_reach_the_search_config_and_chain_is_k_1():
    factory = Factory()
    async with client(factory, defaults=SearchConfig(k=None, max_expansions=20, calibrate=1.0)) as c:
        r = await c.post("/v1/ask", json={"question": "q", "strategy": "tree", "k": 2, "max_expansions": 5,
                                    "threshold": 0.5, "seed": 7, "trace": True})
        assert r.status_code == 200 and r.json()["trace"] == {"nodes": [{"id": 0}]}
        assert (await c.post("/v1/ask", json={"question": "q", "strategy": "chain"})).status_code == 200
    tree, chain = factory.built
    assert (tree.name, tree.config.k, tree.config.max_expansions, tree.config.threshold, tree.config.seed) == (
        "tree", 2, 5, 0.5, 7)
    assert tree.config.calibrate == 1.0  # server defaults that the request does not name stay
    assert (chain.name, chain.config.k, chain.config.max_expansions) == ("chain", 1, 20)


@pytest.mark.parametrize(
    "body, says",
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"question": ""}', "'question'"),
        (b'{"question": "q", "qestion": "typo"}', "unknown field(s) qestion"),
        (b'{"question": "q", "strategy": "nope"}', "'strategy'"),
        (b'{"question": "q", "k": 0}', "between 1 and 8"),
        (b'{"question": "q", "k": true}', "'k' must be an integer"),
        (b'{"question": "q", "max_expansions": 1000000}', "between 1 and 100"),
        (b'{"question": "q", "threshold": 2}', "between 0 and 1"),
        (b'{"question": "q", "top_facts": 0}', "between 1 and 100"),
        (b'{"question": "q", "strategy": "mcts", "max_hops": 6}', "'max_hops' must be between 1 and 5"),
        (b'{"question": "q", "max_hops": "3"}', "'max_hops' must be an integer or null"),
        (b'{"question": "q", "strategy": "retrieve", "max_hops": 4}', "'max_hops' with retrieve is 1 to 3"),
        # a strategy's own range, not the general cap's "between 1 and 5" or "1 and 8"
        (b'{"question": "q", "strategy": "retrieve", "max_hops": 0}', "'max_hops' with retrieve is 1 to 3"),
        (b'{"question": "q", "strategy": "retrieve", "max_hops": 6}', "'max_hops' with retrieve is 1 to 3"),
        (b'{"question": "q", "strategy": "chain", "k": 3}', "k = 1"),
        (b'{"question": "q", "strategy": "chain", "k": 0}', "'chain' is the k = 1 search"),
        (b'{"question": "q", "strategy": "chain", "k": 9}', "'chain' is the k = 1 search"),
        (b'{"question": "q", "topic_entities": "Alpha"}', "list of non-empty strings"),
        (b'{"question": "q", "trace": "yes"}', "'trace'"),
        (b'{"question": "q", "stream": 1}', "'stream'"),
        (b'{"question": "who is \\ud800"}', "'question' is not valid Unicode"),
        (b'{"question": "q", "topic_entities": ["\\udfff"]}', "'topic_entities' is not valid Unicode"),
    ],
)
async def test_bad_requests_get_400_naming_the_problem(body, says):
    factory = Factory()
    async with client(factory) as c:
        r = await c.post("/v1/ask", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "BadInput" and says in r.json()["error"]["message"]
    assert factory.built == []  # nothing was searched


@pytest.mark.parametrize(
    "body, says",
    [
        ({"strategy": "tree", "simulations": 50}, "'simulations' is read by mcts, not by strategy tree"),
        ({"strategy": "cot", "k": 2}, "'k' is read by tree, chain, not by strategy cot"),
        ({"strategy": "mcts", "max_expansions": 5}, "'max_expansions' is read by tree, chain, not by strategy mcts"),
        ({"strategy": "beam", "threshold": 0.5, "seed": 3}, "'seed', 'threshold' are read by tree, chain"),
        ({"strategy": "tree", "top_facts": 5}, "'top_facts' is read by retrieve, not by strategy tree"),
        ({"strategy": "chain", "max_hops": 2}, "'max_hops' is read by mcts, beam, retrieve, not by strategy chain"),
    ],
)
async def test_a_setting_the_requested_strategy_does_not_read_is_refused_not_ignored(body, says):
    factory = Factory()
    async with client(factory) as c:
        r = await c.post("/v1/ask", json={"question": "q", **body})
    assert r.status_code == 400 and says in r.json()["error"]["message"], r.json()
    assert factory.built == []


async def test_a_setting_equal_to_the_servers_default_is_accepted_with_any_strategy():
    """A client that always sends the server's defaults (from /v1/info) is not refused."""
    factory = Factory()
    async with client(factory, defaults=SearchConfig(threshold=0.8, simulations=16)) as c:
        r = await c.post("/v1/ask", json={"question": "q", "strategy": "cot", "threshold": 0.8, "simulations": 16})
    assert r.status_code == 200
    # a default over 1 (serve --threshold 1.5: no early stop), sent back, was refused "between 0 and 1"
    async with client(Factory(), defaults=SearchConfig(threshold=1.5)) as c:
        info = (await c.get("/v1/info")).json()
        assert info["defaults"]["threshold"] == 1.5
        assert (await c.post("/v1/ask", json={"question": "q", "threshold": 1.5})).status_code == 200
        r = await c.post("/v1/ask", json={"question": "q", "threshold": 2})
        assert r.status_code == 400 and "'threshold' must be between 0 and 1.5" in r.json()["error"]["message"]


async def test_retrieve_and_rwt_sizes_are_set_per_request():
    factory = Factory()
    async with client(factory) as c:
        assert (await c.post("/v1/ask", json={"question": "q", "strategy": "retrieve", "top_facts": 3,
                                              "max_hops": 2})).status_code == 200
        assert (await c.post("/v1/ask", json={"question": "q", "strategy": "beam", "max_hops": 5})).status_code == 200
        # null is the server's default (what /v1/info shows when --max-hops was not given)
        assert (await c.post("/v1/ask", json={"question": "q", "strategy": "tree", "max_hops": None})).status_code == 200
        info = (await c.get("/v1/info")).json()
    retrieve, beam, tree = (s.config for s in factory.built)
    assert (retrieve.top_facts, retrieve.max_hops, beam.max_hops, tree.max_hops) == (3, 2, 5, None)
    assert info["defaults"]["max_hops"] is None and info["defaults"]["top_facts"] == 10
    assert info["limits"]["max_hops"] == 5 and info["limits"]["max_top_facts"] == 100


async def test_an_over_long_question_is_refused():
    async with client(limits=ServiceLimits(max_question_chars=10)) as c:
        r = await c.post("/v1/ask", json={"question": "x" * 11})
    assert r.status_code == 400 and "longer than 10" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    "exc, status",
    [
        (KGTimeout("SPARQL query timed out after 30 s"), 504),
        (KGUnavailable("connection refused: http://127.0.0.1:1/sparql"), 503),
        (KGQueryError("400 Bad Request"), 502),
        (LLMError("the model returned nothing"), 502),
        # a gateway timeout as a KG's is (docs/service.md): it was a 502, a failure
        (LLMTimeout("openai: the request timed out after 60 s (--llm-timeout)"), 504),
    ],
)
async def test_backend_failures_map_to_statuses_with_the_message(exc, status):
    async with client(Factory(raises=exc)) as c:
        r = await c.post("/v1/ask", json={"question": "q"})
    assert r.status_code == status
    assert r.json() == {"error": {"type": type(exc).__name__, "message": str(exc)}}


async def test_an_unexpected_error_is_a_500_without_internals():
    async with client(Factory(raises=RuntimeError("secret internals"))) as c:
        r = await c.post("/v1/ask", json={"question": "q"})
    assert r.status_code == 500 and "secret" not in r.text
    assert r.json()["error"]["type"] == "RuntimeError"


async def test_a_bug_in_the_llm_backend_is_a_502_naming_it_with_its_traceback_in_the_log(caplog):
    def reply(prompt, prefix, n, temperature):
        raise RuntimeError("boom in the user's backend")

    caplog.set_level("ERROR", logger="traversals.service")
    async with serving(create_app(ScriptedLLM(reply), [FakeKG()], default_strategy="cot")) as c:
        r = await c.post("/v1/ask", json={"question": "Who is Bob Dylan's mother?"})
        streamed = sse_events((await c.post("/v1/ask", json={"question": "q", "stream": True})).text)[-1]
    error = r.json()["error"]
    assert r.status_code == 502 and error["type"] == "LLMError" and "generate() raised RuntimeError" in error["message"]
    assert streamed[1]["status"] == 502 and streamed[1]["type"] == "LLMError"
    # the backend's own exception, with the lines that raised it, once for each request
    logged = [rec for rec in caplog.records if rec.exc_info]
    assert len(logged) == 2 and all(isinstance(rec.exc_info[1].__cause__, RuntimeError) for rec in logged)
    assert "RuntimeError: boom in the user's backend" in caplog.text and ", in reply" in caplog.text


async def test_a_backend_timeout_or_refusal_logs_no_traceback(caplog):
    caplog.set_level("DEBUG", logger="traversals.service")
    for wrapped, cause in ((KGTimeout("kg: timed out"), TimeoutError("slow")),
                           (LLMTimeout("llm: timed out"), TimeoutError("slow")),
                           (KGUnavailable("kg: refused"), ConnectionRefusedError("refused"))):
        wrapped.__cause__ = cause
        async with client(Factory(raises=wrapped)) as c:
            assert (await c.post("/v1/ask", json={"question": "q"})).status_code in (503, 504)
    assert "Traceback" not in caplog.text


async def test_info_and_health():
    async with client(default_strategy="chain") as c:
        assert (await c.get("/health")).json() == {"status": "ok"}
        info = (await c.get("/v1/info")).json()
        wrong_method, unknown = await c.get("/v1/ask"), await c.post("/v1/answer", json={})
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["type"] == "MethodNotAllowed"
    assert unknown.status_code == 404 and "POST /v1/ask" in unknown.json()["error"]["message"]
    assert info["llm"] == "scripted" and info["kgs"] == ["demo"] and info["default_strategy"] == "chain"
    assert info["strategies"] == ["tree", "chain", "cot", "mcts", "beam", "retrieve"] and info["limits"]["max_concurrency"] == 1


async def test_info_names_the_value_model_served_by_its_digest(tmp_path):
    """`/v1/info` showed the --value-model path as typed: after a retrain in place, which model the
    server had read could not be told."""
    from traversals.kg.factory import open_kgs
    from traversals.search.rwt import ValueModel

    path = ValueModel({"stop|bias": 1.0}, {"features": 1}).save(tmp_path / "m.json")
    model = ValueModel.load(path)
    app = create_app(ScriptedLLM([]), open_kgs(["demo"]), defaults=SearchConfig(value_model=str(path)))
    async with serving(app) as c:
        info = (await c.get("/v1/info")).json()
    assert info["defaults"]["value_model"] == str(path)
    assert (info["value_model_sha256"], info["value_model_digest"]) == (model.sha256, model.digest)


async def test_startup_prepares_the_llm_and_shutdown_closes_llm_and_kgs():
    prepared = []

    async def prepare(llm):
        prepared.append(llm)

    llm, kg = ScriptedLLM([]), FakeKG()
    closed = []

    async def close():
        closed.append(True)

    llm.close = close
    async with serving(create_app(llm, [kg], prepare=prepare, solver_factory=Factory())) as c:
        assert prepared == [llm] and not kg.closed
        await c.get("/health")
    assert kg.closed and closed == [True]


async def test_beyond_the_queue_a_request_gets_503_with_retry_after_and_the_first_still_answers():
    gate, started = asyncio.Event(), asyncio.Event()
    factory = Factory(gate=gate, started=started)
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=factory,
                     limits=ServiceLimits(max_concurrency=1, max_queue=0, retry_after=7))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        first = asyncio.create_task(c.post("/v1/ask", json={"question": "first"}))
        await asyncio.wait_for(started.wait(), 5)
        busy = await c.post("/v1/ask", json={"question": "second"})
        gate.set()
        done = await first
    assert busy.status_code == 503 and busy.headers["retry-after"] == "7"
    assert busy.json()["error"]["type"] == "Busy"
    assert done.status_code == 200 and done.json()["question"] == "first"
    assert [s.asked[0] for s in factory.built if s.asked] == ["first"]


async def test_waiting_requests_run_one_after_another_within_the_queue():
    gate, started = asyncio.Event(), asyncio.Event()
    factory = Factory(gate=gate, started=started)
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=factory,
                     limits=ServiceLimits(max_concurrency=1, max_queue=2))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        tasks = [asyncio.create_task(c.post("/v1/ask", json={"question": q})) for q in ("a", "b", "c")]
        await asyncio.wait_for(started.wait(), 5)
        await asyncio.sleep(0.05)
        running = [s.asked[0] for s in factory.built if s.asked]
        gate.set()
        replies = await asyncio.gather(*tasks)
    assert len(running) == 1  # one searched at a time, two waited
    assert sorted(r.json()["question"] for r in replies) == ["a", "b", "c"]


async def test_a_question_over_the_time_budget_gets_504():
    factory = Factory(gate=asyncio.Event())  # never released
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=factory, limits=ServiceLimits(timeout=0.05))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        r = await c.post("/v1/ask", json={"question": "slow"})
    assert r.status_code == 504 and r.json()["error"]["type"] == "RequestTimeout"
    assert "0.05 s" in r.json()["error"]["message"]


async def test_the_real_solver_factory_answers_with_cot_and_a_scripted_llm():
    llm = ScriptedLLM(rules=[("Bob Dylan", "Thought: his mother was Beatty Stone.\nANSWER: Florence Stone")])
    async with serving(create_app(llm, [FakeKG()], default_strategy="cot")) as c:
        r = await c.post("/v1/ask", json={"question": "Who is Bob Dylan's maternal grandmother?"})
    assert r.status_code == 200
    assert r.json()["answer"] == "Florence Stone" and r.json()["strategy"] == "cot" and r.json()["llm_calls"] == 1


def sse_events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


async def test_a_streamed_answer_sends_the_search_events_then_the_answer():
    async with client() as c:
        r = await c.post("/v1/ask", json={"question": "Who directed Alpha?", "stream": True, "trace": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert [name for name, _ in events] == ["linked", "node", "answer"]
    assert events[1][1]["id"] == 0
    final = events[-1][1]
    assert final["answer"] == "Ann Lee" and final["trace"] == {"nodes": [{"id": 0}]}


async def test_a_streamed_failure_ends_with_an_error_event_carrying_the_status():
    async with client(Factory(raises=KGTimeout("SPARQL query timed out after 30 s"))) as c:
        r = await c.post("/v1/ask", json={"question": "q", "stream": True})
    events = sse_events(r.text)
    assert events[-1] == ("error", {"type": "KGTimeout", "message": "SPARQL query timed out after 30 s", "status": 504})
    assert [name for name, _ in events][:2] == ["linked", "node"]  # what happened before the failure


async def test_a_streamed_request_beyond_the_queue_is_refused_with_503_not_a_stream():
    gate, started = asyncio.Event(), asyncio.Event()
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory(gate=gate, started=started),
                     limits=ServiceLimits(max_concurrency=1, max_queue=0))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        first = asyncio.create_task(c.post("/v1/ask", json={"question": "first"}))
        await asyncio.wait_for(started.wait(), 5)
        busy = await c.post("/v1/ask", json={"question": "second", "stream": True})
        gate.set()
        await first
    assert busy.status_code == 503 and busy.json()["error"]["type"] == "Busy"


async def test_a_streamed_question_over_the_time_budget_ends_with_a_timeout_event():
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory(gate=asyncio.Event()),
                     limits=ServiceLimits(timeout=0.05))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        r = await c.post("/v1/ask", json={"question": "slow", "stream": True})
    name, data = sse_events(r.text)[-1]
    assert name == "error" and data["type"] == "RequestTimeout" and data["status"] == 504


async def test_streamed_requests_arriving_together_are_counted_together():
    """Four streams at once against 1 running + 1 waiting: two are served, two get the 503
    (not a 200 stream ending in an error), and every slot is given back afterwards."""
    gate = asyncio.Event()
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory(gate=gate),
                     limits=ServiceLimits(max_concurrency=1, max_queue=1))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        tasks = [asyncio.create_task(c.post("/v1/ask", json={"question": f"q{i}", "stream": True})) for i in range(4)]
        await asyncio.sleep(0.2)
        gate.set()
        replies = await asyncio.gather(*tasks)
        assert sorted(r.status_code for r in replies) == [200, 200, 503, 503]
        assert all("Retry-After" in r.headers for r in replies if r.status_code == 503)
        again = await asyncio.gather(*(c.post("/v1/ask", json={"question": f"again{i}"}) for i in range(2)))
    assert [r.status_code for r in again] == [200, 200]


async def test_a_body_over_the_byte_cap_gets_413_whether_its_length_is_declared_or_not():
    factory = Factory()
    async with client(factory, limits=ServiceLimits(max_body_bytes=100)) as c:
        declared = await c.post("/v1/ask", json={"question": "x" * 200})

        async def chunks():  # no Content-Length: the body is counted as it arrives
            for _ in range(10):
                yield b" " * 50

        chunked = await c.post("/v1/ask", content=chunks(), headers={"content-type": "application/json"})
    for r in (declared, chunked):
        assert r.status_code == 413 and r.json()["error"]["type"] == "BodyTooLarge"
        assert "100" in r.json()["error"]["message"]
    assert factory.built == []


async def test_a_body_that_trickles_past_the_body_timeout_gets_408_and_starts_no_search():
    """A client that declares a body and sends it slowly (or never) would hold its
    connection for ever: --timeout counts only once the body is read."""
    factory = Factory()
    async with client(factory, limits=ServiceLimits(body_timeout=0.3)) as c:

        async def slow():
            yield b'{"question": '
            await asyncio.sleep(2)
            yield b'"q"}'

        r = await c.post("/v1/ask", content=slow(), headers={"content-type": "application/json"})
        ok = await c.post("/v1/ask", json={"question": "q"})
    assert r.status_code == 408 and r.json()["error"]["type"] == "BodyTooSlow"
    assert "did not arrive within 0.3 s (13 bytes came)" in r.json()["error"]["message"]
    assert ok.status_code == 200 and len(factory.built) == 1


async def test_json_nested_too_deeply_is_a_400_not_a_500():
    async with client() as c:
        r = await c.post("/v1/ask", content=b"[" * 20_000 + b"]" * 20_000,
                         headers={"content-type": "application/json"})
    assert r.status_code == 400 and "nested too deeply" in r.json()["error"]["message"]


async def test_a_server_default_above_a_cap_raises_the_cap_so_echoed_defaults_are_accepted():
    factory = Factory()
    defaults = SearchConfig(k=10, max_expansions=150, top_facts=200)
    async with client(factory, defaults=defaults) as c:
        info = (await c.get("/v1/info")).json()
        echoed = {name: info["defaults"][name] for name in ("k", "max_expansions")}
        ok = await c.post("/v1/ask", json={"question": "q", **echoed})
        over = await c.post("/v1/ask", json={"question": "q", "k": 11})
        depth = await c.post("/v1/ask", json={"question": "q", "max_depth": 31})
    assert (info["limits"]["max_k"], info["limits"]["max_expansions"], info["limits"]["max_top_facts"]) == (10, 150, 200)
    assert info["limits"]["max_depth"] == 30  # a cap above its default stays as it was
    assert ok.status_code == 200 and (factory.built[0].config.k, factory.built[0].config.max_expansions) == (10, 150)
    assert over.status_code == 400 and "'k' must be between 1 and 10" in over.json()["error"]["message"]
    assert depth.status_code == 400 and "'max_depth' must be between 1 and 30" in depth.json()["error"]["message"]


async def test_topic_entities_are_capped_in_number_and_length():
    factory = Factory()
    async with client(factory, limits=ServiceLimits(max_topic_entities=2, max_question_chars=10)) as c:
        many = await c.post("/v1/ask", json={"question": "q", "topic_entities": ["a", "b", "c"]})
        long = await c.post("/v1/ask", json={"question": "q", "topic_entities": ["x" * 11]})
        ok = await c.post("/v1/ask", json={"question": "q", "topic_entities": ["a", "b"]})
    assert many.status_code == 400 and "names 3 entities; at most 2" in many.json()["error"]["message"]
    assert long.status_code == 400 and "longer than 10" in long.json()["error"]["message"]
    assert ok.status_code == 200 and factory.built[0].asked == ("q", ["a", "b"])


@pytest.mark.parametrize(
    "kwargs, says",
    [
        ({"max_concurrency": 0}, "max_concurrency (--concurrency) must be a whole number of at least 1, got 0"),
        ({"max_queue": -1}, "max_queue (--max-queue) must be a whole number of at least 0"),
        ({"timeout": 0}, "timeout (--timeout) must be a number of seconds over 0"),
        ({"timeout": float("nan")}, "timeout (--timeout) must be a number of seconds over 0, got nan"),
        ({"disconnect_poll": float("nan")}, "disconnect_poll must be"),
        ({"max_k": 2.5}, "max_k must be a whole number"),
        ({"max_body_bytes": 0}, "max_body_bytes must be"),
        ({"body_timeout": 0}, "body_timeout must be a number of seconds over 0"),
    ],
)
def test_limits_that_would_break_the_server_are_refused_naming_the_flag(kwargs, says):
    from traversals.errors import BadInput

    with pytest.raises(BadInput) as e:
        ServiceLimits(**kwargs)
    assert says in str(e.value)
    assert ServiceLimits(timeout=float("inf"), max_queue=0).timeout == float("inf")  # no limit, said another way


#: an ASGI scope of POST /v1/ask, for the tests that play the server's part themselves
ASK_SCOPE = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/ask", "raw_path": b"/v1/ask", "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json")], "server": ("t", 80), "client": ("c", 1)}


async def call_asgi(app, body: bytes, cancel_when: asyncio.Event):
    """One POST /v1/ask straight through ASGI; the request task is cancelled (as uvicorn
    does when its shutdown timeout runs out) once ``cancel_when`` is set. The messages sent."""
    sent, delivered = [], False

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client neither sends more nor leaves

    async def send(message):
        sent.append(message)

    task = asyncio.create_task(app(ASK_SCOPE, receive, send))
    await asyncio.wait_for(cancel_when.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return sent


async def test_a_question_stopped_by_the_server_shutting_down_gets_a_json_503():
    started = asyncio.Event()
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory(gate=asyncio.Event(), started=started),
                     limits=ServiceLimits(retry_after=9))
    sent = await call_asgi(app, b'{"question": "slow"}', started)
    start, body = sent[0], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert start["status"] == 503 and (b"retry-after", b"9") in start["headers"]
    assert body["error"]["type"] == "ShuttingDown" and "shutting down" in body["error"]["message"]


async def test_an_answer_that_is_not_valid_json_is_a_json_500():
    class NaNSolver(FakeSolver):
        async def ask(self, question, *, topic_entities=None):
            return Answer(question, "Ann Lee", value=float("nan"), usage=Usage(), seconds=0.1, strategy="tree")

    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=lambda s, llm, kgs, cfg, on_event=None: NaNSolver(s, cfg))
    async with serving(app) as c:
        r = await c.post("/v1/ask", json={"question": "q"})
    assert r.status_code == 500 and r.json()["error"]["message"] == "internal error (see the server log)"


async def test_a_stream_closed_before_its_answer_stops_the_search_and_says_so(caplog):
    caplog.set_level("INFO", logger="traversals.service")
    started = asyncio.Event()
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory(gate=asyncio.Event(), started=started))
    messages = [{"type": "http.request", "body": b'{"question": "slow", "stream": true}', "more_body": False}]
    sent: list[dict] = []

    async def receive():
        if messages:
            return messages.pop()
        await started.wait()  # the client hangs up once the search runs
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    await asyncio.wait_for(app(ASK_SCOPE, receive, send), 5)
    assert "the stream was closed before the answer; the search was stopped (499)" in caplog.text
    assert "shutting down" not in caplog.text and not any(b"event: error" in m.get("body", b"") for m in sent)


async def test_a_stream_stopped_by_the_server_shutting_down_is_logged_as_such_not_as_a_499(caplog):
    """uvicorn cancels a stream at shutdown as Starlette does when its client leaves: the
    client got a ShuttingDown event, so the log must not say it hung up (499)."""
    caplog.set_level("INFO", logger="traversals.service")
    started = asyncio.Event()
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory(gate=asyncio.Event(), started=started))
    sent = await call_asgi(app, b'{"question": "slow", "stream": true}', started)
    assert b'"type": "ShuttingDown"' in sent[-1]["body"] and sent[-1]["more_body"] is False
    assert "the server is shutting down; a stream's search was stopped before its answer (503)" in caplog.text
    assert "499" not in caplog.text


@pytest.mark.parametrize("defaults, says", [(SearchConfig(threshold=float("nan")), "--threshold"),
                                            (SearchConfig(max_expansions=0), "--max-expansions")])
def test_default_search_settings_out_of_range_stop_the_server_from_starting(defaults, says):
    """Not a server that answers every request with a 400 blaming the client (and a /v1/info
    that cannot be written as JSON)."""
    from traversals.errors import BadInput

    with pytest.raises(BadInput) as e:
        create_app(ScriptedLLM([]), [FakeKG()], defaults=defaults)
    assert "the server's default search settings" in str(e.value) and says in str(e.value)


def test_a_chain_server_may_default_tree_requests_to_k_3():
    app = create_app(ScriptedLLM([]), [FakeKG()], defaults=SearchConfig(k=3), default_strategy="chain")
    assert app is not None  # chain requests run k = 1 whatever the default k


async def test_a_client_gone_while_sending_its_body_is_a_499_in_the_log_not_an_error(caplog):
    caplog.set_level("INFO", logger="traversals.service")
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory())
    messages = iter([{"type": "http.request", "body": b'{"question": ', "more_body": True}, {"type": "http.disconnect"}])
    sent = []

    async def receive():
        return next(messages)

    async def send(message):
        sent.append(message)

    await app(ASK_SCOPE, receive, send)
    assert sent[0]["status"] == 499
    assert "the client disconnected while sending its request (499)" in caplog.text
    assert "unexpected error" not in caplog.text


async def test_shutdown_lets_a_cancelled_question_send_its_503_before_the_llm_closes():
    """uvicorn cancels the questions still running when its shutdown timeout is over and
    goes straight on to the lifespan's shutdown, then exits: the shutdown waits for them."""
    started, order = asyncio.Event(), []
    llm = ScriptedLLM([])

    async def close():
        order.append("llm closed")

    llm.close = close
    app = create_app(llm, [FakeKG()], solver_factory=Factory(gate=asyncio.Event(), started=started))
    delivered = False

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": b'{"question": "slow"}', "more_body": False}
        await asyncio.Event().wait()

    async def send(message):
        if message["type"] == "http.response.start":
            order.append(message["status"])

    async with app.router.lifespan_context(app):
        task = asyncio.create_task(app(ASK_SCOPE, receive, send))
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
    assert order == [503, "llm closed"]
    await task


async def test_cors_lets_the_named_pages_call_the_api_from_a_browser():
    """--cors-origin: a browser's preflight for the named page is answered (before any key is
    checked: a preflight carries none), its requests' answers and errors say the page may read
    them; another page gets no such header, and no origin named means no CORS at all."""
    app = create_app(ScriptedLLM([]), [FakeKG()], solver_factory=Factory(), defaults=SearchConfig(k=None),
                     api_keys=["k-0123456789"], cors_origins=["https://App.example.com/", "http://localhost:3000"])
    page = {"Origin": "https://app.example.com"}
    async with serving(app) as c:
        pre = await c.options("/v1/ask", headers={**page, "Access-Control-Request-Method": "POST",
                                                  "Access-Control-Request-Headers": "authorization, content-type"})
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "https://app.example.com"
        assert "POST" in pre.headers["access-control-allow-methods"]
        assert "authorization" in pre.headers["access-control-allow-headers"].lower()
        ok = await c.post("/v1/ask", json={"question": "q"}, headers={**page, "Authorization": "Bearer k-0123456789"})
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "https://app.example.com"
        refused = await c.post("/v1/ask", json={"question": "q"}, headers=page)
        assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == "https://app.example.com"
        other = await c.post("/v1/ask", json={"question": "q"},
                             headers={"Origin": "https://evil.example", "Authorization": "Bearer k-0123456789"})
        assert "access-control-allow-origin" not in other.headers
        bad_pre = await c.options("/v1/ask", headers={"Origin": "https://evil.example",
                                                      "Access-Control-Request-Method": "POST"})
        assert bad_pre.status_code == 400
    async with client() as c:  # no origin named: no CORS headers
        r = await c.post("/v1/ask", json={"question": "q"}, headers=page)
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


@pytest.mark.parametrize("origin", ["app.example.com", "https://app.example.com/ask", "ftp://x", "https://", "*.example.com"])
def test_an_origin_no_browser_sends_is_refused(origin):
    from traversals.errors import BadInput
    from traversals.service import cors_origin

    with pytest.raises(BadInput, match="an origin is scheme://host"):
        cors_origin(origin)


async def test_the_servers_prompt_set_is_used_and_a_request_cannot_name_another(tmp_path):
    """``serve --prompts DIR``: read once at start; a client names no prompt files on the server."""
    (tmp_path / "cot.txt").write_text("Answer briefly: $query")
    llm = ScriptedLLM(rules=[("Answer briefly: Who", "ANSWER: Florence Stone")])
    app = create_app(llm, [FakeKG()], default_strategy="cot", defaults=SearchConfig(prompts=str(tmp_path)))
    (tmp_path / "cot.txt").write_text("Edited after the start: $query")  # read at start, not per request
    async with serving(app) as c:
        r = await c.post("/v1/ask", json={"question": "Who is Bob Dylan's maternal grandmother?"})
        assert r.status_code == 200 and r.json()["answer"] == "Florence Stone"
        assert llm.calls[0].prompt == "Answer briefly: Who is Bob Dylan's maternal grandmother?"
        refused = await c.post("/v1/ask", json={"question": "q?", "prompts": "paper"})
    assert refused.status_code == 400 and "unknown field(s) prompts" in refused.json()["error"]["message"]


async def test_what_v1_info_shows_is_accepted_back_and_odd_numbers_are_400s():
    """k is null in /v1/info when the server set none: a client sending the defaults back is
    not refused; a 400-digit threshold is the client's error, not a 500."""
    factory = Factory()
    async with client(factory, limits=ServiceLimits(timeout=float("inf"))) as c:
        info = (await c.get("/v1/info")).json()  # --timeout inf (no limit): null, not a plain-text 500
        assert info["defaults"]["k"] is None and info["limits"]["timeout"] is None
        for strategy in ("tree", "chain"):
            r = await c.post("/v1/ask", json={"question": "q", "strategy": strategy, "k": info["defaults"]["k"]})
            assert r.status_code == 200, r.text
        r = await c.post("/v1/ask", content=b'{"question": "q", "threshold": 1' + b"0" * 400 + b"}")
        assert r.status_code == 400 and "'threshold' is too large" in r.json()["error"]["message"]
    assert [(s.name, s.config.k) for s in factory.built] == [("tree", None), ("chain", 1)]


async def test_a_chain_request_sending_back_the_servers_k_is_not_refused():
    """`serve --k 5`: /v1/info shows k 5; a client sending those defaults back with "strategy":
    "chain" got 400 "'chain' is the k = 1 search". It runs k = 1; another k is still refused."""
    from traversals.service import OVERRIDES

    factory = Factory()
    async with client(factory, defaults=SearchConfig(k=5)) as c:
        shown = (await c.get("/v1/info")).json()["defaults"]
        body = {"question": "q", "strategy": "chain", **{name: shown[name] for name in OVERRIDES}}
        r = await c.post("/v1/ask", json=body)
        assert r.status_code == 200, r.text
        other = await c.post("/v1/ask", json={**body, "k": 4})
        assert other.status_code == 400 and "'chain' is the k = 1 search" in other.json()["error"]["message"]
    assert [(s.name, s.config.k) for s in factory.built] == [("chain", 1)]


async def test_a_server_max_hops_beyond_retrieves_is_said_to_retrieve_requests():
    async with client(Factory(), defaults=SearchConfig(k=None, max_hops=4)) as c:
        r = await c.post("/v1/ask", json={"question": "q", "strategy": "retrieve"})
        assert r.status_code == 400
        assert "the server's max_hops (4, its --max-hops) is more than retrieve's 1 to 3" in r.json()["error"]["message"]
        assert (await c.post("/v1/ask", json={"question": "q", "strategy": "retrieve", "max_hops": 2})).status_code == 200


@pytest.mark.parametrize("kwargs, says", [
    ({"defaults": SearchConfig(max_hops=4), "default_strategy": "retrieve"}, "--max-hops with retrieve"),
    ({"defaults": SearchConfig(prior_weight=float("inf"))}, "--prior-weight must be a finite number"),
    ({"defaults": SearchConfig(calibrate=float("nan"))}, "--calibrate-weight must be a finite number"),
])
def test_defaults_no_request_could_use_stop_the_server_from_starting(kwargs, says):
    from traversals.errors import BadInput

    with pytest.raises(BadInput) as e:
        create_app(ScriptedLLM([]), [FakeKG()], **kwargs)
    assert "the server's default search settings" in str(e.value) and says in str(e.value)
