"""HTTP plumbing (retries, Retry-After, time budget, User-Agent, rate limit) and the
persistent query cache, with in-process transports (no sockets; the real-server tests
are in tests/integration/test_sparql_endpoint.py)."""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import threading
import time

import httpx
import pytest

from traversals.errors import KGQueryError, KGTimeout, KGUnavailable
from traversals.kg.cache import QueryCache, cache_key, default_cache_dir, default_cache_path
from traversals.kg.http import (
    HttpClient,
    RateLimit,
    backoff_delay,
    default_user_agent,
    first_line,
    parse_retry_after,
)

URL = "http://sparql.test/query"


class Sleeps:
    """A fake ``sleep`` that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, d: float) -> None:
        self.delays.append(d)


def scripted(*answers):
    """A transport that plays ``answers`` in order (Response objects or exceptions)."""
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        a = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(a, Exception):
            raise a
        return a

    return httpx.MockTransport(handler), seen


def client(transport, **kw) -> tuple[HttpClient, Sleeps]:
    sleeps = Sleeps()
    kw.setdefault("rng", random.Random(7))
    return HttpClient(transport=transport, sleep=sleeps, **kw), sleeps


# -- User-Agent -------------------------------------------------------------------------


def test_default_user_agent_follows_wikimedia_policy() -> None:
    ua = default_user_agent("ops@example.org")
    assert re.fullmatch(r"traversals/\S+ \(ops@example\.org\) httpx/\S+", ua), ua
    assert re.fullmatch(r"traversals/\S+ \(https://x\.test; ops@example\.org\) httpx/\S+",
                        default_user_agent("ops@example.org", url="https://x.test"))
    # no contact given: no made-up address either
    assert re.fullmatch(rf"traversals/\S+ httpx/{re.escape(httpx.__version__)}", default_user_agent())


async def test_user_agent_is_sent_and_configurable() -> None:
    transport, seen = scripted(httpx.Response(200, text="ok"))
    http, _ = client(transport, user_agent="mybot/1.0 (https://x.test; me@x.test) httpx")
    await http.get(URL)
    assert seen[0].headers["User-Agent"] == "mybot/1.0 (https://x.test; me@x.test) httpx"
    await http.aclose()
    transport, seen = scripted(httpx.Response(200, text="ok"))
    http, _ = client(transport)
    await http.get(URL)
    assert seen[0].headers["User-Agent"] == default_user_agent()
    await http.aclose()


def test_a_user_agent_a_header_cannot_carry_is_refused_up_front() -> None:
    """An accent failed the first request with UnicodeEncodeError; a line break was retried
    five times and reported as an unreachable endpoint."""
    from traversals.errors import BadInput

    for bad in ("study/1.0 (José Núñez <jn@example.org>)", "bot/1\r\nX-Injected: 1", " "):
        with pytest.raises(BadInput, match="must be one line of printable ASCII"):
            HttpClient(user_agent=bad)
    with pytest.raises(BadInput, match="printable ASCII"):
        HttpClient(user_agent=default_user_agent("Zoë <z@example.org>"))


# -- retries ---------------------------------------------------------------------------


async def test_429_with_retry_after_waits_then_succeeds() -> None:
    transport, seen = scripted(
        httpx.Response(429, headers={"Retry-After": "3"}, text="slow down"),
        httpx.Response(200, text="fine"),
    )
    http, sleeps = client(transport)
    r = await http.get(URL)
    assert r.text == "fine"
    assert len(seen) == 2
    assert sleeps.delays and sleeps.delays[0] >= 3.0
    assert http.stats.retries == 1 and http.stats.statuses == {429: 1, 200: 1}


async def test_a_retry_after_holds_every_request_of_the_client() -> None:
    """WDQS bans a client that goes on after a 429: the other queued requests went out at
    once, inside the Retry-After window (the wait was the answered request's only)."""
    events: list[str] = []

    class Recorded(Sleeps):
        async def __call__(self, d: float) -> None:
            events.append(f"sleep {round(d)}")
            await super().__call__(d)

    answered = []

    async def handler(request: httpx.Request) -> httpx.Response:
        events.append(f"send {request.url.params['q']}")
        if not answered:
            answered.append(True)
            return httpx.Response(429, headers={"Retry-After": "30"})
        return httpx.Response(200, text="ok")

    http = HttpClient(transport=httpx.MockTransport(handler), sleep=Recorded(), rng=random.Random(7),
                      rate_limit=RateLimit(max_concurrency=1))
    await asyncio.gather(*(http.get(URL, params={"q": q}) for q in "abc"))
    # a's own wait, then b's: b waited too before going out (it went out right after a's 429)
    assert events[0] == "send a" and events[:events.index("send b")].count("sleep 30") >= 2, events
    await http.aclose()


async def test_a_retry_after_holds_requests_queued_for_a_connection_and_after_a_last_attempt() -> None:
    """Requests waiting for one of the pool's connections went out right after the 429; and a
    Retry-After on a request that gave up (its last attempt) held no other request."""
    events: list[str] = []

    class Recorded(Sleeps):
        async def __call__(self, d: float) -> None:
            events.append(f"sleep {round(d)}")
            await super().__call__(d)

    def handler(request: httpx.Request) -> httpx.Response:
        events.append(f"send {request.url.params['q']}")
        if request.url.params["q"] == "a":
            return httpx.Response(429, headers={"Retry-After": "30"})
        return httpx.Response(200, text="ok")

    http = HttpClient(transport=httpx.MockTransport(handler), sleep=Recorded(), max_connections=1, max_retries=0)
    got = await asyncio.gather(*(http.get(URL, params={"q": q}) for q in "abc"), return_exceptions=True)
    assert isinstance(got[0], KGUnavailable)  # a gave up at once (no retry left) ...
    assert events[:2] == ["send a", "sleep 30"], events  # ... and b, queued for the connection, waited
    http2 = HttpClient(transport=httpx.MockTransport(handler), sleep=Recorded(), max_retries=0)
    events.clear()
    with pytest.raises(KGUnavailable):
        await http2.get(URL, params={"q": "a"})
    await http2.get(URL, params={"q": "b"})  # the next one, later: it waits too
    assert events == ["send a", "sleep 30", "send b"], events
    await http.aclose()
    await http2.aclose()


async def test_retry_after_http_date_is_honoured() -> None:
    when = email.utils.formatdate(time.time() + 5, usegmt=True)
    transport, _ = scripted(
        httpx.Response(429, headers={"Retry-After": when}), httpx.Response(200, text="ok")
    )
    http, sleeps = client(transport)
    await http.get(URL)
    assert 3.5 <= sleeps.delays[0] <= 6.0


async def test_5xx_backs_off_exponentially_with_jitter() -> None:
    transport, seen = scripted(
        httpx.Response(503), httpx.Response(502), httpx.Response(500), httpx.Response(200, text="ok")
    )
    http, sleeps = client(transport, backoff_base=1.0, max_retries=4)
    assert (await http.get(URL)).text == "ok"
    assert len(seen) == 4
    d = sleeps.delays
    assert len(d) == 3
    for n, delay in enumerate(d):  # equal jitter: between half and all of base*2**n
        assert 2**n / 2 <= delay <= 2**n
    assert d[2] > d[0]


async def test_retries_are_bounded_and_end_in_kg_unavailable() -> None:
    transport, seen = scripted(httpx.Response(503, text="Service Unavailable\nmore"))
    http, sleeps = client(transport, max_retries=2)
    with pytest.raises(KGUnavailable) as e:
        await http.get(URL, what="SPARQL endpoint")
    assert len(seen) == 3 and len(sleeps.delays) == 2
    msg = str(e.value)
    assert "\n" not in msg and URL in msg and "503" in msg and "3 attempts" in msg


async def test_4xx_is_a_query_error_with_the_server_message_and_no_retry() -> None:
    transport, seen = scripted(
        httpx.Response(400, text="\nerror at 1:22: expected one of ...\nsecond line")
    )
    http, sleeps = client(transport)
    with pytest.raises(KGQueryError) as e:
        await http.get(URL, what="SPARQL endpoint")
    assert len(seen) == 1 and not sleeps.delays
    assert "error at 1:22: expected one of ..." in str(e.value)
    assert "second line" not in str(e.value)
    assert "HTTP 400" in str(e.value) and URL in str(e.value)


async def test_connection_errors_are_retried_then_unavailable() -> None:
    transport, seen = scripted(httpx.ConnectError("[Errno 111] Connection refused"))
    http, sleeps = client(transport, max_retries=3)
    with pytest.raises(KGUnavailable) as e:
        await http.get(URL, what="SPARQL endpoint")
    assert len(seen) == 4 and len(sleeps.delays) == 3
    assert str(e.value).startswith(f"SPARQL endpoint {URL} is unreachable: ")
    assert "Connection refused" in str(e.value)


async def test_connection_error_then_success() -> None:
    transport, seen = scripted(httpx.ConnectError("refused"), httpx.Response(200, text="ok"))
    http, _ = client(transport)
    assert (await http.get(URL)).text == "ok"


async def test_read_timeout_is_kg_timeout_without_retry() -> None:
    transport, seen = scripted(httpx.ReadTimeout("timed out"))
    http, sleeps = client(transport, timeout=7)
    with pytest.raises(KGTimeout) as e:
        await http.get(URL, what="SPARQL endpoint")
    assert len(seen) == 1 and not sleeps.delays
    assert URL in str(e.value) and "7 s" in str(e.value)


async def test_total_time_budget_is_enforced() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200)

    http = HttpClient(transport=httpx.MockTransport(slow), timeout=0.2)
    t0 = time.monotonic()
    with pytest.raises(KGTimeout):
        await http.get(URL)
    assert time.monotonic() - t0 < 2
    await http.aclose()


