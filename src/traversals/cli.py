"""Command line: ``traversals ask | serve | mcp | eval | report | view | kg | model``.

Thin by design: parse flags, read the environment once (here, at the edge), build the
objects, call the library, print. Every :class:`~traversals.errors.TraversalsError`
becomes one line on stderr and exit code 2; tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence

from . import __version__
from .api import STRATEGIES
from .errors import BadInput, TraversalsError, TraversalsWarning
from .eval.commands import add_eval_commands
from .eval.training import add_training_command
from .kg.commands import add_kg_commands
from .kg.factory import SPEC_HELP
from .mcp_server import MAX_QUEUE as MCP_MAX_QUEUE
from .llm.commands import add_model_commands
from .options import (
    add_decoding_flag, add_kg_flags, add_llm_flags, add_prompts_flag, add_rwt_flags, add_tree_flags, add_value_flags, check_kg_specs,
    open_embedder_from_args, open_llm_from_args, prepare_llm, refuse_contradicting_flags, refuse_scoring_flags_when_sampled, refuse_unread_prompts,
    refuse_unused_flags, refuse_unused_llm_flags, remote_kg_options, unopened_kgs_note, whole_number, decoding_settings,
)
from .interrupt import run_interruptible
from .search.templates import load_prompts
from .validate import terminal_text, unicode_text


#: ``--port``: a TCP port number (uvicorn would fail with a traceback on 99999)
_port = whole_number(0, 65535, "a port number")
#: where ``mcp --transport streamable-http`` listens unless ``--host`` / ``--port`` say
MCP_HOST, MCP_PORT = "127.0.0.1", 8001


def _add_search_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=int, default=None, metavar="N",
                   help="branching factor (1 = Chain-of-Traversals); default 3 for tree, 1 for chain")
    p.add_argument("--max-depth", type=int, default=7, metavar="N", help="default 7 (the paper's)")
    p.add_argument("--max-expansions", type=int, default=20, metavar="N", help="default 20 (the paper's)")
    p.add_argument("--threshold", type=float, default=0.8, metavar="X",
                   help="stop when an answer's value exceeds this (τ; default 0.8, the paper's)")
    p.add_argument("--simulations", type=int, default=16, metavar="N", help="mcts: simulations per question (default 16)")
    add_rwt_flags(p, defaults=True)
    add_tree_flags(p)
    add_decoding_flag(p)
    add_value_flags(p)
    add_prompts_flag(p)
    p.add_argument("--seed", type=int, default=0,
                   help="tree/chain: the search's random seed (default 0); it seeds every LLM call that samples "
                        "(sampled decoding's diverse samples), so such a run repeats on any endpoint")


def _add_solver_flags(p: argparse.ArgumentParser, *, strategy_help: str) -> None:
    """What a solver is built from: the KGs, the LLM, the search settings, the strategy."""
    p.add_argument("--kg", action="append", metavar="SPEC",
                   help=f"{SPEC_HELP}; repeatable. Default: the built-in demo KG")
    add_kg_flags(p)
    add_llm_flags(p)
    _add_search_flags(p)
    p.add_argument("--strategy", choices=STRATEGIES, default=None, help=strategy_help)


def _search_config(args: argparse.Namespace, *, k: int | None):
    """The SearchConfig of the search flags (``_add_search_flags``) with branching ``k``."""
    from .api import SearchConfig

    return SearchConfig(
        k=k,
        max_depth=args.max_depth,
        max_expansions=args.max_expansions,
        threshold=args.threshold,
        **decoding_settings(args),
        seed=args.seed,
        simulations=args.simulations,
        c_puct=args.c_puct,
        max_hops=args.max_hops,
        top_facts=args.top_facts,
        beam_width=args.beam_width,
        beam_branch=args.beam_branch,
        value_model=args.value_model,
        screen_dead_ends=args.screen_dead_ends,
        prior_weight=args.prior_weight,
        answer_choice=args.answer_choice,
        **({} if args.group_selection is None else {"group_selection": args.group_selection}),
        answers=args.answers,
        **({} if args.embedder is None else {"embedder": args.embedder}),
        **({} if args.prompts is None else {"prompts": args.prompts}),
    )


def _strategy(args: argparse.Namespace) -> str:
    return args.strategy or ("chain" if args.k == 1 else "tree")


def _server_k(args: argparse.Namespace) -> int | None:
    """The k of ``serve``'s and ``mcp``'s defaults, which tree requests search with (chain
    requests always run k = 1). A ``--k 1`` that made chain the default (no ``--strategy``,
    or ``--strategy chain``) only picked it: tree requests keep their own k (None: 3). Beside
    ``--strategy tree`` (or another) ``--k 1`` is tree's k, as ``ask`` reads it."""
    return None if args.k == 1 and _strategy(args) == "chain" else args.k


