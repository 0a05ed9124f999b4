"""The HTTP service over a real socket: `traversals serve` as a uvicorn process on
127.0.0.1 with the default local model and MetaQA's KB in the embedded store, then stopped
with SIGINT (a clean shutdown, exit 0), as SIGTERM stops it too; and an in-process uvicorn server whose client hangs
up mid-search (the search is cancelled)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from traversals.llm.scripted import ScriptedLLM
from traversals.service import ServiceLimits, create_app

from .servers import free_port, start_traversals, stop_process


@pytest.fixture()
def served(SHARED, default_model_path, tmp_path):
    kb = SHARED / "data" / "metaqa" / "kb.txt"
    if not kb.exists():
        pytest.skip(f"{kb} is not there")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_traversals(["serve", "--kg", str(kb), "--k", "1", "--port", str(port), "--log-level", "warning"],
                            tmp_path / "serve.log", base + "/health", timeout=300)
    yield base, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


@pytest.mark.model
@pytest.mark.server
@pytest.mark.timeout(900)
def test_serve_answers_over_http_with_provenance_then_shuts_down_cleanly(served):
    base, proc = served
    info = httpx.get(base + "/v1/info", timeout=10).json()
    assert info["default_strategy"] == "chain" and info["can_score"] is True and info["kgs"] == ["kb"]

    # streamed: the search's nodes arrive while it runs, then the answer
    events = []
    with httpx.stream("POST", base + "/v1/ask", json={"question": "what films did [Charles Bail] direct", "stream": True},
                      timeout=600) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("event: "):
                events.append([line[7:], None])
            elif line.startswith("data: "):
                events[-1][1] = json.loads(line[6:])
    names = [name for name, _ in events]
    assert names[0] == "linked" and names[-1] == "answer" and names.count("node") >= 5
    assert any(d.get("action", {}) and d["action"]["type"] == "SELECT_RELATION" for n, d in events if n == "node")
    out = events[-1][1]
    assert "The Gumball Rally" in out["answer"]
    assert out["decoding"] == "constrained" and out["strategy"] == "chain" and out["llm_calls"] > 0
    edges = {(e["subject"]["label"], e["object"]["label"]) for e in out["supporting_edges"]}
    assert ("The Gumball Rally", "Charles Bail") in edges

    bad = httpx.post(base + "/v1/ask", json={"question": "x", "k": 99}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "BadInput"

    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0


@pytest.mark.server
@pytest.mark.timeout(180)
def test_serve_stopped_by_sigterm_exits_0_after_its_graceful_shutdown(tmp_path):
    """SIGTERM (``docker stop``, systemd, ``kill``) is Ctrl-C's stop: the server shut down
    gracefully, then uvicorn raised the signal again and the process died of it (-15, 143 in
    a shell), while SIGINT's exit was 0."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    proc = start_traversals(["serve", "--kg", "demo", "--strategy", "cot", "--port", str(port)], log, base + "/health")
    try:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    finally:
        stop_process(proc)
    output = log.read_text(errors="replace")
    assert code == 0, output[-2000:]
    assert "Application shutdown complete" in output and "Traceback" not in output and "interrupted" not in output


class _NoKG:
    name = "kb"

    async def close(self) -> None:
        pass


