"""HTTP API: ``traversals serve`` answers questions over JSON.

One process holds one LLM and one set of KGs (opened once, closed at shutdown); each
request builds a fresh solver from the server's :class:`~traversals.api.SearchConfig`
with the request's overrides, so concurrent requests share no search state.

Endpoints
---------
``GET /health``
    ``{"status": "ok"}`` — the process is up.
``GET /v1/info``
    the LLM, the KGs, the strategies, the default search settings and the limits.
``POST /v1/ask``
    (each path also with a trailing slash, ``/v1/ask/``: the same endpoint, not a redirect)
    body ``{"question": "...", "strategy": "tree|chain|cot|mcts|beam|retrieve", "topic_entities": [...],
    "k": 3, "max_depth": 7, "max_expansions": 20, "threshold": 0.8, "seed": 0,
    "simulations": 16, "max_hops": null, "top_facts": 10, "trace": false, "stream": false}`` (only ``question`` is required;
    unknown fields are refused) →
    the same object as ``traversals ask --json`` (answer, value, supporting edges with
    their KG, LLM/KG calls, tokens, seconds, decoding, strategy) plus ``"trace"`` (the
    whole search tree) when asked for.

Errors are ``{"error": {"type": NAME, "message": TEXT}}`` with the status saying who
should act: 400 a bad request (``BadInput``), 413 a body over ``max_body_bytes``, 503 the
service is busy (``Busy``, with ``Retry-After``), stopping (``ShuttingDown``) or an LLM/KG
cannot be reached, 504 a KG query, an LLM request or the whole request timed out, 502 the LLM or a KG
failed otherwise.

Concurrency: at most ``ServiceLimits.max_concurrency`` questions are searched at once
(the local llama.cpp model runs one call at a time anyway; remote endpoints can take
more), at most ``max_queue`` wait; beyond that a request is refused at once with 503
instead of piling up. Starlette and uvicorn come with the ``serve`` extra.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import math
import time
import weakref
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

from .api import STRATEGIES, SearchConfig, build_solver, close_all, load_value_model
from .search.templates import load_prompts
from .auth import BearerAuth, HostCheck, Unauthorized, allowed_host, check_key
from .embed import Embedder, open_embedder
from .errors import (
    BadInput,
    EmbedderUnavailable,
    KGError,
    KGTimeout,
    KGUnavailable,
    LLMError,
    LLMTimeout,
    LLMUnavailable,
    TraversalsError,
)
from .kg.base import KnowledgeGraph
from .llm.base import LLM
from .options import flag_dest, unread_flags
from .search.result import Solver
from .search.retrieve import MAX_HOPS as RETRIEVE_MAX_HOPS
from .validate import unicode_text

__all__ = ["BodyTooLarge", "Busy", "ClientGone", "RequestTimeout", "ServiceLimits", "ShuttingDown", "create_app",
           "parse_ask_request", "status_for"]

#: request fields that override the server's SearchConfig, with their JSON types
OVERRIDES: dict[str, tuple[type, ...]] = {
    "k": (int, type(None)),  # null: the strategy's default (3 for tree, 1 for chain), as /v1/info shows it
    "max_depth": (int,),
    "max_expansions": (int,),
    "threshold": (int, float),
    "seed": (int,),
    "simulations": (int,),
    "max_hops": (int, type(None)),  # null: each strategy's default (what /v1/info shows when none was set)
    "top_facts": (int,),
}
#: seconds shutdown waits, once the server has cancelled what still ran, for those requests
#: to send their 503 and stop their searches, before the LLM and KGs are closed
SHUTDOWN_DRAIN_SECONDS = 5.0
REQUEST_FIELDS = {"question", "strategy", "topic_entities", "trace", "stream", *OVERRIDES}
#: what a question stopped by the server's shutdown is told (a JSON reply, or a stream's last event)
STOPPED_BY_SHUTDOWN = "the server is shutting down; the search was stopped before its answer"
#: the scope key under which :class:`_CountInFlight` says whether the client hung up
#: (``{"left": bool}``): a stream cancelled without it was stopped by the server
CLIENT_SCOPE_KEY = "traversals.client"


class Busy(TraversalsError):
    """Too many questions are waiting; retry later."""


class RequestTimeout(TraversalsError):
    """The question was not answered within the service's time budget."""