#: how a search that returned an answer under τ stopped (:attr:`Answer.stopped`)
UNSURE = {"max_expansions": "used its {} expansions", "frontier_empty": "had nothing left to expand"}


def answer_notes(answer, args: argparse.Namespace) -> list[str]:
    """What ``ask`` adds on stderr about an answer a user should not take at its word."""
    notes = []
    if answer.found and answer.stopped in UNSURE:
        notes.append(f"no answer was rated over the threshold {args.threshold:g} before the search "
                     f"{UNSURE[answer.stopped].format(args.max_expansions)}; this one, rated "
                     f"{answer.value or 0.0:.2f}, is the best of the rest and may be wrong (a value trained "
                     f"on the KG judges answers better than a small LLM: traversals train-value --synthetic, "
                     f"docs/rwt.md)")
    elif (answer.found and answer.strategy in ("mcts", "beam") and not args.value_model
          and (answer.value or 0.0) < args.threshold):
        notes.append(f"{answer.strategy} without --value-model rates paths with the LLM (the roll-out "
                     f"stand-in); this answer, rated {answer.value or 0.0:.2f}, under the threshold "
                     f"{args.threshold:g}, may be wrong (RwT is meant to run with a trained value: "
                     f"traversals train-value, docs/rwt.md)")
    left_out = (answer.trace or {}).get("answer_entities_left_out") or 0
    if left_out:  # RwT lists the first max_answer_entities of its best state's entities
        notes.append(f"the answer lists the first {len(answer.text.split(', '))} entities its best state reached; "
                     f"{left_out} more are in the trace (--trace FILE, its answer_node)")
    if answer.strategy == "cot" and (unused := unopened_kgs_note(args)):  # accepted with cot, never opened
        notes.append(unused)
    if answer.linked_entities == []:
        notes.append("nothing in the question was found in the KG, so the answer is the LLM's alone "
                     "(name the entity as the KG labels it, or put it in [brackets])")
    elif not answer.found:
        notes.append("the search found no answer")
    elif answer.linked_entities and not answer.supporting_edges:
        notes.append("the answer has no supporting KG edge (the search found none that leads to it)")
    return notes


