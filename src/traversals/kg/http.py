"""HTTP plumbing shared by the remote KG backends (SPARQL endpoints, the Wikidata API).

One :class:`HttpClient` wraps a pooled ``httpx.AsyncClient`` and adds what a polite,
robust client of a public endpoint needs:

* a time budget per attempt (``timeout``): the whole request -- connect, send, wait,
  read -- must finish within it, not just each socket operation; it starts once one of
  the pool's ``max_connections`` is free (a query queued behind the client's others is
  not the endpoint being slow);
* retries with exponential backoff and jitter on HTTP 429, HTTP 5xx and connection
  errors, honouring ``Retry-After`` (seconds or an HTTP date) for every request of the
  client, not only the one it answered. Other 4xx answers and
  timeouts are not retried: the same query would fail again (and on WDQS a timed-out
  query counts against the client's budget);
* a descriptive ``User-Agent`` (Wikimedia's policy: tool/version, a URL, a contact, the
  library), see :func:`default_user_agent`;
* an optional :class:`RateLimit` (minimum interval between requests, maximum requests
  in flight);
* errors mapped to the library's exceptions, each naming the endpoint:
  :class:`~traversals.errors.KGUnavailable` (unreachable, rate limited, server errors
  after all retries), :class:`~traversals.errors.KGTimeout` (budget exceeded),
  :class:`~traversals.errors.KGAuthError` (HTTP 401 / 403: credentials missing or refused),
  :class:`~traversals.errors.KGQueryError` (the server rejected the request, other 4xx).

Credentials travel per request (``auth=``, ``headers=``), so one client may serve several
endpoints, each with its own; httpx drops the ``Authorization`` header when a redirect leaves
the endpoint's origin.

An ``httpx.AsyncClient`` is created lazily on first use in each event loop (so an
``HttpClient`` can be built outside one, and serve one ``asyncio.run`` after another, or
threads that each run their own), and is closed as that loop shuts down; the
:class:`RateLimit` holds across all the loops and threads together. Call
:meth:`HttpClient.aclose` when done.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Awaitable, Callable, Mapping

import httpx

from ..aio import LoopClients, SharedSemaphore
from ..errors import BadInput, KGAuthError, KGError, KGQueryError, KGTimeout, KGUnavailable
from ..retry import backoff_delay, parse_retry_after
from ..validate import shown_url

#: redirects followed for one request (httpx's default)
MAX_REDIRECTS = 20

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: statuses that mean "not with these credentials" (:class:`~traversals.errors.KGAuthError`)
AUTH_STATUSES = frozenset({401, 403})


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("traversals")
    except Exception:  # pragma: no cover - not installed
        return "0"


def default_user_agent(contact: str | None = None, *, url: str | None = None) -> str:
    """``traversals/<version> (<url>; <contact>) httpx/<version>``, leaving out what is
    not given.

    Wikimedia's User-Agent policy asks bots for a tool name and version and a way to
    contact the operator (a URL, an e-mail address or a user page); pass ``contact`` when
    you run against public Wikimedia services. The project has no published address, so
    no URL is named unless you pass one: a made-up one would send Wikimedia's operators
    to a page that does not exist.
    """
    inside = "; ".join(part for part in (url, contact) if part)
    return f"traversals/{_package_version()}{f' ({inside})' if inside else ''} httpx/{httpx.__version__}"


@dataclass(frozen=True)
class RateLimit:
    """Client-side pacing: at least ``min_interval`` seconds between the starts of two
    requests, and at most ``max_concurrency`` requests in flight (``None``: no cap), of one
    :class:`HttpClient` in all the event loops and threads that use it."""

    min_interval: float = 0.0
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.min_interval < 0:
            raise ValueError("min_interval must be >= 0")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")


@dataclass
class HttpStats:
    """What went over the wire (cache hits never reach the HTTP layer)."""

    requests: int = 0  # attempts sent, retries included
    retries: int = 0
    waited_seconds: float = 0.0  # time slept for backoff / Retry-After / rate limit
    statuses: dict[int, int] = field(default_factory=dict)


def first_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of a server message, shortened."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return _clip(line, limit)
    return ""


def _clip(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


#: how much of an HTML page is read for its message (an error page's stack trace can run long)
_HTML_READ = 200_000
#: a page's start: an XML declaration, comments (none crossing another's end: a pattern that
#: could backtracked exponentially over a body of many comments, blocking the event loop
#: beyond any timeout), then the doctype or the html element
_HTML_START = re.compile(r"\s*(?:<\?xml[^>]*>\s*)?(?:<!--(?:[^-]|-(?!->))*-->\s*)*<(?:!doctype\s+html|html)\b", re.I)
#: markup: a body that begins with a tag, or holds one of a page's elements near its start
_HTML_MARKUP = re.compile(r"\A\s*<[A-Za-z!]|<(?:html|head|body|title|h1|div|p|pre)\b", re.I)


def is_html(text: str, content_type: str | None = None) -> bool:
    """Is the body an HTML page: it begins as one (``<!DOCTYPE html>``, ``<html>``) whatever
    its type claims, or its Content-Type says HTML and it holds markup? A plain-text message
    labelled text/html (Virtuoso labels its text replies so) is not parsed as HTML, which
    would drop what it writes in angle brackets ("before '<http://example.org/a>'")."""
    head = text[:2000]
    if _HTML_START.match(head):
        return True
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind in ("text/html", "application/xhtml+xml") and bool(_HTML_MARKUP.search(head))


class _PageText(HTMLParser):
    """The title, the first ``<h1>`` and the lines of text of an HTML page (not its
    scripts or styles): each block element starts a line, as a line break in ``<pre>`` does."""

    _BLOCKS = frozenset({"address", "article", "aside", "blockquote", "body", "br", "center", "dd", "div", "dl",
                         "dt", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
                         "main", "nav", "ol", "p", "pre", "section", "table", "td", "th", "title", "tr", "ul"})
    _HIDDEN = frozenset({"script", "style", "noscript", "template", "head"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.h1: list[str] = []
        self.text: list[str] = []
        self._open: list[str] = []  # the hidden, title and h1 elements we are inside
        self._h1_done = False

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "body" and "head" in self._open:  # a page that never closed its <head>
            self._open.remove("head")
        if tag in self._BLOCKS:
            self.text.append("\n")
        if tag in self._HIDDEN or tag in ("title", "h1", "pre"):
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._BLOCKS:
            self.text.append("\n")
        if tag in self._open:
            while self._open and self._open.pop() != tag:
                pass
            if tag == "h1" and self.h1:
                self._h1_done = True

    def handle_data(self, data: str) -> None:
        if "pre" not in self._open:  # a line break in HTML's text is a space, but in <pre>
            data = re.sub(r"\s+", " ", data)
        if "title" in self._open:
            self.title.append(data)
        elif not self._HIDDEN.intersection(self._open):
            if "h1" in self._open and not self._h1_done:
                self.h1.append(data)
            self.text.append(data)

    def lines(self) -> list[str]:
        return [" ".join(ln.split()) for ln in "".join(self.text).split("\n") if ln.strip()]


def _one_line(parts: list[str]) -> str:
    return " ".join("".join(parts).split())


def html_message(text: str, limit: int = 300) -> str:
    """An HTML page's message on one line: its title or first ``<h1>``, then the first line
    of its text that says more (``502 Bad Gateway: nginx``, ``Error: at org.Foo.bar(...)``);
    "" when it has no text. A page that cannot be parsed gives its first line of text with
    the tags taken out; this never raises."""
    try:
        page = _PageText()
        for start in range(0, min(len(text), _HTML_READ), 8192):
            page.feed(text[start : start + 8192])
            if len(page.lines()) > 5:  # enough to say what went wrong
                break
        head = _one_line(page.title) or _one_line(page.h1)
        more = next((ln for ln in page.lines() if ln.casefold() not in head.casefold()), "")
        message = f"{head}: {more}" if head and more else head or more
    except Exception:  # a page html.parser cannot take: its text without the tags
        message = first_line(re.sub(r"<[^>]*>", " ", text[:_HTML_READ]), limit)
    return _clip(" ".join(message.split()), limit)


def server_message(text: str, content_type: str | None = None, limit: int = 300) -> str:
    """A server's error message on one line: an HTML page's title and what it says
    (:func:`html_message`; its first line is ``<!DOCTYPE html>``), else the first line."""
    if is_html(text, content_type):
        return html_message(text, limit)
    return first_line(text, limit)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    if not text and exc.__cause__ is not None:
        text = str(exc.__cause__).strip()
    text = first_line(text) if text else ""
    return text or type(exc).__name__


@dataclass
class _Pool:
    """One event loop's client, and its connection slots: a request holds one of the pool's
    connections before its time budget starts, so the budget is the endpoint's time, not the
    wait behind this client's other requests."""

    client: httpx.AsyncClient
    connections: asyncio.Semaphore

    async def aclose(self) -> None:
        await self.client.aclose()


