"""``traversals model status | fetch [NAME]``: the local model cache."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .models import DEFAULT_MODEL, MODELS, default_cache_dir, ensure_model, format_status


def _cache(args: argparse.Namespace) -> Path:
    return Path(args.cache_dir) if args.cache_dir else default_cache_dir(os.environ)


def cmd_status(args: argparse.Namespace) -> int:
    print(format_status(_cache(args)))
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    path = ensure_model(args.name, _cache(args), progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(path)
    return 0


def add_model_commands(subparsers) -> None:
    model = subparsers.add_parser("model", help="the local model cache (GGUF LLMs, the sentence-embedding model)")
    sub = model.add_subparsers(dest="model_command", required=True)
    for name, fn, text in (("status", cmd_status, "show which models are cached"),
                           ("fetch", cmd_fetch, "download, assemble and verify a model")):
        p = sub.add_parser(name, help=text)
        if name == "fetch":
            p.add_argument("name", nargs="?", default=DEFAULT_MODEL, choices=sorted(MODELS),
                           help=f"the model (default {DEFAULT_MODEL}, {MODELS[DEFAULT_MODEL].size / 1e9:.1f} GB)")
        p.add_argument("--cache-dir", default=None, help="default: $TRAVERSALS_CACHE/models, else $XDG_CACHE_HOME/traversals/models, else ~/.cache/traversals/models")
        p.set_defaults(func=fn)