async def test_blazegraph_timeout_500_is_not_retried() -> None:
    body = "SPARQL-QUERY: queryStr=SELECT ...\njava.util.concurrent.ExecutionException: java.util.concurrent.TimeoutException"
    transport, seen = scripted(httpx.Response(500, text=body))
    http, _ = client(transport)
    with pytest.raises(KGTimeout):
        await http.get(URL)
    assert len(seen) == 1


async def test_excessive_retry_after_fails_fast() -> None:
    transport, seen = scripted(httpx.Response(429, headers={"Retry-After": "3600"}))
    http, sleeps = client(transport, max_retry_after=120)
    with pytest.raises(KGUnavailable) as e:
        await http.get(URL)
    assert "3600" in str(e.value) and not sleeps.delays


def test_parse_retry_after() -> None:
    assert parse_retry_after("5") == 5.0
    assert parse_retry_after(" 0 ") == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = time.time()
    assert parse_retry_after(email.utils.formatdate(now - 100, usegmt=True), now=now) == 0.0


def test_backoff_delay_bounds() -> None:
    rng = random.Random(1)
    for attempt in range(10):
        d = backoff_delay(attempt, 0.5, 8.0, rng)
        cap = min(8.0, 0.5 * 2**attempt)
        assert cap / 2 <= d <= cap