class HttpClient:
    """A pooled HTTP client with time budgets, retries, a User-Agent and rate limiting.

    Parameters
    ----------
    timeout:
        Seconds one attempt may take in total (connect + send + server time + read).
    max_retries:
        Retries after the first attempt for 429 / 5xx / connection errors.
    backoff_base, backoff_max:
        Exponential backoff: ``min(backoff_max, backoff_base * 2**n)`` with jitter.
    max_retry_after:
        Longest ``Retry-After`` that is waited for; a server asking for more gets a
        :class:`KGUnavailable` ("rate limited, retry after N s") instead of a silent
        multi-minute sleep.
    user_agent:
        Full User-Agent string; default :func:`default_user_agent`.
    rate_limit:
        Optional :class:`RateLimit`.
    transport, event_hooks:
        Passed to ``httpx.AsyncClient`` (tests use a ``MockTransport`` or hooks).
    sleep, rng:
        Injected for tests (``asyncio.sleep`` and a ``random.Random``).
    """

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 300.0,
        user_agent: str | None = None,
        rate_limit: RateLimit | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
        max_connections: int = 10,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.max_retry_after = float(max_retry_after)
        self.user_agent = user_agent or default_user_agent()
        if not all(32 <= ord(c) < 127 for c in self.user_agent) or not self.user_agent.strip():
            # it failed at the first request: an accent as UnicodeEncodeError, a line break
            # as an "unreachable" endpoint after five attempts
            raise BadInput(f"the User-Agent {self.user_agent!r} must be one line of printable ASCII (a header cannot "
                           "carry a line break or an accent: write 'Jose Nunez' for 'José Núñez')")
        self.rate_limit = rate_limit
        self.stats = HttpStats()
        self._transport = transport
        self._event_hooks = dict(event_hooks or {})
        self._max_connections = max_connections
        self._sleep = sleep or asyncio.sleep
        self._rng = rng or random.Random()
        #: one pool per event loop (its connections are that loop's), closed as the loop shuts down
        self._pools: LoopClients[_Pool] = LoopClients(self._new_pool, _Pool.aclose)
        #: the cap on requests in flight, held across event loops and threads (WDQS asks for one
        #: at a time from a client, whichever thread sends it: docs/decisions.md)
        self._semaphore = (SharedSemaphore(rate_limit.max_concurrency)
                           if rate_limit is not None and rate_limit.max_concurrency is not None else None)
        #: taken by one request at a time, in whichever loop or thread, to wait out ``min_interval``
        self._pace_lock = (SharedSemaphore(1)
                           if rate_limit is not None and rate_limit.min_interval > 0 else None)
        self._next_start = 0.0
        #: no request starts before this (time.monotonic()): a server's Retry-After holds for
        #: the whole client, not only the request it answered (WDQS bans a client that goes on)
        self._resume_at = 0.0
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------

    def _new_pool(self) -> _Pool:
        client = httpx.AsyncClient(
            headers={"User-Agent": self.user_agent},
            # The overall budget is enforced by asyncio.timeout; these keep a dead
            # connection attempt from eating the whole budget of every retry.
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
            limits=httpx.Limits(
                max_connections=self._max_connections,
                max_keepalive_connections=self._max_connections,
            ),
            transport=self._transport,
            event_hooks=self._event_hooks or None,
            follow_redirects=True,
        )
        return _Pool(client, asyncio.Semaphore(self._max_connections))

    async def _get_pool(self) -> _Pool:
        """The running loop's client and its connection slots, made on the loop's first request."""
        if self._closed:
            raise KGError("HTTP client is closed")
        return await self._pools.get()

    async def aclose(self) -> None:
        """Close the clients: the running loop's at once, those of other loops still running
        in their own loop (:meth:`traversals.aio.LoopClients.aclose`)."""
        self._closed = True
        await self._pools.aclose()

    async def __aenter__(self) -> "HttpClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- pacing ----------------------------------------------------------------------

    async def _pace(self) -> None:
        if self._pace_lock is None or self.rate_limit is None:
            return
        async with self._pace_lock:
            now = time.monotonic()
            wait = self._next_start - now
            if wait > 0:
                self.stats.waited_seconds += wait
                await self._sleep(wait)
                now = time.monotonic()
            self._next_start = max(now, self._next_start) + self.rate_limit.min_interval

    # -- requests --------------------------------------------------------------------

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        data: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        what: str = "endpoint",
        timeout: float | None = None,
        auth: httpx.Auth | None = None,
    ) -> httpx.Response:
        """Send a request and return the successful (2xx) response.

        ``what`` names the service in error messages ("SPARQL endpoint" gives
        ``"SPARQL endpoint http://... is unreachable: ..."``); ``url`` should carry no password
        (it is named in them): give it as ``auth`` (``httpx.BasicAuth``); a token in its query
        is named as ``***``.
        """
        budget = self.timeout if timeout is None else float(timeout)
        where = f"{what} {shown_url(url)}"
        target = with_params(url, params)
        pool = await self._get_pool()
        semaphore = self._semaphore
        attempt = 0
        while True:
            retry_after: float | None = None
            failure: str
            try:
                if semaphore is not None:
                    await semaphore.acquire()
                try:
                    await self._pace()
                    async with pool.connections:  # a free connection first, then the budget
                        await self._hold(where)
                        self.stats.requests += 1
                        async with asyncio.timeout(budget):
                            response = await self._send(pool.client, method, target, data, headers, auth)
                finally:
                    if semaphore is not None:
                        semaphore.release()
            except (TimeoutError, httpx.TimeoutException) as e:
                if isinstance(e, httpx.ConnectTimeout):
                    failure = f"{where} is unreachable: connection timed out"
                else:
                    raise KGTimeout(
                        f"{where} did not answer within the {budget:g} s time budget"
                    ) from None
            except httpx.LocalProtocolError as e:  # this client could not send it: no retry helps
                raise KGQueryError(f"{where}: the request could not be sent ({_describe(e)})") from None
            except httpx.TransportError as e:
                # ConnectError, ReadError (server died mid-answer), RemoteProtocolError ...
                failure = f"{where} is unreachable: {_describe(e)}"
            except httpx.TooManyRedirects:
                raise KGQueryError(f"{where} redirects in a loop (more than {MAX_REDIRECTS} redirects)") from None
            except httpx.RequestError as e:  # a body that cannot be decoded (a wrong Content-Encoding) ...
                raise KGQueryError(f"{where} sent an answer that cannot be read: {_describe(e)}") from None
            else:
                status = response.status_code
                self.stats.statuses[status] = self.stats.statuses.get(status, 0) + 1
                if 200 <= status < 300:
                    return response
                message = server_message(response.text, response.headers.get("content-type"))
                if status in RETRY_STATUSES:
                    if status != 429 and looks_like_timeout(response.text[:20000]):
                        raise KGTimeout(
                            f"{where} gave up on the query (its own time limit): {message}"
                        )
                    retry_after = parse_retry_after(response.headers.get("Retry-After"))
                    if retry_after is not None:  # for every request of the client, this one's last attempt too
                        self._resume_at = max(self._resume_at, time.monotonic() + retry_after)
                    if status == 429:
                        failure = f"{where} is rate limiting requests (HTTP 429)"
                    else:
                        failure = f"{where} failed with HTTP {status}" + (
                            f": {message}" if message else ""
                        )
                    if retry_after is not None and retry_after > self.max_retry_after:
                        raise KGUnavailable(
                            f"{failure}; it asks to retry after {retry_after:.0f} s"
                        )
                elif status in AUTH_STATUSES:
                    raise KGAuthError(
                        f"{where} refused access (HTTP {status}"
                        + (", unauthorized" if status == 401 else ", forbidden")
                        + ")" + (f": {message}" if message else "")
                    )
                else:
                    raise KGQueryError(
                        f"{where} rejected the request (HTTP {status})"
                        + (f": {message}" if message else "")
                    )
            # a retryable failure
            if attempt >= self.max_retries:
                suffix = f" (after {attempt + 1} attempts)" if attempt else ""
                raise KGUnavailable(failure + suffix)
            delay = backoff_delay(attempt, self.backoff_base, self.backoff_max, self._rng)
            if retry_after is not None:
                delay = max(delay, retry_after)
            attempt += 1
            self.stats.retries += 1
            self.stats.waited_seconds += delay
            await self._sleep(delay)

    async def _hold(self, where: str) -> None:
        """Wait out a ``Retry-After`` the server gave any request of this client (checked once
        this request holds its connection: it may have queued before that answer came, and
        again if another answer extends the wait meanwhile); a wait past ``max_retry_after``
        is :class:`KGUnavailable` at once, as for the request that was told."""
        seen = None
        while (held := self._resume_at - time.monotonic()) > 0 and self._resume_at != seen:
            if held > self.max_retry_after:
                raise KGUnavailable(f"{where} asked this client to wait {held:.0f} s before its next request "
                                    "(Retry-After)")
            seen = self._resume_at
            self.stats.waited_seconds += held
            await self._sleep(held)

    @staticmethod
    async def _send(client: httpx.AsyncClient, method: str, url: str | httpx.URL, data: Mapping[str, str] | None,
                    headers: Mapping[str, str] | None, auth: httpx.Auth | None) -> httpx.Response:
        """One request, its redirects followed as httpx follows them, except that the
        caller's ``headers`` (an ``X-Api-Key``, a gateway's token) are not sent on to another
        origin: httpx drops only ``Authorization`` there."""
        response = await client.request(method, url, data=data, headers=headers, auth=auth, follow_redirects=False)
        origin = response.request.url.copy_with(path="/", query=None, fragment=None)
        for _ in range(MAX_REDIRECTS):
            following = response.next_request
            if following is None:
                return response
            if headers and following.url.copy_with(path="/", query=None, fragment=None) != origin:
                for name in headers:
                    following.headers.pop(name, None)
            response = await client.send(following, follow_redirects=False)
        raise httpx.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects", request=response.request)

    async def get(self, url: str, **kw: Any) -> httpx.Response:
        return await self.request("GET", url, **kw)

    async def post(self, url: str, **kw: Any) -> httpx.Response:
        return await self.request("POST", url, **kw)


def with_params(url: str, params: Mapping[str, str] | None) -> httpx.URL:
    """``url`` with ``params`` added to the query string it already has.

    httpx *replaces* a URL's query string with ``params``, so an endpoint given as
    ``http://host/sparql?default-graph-uri=urn:g`` (or with ``?infer=false``, an API key
    ...) would lose its own parameters on every GET and keep them on every POST: short
    and long queries would ask different graphs. Here the URL's parameters stay, and a
    parameter of ``params`` replaces one of the same name."""
    target = httpx.URL(url)
    return target.copy_merge_params(params) if params else target


def looks_like_timeout(message: str) -> bool:
    """Blazegraph (WDQS) answers a query that ran out of time with HTTP 500 and a
    ``java.util.concurrent.TimeoutException``; retrying it only burns more budget."""
    low = message.lower()
    return "timeoutexception" in low or "query timeout" in low or "timed out" in low
