"""POST JSON to an OpenAI-compatible API: the HTTP plumbing the LLM client
(:mod:`traversals.llm.openai`) and the embeddings client (:mod:`traversals.embed.openai`)
share.

- **retries**: 408/409/429/5xx answers and connection errors are retried with exponential
  backoff and jitter, honouring ``retry-after-ms`` or ``Retry-After`` (capped at
  ``backoff_max``), up to ``max_retries`` times; a connect timeout is retried, a read
  timeout is not, and neither is a 5xx that says the input is too long (llama.cpp's server);
- **errors**: one line naming the URL and, for an HTTP error, the endpoint's own error
  message. Which classes are raised is the caller's: ``unavailable`` when no request can
  succeed now -- the endpoint cannot be reached, refuses the credentials (401/403: "check
  the API key"), has no such path or model (404), or still answers 5xx/429 after every
  retry -- so that an evaluation stops instead of recording every question as an error;
  ``error`` for what is this request's own (a timeout, as ``timed_out`` if the caller
  names a class for it; another 4xx, a reply that is not a JSON object). A 400 that names
  an unknown model is ``unavailable`` too; one that says the input is too long
  (400/413/422/500, in OpenAI's, vLLM's, llama.cpp's, TGI's or Groq's words) is ``error``
  with the caller's ``size`` note (how long this request's input was).
  An HTTP refusal carries its ``status`` and the server's ``detail`` on the exception;
- **time limit**: ``timeout`` bounds a whole attempt, not only each read, so a server that
  trickles its reply cannot hold a request for longer;
- **headers**: ``headers`` are sent with every request (a gateway's key, Azure's ``api-key``),
  checked first (:func:`traversals.headers.check_headers`); an ``Authorization`` header
  takes the API key's place, and both at once are refused;
- **expiring tokens**: with ``token`` (:class:`~traversals.tokens.CommandToken`) each request
  carries ``Authorization: Bearer`` the command's token; a 401/403 fetches a new one and
  sends the request once more;
- **query**: a query in ``base_url`` (Azure's ``?api-version=``) goes after each path;
- **secrets**: no message holds the API key, a header's value, a password in the URL or a
  credential in its query (``?key=``, :func:`traversals.validate.url_secrets`),
  even when a server or ``httpx`` quotes them; a key with surrounding whitespace (a pasted line) is stripped,
  one with a character no header can carry is refused before any request;
- **redirects** are not followed (a POST may turn into a GET, the key go to another host):
  ``unavailable``, naming the URL the endpoint points to;
- **odd bodies**: an HTML page (a proxy's error page, a web UI at the wrong URL) is named by
  its title, a body in another charset than UTF-8 is read by its declared charset, and a
  reply streamed as server-sent events though not asked for goes to ``merge_stream`` (or is
  one clear error).
"""

from __future__ import annotations

import asyncio
import html
import json
import random
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .aio import LoopClients, SharedSemaphore
from .errors import BadInput, PromptTooLong, TraversalsError
from .headers import check_headers, has_authorization
from .retry import backoff_delay, parse_retry_after
from .tokens import CommandToken
from .validate import http_url, scrub_surrogates, shown_url, url_secrets

__all__ = ["RETRY_STATUS", "JsonPoster", "error_detail"]

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
#: headers the client sets itself: one given in ``headers`` is refused
OWN_HEADERS = {name: "" for name in ("accept", "content-type", "content-length", "host", "transfer-encoding")}


#: an error message that says the input does not fit the model's context (OpenAI, vLLM,
#: llama.cpp's "input is too large to process" (a 500), TGI's "`inputs` tokens +
#: `max_new_tokens` must be <= N" (a 422), Groq's "reduce the length of the messages")
_TOO_LONG = re.compile(
    r"context (length|size|window)|context_length_exceeded|maximum context|too long|too many tokens"
    r"|exceeds? (the )?(available|max)|input is too large|too large to process|reduce the length"
    r"|tokens \+ `?max_new_tokens`? must be",
    re.IGNORECASE,
)
#: a 400's message that says the model is not served here (OpenRouter, LiteLLM, LM Studio ...)
_NO_MODEL = re.compile(
    r"\bmodel\b.{0,120}\b(not found|does not exist|is not available|not loaded)"
    r"|not a valid model|\b(unknown|invalid) model\b|model_not_found",
    re.IGNORECASE,
)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.IGNORECASE | re.DOTALL)


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[:limit]


