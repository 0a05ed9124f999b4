"""`traversals mcp` as an MCP host runs it: a subprocess speaking MCP over stdio, driven by
the SDK's client."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402


@pytest.mark.timeout(120)
async def test_the_command_serves_the_tools_over_stdio():
    exe = Path(sys.executable).parent / "traversals"
    params = StdioServerParameters(command=str(exe), args=["mcp", "--kg", "demo", "--strategy", "cot"],
                                   env=dict(os.environ))  # the SDK passes a minimal environment otherwise
    async with Client(params) as c:
        r = await c.call_tool("kg_search", {"text": "Beatrice Stone"})
    assert [e["label"] for e in r.structured_content["entities"]][:1] == ["Beatrice Stone"]