class ClientGone(TraversalsError):
    """The client disconnected before the answer; its search was cancelled."""


class ShuttingDown(TraversalsError):
    """The server stopped (its shutdown timeout ran out) before the answer; retry."""


class BodyTooLarge(BadInput):
    """The request body is over ``ServiceLimits.max_body_bytes`` (HTTP 413)."""


class BodyTooSlow(BadInput):
    """The request body did not arrive within ``ServiceLimits.body_timeout`` (HTTP 408): a
    client that declares a body and trickles it, or never sends it, would hold a connection."""


#: how a limit is named in an error: the ``traversals serve`` flag that sets it, if any
_LIMIT_NAMES = {"max_concurrency": "max_concurrency (--concurrency)", "max_queue": "max_queue (--max-queue)",
                "timeout": "timeout (--timeout)"}


@dataclass(frozen=True)
class ServiceLimits:
    """What one server accepts. The caps keep one request from holding the model for an
    hour (``max_expansions`` 10,000) or the process from queueing without bound."""

    max_concurrency: int = 1
    max_queue: int = 16
    max_question_chars: int = 2000
    max_k: int = 8
    max_depth: int = 30
    max_expansions: int = 100
    max_simulations: int = 200
    #: hops mcts/beam walk or retrieve gathers (retrieve: at most 3 whatever this says)
    max_hops: int = 5
    #: facts retrieve's one prompt lists
    max_top_facts: int = 100
    #: entity names a request may give in ``topic_entities`` (each is linked, maybe with an LLM call)
    max_topic_entities: int = 10
    #: bytes of a request body (a question of ``max_question_chars`` fits many times over)
    max_body_bytes: int = 64 * 1024
    #: seconds per question, queueing included (None: no limit)
    timeout: float | None = None
    retry_after: int = 5
    #: seconds between checks that the client is still connected (a search whose client
    #: has gone is cancelled)
    disconnect_poll: float = 0.5
    #: seconds a request's whole body may take to arrive
    body_timeout: float = 30.0

    def __post_init__(self) -> None:
        """A :class:`BadInput` naming the limit (and its ``serve`` flag) for a value that
        would make the server refuse everything, spin, or queue without bound."""
        for f in dataclasses.fields(self):
            value, name = getattr(self, f.name), _LIMIT_NAMES.get(f.name, f.name)
            if f.name in ("timeout", "disconnect_poll", "body_timeout"):
                if value is None and f.name == "timeout":
                    continue
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:  # NaN too
                    raise BadInput(f"{name} must be a number of seconds over 0, got {value!r}")
                continue
            least = 0 if f.name in ("max_queue", "retry_after", "max_topic_entities") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise BadInput(f"{name} must be a whole number of at least {least}, got {value!r}")

    def covering(self, defaults: SearchConfig) -> ServiceLimits:
        """These limits with each per-request cap raised to the server's own default where
        that is higher (``serve --k 10`` under ``max_k`` 8), so a client that sends back
        what ``/v1/info`` shows is never refused; a request may still ask for less."""
        raised = {cap: value for cap, name in _CAPPED.items()
                  if isinstance(value := getattr(defaults, name), int) and value > getattr(self, cap)}
        return dataclasses.replace(self, **raised) if raised else self


#: each per-request cap of :class:`ServiceLimits` -> the request field (and SearchConfig setting) it caps
_CAPPED = {"max_k": "k", "max_depth": "max_depth", "max_expansions": "max_expansions",
           "max_simulations": "simulations", "max_hops": "max_hops", "max_top_facts": "top_facts"}


@dataclass(frozen=True)
class AskRequest:
    question: str
    strategy: str
    config: SearchConfig
    topic_entities: list[str] | None = None
    trace: bool = False
    stream: bool = False