def html_text(text: str) -> str | None:
    """What an HTML page says, on one line: its ``<title>``, else its text without tags;
    ``None`` if ``text`` is not an HTML page."""
    head = text.lstrip()[:200].lower()
    if not head.startswith(("<!doctype html", "<html", "<head", "<body", "<title")):
        return None
    title = _TITLE.search(text)
    shown = title.group(1) if title and title.group(1).strip() else _TAG.sub(" ", text)
    return _one_line(html.unescape(shown)) or "an empty page"


def read_json(resp: httpx.Response) -> Any:
    """The body as JSON: UTF-8 (or UTF-16/32) as JSON says, else the charset the response
    declares. Raises ``ValueError`` if it is not JSON in either."""
    try:
        doc = resp.json()
    except UnicodeDecodeError:
        doc = json.loads(resp.text)
    return scrub_surrogates(doc)  # a "\ud800" escape: U+FFFD, not a string nothing can print


def error_detail(resp: httpx.Response) -> str:
    """The endpoint's own error message of a failed response, on one line (200 characters
    at most): ``{"error": {"message": ...}}``, ``{"detail": ...}``, an HTML page's title,
    or the body's text."""
    try:
        body = read_json(resp)
    except ValueError:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        page = html_text(resp.text)
        return f"an HTML page: {page}" if page is not None else _one_line(resp.text)
    err = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail") or json.dumps(err)[:200]
    else:
        msg = str(err)
    return str(msg).replace("\n", " ")[:200]


