"""Real servers started on 127.0.0.1 for integration tests (Oxigraph's SPARQL server)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class LocalApp:
    """A stdlib HTTP server in a thread; ``handle(handler)`` answers each request."""

    def __init__(self, handle) -> None:
        app = self
        self.requests: list[dict] = []
        self.release = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                app.requests.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )
                status, headers, payload = handle(self, app)
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout tests)

            do_GET = do_POST = _any

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/query"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class AuthProxy(LocalApp):
    """An authenticating gateway in front of a SPARQL server: forwards a request whose
    ``Authorization`` header is one of ``accepted`` (``Basic ...``, ``Bearer ...``), answers
    any other with 401; ``seen`` is the ``Authorization`` header of each request."""

    def __init__(self, upstream: str, accepted: set[str]) -> None:
        base = upstream.rsplit("/", 1)[0]

        def handle(handler, app) -> tuple[int, dict, bytes]:
            if handler.headers.get("Authorization") not in accepted:
                return 401, {"WWW-Authenticate": 'Basic realm="sparql"'}, b"Unauthorized: credentials required"
            r = httpx.request(handler.command, base + handler.path, content=app.requests[-1]["body"], timeout=30,
                              headers={k: v for k, v in handler.headers.items() if k.lower() in ("accept", "content-type")})
            return r.status_code, {"Content-Type": r.headers.get("content-type", "")}, r.content

        super().__init__(handle)

    @property
    def seen(self) -> list[str | None]:
        return [r["headers"].get("Authorization") for r in self.requests]

    def with_user(self, user: str, password: str) -> str:
        from urllib.parse import quote

        return self.url.replace("://", f"://{quote(user, safe='')}:{quote(password, safe='')}@")
