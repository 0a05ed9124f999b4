"""Real servers started on 127.0.0.1 for integration tests (Oxigraph's SPARQL server)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def oxigraph_binary() -> str:
    here = Path(sys.executable).parent / "oxigraph"
    if here.exists():
        return str(here)
    found = shutil.which("oxigraph")
    if not found:
        pytest.skip("the oxigraph server (PyPI package 'oxigraph') is not installed")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OxigraphServer:
    def __init__(self, location: Path, log: Path) -> None:
        self.location = location
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/query"
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            [oxigraph_binary(), "serve-read-only", "--location", str(location), "--bind", f"127.0.0.1:{self.port}"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                self._log.close()
                raise RuntimeError(f"oxigraph exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                r = httpx.get(self.url, params={"query": "ASK {}"}, timeout=2)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("oxigraph did not start within 60 s")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if not self._log.closed:
            self._log.close()


def start_traversals(args: list[str], log: Path, ready: str, *, env: dict | None = None,
                     timeout: float = 120) -> subprocess.Popen:
    """Start ``traversals ARGS`` (this venv's command) with its output in ``log`` and wait
    until ``ready`` (a URL) answers (any status under 500: an MCP server has no ``/health``
    and answers 404 once it listens); the test fails with the log's tail if the process
    exits first or does not answer within ``timeout`` seconds."""
    out = open(log, "wb")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "traversals"), *args], stdout=out,
                            stderr=subprocess.STDOUT, env=env)
    out.close()  # the child holds its own handle
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"traversals {args[0]} exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(ready, timeout=2).status_code < 500:
                return proc
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"traversals {args[0]} did not start within {timeout:g} s")
        time.sleep(0.2)


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate ``proc`` (SIGTERM, then SIGKILL after 20 s) and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def load_store(location: Path, files: list[Path], *, lenient: bool = False) -> None:
    """Load files into an Oxigraph store; ``lenient`` lets in IRIs RFC 3987 refuses."""
    subprocess.run(
        [oxigraph_binary(), "load", *(["--lenient"] if lenient else []), "--location", str(location), "--file", *map(str, files)],
        check=True,
        capture_output=True,
    )