def _stream_events(text: str) -> list[dict[str, Any]] | None:
    """The JSON objects of a server-sent event stream (``data: {...}`` lines, ``[DONE]``
    skipped); ``None`` if ``text`` is not one."""
    if not text.lstrip().startswith(("data:", "event:", ":")):
        return None
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if not data or data == "[DONE]":
            continue
        try:
            event = scrub_surrogates(json.loads(data))
        except ValueError:
            return None
        if isinstance(event, dict):
            events.append(event)
    return events


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds a 429/5xx asks to wait: ``retry-after-ms`` (OpenAI's, milliseconds) or
    ``Retry-After`` (seconds or an HTTP date); None when neither says."""
    try:
        ms = float(headers.get("retry-after-ms", ""))
        if ms >= 0 and ms == ms and ms != float("inf"):
            return ms / 1000
    except ValueError:
        pass
    return parse_retry_after(headers.get("retry-after"))


def _header_safe(api_key: str) -> int | None:
    """The position of the first character of ``api_key`` an HTTP header cannot carry
    (a control or non-ASCII character), or ``None``."""
    for i, ch in enumerate(api_key):
        if not " " <= ch <= "~":
            return i
    return None


#: endpoint paths a base URL may be given with by mistake (cut back to the API root)
ENDPOINT_PATHS = ("/chat/completions", "/completions", "/embeddings")


def api_root(base_url: str) -> str:
    """``base_url`` without a trailing slash or endpoint path (``.../v1/chat/completions``
    or ``.../v1/embeddings`` -> ``.../v1``), its query kept
    (``.../deployments/D/chat/completions?api-version=V`` -> ``.../deployments/D?api-version=V``)."""
    url, mark, query = base_url.strip().partition("?")
    url = url.rstrip("/")
    for path in ENDPOINT_PATHS:
        if url.endswith(path):
            url = url[: -len(path)]
            break
    return url + mark + query


class JsonPoster:
    """An ``httpx.AsyncClient`` for one API root (``base_url``, e.g.
    ``http://127.0.0.1:8000/v1``) that posts JSON objects and returns JSON objects (module
    doc). ``name`` starts every error message; at most ``max_concurrency`` requests are in
    flight at once, across all the event loops and threads that use it. ``merge_stream``
    turns the events of a reply streamed though not asked for into the reply's JSON object."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str,
        error: type[TraversalsError],
        unavailable: type[TraversalsError],
        timed_out: type[TraversalsError] | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        token: CommandToken | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_concurrency: int = 8,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        merge_stream: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
    ) -> None:
        parts = urlsplit(http_url(base_url, "base_url", error).strip())
        #: the API root each path is appended to, without the URL's query
        self.base_url = urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
        #: the base URL's query (Azure's ``api-version=...``), sent with every request
        self.query = parts.query
        self.name = name
        self.error = error
        self.unavailable = unavailable
        #: the error of a request that ran out of time (``error`` unless the caller tells them apart)
        self.timed_out = timed_out or error
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.merge_stream = merge_stream
        self._rng = random.Random()
        self._sleep = sleep
        #: the cap on requests in flight, held across event loops and threads (one object
        #: shared by threads that each run asyncio.run: docs/decisions.md)
        self._sem = SharedSemaphore(max(1, int(max_concurrency)))
        api_key = (api_key or "").strip()
        extra = check_headers(headers, f"{name}: headers", own=OWN_HEADERS, client="the client")
        if api_key and has_authorization(extra):
            raise BadInput(f"{name}: both an API key and an Authorization header are given; give one "
                           "(the key is sent as 'Authorization: Bearer KEY')")
        if token is not None and (api_key or has_authorization(extra)):
            raise BadInput(f"{name}: a token command ({token.what}) and an API key or an Authorization header are "
                           "given; give one (the token is sent as 'Authorization: Bearer TOKEN')")
        #: where each request's bearer token comes from (None: the key or headers alone)
        self.token = token
        #: the names of the headers given (their values are secrets), for messages
        self.header_names = list(extra)
        self._secrets = [api_key] if len(api_key) >= 4 else []  # a 1-letter "key" would mask that letter everywhere
        # a header's value, and the credential after its scheme ("Bearer tok-123": a server may quote "tok-123")
        values = [v for v in extra.values() if len(v) >= 4]
        values += [v.split(None, 1)[1] for v in values if len(v.split(None, 1)) == 2 and len(v.split(None, 1)[1]) >= 4]
        self._secrets += sorted(set(values), key=len, reverse=True)
        self._secrets += url_secrets(self.url_of(""))  # a password, a ?key=: as written and decoded
        #: ``base_url`` as messages show it (a password or a ?key= in it masked)
        self.shown_url = shown_url(self.url_of(""))
        headers = {"Accept": "application/json"}
        if api_key:
            bad = _header_safe(api_key)
            if bad is not None:
                raise unavailable(
                    f"{name}: the API key holds a character an HTTP header cannot carry (a control or "
                    f"non-ASCII character at position {bad + 1} of {len(api_key)}); check the key"
                )
            headers["Authorization"] = f"Bearer {api_key}"
        self._has_key = bool(api_key)
        #: what every request carries (the key among them: never shown)
        self._headers = httpx.Headers(headers | extra)
        self._client_args: dict[str, Any] = dict(
            headers=self._headers,
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            limits=httpx.Limits(
                max_connections=max(1, int(max_concurrency)),
                max_keepalive_connections=max(1, int(max_concurrency)),
            ),
            transport=transport,
        )
        #: one client per event loop (its connections are that loop's), closed as the loop shuts down
        self._clients: LoopClients[httpx.AsyncClient] = LoopClients(
            lambda: httpx.AsyncClient(**self._client_args), httpx.AsyncClient.aclose)

    def url_of(self, path: str) -> str:
        """``base_url + path``, with the base URL's query after it."""
        return f"{self.base_url}{path}" + (f"?{self.query}" if self.query else "")

    def shown(self, path: str) -> str:
        """:meth:`url_of` as messages show it (a password or a ``?key=`` masked)."""
        return shown_url(self.url_of(path))

    def redact(self, text: str) -> str:
        """``text`` with the API key, header values, a URL's password or ``?key=`` and every
        token of the token command replaced by ``***``."""
        issued = [t for t in self.token.issued if len(t) >= 4] if self.token is not None else []
        for secret in [*sorted(issued, key=len, reverse=True), *self._secrets]:
            text = text.replace(secret, "***")
        return text

    def _backoff(self, attempt: int) -> float:
        return backoff_delay(attempt, self.backoff_base, self.backoff_max, self._rng)

    async def _send(self, url: str, body: dict[str, Any], bearer: str | None) -> httpx.Response:
        """One attempt, the whole of it within ``timeout`` (httpx bounds each read only)."""
        headers = {"Authorization": f"Bearer {bearer}"} if bearer is not None else None
        client = await self._clients.get()
        async with self._sem:
            try:
                return await asyncio.wait_for(client.post(url, json=body, headers=headers), self.timeout)
            except asyncio.TimeoutError:
                raise httpx.ReadTimeout("the whole reply took too long") from None

    async def _bearer(self, refused: str | None = None) -> str | None:
        """The token command's token (a new one after ``refused`` was refused: None when the
        command gives no other); its failure is ``unavailable``, as no request can succeed."""
        if self.token is None:
            return None
        try:
            return await (self.token.get() if refused is None else self.token.refresh(refused))
        except TraversalsError as e:
            raise self.unavailable(f"{self.name}: {e}") from None

    async def post(self, path: str, body: dict[str, Any], *, size: str | None = None) -> dict[str, Any]:
        """POST ``body`` to ``base_url + path``; the reply's JSON object. ``size`` says how
        long the input was, for a 400 that says it is too long."""
        url, shown = self.url_of(path), self.shown(path)
        attempt = 0
        bearer = await self._bearer()
        renewed = False  # a token refused is fetched anew once per request
        while True:
            try:
                resp = await self._send(url, body, bearer)
            except httpx.TimeoutException as e:
                if isinstance(e, httpx.ConnectTimeout) and attempt < self.max_retries:
                    await self._sleep(self._backoff(attempt))
                    attempt += 1
                    continue
                kind = type(e).__name__
                raise self.timed_out(
                    f"{self.name}: POST {shown} timed out ({kind}, limit {self.timeout:g} s; "
                    "a slow server needs a longer time limit, e.g. --llm-timeout)"
                ) from None
            except UnicodeEncodeError as e:
                raise self.error(
                    f"{self.name}: the request to {shown} holds text that is not valid Unicode ({e.reason})"
                ) from None
            except (httpx.TransportError, OSError) as e:
                if attempt < self.max_retries:
                    await self._sleep(self._backoff(attempt))
                    attempt += 1
                    continue
                raise self.unavailable(
                    f"{self.name}: cannot reach {shown} after {attempt + 1} attempts: "
                    f"{type(e).__name__}: {self.redact(str(e)) or 'connection failed'}"
                ) from None
            if resp.status_code in (401, 403) and bearer is not None and not renewed:
                renewed = True
                fresh = await self._bearer(refused=bearer)
                if fresh is not None:
                    bearer = fresh
                    continue
            if 300 <= resp.status_code < 400:
                raise self._redirected(resp, shown, path)
            if resp.status_code < 400:
                return self._reply(resp, shown)
            if resp.status_code in RETRY_STATUS and attempt < self.max_retries and not self._too_long(resp):
                wait = _retry_after(resp.headers)
                delay = (
                    self._backoff(attempt)
                    if wait is None
                    else min(wait, self.backoff_max)
                )
                await self._sleep(delay)
                attempt += 1
                continue
            raise self._failure(resp, shown, attempt, size)

    def _redirected(self, resp: httpx.Response, shown: str, path: str) -> Exception:
        """The ``unavailable`` error of a redirect, which is not followed (a POST may become a
        GET, the API key go to another host): it names where the endpoint points instead."""
        where = resp.headers.get("location")
        msg = f"{self.name}: POST {shown} -> HTTP {resp.status_code}: "
        if not where:
            return self.unavailable(msg + "redirected without saying where (no Location header); check the base URL")
        where = self.redact(str(resp.request.url.join(where)))
        base = where[: -len(path)] if path and where.endswith(path) else None
        hint = f"base URL {base}" if base else "check the base URL"
        return self.unavailable(f"{msg}redirected to {where} (use the URL it points to: {hint})")

    def _reply(self, resp: httpx.Response, shown: str) -> dict[str, Any]:
        """The JSON object of a successful response (module doc: odd bodies)."""
        try:
            data = read_json(resp)
        except ValueError:
            events = _stream_events(resp.text)
            if events is not None and self.merge_stream is not None:
                return self.merge_stream(events)
            page = html_text(resp.text)
            if events is not None:
                why = "streamed its reply as server-sent events, though not asked to"
            elif page is not None:
                why = f"returned an HTML page ({self.redact(page)}), not JSON: is {self.shown_url} the API root (e.g. .../v1)?"
            else:
                why = f"returned non-JSON ({self.redact(resp.text[:100])!r})"
            raise self.error(f"{self.name}: POST {shown} {why}") from None
        if not isinstance(data, dict):
            what = "null" if data is None else type(data).__name__
            raise self.error(f"{self.name}: POST {shown} returned a JSON {what}, not an object")
        return data

    @staticmethod
    def _too_long(resp: httpx.Response) -> bool:
        """Whether a failed response says this request's input is too long (llama.cpp's
        server says so with a 500: retrying it would only fail again, then stop a run)."""
        return resp.status_code in (400, 413, 422, 500) and (
            resp.status_code == 413 or bool(_TOO_LONG.search(error_detail(resp))))

    def _failure(self, resp: httpx.Response, shown: str, attempt: int, size: str | None) -> TraversalsError:
        """The named error of a response that failed for good, with its ``status`` and the
        server's ``detail``."""
        status = resp.status_code
        detail = self.redact(error_detail(resp))  # a server may quote the key it refused
        msg = f"{self.name}: POST {shown} -> HTTP {status}: {detail}"
        err: TraversalsError
        if status in (401, 403):
            sent = (["the API key"] if self._has_key else []) + [f"header {h}" for h in self.header_names]
            if self.token is not None:
                sent.append(f"the token {self.token.what} printed")
            hint = ("no API key was sent: set one (the CLI reads $OPENAI_API_KEY; or a header, --llm-header)"
                    if not sent else "check the API key" if sent == ["the API key"]
                    else f"check the credentials sent: {', '.join(sent)}")
            err = self.unavailable(f"{msg} ({hint})")
        elif status == 404:  # a wrong base URL or model: every request would fail
            if "/deployments/" in self.base_url and "api-version=" not in self.query:  # Azure OpenAI's
                hint = ("an Azure deployment's URL needs its API version: .../deployments/NAME?api-version=2024-10-21, "
                        "or use the v1 API, https://RESOURCE.openai.azure.com/openai/v1")
            elif not self.base_url.endswith("/v1") and not self.query:
                hint = "base URL usually ends with /v1"
            else:
                hint = "check the base URL and the model name"
            err = self.unavailable(f"{msg} ({hint})")
        elif self._too_long(resp):  # this request's own, whatever the status says
            # an LLM's: PromptTooLong, which a search survives by giving up that node
            too_long = PromptTooLong if issubclass(PromptTooLong, self.error) else self.error
            err = too_long(f"{msg} (this request: {size})" if size else msg)
        elif status in RETRY_STATUS:  # down or overloaded, not this request's fault
            err = self.unavailable(f"{msg} (gave up after {attempt + 1} attempts)")
        elif status in (400, 422) and _NO_MODEL.search(detail):
            err = self.unavailable(f"{msg} (check the model name)")
        else:
            err = self.error(msg)
        err.status, err.detail = status, detail
        return err

    async def aclose(self) -> None:
        """Close the clients: the running loop's at once, those of other loops still running
        in their own loop (:meth:`traversals.aio.LoopClients.aclose`)."""
        await self._clients.aclose()