def parse_ask_request(body: object, default_strategy: str, defaults: SearchConfig, limits: ServiceLimits) -> AskRequest:
    """Validate a ``/v1/ask`` body; every problem is a :class:`BadInput` naming the field."""
    if not isinstance(body, dict):
        raise BadInput("the request body must be a JSON object")
    unknown = sorted(set(body) - REQUEST_FIELDS)
    if unknown:
        raise BadInput(f"unknown field(s) {', '.join(unknown)}; accepted: {', '.join(sorted(REQUEST_FIELDS))}")
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        raise BadInput("'question' must be a non-empty string")
    if len(question) > limits.max_question_chars:
        raise BadInput(f"'question' is longer than {limits.max_question_chars} characters")
    unicode_text(question, "'question'")
    strategy = body.get("strategy", default_strategy)
    if strategy not in STRATEGIES:
        raise BadInput(f"'strategy' must be one of {', '.join(STRATEGIES)}")
    topics = body.get("topic_entities")
    if topics is not None and (
        not isinstance(topics, list) or not all(isinstance(t, str) and t.strip() for t in topics)
    ):
        raise BadInput("'topic_entities' must be a list of non-empty strings")
    if topics is not None and len(topics) > limits.max_topic_entities:
        raise BadInput(f"'topic_entities' names {len(topics)} entities; at most {limits.max_topic_entities}")
    for t in topics or []:
        if len(t) > limits.max_question_chars:
            raise BadInput(f"an entity in 'topic_entities' is longer than {limits.max_question_chars} characters")
        unicode_text(t, "'topic_entities'")
    trace, stream = body.get("trace", False), body.get("stream", False)
    if not isinstance(trace, bool) or not isinstance(stream, bool):
        raise BadInput("'trace' and 'stream' must be true or false")

    changes: dict[str, Any] = {}
    for name, types in OVERRIDES.items():
        if name not in body:
            continue
        value = body[name]
        if isinstance(value, bool) or not isinstance(value, types):
            kind = "a number" if float in types else "an integer or null" if type(None) in types else "an integer"
            raise BadInput(f"'{name}' must be {kind}")
        try:
            changes[name] = float(value) if float in types and isinstance(value, (int, float)) else value
        except OverflowError:  # an integer of hundreds of digits
            raise BadInput(f"'{name}' is too large") from None
    # a strategy's own range first: a general cap's message ("between 1 and 5", "1 and 8")
    # named a range the strategy refuses too (retrieve's max_hops 4, chain's k 2)
    if strategy == "retrieve" and changes.get("max_hops") is not None and not 1 <= changes["max_hops"] <= RETRIEVE_MAX_HOPS:
        raise BadInput(f"'max_hops' with retrieve is 1 to {RETRIEVE_MAX_HOPS} (the facts that many hops around the "
                       f"question's entities)")
    # the server's own k (tree requests', as /v1/info shows it) sent back is no k asked for
    if strategy == "chain" and changes.get("k") not in (None, 1, defaults.k):
        raise BadInput("'chain' is the k = 1 search; use 'tree' for k > 1")
    for cap_name, name in _CAPPED.items():
        cap = getattr(limits, cap_name)
        if changes.get(name) is not None and not 1 <= changes[name] <= cap:
            raise BadInput(f"'{name}' must be between 1 and {cap}")
    # up to 1, or the server's own default (serve --threshold 1.5, which /v1/info shows: no early stop)
    top = max(1.0, defaults.threshold)
    if "threshold" in changes and not 0.0 <= changes["threshold"] <= top:
        raise BadInput(f"'threshold' must be between 0 and {top:g}")
    _refuse_unread(strategy, changes, defaults)
    if strategy == "retrieve" and "max_hops" not in changes and (defaults.max_hops or 0) > RETRIEVE_MAX_HOPS:
        raise BadInput(f"the server's max_hops ({defaults.max_hops}, its --max-hops) is more than retrieve's "
                       f"1 to {RETRIEVE_MAX_HOPS}: give 'max_hops' 1 to {RETRIEVE_MAX_HOPS} with a retrieve question")
    if strategy == "chain":
        changes["k"] = 1
    config = dataclasses.replace(defaults, **changes)
    return AskRequest(question.strip(), strategy, config, [t.strip() for t in topics] if topics else None, trace, stream)