async def _ask(args: argparse.Namespace) -> int:
    from .api import build_solver, close_all
    from .kg.factory import open_kgs
    from .search.events import StatusLine, describe

    unicode_text(args.question, "the question")
    if not args.question.strip():  # a search over nothing would still spend a minute of LLM calls
        raise BadInput("the question is empty: traversals ask \"QUESTION\"")
    trace_file = Path(args.trace) if args.trace else None
    if trace_file is not None and (trace_file.is_dir() or not trace_file.parent.is_dir()):
        raise BadInput(f"--trace {trace_file}: " + ("is a directory" if trace_file.is_dir()
                       else f"directory {trace_file.parent} does not exist"))  # before a search is spent
    strategy = _strategy(args)
    refuse_unused_flags(strategy, args)
    refuse_unused_llm_flags(args)  # before a KG loads
    prompts = load_prompts(args.prompts)  # a directory's templates checked before anything loads
    refuse_unread_prompts(strategy, args.prompts, prompts)
    # RwT's critical model, retrieve's fact ranking
    embedder = open_embedder_from_args(args) if strategy in ("mcts", "beam", "retrieve") else None
    # cot reads no KG: a --kg is not opened (a note says so), nor is the demo KG without one, but a
    # malformed one is refused as the other strategies refuse it
    if strategy == "cot":
        check_kg_specs(args.kg or [])
    kgs = open_kgs(args.kg or [], **remote_kg_options(args)) if strategy != "cot" else []
    llm = open_llm_from_args(args)
    # --verbose: every event as a line; else, on a terminal, one status line kept up to date
    status = StatusLine(sys.stderr) if not args.verbose and sys.stderr.isatty() else None
    if status is not None:  # a warning during the search goes on a line of its own, not after the status
        show = warnings.showwarning  # (main's catch_warnings puts it back)

        def show_below(*a, **k) -> None:
            status.clear()
            show(*a, **k)

        warnings.showwarning = show_below
    try:
        await prepare_llm(llm)
        refuse_scoring_flags_when_sampled(args, llm)
        on_event = (lambda e: print(describe(e), file=sys.stderr, flush=True)) if args.verbose else status
        solver = build_solver(strategy, llm, kgs, _search_config(args, k=args.k), on_event=on_event,
                              embedder=embedder, prompts=prompts)
        answer = await solver.ask(args.question)
    finally:
        if status is not None:
            status.clear()
        await close_all(llm, kgs, embedder)
    # the trace first: a reader of stdout gone before the answer (a pager quit) loses no
    # search; a failed write is said after the answer is printed, so it costs only the trace
    trace_failed = None
    if trace_file is not None:
        try:
            trace_file.write_text(json.dumps(answer.trace, indent=1, ensure_ascii=False), "utf-8")
        except OSError as exc:
            trace_failed = f"--trace {trace_file}: cannot write it ({exc.strerror or type(exc).__name__})"
    if args.json:
        print(json.dumps(answer.to_json(), ensure_ascii=False))
    else:
        value = "-" if answer.value is None else f"{answer.value:.2f}"
        print(terminal_text(answer.text))  # labels and replies are text from elsewhere: no control character acts
        hits = f" (+{answer.usage.llm_cache_hits} from --llm-cache)" if answer.usage.llm_cache_hits else ""
        embedded = (f"{answer.usage.embedder_calls} embedder calls · " if answer.usage.embedder_calls else "")
        print(f"  value {value} · {answer.usage.llm_calls} LLM calls{hits} · {answer.usage.prompt_tokens} prompt + "
              f"{answer.usage.completion_tokens} completion tokens · {answer.usage.kg_calls} KG calls · {embedded}"
              f"{answer.seconds:.1f} s · {answer.decoding} decoding")
        for e in answer.supporting_edges:
            print(terminal_text(f"  ({e.subject.label}) -[{e.relation.label}]-> ({e.object.label})"))
    for note in answer_notes(answer, args):
        print(f"note: {note}", file=sys.stderr)
    if trace_failed is not None:
        raise BadInput(trace_failed)
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    return run_interruptible(_ask(args))


def _api_keys(args: argparse.Namespace, what: str) -> list[str]:
    """The keys an HTTP endpoint accepts (``--api-key-file``, ``$TRAVERSALS_API_KEY``), read
    before any model loads; a warning when it listens beyond this machine without one."""
    from .auth import API_KEY_ENV, is_loopback, read_api_keys

    keys = read_api_keys(args.api_key_file, os.environ)
    if not keys and not is_loopback(args.host):
        print(f"warning: {what} listens on {args.host} with no API key: anyone who can reach it can use the LLM "
              f"and the KGs (--api-key-file FILE or ${API_KEY_ENV}; docs/service.md)", file=sys.stderr)
    return keys