@pytest.mark.server
@pytest.mark.timeout(60)
async def test_a_client_that_hangs_up_cancels_its_search(caplog):
    import uvicorn

    caplog.set_level("INFO", logger="traversals.service")
    started, cancelled = asyncio.Event(), asyncio.Event()

    class SlowSolver:
        name = "tree"

        async def ask(self, question, *, topic_entities=None):
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

    app = create_app(ScriptedLLM([]), [_NoKG()], solver_factory=lambda *a, **kw: SlowSolver(),
                     limits=ServiceLimits(disconnect_poll=0.05))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        async with httpx.AsyncClient() as c:
            with pytest.raises(httpx.ReadTimeout):
                await c.post(f"http://127.0.0.1:{port}/v1/ask", json={"question": "q"},
                             timeout=httpx.Timeout(5, read=0.5))
        assert started.is_set()
        await asyncio.wait_for(cancelled.wait(), 5)  # not the 60 s the search would take
        for _ in range(50):  # the log line follows the cancellation
            if "(499)" in caplog.text:
                break
            await asyncio.sleep(0.02)
        assert "the client disconnected; the search was stopped (499)" in caplog.text

        # the same for a streamed answer that the client stops reading
        started.clear()
        cancelled.clear()
        async with httpx.AsyncClient() as c:
            with pytest.raises(httpx.ReadTimeout):
                async with c.stream("POST", f"http://127.0.0.1:{port}/v1/ask", json={"question": "q", "stream": True},
                                    timeout=httpx.Timeout(5, read=0.5)) as r:
                    async for _ in r.aiter_lines():
                        pass
        assert started.is_set()
        await asyncio.wait_for(cancelled.wait(), 5)
    finally:
        server.should_exit = True
        await serving


#: a server (uvicorn.run, as `traversals serve` runs it) whose searches never end on their own
_SLOW_SERVER = """
import asyncio, sys
import uvicorn
from traversals.llm.scripted import ScriptedLLM
from traversals.service import ServiceLimits, create_app

class NoKG:
    name = "kb"
    async def close(self):
        pass

class SlowSolver:
    name = "tree"
    async def ask(self, question, *, topic_entities=None):
        print("searching", flush=True)
        await asyncio.sleep(60)

app = create_app(ScriptedLLM([]), [NoKG()], solver_factory=lambda *a, **kw: SlowSolver(),
                 limits=ServiceLimits(max_queue=4, retry_after=3))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", timeout_graceful_shutdown=0.5)
"""


@pytest.mark.server
@pytest.mark.timeout(60)
def test_questions_in_flight_when_the_server_stops_get_a_503_not_a_dropped_connection(tmp_path):
    """SIGTERM with one question searching and one waiting: once --shutdown-timeout is over
    both get 503 ShuttingDown (as docs/service.md says), before the process exits."""
    script = tmp_path / "slow_server.py"
    script.write_text(_SLOW_SERVER)
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)

        async def read_stream(c: httpx.AsyncClient) -> tuple[int, str]:
            async with c.stream("POST", base + "/v1/ask", json={"question": "s", "stream": True}) as r:
                return r.status_code, (await r.aread()).decode()

        async def ask_then_stop() -> tuple[list, Any]:
            async with httpx.AsyncClient(timeout=20) as c:
                asks = [asyncio.create_task(c.post(base + "/v1/ask", json={"question": q})) for q in ("a", "b")]
                streamed = asyncio.create_task(read_stream(c))
                await asyncio.sleep(0.5)
                proc.send_signal(signal.SIGTERM)
                return await asyncio.gather(*asks, return_exceptions=True), await streamed

        replies, (stream_status, stream_text) = asyncio.run(ask_then_stop())
        output = proc.stdout.read().decode()
        proc.wait(20)  # uvicorn re-raises the SIGTERM once it has shut down: -15
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    for r in replies:
        assert isinstance(r, httpx.Response), f"no reply: {r!r}; server output: {output}"
        assert r.status_code == 503 and r.headers["retry-after"] == "3"
        assert r.json()["error"]["type"] == "ShuttingDown"
    # the stream had started (200): it ends with the error event, not cut off
    assert stream_status == 200
    last = stream_text.strip().split("\n\n")[-1]
    assert last.startswith("event: error\n")
    assert json.loads(last.split("data: ", 1)[1]) == {
        "type": "ShuttingDown", "message": "the server is shutting down; the search was stopped before its answer",
        "status": 503}
    assert "Traceback" not in output and "Exception in ASGI application" not in output