def _refuse_unread(strategy: str, changes: dict[str, Any], defaults: SearchConfig) -> None:
    """A :class:`BadInput` for settings ``strategy`` does not read, given a value other than
    the server's default (the rule ``traversals ask`` applies to its flags, from the same
    table), rather than ignoring them in silence."""
    given = ["--" + name.replace("_", "-") for name in sorted(changes) if changes[name] != getattr(defaults, name)]
    unread = {readers: [flag_dest(f) for f in flags] for readers, flags in unread_flags(strategy, given).items()}
    if not unread:
        return
    clauses = [f"{', '.join(repr(n) for n in names)} {'are' if len(names) > 1 else 'is'} read by {', '.join(readers)}"
               for readers, names in unread.items()]
    several = len(unread) > 1 or len(next(iter(unread.values()))) > 1
    raise BadInput(f"{'; '.join(clauses)}, not by strategy {strategy}; drop {'them' if several else 'it'}")


def _finite(value: Any) -> Any:
    """``value`` with each float that JSON cannot hold (inf, nan: a library caller's setting
    no check refused) as null, so that /v1/info still answers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def status_for(exc: BaseException) -> int:
    """The HTTP status of a failure: who should act, the caller (4xx) or the operator (5xx)."""
    if isinstance(exc, BodyTooLarge):
        return 413
    if isinstance(exc, BodyTooSlow):
        return 408
    if isinstance(exc, Unauthorized):
        return 401
    if isinstance(exc, BadInput):
        return 400
    if isinstance(exc, (Busy, ShuttingDown, KGUnavailable, LLMUnavailable, EmbedderUnavailable)):
        return 503
    if isinstance(exc, (KGTimeout, LLMTimeout, RequestTimeout)):
        return 504
    if isinstance(exc, ClientGone):
        return 499  # nginx's "client closed request": nobody reads it, the log does
    if isinstance(exc, (KGError, LLMError, TraversalsError)):
        return 502
    return 500


#: ``factory(strategy, llm, kgs, config, on_event=callback_or_None) -> Solver``
SolverFactory = Callable[..., Solver]


def create_app(
    llm: LLM,
    kgs: Sequence[KnowledgeGraph],
    *,
    defaults: SearchConfig | None = None,
    default_strategy: str = "tree",
    limits: ServiceLimits | None = None,
    prepare: Callable[[LLM], Awaitable[None]] | None = None,
    close_on_shutdown: bool = True,
    solver_factory: SolverFactory | None = None,
    embedder: Embedder | None = None,
    api_keys: Sequence[str] = (),
    cors_origins: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
):
    """The ASGI application (Starlette). ``prepare(llm)`` runs once at startup (probe an
    endpoint's log-probabilities); the LLM and KGs are closed at shutdown unless
    ``close_on_shutdown`` is false (the caller owns them). ``embedder`` serves RwT's
    critical model in every request (default: ``defaults.embedder`` opened here); it is
    closed at shutdown with the LLM. With ``api_keys`` every request but ``GET /health``
    needs ``Authorization: Bearer KEY`` for one of them (:class:`~traversals.auth.BearerAuth`:
    401 otherwise). ``cors_origins`` are the web pages' origins (``https://app.example``, or
    ``*``) whose scripts may call the API from a browser (:func:`cors_middleware`). With
    ``allowed_hosts`` a request whose ``Host`` names none of them gets 421
    (:class:`~traversals.auth.HostCheck`; ``traversals serve`` on 127.0.0.1 allows its
    loopback names only, so that no web page reaches it by DNS rebinding)."""
    try:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.middleware import Middleware
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise BadInput("the HTTP service needs Starlette and uvicorn: pip install 'traversals[serve]'") from exc

    defaults = defaults or SearchConfig()
    limits = (limits or ServiceLimits()).covering(defaults)
    if default_strategy not in STRATEGIES:
        raise BadInput(f"unknown strategy {default_strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if not kgs and default_strategy != "cot":
        raise BadInput("at least one knowledge graph is needed")
    model_seen: dict[str, str] = {}
    if solver_factory is None:  # one embedder (RwT's critical model, loaded on first use) for every request
        embedder = embedder or open_embedder(defaults.embedder)
        # so are the value model and the prompts' templates
        value_model = load_value_model(defaults)
        solver_factory = functools.partial(build_solver, embedder=embedder, value_model=value_model,
                                           prompts=load_prompts(defaults.prompts))
        if value_model is not None:  # which model is served: retrained in place, the path alone would not tell
            model_seen = {"value_model_sha256": value_model.sha256, "value_model_digest": value_model.digest}
        # a default out of range (--threshold nan) fails here, not as a 400 to every request
        try:  # and the default strategy's (--max-hops 4 is no default of retrieve's)
            for strategy in dict.fromkeys(("tree", default_strategy) if kgs else ("cot",)):
                # chain requests run k = 1 whatever the default k (that of tree requests)
                solver_factory(strategy, llm, kgs, dataclasses.replace(defaults, k=1) if strategy == "chain" else defaults)
        except BadInput as exc:
            raise BadInput(f"the server's default search settings: {exc}") from None
    gate = _Gate(limits.max_concurrency, limits.max_queue)

    def error(exc: BaseException) -> JSONResponse:
        headers = {"Retry-After": str(limits.retry_after)} if isinstance(exc, (Busy, ShuttingDown)) else None
        if isinstance(exc, ClientGone):  # nobody reads the response: the log is the only trace
            logging.getLogger("traversals.service").info("%s (499)", exc)
        return JSONResponse({"error": _error_body(exc)}, status_for(exc), headers=headers)

    async def http_error(request: Request, exc: Any) -> JSONResponse:
        """Starlette's own 404 / 405 in the service's error shape."""
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
        message = f"{request.method} {request.url.path}: {exc.detail}"
        if exc.status_code == 404:
            message += " (endpoints: GET /health, GET /v1/info, POST /v1/ask)"
        return JSONResponse({"error": {"type": kind, "message": message}}, exc.status_code,
                            headers=getattr(exc, "headers", None))

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def info(request: Request) -> JSONResponse:
        return JSONResponse(_finite({
            "llm": getattr(llm, "name", type(llm).__name__),
            "can_score": bool(getattr(llm, "can_score", False)),
            "kgs": [getattr(kg, "name", type(kg).__name__) for kg in kgs],
            "strategies": list(STRATEGIES),
            "default_strategy": default_strategy,
            "defaults": dataclasses.asdict(defaults),
            **model_seen,
            "limits": dataclasses.asdict(limits),
        }))

    async def ask(request: Request) -> Response:
        try:
            body = _parse_json(await _read_body(request, limits.max_body_bytes, limits.body_timeout))
            req = parse_ask_request(body, default_strategy, defaults, limits)
            if req.stream:
                queue: asyncio.Queue = asyncio.Queue()
                solver = solver_factory(req.strategy, llm, kgs, req.config, on_event=queue.put_nowait)
                leave = gate.admit()  # refused now, with a status, rather than inside the stream
                client = request.scope.get(CLIENT_SCOPE_KEY, {})
                events = _stream(gate.run(lambda: solver.ask(req.question, topic_entities=req.topic_entities), leave),
                                 queue, req, timeout=limits.timeout, client_left=lambda: client.get("left", False))
                weakref.finalize(events, leave)  # a stream never started (the client left first) leaves too
                return StreamingResponse(events, media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
            solver = solver_factory(req.strategy, llm, kgs, req.config, on_event=None)
            answer = await _answer_within(
                request,
                gate.run(lambda: solver.ask(req.question, topic_entities=req.topic_entities)),
                timeout=limits.timeout,
                poll=limits.disconnect_poll,
            )
            return JSONResponse(_answer_json(answer, req))  # inside: an answer that is not JSON is a 500 too
        except Exception as exc:  # every failure becomes a JSON error
            return error(exc)
        except asyncio.CancelledError:  # uvicorn cancels what still runs when --shutdown-timeout is over
            return error(ShuttingDown(STOPPED_BY_SHUTDOWN))

    in_flight = _InFlight()

    @asynccontextmanager
    async def lifespan(app):
        if prepare is not None:
            await prepare(llm)
        try:
            yield
        finally:
            # uvicorn cancels the requests still running when --shutdown-timeout is over, then
            # shuts down at once: let them send their 503 before the process exits, and stop
            # their searches before the LLM and KGs close under them
            await in_flight.drained(SHUTDOWN_DRAIN_SECONDS)
            if close_on_shutdown:
                await close_all(llm, kgs, embedder)

    endpoints = (("/health", health, "GET"), ("/v1/info", info, "GET"), ("/v1/ask", ask, "POST"))
    return Starlette(
        # each path with a trailing slash too: Starlette would answer it with a bare 307 redirect, which
        # curl (without -L) and many clients show as an empty reply instead of following it
        routes=[Route(path + slash, endpoint, methods=[method])
                for path, endpoint, method in endpoints for slash in ("", "/")],
        # a request for another host is refused first; then CORS: a browser's preflight carries no
        # key, and a 401 must say who may read it
        middleware=[Middleware(HostCheck, hosts=[allowed_host(h) for h in allowed_hosts if h.strip()]),
                    *cors_middleware(cors_origins),
                    Middleware(BearerAuth, keys=[check_key(k, "api_keys") for k in api_keys]),
                    Middleware(_CountInFlight, in_flight=in_flight)],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )


def cors_origin(origin: str) -> str:
    """``origin`` as a browser sends it (``scheme://host[:port]``, no path, no trailing slash:
    the one ``/`` given is dropped), or ``*``; :class:`BadInput` for anything else, which
    would never match a browser's ``Origin`` and leave the page refused without a word."""
    text = origin.strip()
    if text == "*":
        return text
    scheme, sep, rest = text.rstrip("/").partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or any(c in rest for c in "/?#@ "):
        raise BadInput(f"--cors-origin {origin!r}: an origin is scheme://host[:port] as a browser sends it "
                       "(https://app.example.com, http://localhost:3000; no path), or * for any page")
    return f"{scheme.lower()}://{rest.lower()}"