def test_first_line() -> None:
    assert first_line("\n\n  hello \nworld") == "hello"
    assert first_line("") == ""
    assert len(first_line("x" * 1000)) <= 300


#: an application server's error page behind a proxy: a long style sheet, then the stack trace
JAVA_PAGE = ("<!DOCTYPE html>\n<html>\n<head><style>" + "body{color:red}\n" * 2000 + "</style></head><body>"
             "<h1>Error</h1><pre>" + "at org.Foo.bar(Foo.java:1)\n" * 500 + "</pre></body></html>")
NGINX_PAGE = ("<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center>"
              "<hr><center>nginx</center></body></html>")


@pytest.mark.parametrize("status, error", [(400, KGQueryError), (502, KGUnavailable)])
async def test_an_html_error_page_is_told_by_its_title_and_text_not_its_doctype(status, error) -> None:
    """An endpoint (or the proxy in front of it) answering with an HTML page: the message
    kept its first line, "<!DOCTYPE html>", and nothing of the error reached the user."""
    for page, said in [(JAVA_PAGE, "Error: at org.Foo.bar(Foo.java:1)"), (NGINX_PAGE, "502 Bad Gateway: nginx")]:
        transport, _ = scripted(httpx.Response(status, text=page, headers={"content-type": "text/html"}))
        http, _ = client(transport, max_retries=0)
        with pytest.raises(error) as e:
            await http.get(URL, what="SPARQL endpoint")
        message = str(e.value)
        assert f"HTTP {status}" in message and message.endswith(f": {said}")
        assert "DOCTYPE" not in message and "\n" not in message


