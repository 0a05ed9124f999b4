"""Who may call the HTTP endpoints (``traversals serve`` and ``traversals mcp --transport
http``): an ASGI middleware that lets a request through only with ``Authorization: Bearer
KEY`` for one of the keys, the reading of the keys from a file or the environment, and one
that lets a request through only when its ``Host`` names this server
(:class:`HostCheck`: a web page cannot reach a server on 127.0.0.1 by DNS rebinding).

With no key configured no key is checked (the default on 127.0.0.1). Keys are compared in
constant time and never written to a message or a log.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .errors import BadInput, TraversalsError

#: the environment variable holding one API key (read by the command line, at its edge)
API_KEY_ENV = "TRAVERSALS_API_KEY"
#: paths a load balancer probes: open without a key
OPEN_PATHS = ("/health", "/health/")


class Unauthorized(TraversalsError):
    """A request without one of the server's API keys (HTTP 401)."""


def check_key(key: str, where: str) -> str:
    """``key`` stripped, or :class:`BadInput`: a key travels in an HTTP header, so it is
    printable ASCII without spaces."""
    key = key.strip()
    if not key:
        raise BadInput(f"{where}: an empty API key")
    if not all(33 <= ord(c) < 127 for c in key):
        raise BadInput(f"{where}: an API key must be printable ASCII without spaces (it is sent in a header)")
    return key


def read_api_keys(path: str | Path | None, environ: Mapping[str, str]) -> list[str]:
    """The keys a server accepts: one per line of the file at ``path`` (blank lines and lines
    starting with ``#`` skipped) and ``$TRAVERSALS_API_KEY`` from ``environ``. None of
    either: no key, so nothing is checked. A file named but unreadable or holding no key is
    :class:`BadInput`, so a typo never leaves a server open."""
    keys: list[str] = []
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8-sig")  # a BOM (Notepad) is no part of the first key
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"--api-key-file {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                keys.append(check_key(line, f"--api-key-file {path} line {n}"))
        if not keys:
            raise BadInput(f"--api-key-file {path} holds no key (one a line; '#' starts a comment)")
    if environ.get(API_KEY_ENV, "").strip():
        keys.append(check_key(environ[API_KEY_ENV], f"${API_KEY_ENV}"))
    return keys


class BearerAuth:
    """ASGI middleware: an HTTP request to any path but ``open_paths`` needs the header
    ``Authorization: Bearer KEY`` with one of ``keys``; without it the answer is 401 in the
    service's error shape (``{"error": {"type", "message"}}``) with ``WWW-Authenticate:
    Bearer``. Other scopes (lifespan, websocket) pass through. No keys: every request passes."""

    def __init__(self, app: Any, *, keys: Iterable[str], open_paths: Sequence[str] = OPEN_PATHS) -> None:
        self.app = app
        self.keys = [k.encode("ascii") for k in keys]
        self.open_paths = tuple(open_paths)

    def _allowed(self, headers: Iterable[tuple[bytes, bytes]]) -> bool | None:
        """True for a known key, False for another, None when no key was sent."""
        for name, value in headers:
            if name.lower() == b"authorization":
                scheme, _, given = value.strip().partition(b" ")
                if scheme.lower() != b"bearer" or not given.strip():
                    return False
                given = given.strip()
                # every key compared, in constant time each: the time says nothing about which
                return any([hmac.compare_digest(given, key) for key in self.keys])
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.keys or scope.get("path") in self.open_paths:
            await self.app(scope, receive, send)
            return
        allowed = self._allowed(scope.get("headers") or ())
        if allowed:
            await self.app(scope, receive, send)
            return
        refused = Unauthorized("this server needs an API key: send the header 'Authorization: Bearer KEY'"
                               if allowed is None else "the API key sent is not one this server accepts")
        body = json.dumps({"error": {"type": type(refused).__name__, "message": str(refused)}}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="traversals"')]})
        await send({"type": "http.response.body", "body": body})


#: the names a server listening on 127.0.0.1 / ::1 is called by (any port)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


#: a host name as a ``Host`` header carries it: labels of letters, digits, ``-`` and ``_``, between dots
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?")


def allowed_host(name: str) -> str:
    """``name`` as :class:`HostCheck` compares it with a request's ``Host`` (lower case; an
    IPv6 address in brackets), or ``*``; :class:`BadInput` for what no ``Host`` without its
    port can equal (``api.example.com:8000``, ``https://api.example.com``), which would be
    accepted at start and then refuse every request with 421."""
    text = name.strip().lower()
    if text == "*":
        return text
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        address = None
    if address is not None:
        return f"[{address.compressed}]" if address.version == 6 else address.compressed
    if bare == text and _HOST_NAME.fullmatch(text):
        return text
    raise BadInput(f"--allowed-host {name!r}: a name is a bare host name (api.example.com), an IP address "
                   "(10.0.0.5, [::1]) or * for any, without scheme or port (every port is answered)")


class HostCheck:
    """ASGI middleware: an HTTP request whose ``Host`` header (without its port) is not one of
    ``hosts`` is answered 421 in the service's error shape. A page on another site that makes
    its name resolve to 127.0.0.1 (DNS rebinding) reaches a local server as its own origin,
    with its own name in ``Host``: refused here. Names are compared without case (each read
    by :func:`allowed_host`); no hosts: every request passes."""

    def __init__(self, app: Any, *, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = {allowed_host(h) for h in hosts if h.strip()}
        if "*" in self.hosts:  # any name: no check
            self.hosts = set()

    @staticmethod
    def _host(headers: Iterable[tuple[bytes, bytes]]) -> str:
        """The request's ``Host`` without its port, in lower case ("" when none is sent)."""
        for name, value in headers:
            if name.lower() == b"host":
                host = value.decode("latin-1").strip().lower()
                if host.startswith("["):  # an IPv6 address: [::1]:8000
                    return host[: host.find("]") + 1]
                return host.partition(":")[0]
        return ""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.hosts:
            await self.app(scope, receive, send)
            return
        host = self._host(scope.get("headers") or ())
        if host in self.hosts:
            await self.app(scope, receive, send)
            return
        message = (f"this server answers requests for {', '.join(sorted(self.hosts))}, not {host or 'a request without a Host'}"
                   " (behind a proxy or under another name: serve --allowed-host NAME)")
        body = json.dumps({"error": {"type": "MisdirectedRequest", "message": message}}).encode()
        await send({"type": "http.response.start", "status": 421,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def is_loopback(host: str) -> bool:
    """Whether ``--host`` only listens on this machine: ``localhost`` or a loopback address
    however it is written (``127.0.0.2``, ``::1``, ``0:0:0:0:0:0:0:1``, ``[::1]``; the long
    form of ``::1`` was taken for a public address, which turned the Host check off)."""
    if host.casefold() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