def cors_middleware(origins: Sequence[str]) -> list:
    """Starlette's CORS middleware for ``origins`` (none: no middleware, and a browser refuses
    every cross-origin page, as before): ``GET`` and ``POST`` with the ``Authorization`` and
    ``Content-Type`` headers (a JSON body and an API key), ``Retry-After`` readable by the
    script, preflights cached 10 minutes. No cookies are used, so none are allowed."""
    if not origins:
        return []
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware

    return [Middleware(CORSMiddleware, allow_origins=sorted({cors_origin(o) for o in origins}),
                       allow_methods=["GET", "POST"], allow_headers=["Authorization", "Content-Type"],
                       expose_headers=["Retry-After"], max_age=600)]


class _InFlight:
    """How many HTTP requests are being answered (their response sent in full or not)."""

    def __init__(self) -> None:
        self.count = 0
        self._idle: asyncio.Event | None = None

    def enter(self) -> None:
        self.count += 1
        if self._idle is not None:
            self._idle.clear()

    def leave(self) -> None:
        self.count -= 1
        if self.count == 0 and self._idle is not None:
            self._idle.set()

    async def drained(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for no request in flight; whether none is."""
        if self.count == 0:
            return True
        self._idle = asyncio.Event()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except asyncio.TimeoutError:
            logging.getLogger("traversals.service").warning(
                "%d request(s) still in flight after %g s of shutdown; closing anyway", self.count, timeout)
        return self.count == 0


class _CountInFlight:
    """ASGI middleware: counts each HTTP request in ``in_flight`` until its response is done,
    and ends a stream the server cancelled (shutting down) with an ``error`` event, as a JSON
    reply cancelled so gets its 503, instead of an exception and a cut-off stream. It notes
    in the scope (:data:`CLIENT_SCOPE_KEY`) when the client hangs up, which the stream's log
    line needs: the stream is cancelled alike when the client leaves and at shutdown."""

    def __init__(self, app: Any, *, in_flight: _InFlight) -> None:
        self.app = app
        self.in_flight = in_flight

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stream = {"open": False}
        client = {"left": False}

        async def listen() -> dict:
            message = await receive()
            if message["type"] == "http.disconnect":
                client["left"] = True
            return message

        async def watch(message: dict) -> None:
            if message["type"] == "http.response.start":
                stream["open"] = any(k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                                     for k, v in message.get("headers", []))
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                stream["open"] = False
            await send(message)

        self.in_flight.enter()
        try:
            await self.app({**scope, CLIENT_SCOPE_KEY: client}, listen, watch)
        except asyncio.CancelledError:
            if not stream["open"]:
                raise
            await _end_stream(send)
        finally:
            self.in_flight.leave()


async def _end_stream(send: Any) -> None:
    """The last event of a stream stopped by the server shutting down."""
    exc = ShuttingDown(STOPPED_BY_SHUTDOWN)
    event = _sse("error", {**_error_body(exc), "status": status_for(exc)})
    try:
        await send({"type": "http.response.body", "body": event.encode(), "more_body": False})
    except Exception:  # the connection is gone already: nobody to tell  # noqa: BLE001
        logging.getLogger("traversals.service").info("a stream stopped by the shutdown could not be told so")


async def _answer_within(request: Any, work: Awaitable[Any], *, timeout: float | None, poll: float) -> Any:
    """Await ``work`` for at most ``timeout`` seconds (:class:`RequestTimeout`); if the
    client disconnects first, cancel it (a tree search on the local model holds the model
    for minutes) and raise :class:`ClientGone`."""
    start = time.monotonic()
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request, poll))
    try:
        await asyncio.wait({task, watch}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone = watch.done() and not watch.cancelled() and watch.exception() is None
        watch.cancel()
        stopped = not task.done()
        if stopped:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if not stopped:
        return task.result()  # the answer, or the search's own error
    if gone:
        raise ClientGone("the client disconnected; the search was stopped")
    raise RequestTimeout(f"no answer within {timeout:g} s ({time.monotonic() - start:.1f} s spent)")


async def _read_body(request: Any, limit: int, timeout: float = ServiceLimits.body_timeout) -> bytes:
    """The body, refused with :class:`BodyTooLarge` as soon as it is known to be over
    ``limit`` bytes (by its Content-Length, or while it arrives), not after reading it all,
    and with :class:`BodyTooSlow` when it has not all arrived after ``timeout`` seconds."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"the request body is {int(declared)} bytes; at most {limit}")
    from starlette.requests import ClientDisconnect  # the serve extra: there when a request is

    chunks: list[bytes] = []
    size = 0

    async def read() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"the request body is over {limit} bytes")
            chunks.append(chunk)

    try:
        await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        raise BodyTooSlow(f"the request body did not arrive within {timeout:g} s ({size} bytes came)") from None
    except ClientDisconnect:  # a 499 for the log, not an "unexpected error" with a traceback
        raise ClientGone("the client disconnected while sending its request") from None
    return b"".join(chunks)