def cmd_serve(args: argparse.Namespace) -> int:
    from .kg.factory import open_kgs
    from .service import ServiceLimits, cors_origin, create_app

    try:
        import uvicorn
    except ImportError:
        raise TraversalsError("`traversals serve` needs uvicorn and Starlette: pip install 'traversals[serve]'") from None
    if not args.shutdown_timeout >= 0:
        raise BadInput(f"--shutdown-timeout must be 0 or more, got {args.shutdown_timeout}")
    limits = ServiceLimits(max_concurrency=args.concurrency, max_queue=args.max_queue, timeout=args.timeout)
    _check_listen(args.host, args.port)
    api_keys = _api_keys(args, "the service")
    for origin in args.cors_origin or ():  # a typo is told before the model loads
        cors_origin(origin)
    allowed_hosts = _allowed_hosts(args)  # so is a name with a port
    # flags one another makes pointless, whatever strategy a request names ("tree": a --k
    # beside a chain default is the k of tree requests here)
    refuse_contradicting_flags("tree", args)
    refuse_unused_llm_flags(args)
    load_prompts(args.prompts)  # a directory's templates checked before the model loads (and read again by the app)
    # chain requests always run k = 1, tree requests this k (3 when --k 1 made chain the default)
    defaults = _search_config(args, k=_server_k(args))
    embedder = open_embedder_from_args(args)  # any request may ask for mcts/beam
    kgs = open_kgs(args.kg or [], **remote_kg_options(args))
    llm = open_llm_from_args(args)
    _ready(args, llm)
    app = create_app(llm, kgs, defaults=defaults, limits=limits, default_strategy=_strategy(args),
                     embedder=embedder, api_keys=api_keys, cors_origins=args.cors_origin or (),
                     allowed_hosts=allowed_hosts)
    # the service's own lines (a client gone: 499; an unexpected error: its traceback) at uvicorn's level
    service_log = logging.getLogger("traversals")
    if not service_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
        service_log.addHandler(handler)
    service_log.setLevel(args.log_level.upper())
    with _sigterm_as_ctrl_c():  # its graceful shutdown then exit 0, as Ctrl-C's
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                    timeout_graceful_shutdown=args.shutdown_timeout)
    return 0


def _ready(args: argparse.Namespace, llm: Any) -> None:
    """An endpoint's log-probabilities probed (:func:`prepare_llm`), and flags only constrained
    decoding reads refused if it cannot score, as ask and eval do -- before the server starts,
    so the refusal is one line and not a failed startup (the LLM's HTTP client is made anew
    on the server's event loop)."""
    import asyncio

    async def ready() -> None:
        await prepare_llm(llm)
        refuse_scoring_flags_when_sampled(args, llm)

    asyncio.run(ready())


