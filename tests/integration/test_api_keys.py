"""API keys on the real HTTP endpoints: `traversals serve` and `traversals mcp --transport
streamable-http` started as subprocesses on 127.0.0.1, with a key in a file or in
$TRAVERSALS_API_KEY, driven by httpx and by the MCP SDK's own client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .servers import free_port, start_traversals as start, stop_process as stop

EXE = Path(sys.executable).parent / "traversals"  # the stdio test runs it directly
KEY = "team-key-0123456789"


@pytest.mark.timeout(180)
def test_serve_with_a_key_file_refuses_requests_without_the_key(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"# ops\n{KEY}\n", encoding="utf-8")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start(["serve", "--kg", "demo", "--strategy", "cot", "--port", str(port), "--log-level", "warning",
                  "--api-key-file", str(keys), "--cors-origin", "http://localhost:3000"],
                 tmp_path / "serve.log", base + "/health")
    try:
        assert httpx.get(base + "/health").json() == {"status": "ok"}
        refused = httpx.post(base + "/v1/ask", json={"question": "Who is Bob Dylan's mother?"})
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "Unauthorized"
        assert httpx.get(base + "/v1/info", headers={"Authorization": "Bearer wrong"}).status_code == 401
        info = httpx.get(base + "/v1/info", headers={"Authorization": f"Bearer {KEY}"})
        assert info.status_code == 200 and info.json()["kgs"] == ["demo"]
        # a page allowed by --cors-origin: its browser's preflight passes without the key
        pre = httpx.options(base + "/v1/ask", headers={"Origin": "http://localhost:3000",
                                                       "Access-Control-Request-Method": "POST",
                                                       "Access-Control-Request-Headers": "authorization"})
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "http://localhost:3000"
        # on 127.0.0.1 a request for another name (a page reaching it by DNS rebinding) is refused
        rebound = httpx.get(base + "/v1/info", headers={"Host": f"attacker.example:{port}",
                                                        "Authorization": f"Bearer {KEY}"})
        assert rebound.status_code == 421
    finally:
        stop(proc)
    assert KEY not in (tmp_path / "serve.log").read_text(errors="replace")  # never logged


@pytest.mark.timeout(180)
async def test_mcp_over_http_with_the_key_in_the_environment(tmp_path):
    pytest.importorskip("mcp")
    from mcp import Client
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = start(["mcp", "--transport", "streamable-http", "--port", str(port), "--kg", "demo", "--strategy", "cot"],
                 tmp_path / "mcp.log", f"http://127.0.0.1:{port}/health", env={**os.environ, "TRAVERSALS_API_KEY": KEY})
    try:
        refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                             headers={"Accept": "application/json, text/event-stream"})
        assert refused.status_code == 401 and "Authorization: Bearer KEY" in refused.json()["error"]["message"]
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as c:
            r = await c.call_tool("kg_search", {"text": "Beatrice Stone"})
        assert [e["label"] for e in r.structured_content["entities"]][:1] == ["Beatrice Stone"]
    finally:
        stop(proc)
    assert KEY not in (tmp_path / "mcp.log").read_text(errors="replace")


def test_mcp_over_stdio_refuses_a_key_file(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n", encoding="utf-8")
    r = subprocess.run([str(EXE), "mcp", "--kg", "demo", "--api-key-file", str(keys)],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "--api-key-file guards the streamable-http transport" in r.stderr