def _parse_json(raw: bytes) -> object:
    """The request body as JSON (an empty body is ``None``); :class:`BadInput` otherwise."""
    try:
        return json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput(f"the request body is not JSON: {exc}") from None
    except RecursionError:
        raise BadInput("the request body is not a request: its JSON is nested too deeply") from None


def _error_body(exc: BaseException) -> dict:
    """``{"type", "message"}`` of a failure; an unexpected one is logged with its traceback
    and its message is not shown (it may hold internals). A backend's failure that is an
    exception of the backend's own (a ``RuntimeError`` in a user's LLM or KG: a bug there,
    named by the plugin boundary as an ``LLMError`` / ``KGError`` with it as the cause) keeps
    its 502 and its message, which names the backend and method, and its traceback is
    logged: the message alone does not say where the bug is."""
    if not isinstance(exc, TraversalsError):
        logging.getLogger("traversals.service").error("unexpected error answering a question", exc_info=exc)
        return {"type": type(exc).__name__, "message": "internal error (see the server log)"}
    log_backend_bug(exc, logging.getLogger("traversals.service"))
    return {"type": type(exc).__name__, "message": str(exc)}


def log_backend_bug(exc: TraversalsError, log: logging.Logger) -> None:
    """Log the traceback of a backend's failure that is an exception of the backend's own (a
    bug there, named by the plugin boundary with it as the cause), which the client sees as
    a message only. A timeout or a refused connection (503, 504) is the operator's to fix,
    not a bug: no traceback."""
    cause = exc.__cause__
    if status_for(exc) == 502 and isinstance(cause, Exception) and not isinstance(cause, TraversalsError):
        log.error("a backend failed with an exception of its own (%s)", exc, exc_info=exc)