def _check_listen(host: str, port: int) -> None:
    """:class:`BadInput` when ``host:port`` cannot be listened on (a port in use -- by the LLM
    server of the README's example, at 8000 too --, a host name that does not resolve),
    before a KG or model loads: uvicorn said so in log lines after loading them, exit 3."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise BadInput(f"--host {host}: not an address of this machine ({e.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind(address)
        except OSError as e:
            hint = (": another program listens there (your LLM server?); pass --port N"
                    if e.errno == errno.EADDRINUSE else "")
            raise BadInput(f"--host {host} --port {port}: cannot listen there ({e.strerror}){hint}") from None


def cmd_mcp(args: argparse.Namespace) -> int:
    from .kg.factory import open_kgs
    from .mcp_server import create_mcp_server
    from .service import ServiceLimits

    # out of range: one line, before a model loads
    ServiceLimits(max_concurrency=args.concurrency, max_queue=args.max_queue, timeout=args.timeout)
    if args.transport == "stdio" and args.api_key_file is not None:
        raise BadInput("--api-key-file guards the streamable-http transport; with stdio only the host that "
                       "started this command talks to it")
    if args.transport == "stdio" and (given := [f"--{n}" for n in ("host", "port") if getattr(args, n) is not None]):
        several = len(given) > 1
        raise BadInput(f"{' and '.join(given)} {'set' if several else 'sets'} where the streamable-http transport "
                       f"listens; stdio (the default) listens nowhere: add --transport streamable-http or drop "
                       f"{'them' if several else 'it'}")
    # None in the parser, to tell a flag given with stdio: the documented defaults for HTTP
    args.host = MCP_HOST if args.host is None else args.host
    args.port = MCP_PORT if args.port is None else args.port
    api_keys = _api_keys(args, "the MCP server") if args.transport != "stdio" else []
    if args.transport != "stdio":
        _check_listen(args.host, args.port)
    refuse_contradicting_flags("tree", args)  # as serve: whatever strategy a call names
    refuse_unused_llm_flags(args)
    load_prompts(args.prompts)  # a directory's templates checked before the model loads (and read again by the server)
    embedder = open_embedder_from_args(args)  # any answer_question call may ask for mcts/beam
    kgs = open_kgs(args.kg or [], **remote_kg_options(args))
    llm = open_llm_from_args(args)
    _ready(args, llm)
    server = create_mcp_server(llm, kgs, defaults=_search_config(args, k=_server_k(args)),
                               default_strategy=_strategy(args), embedder=embedder, timeout=args.timeout,
                               max_concurrency=args.concurrency, max_queue=args.max_queue)
    # the MCP SDK logs at INFO on stderr, where httpx would add a line per KG/LLM request
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.transport == "stdio":
        server.run("stdio")
    else:  # the SDK's own app, behind the same API-key check as serve (none: every request passes)
        import uvicorn

        from .auth import BearerAuth

        app = BearerAuth(server.streamable_http_app(host=args.host), keys=api_keys)
        uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from .errors import BadInput
    from .viewer import write_run_view, write_trace_view

    path = Path(args.path)
    out = Path(args.out) if args.out else None
    if out is not None and args.out.endswith(("/", os.sep)) and path.is_file():  # --out DIR/: a folder, made if new
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a file of that name, a path through a file, no permission
            raise BadInput(f"--out {args.out}: cannot make the folder ({e.strerror or type(e).__name__})") from None
    if path.is_dir():
        if not (path / "results.jsonl").is_file():
            raise BadInput(f"{path} has no results.jsonl: give a run directory of traversals eval or a trace file")
        written = write_run_view(path, out)
    elif path.is_file():
        written = write_trace_view(path, out)
    else:
        raise BadInput(f"no such file or directory: {path}")
    print(written)
    return 0


def cmd_prompts(args: argparse.Namespace) -> int:
    """``traversals prompts``: list a prompt set's prompts (checking a directory's), print one, or
    export them all to edit."""
    from .search.templates import BUILT_IN, VARIABLES, export_prompts

    prompts = load_prompts(args.prompts or "default")
    if args.export:
        if args.name:
            raise BadInput("give a prompt's NAME to print it, or --export DIR to write them all, not both")
        written = export_prompts(prompts, Path(args.export))
        # a folder called like a built-in set is named as a path: --prompts default is the built-in one
        given = f"./{args.export}" if args.export in BUILT_IN else args.export
        print(f"wrote {len(written)} prompts to {args.export}; edit some (delete the others: the default ones "
              f"take their place), then pass --prompts {given}")
        return 0
    if args.name:
        if args.name not in VARIABLES:
            raise BadInput(f"no prompt is named {args.name!r}; the prompts are {', '.join(VARIABLES)}")
        print(prompts.text(args.name))
        return 0
    print(f"prompt set: {prompts.name} (sha256 {prompts.sha256[:12]})")
    for name, allowed in VARIABLES.items():
        source = "this set" if name in prompts.replaced else "default"
        given = " ".join(f"${v}" for v in sorted(allowed)) or "-"
        print(f"  {name:<22} {source:<9} {given}")
    return 0


def _allowed_hosts(args: argparse.Namespace) -> list[str]:
    """The names ``serve`` answers under (:class:`~traversals.auth.HostCheck`): on a loopback
    address its loopback names and each ``--allowed-host``; elsewhere only the
    ``--allowed-host`` given (none: any). A name no ``Host`` can carry (with a port or a
    scheme) is :class:`BadInput` (:func:`~traversals.auth.allowed_host`)."""
    from .auth import LOOPBACK_HOSTS, allowed_host, is_loopback

    given = [allowed_host(name) for name in args.allowed_host or []]
    if is_loopback(args.host):
        given += [*LOOPBACK_HOSTS, allowed_host(args.host)]
    return given


def _add_api_key_flag(p: argparse.ArgumentParser, only: str = "") -> None:
    p.add_argument("--api-key-file", metavar="FILE", default=None,
                   help=f"{only}accept only requests with 'Authorization: Bearer KEY' for a key in FILE (one a "
                        "line, '#' comments) or in $TRAVERSALS_API_KEY; GET /health stays open (default: no key "
                        "is checked)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="traversals", description="Answer questions by searching knowledge graphs with an LLM.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", "-V", action="version", version=f"traversals {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    ask = sub.add_parser("ask", help="answer one question")
    ask.add_argument("question")
    _add_solver_flags(ask, strategy_help="tree, chain, cot (the LLM alone), mcts, beam (RwT), retrieve (KAPING: "
                                         "the KG facts most similar to the question, one LLM call); default: chain "
                                         "when --k 1, else tree")
    ask.add_argument("--trace", metavar="FILE", help="write the whole search tree as JSON")
    ask.add_argument("--json", action="store_true", help="print one JSON object")
    ask.add_argument("--verbose", "-v", action="store_true", help="show the search as it runs (on stderr)")
    ask.set_defaults(func=cmd_ask)

    serve = sub.add_parser("serve", help="answer questions over HTTP (POST /v1/ask; see docs/service.md)")
    _add_solver_flags(serve, strategy_help="strategy of requests that name none (default: chain when --k 1, else tree)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=_port, default=8000)
    serve.add_argument("--concurrency", type=int, default=1, help="questions searched at once (default 1)")
    serve.add_argument("--max-queue", type=int, default=16, help="questions that may wait; more get 503 (default 16)")
    serve.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                       help="answer within this many seconds or return 504 (default: no limit)")
    serve.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    serve.add_argument("--shutdown-timeout", type=float, default=30.0, metavar="SECONDS",
                       help="on Ctrl-C / SIGTERM, wait this long for questions being searched, then stop them "
                            "(default 30)")
    serve.add_argument("--allowed-host", action="append", default=None, metavar="NAME",
                       help="a name clients reach the server by (its Host header), e.g. api.example.com behind a "
                            "proxy (repeatable; * for any; a bare name or IP address, any port). On 127.0.0.1 only localhost, 127.0.0.1 and [::1] are "
                            "answered besides these, so no web page reaches the server by DNS rebinding; on "
                            "another address any name is, unless some are given")
    serve.add_argument("--cors-origin", action="append", default=None, metavar="ORIGIN",
                       help="a web page's origin whose scripts may call the API from a browser, e.g. "
                            "https://app.example.com or http://localhost:3000 (repeatable; * for any page; "
                            "default: none, browsers refuse cross-origin calls)")
    _add_api_key_flag(serve)
    serve.set_defaults(func=cmd_serve)

    mcp = sub.add_parser("mcp", help="offer the KG interface and the search as MCP tools (docs/mcp.md)")
    _add_solver_flags(mcp, strategy_help="strategy of answer_question calls that name none "
                                         "(default: chain when --k 1, else tree)")
    mcp.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio",
                     help="stdio (default: the host starts this command) or streamable-http")
    mcp.add_argument("--host", default=None, help=f"streamable-http: address (default {MCP_HOST})")
    mcp.add_argument("--port", type=_port, default=None, help=f"streamable-http: port (default {MCP_PORT})")
    mcp.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                     help="answer_question gives up a search after this long (default: no limit)")
    mcp.add_argument("--concurrency", type=int, default=1,
                     help="answer_question searches run at once (default 1; more only help with a remote LLM)")
    mcp.add_argument("--max-queue", type=int, default=MCP_MAX_QUEUE,
                     help=f"answer_question calls that may wait behind the running searches; more are refused "
                          f"as busy (default {MCP_MAX_QUEUE})")
    _add_api_key_flag(mcp, "streamable-http: ")
    mcp.set_defaults(func=cmd_mcp)

    view = sub.add_parser("view", help="HTML view of a search trace or of an evaluation run's traces")
    view.add_argument("path", metavar="TRACE_OR_RUN", help="a trace file (ask --trace) or a run directory (eval --out)")
    view.add_argument("--out", default=None, metavar="PATH",
                      help="for a trace: the output file, or a folder to write TRACE.html into (default: TRACE.html beside it); for a run: the output folder (default RUN/view)")
    view.set_defaults(func=cmd_view)

    prompts = sub.add_parser("prompts", help="list, print or export the prompts' templates (docs/prompts.md)")
    prompts.add_argument("name", nargs="?", metavar="NAME", help="print this prompt's template")
    prompts.add_argument("--prompts", default=None, metavar="SET|DIR",
                         help="the prompt set: default, paper, or a directory of NAME.txt files (checked as "
                              "ask and eval check it)")
    prompts.add_argument("--export", metavar="DIR", default=None,
                         help="write every prompt of the set to DIR as NAME.txt, to edit and pass back with --prompts DIR")
    prompts.set_defaults(func=cmd_prompts)

    add_eval_commands(sub)
    add_training_command(sub)
    add_kg_commands(sub)
    add_model_commands(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Our warnings as one line on stderr, like errors; others as Python shows them."""
    if issubclass(category, TraversalsWarning):
        print(f"traversals: warning: {message}", file=file or sys.stderr)
    else:
        (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


@contextmanager
def _sigterm_as_interrupt(command: str | None) -> Iterator[None]:
    """SIGTERM (``timeout``, ``docker stop``, a job scheduler) handled as Ctrl-C is: a model
    fetch stops its downloads. ``ask``, ``eval`` and ``train-value`` run their event loop
    with :func:`~traversals.interrupt.run_interruptible`, whose own handler cancels the
    search where it awaits (an eval says how to resume). Not for ``serve`` and ``mcp``,
    whose servers handle it themselves (``serve`` its server's end: :func:`_sigterm_as_ctrl_c`)."""
    if command in ("serve", "mcp"):
        yield
        return
    with _sigterm_as_ctrl_c():
        yield


@contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM handled as Ctrl-C (SIGINT) is, on the main thread (off it no handler can be
    set). Around ``uvicorn.run`` too: uvicorn shuts down gracefully on either, then raises the
    signal again with the handler found at its start; SIGINT's KeyboardInterrupt it catches
    (exit 0), but with no handler of ours SIGTERM killed the process (-15; 143 in a shell,
    which ``docker stop`` or a script checking the status read as a failure)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        # Ctrl-C's own handler (in a plain asyncio.run, asyncio's: it cancels the main task)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:  # SIGINT ignored (a background job): stop as Ctrl-C would have
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments, with a hint for a question (or search text) typed without quotes:
    ``traversals ask what films did X direct`` read one word as the question and refused
    the others as "unrecognized arguments"."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        words = [w for w in extra if not w.startswith("-")]
        said = {"ask": "question", "search": "text"}.get(getattr(args, "kg_command", None) or args.command)
        first = (args.question if said == "question" else args.text) if said else ""
        if said and words and len(words) == len(extra) and len(first.split()) == 1:  # it was one word: unquoted
            command = "traversals ask" if said == "question" else "traversals kg search"
            parser.exit(2, f"traversals: error: put the {said} in quotes, as one argument: "
                           f"{command} \"{' '.join([first, *words])}\" ...\n")
        parser.parse_args(argv)  # argparse's own message for the rest
    return args


def main(argv: Sequence[str] | None = None) -> int:
    # stdout in an encoding that cannot hold every answer or label (ASCII, cp1252): a file or
    # a pipe gets UTF-8 (JSON and names intact), a terminal "?" for what it cannot show --
    # not a UnicodeEncodeError traceback; an encoding asked for ($PYTHONIOENCODING) is kept
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None and (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "") != "utf8":
        if not sys.stdout.isatty() and not os.environ.get("PYTHONIOENCODING"):
            reconfigure(encoding="utf-8")
        else:
            reconfigure(errors="replace")
    parser = build_parser()
    args = _parse(parser, argv)
    try:
        with warnings.catch_warnings(), _sigterm_as_interrupt(getattr(args, "command", None)):
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except TraversalsError as exc:
        if args.debug:
            raise
        print(f"traversals: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("traversals: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `traversals eval ... | head`: the reader left; what was written is written
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