def test_a_server_message_reads_html_by_its_type_or_its_start_and_never_fails() -> None:
    from traversals.kg.http import server_message
    from traversals.kg.sparql import parse_results

    apache = ('<!DOCTYPE HTML PUBLIC "-//IETF//DTD HTML 2.0//EN">\n<html><head>\n<title>403 Forbidden</title>\n'
              "</head><body>\n<h1>Forbidden</h1>\n<p>You don't have permission to access this resource.</p>\n</body></html>")
    assert server_message(apache) == "403 Forbidden: You don't have permission to access this resource."
    assert server_message("<html><body><h1>Oops &amp; <b>more</b></h1><script>x()</script><p>a\n  b", "text/html") == "Oops & more: a b"
    # plain text and JSON keep their first line; an HTML type with no page in it says what it has
    assert server_message("Parser error\nQuery: SELECT", "text/plain") == "Parser error"
    assert server_message('{"error": "bad"}\n', "application/json") == '{"error": "bad"}'
    assert server_message("<b>bold</b> news", "text/html; charset=utf-8") == "bold news"
    for broken in ["<html><", "<!DOCTYPE html><title>never closed", "<<<>>><!x <![CDATA[ <", "<html>" + "<div>" * 5000,
                   "<!DOCTYPE html><p>" + "word " * 100_000, "<html><body>&#xD800;&#99999999;</body>"]:
        said = server_message(broken, "text/html")
        assert isinstance(said, str) and "\n" not in said and len(said) <= 300
    assert len(server_message("<!DOCTYPE html><p>" + "x" * 1000)) == 300
    # plain text labelled text/html (Virtuoso labels its text replies so) keeps its angle brackets
    virtuoso = "Virtuoso 37000 Error SP030: syntax error at 'x' before '<http://example.org/a>'\nSPARQL query: x"
    assert server_message(virtuoso, "text/html") == virtuoso.splitlines()[0]
    assert server_message('{"error": "bad query <x>"}', "text/html") == '{"error": "bad query <x>"}'
    # many comments before a body that is no page: read at once (the start's pattern backtracked
    # exponentially, about a second at 22 comments and doubling with each, beyond any timeout)
    from traversals.kg.http import is_html

    started = time.monotonic()
    assert not is_html("<!-- c -->" * 40 + "{}") and is_html("<!-- a -- b -->\n<!-- c --><!DOCTYPE html><p>x")
    assert time.monotonic() - started < 5  # milliseconds when linear
    with pytest.raises(KGQueryError, match=r"did not return SPARQL JSON results: Login: Please log in$"):
        parse_results("<!DOCTYPE html><html><head><title>Login</title></head><body>Please log in</body></html>", "it")


# -- rate limit ---------------------------------------------------------------------------


async def test_min_interval_between_requests() -> None:
    times: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        times.append(time.monotonic())
        return httpx.Response(200)

    http = HttpClient(transport=httpx.MockTransport(handler), rate_limit=RateLimit(min_interval=0.1))
    await asyncio.gather(*(http.get(URL) for _ in range(4)))
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(g >= 0.09 for g in gaps), gaps
    await http.aclose()


async def test_max_concurrency() -> None:
    in_flight = 0
    peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return httpx.Response(200)

    http = HttpClient(transport=httpx.MockTransport(handler), rate_limit=RateLimit(max_concurrency=2))
    await asyncio.gather(*(http.get(URL) for _ in range(8)))
    assert peak == 2
    await http.aclose()