def _answer_json(answer: Any, req: AskRequest) -> dict:
    out = answer.to_json()
    if req.trace:
        out["trace"] = answer.trace
    return out


def _sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def _stream(work: Awaitable[Any], queue: asyncio.Queue, req: AskRequest, *, timeout: float | None,
                  client_left: Callable[[], bool]):
    """Server-sent events: the search's events as they happen, then ``answer`` (the same
    object as the JSON reply) or ``error`` (``type``, ``message``, ``status``). A client
    that disconnects stops the search (Starlette cancels this generator), and so does the
    server shutting down (uvicorn cancels the request); ``client_left`` says which, for the
    log."""
    start = time.monotonic()
    task = asyncio.ensure_future(work)
    getter: asyncio.Future | None = None
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
            done, _ = await asyncio.wait({getter, task}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                event = getter.result()
                yield _sse(str(event.get("event", "event")), event)
                continue
            getter.cancel()
            if not done:  # out of time
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                exc: BaseException = RequestTimeout(f"no answer within {timeout:g} s")
                yield _sse("error", {**_error_body(exc), "status": status_for(exc)})
                return
            while not queue.empty():
                event = queue.get_nowait()
                yield _sse(str(event.get("event", "event")), event)
            break
        try:
            answer = task.result()
        except Exception as exc:  # the same errors the JSON reply would give, as an event
            yield _sse("error", {**_error_body(exc), "status": status_for(exc)})
            return
        yield _sse("answer", _answer_json(answer, req))
    finally:
        if getter is not None and not getter.done():  # a client gone mid-wait: no task left pending
            getter.cancel()
        if not task.done():  # the client left, or the server is stopping: nobody reads the answer
            if client_left():
                logging.getLogger("traversals.service").info(
                    "the stream was closed before the answer; the search was stopped (499)")
            else:  # the client gets a ShuttingDown error event (_CountInFlight): not a 499
                logging.getLogger("traversals.service").info(
                    "the server is shutting down; a stream's search was stopped before its answer (503)")
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _disconnected(request: Any, poll: float) -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(poll)


class _Gate:
    """At most ``running`` questions searched at once and at most ``waiting`` more queued;
    one more is refused with :class:`Busy` instead of waiting without bound. A question
    counts from the moment it is admitted (so requests arriving together are counted
    together, streamed or not) until it is answered or abandoned."""

    def __init__(self, running: int, waiting: int) -> None:
        self._running = running
        self._waiting = waiting
        self._inside = 0  # admitted: waiting for a slot or searching
        self._sem: asyncio.Semaphore | None = None

    def admit(self) -> Callable[[], None]:
        """Count one more question in, or raise :class:`Busy`; returns its ``leave``
        (idempotent), which :meth:`run` calls when the question is done."""
        if self._sem is None:  # created on the server's event loop
            self._sem = asyncio.Semaphore(self._running)
        if self._inside >= self._running + self._waiting:
            running = min(self._inside, self._running)
            raise Busy(f"busy: {running} question(s) running and {self._inside - running} waiting; retry later")
        self._inside += 1
        left = False

        def leave() -> None:
            nonlocal left
            if not left:
                left = True
                self._inside -= 1

        return leave

    async def run(self, make: Callable[[], Awaitable[Any]], leave: Callable[[], None] | None = None) -> Any:
        """Search once a slot is free; ``leave`` from :meth:`admit` if admitted already."""
        leave = leave or self.admit()
        try:
            assert self._sem is not None
            async with self._sem:
                return await make()
        finally:
            leave()