def test_a_rate_limit_holds_across_threads_each_running_its_own_loop() -> None:
    """WDQS's one request at a time (RateLimit(max_concurrency=1)) held in each event loop
    only: threads sharing one KG, each with its own asyncio.run, sent theirs at once; and two
    loops waiting out min_interval both started at the same moment."""
    guard = threading.Lock()
    in_flight, peak, starts = [0], [0], []

    async def handler(request: httpx.Request) -> httpx.Response:
        with guard:
            starts.append(time.monotonic())
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0.005)
        with guard:
            in_flight[0] -= 1
        return httpx.Response(200, text="ok")

    http = HttpClient(transport=httpx.MockTransport(handler),
                      rate_limit=RateLimit(min_interval=0.05, max_concurrency=1))

    async def burst() -> list[str]:
        return [r.text for r in await asyncio.gather(*(http.get(URL) for _ in range(3)))]

    answers: list[list[str]] = []
    threads = [threading.Thread(target=lambda: answers.append(asyncio.run(burst()))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    asyncio.run(http.aclose())
    assert answers == [["ok"] * 3] * 3
    assert peak[0] == 1
    starts.sort()
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(g >= 0.03 for g in gaps), gaps  # 0.05 s apart, less a thread switch's delay


def test_each_event_loops_client_is_closed_as_the_loop_shuts_down() -> None:
    """A KG used in one asyncio.run after another made a client in each and dropped the last
    one's unclosed, its connections open until a garbage collection."""

    class Counted(httpx.MockTransport):
        closed = 0

        async def aclose(self) -> None:
            self.closed += 1

    transport = Counted(lambda request: httpx.Response(200, text="ok"))
    http = HttpClient(transport=transport)
    assert [asyncio.run(http.get(URL)).text for _ in range(3)] == ["ok"] * 3
    assert transport.closed == 3  # each loop's client, as its asyncio.run ended


def test_rate_limit_validation() -> None:
    with pytest.raises(ValueError):
        RateLimit(min_interval=-1)
    with pytest.raises(ValueError):
        RateLimit(max_concurrency=0)


# -- the query cache ------------------------------------------------------------------------


def test_cache_roundtrip_and_persistence(tmp_path) -> None:
    path = tmp_path / "c" / "q.sqlite3"
    c = QueryCache(path)
    assert c.get(URL, "SELECT 1", "application/json") is None
    c.set(URL, "SELECT 1", "application/json", '{"x": 1}')
    assert c.get(URL, "SELECT 1", "application/json") == '{"x": 1}'
    # the key covers endpoint, query and accept
    assert c.get(URL + "2", "SELECT 1", "application/json") is None
    assert c.get(URL, "SELECT 2", "application/json") is None
    assert c.get(URL, "SELECT 1", "text/csv") is None
    c.close()
    again = QueryCache(path)
    assert again.get(URL, "SELECT 1", "application/json") == '{"x": 1}'
    assert len(again) == 1
    assert again.stats.hits == 1
    again.clear()
    assert len(again) == 0


def test_cache_disabled_never_touches_disk(tmp_path) -> None:
    path = tmp_path / "never" / "q.sqlite3"
    c = QueryCache(path, enabled=False)
    c.set(URL, "q", "a", "body")
    assert c.get(URL, "q", "a") is None
    assert not path.parent.exists()


def test_cache_ttl(tmp_path) -> None:
    c = QueryCache(tmp_path / "q.sqlite3", ttl=0.0)
    c.set(URL, "q", "a", "body")
    time.sleep(0.01)
    assert c.get(URL, "q", "a") is None


def test_cache_key_is_unambiguous() -> None:
    assert cache_key("a", "bc", "d") != cache_key("ab", "c", "d")
    assert len(cache_key("e", "q", "a")) == 64


def test_cache_is_thread_safe(tmp_path) -> None:
    c = QueryCache(tmp_path / "q.sqlite3")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(50):
                c.set(URL, f"q{n}-{i}", "a", f"b{n}-{i}")
                assert c.get(URL, f"q{n}-{i}", "a") == f"b{n}-{i}"
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(c) == 200


async def test_cache_async_api(tmp_path) -> None:
    c = QueryCache(tmp_path / "q.sqlite3")
    await c.aset(URL, "q", "a", "body")
    assert await c.aget(URL, "q", "a") == "body"


def test_default_cache_location_is_computed_from_what_is_passed(tmp_path) -> None:
    home = tmp_path / "home"
    assert default_cache_dir({}, home, "linux") == home / ".cache"
    assert default_cache_dir({"XDG_CACHE_HOME": "/xdg"}, home, "linux").as_posix() == "/xdg"
    assert default_cache_dir({"XDG_CACHE_HOME": "relative"}, home, "linux") == home / ".cache"
    assert default_cache_dir({}, home, "darwin") == home / "Library" / "Caches"
    assert default_cache_path(home / ".cache") == home / ".cache" / "traversals" / "kg-queries.sqlite3"


def test_client_survives_a_new_event_loop() -> None:
    transport, seen = scripted(httpx.Response(200, text="ok"))
    http = HttpClient(transport=transport, rate_limit=RateLimit(min_interval=0.01, max_concurrency=1))
    assert asyncio.run(http.get(URL)).text == "ok"
    assert asyncio.run(http.get(URL)).text == "ok"  # a second asyncio.run, as a CLI might do
    asyncio.run(http.aclose())
    assert len(seen) == 2


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_an_endpoint_that_redirects_is_unavailable_naming_where_to(status):
    """The OpenAI-compatible client (http_json) does not follow a redirect (a POST may turn
    into a GET, the key go to another host): it names the URL to use instead, and every
    request would fail the same way, so it is not one question's error."""
    from traversals.errors import LLMError, LLMUnavailable
    from traversals.http_json import JsonPoster

    transport, seen = scripted(httpx.Response(status, headers={"location": "https://llm.test/v1/chat/completions"}))
    poster = JsonPoster("http://llm.test/v1", name="openai", error=LLMError, unavailable=LLMUnavailable,
                        transport=transport, sleep=Sleeps())
    with pytest.raises(LLMUnavailable) as err:
        await poster.post("/chat/completions", {"model": "m"})
    assert len(seen) == 1
    assert str(err.value) == (
        f"openai: POST http://llm.test/v1/chat/completions -> HTTP {status}: redirected to "
        "https://llm.test/v1/chat/completions (use the URL it points to: base URL https://llm.test/v1)")


async def test_a_redirect_to_another_origin_drops_the_callers_headers() -> None:
    """httpx drops only Authorization on a redirect to another host: a --kg-header
    (X-Api-Key, a gateway's token) went on to wherever the endpoint pointed."""
    seen: dict[str, dict[str, str]] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen[f"{request.url.host}{request.url.path}"] = dict(request.headers)
        if request.url.host == "elsewhere.test":
            return httpx.Response(200, json={"ok": True})
        if request.url.path == "/query":  # moved within the same server
            return httpx.Response(307, headers={"Location": "http://sparql.test/v2/query"})
        return httpx.Response(307, headers={"Location": "http://elsewhere.test/query"})  # then to another one

    http, _ = client(httpx.MockTransport(handler))
    response = await http.get(URL, headers={"X-Api-Key": "SECRET"}, what="SPARQL endpoint")
    assert response.json() == {"ok": True}
    assert seen["sparql.test/v2/query"]["x-api-key"] == "SECRET"  # same origin: kept
    assert "x-api-key" not in seen["elsewhere.test/query"]


async def test_a_redirect_loop_and_an_unreadable_body_are_query_errors_naming_the_endpoint() -> None:
    loop = httpx.MockTransport(lambda r: httpx.Response(302, headers={"Location": URL}))
    http, _ = client(loop)
    with pytest.raises(KGQueryError, match=r"SPARQL endpoint http://sparql.test/query redirects in a loop"):
        await http.get(URL, what="SPARQL endpoint")
    garbled = httpx.MockTransport(lambda r: httpx.Response(200, headers={"Content-Encoding": "gzip"}, content=b"not gzip"))
    http, _ = client(garbled)
    with pytest.raises(KGQueryError, match=r"SPARQL endpoint http://sparql.test/query sent an answer that cannot be read"):
        await http.get(URL, what="SPARQL endpoint")
