"""Sentence embeddings from an OpenAI-compatible ``/embeddings`` endpoint (``--embedder
openai:MODEL``): OpenAI's API, vLLM serving an embedding model, Ollama, llama.cpp's
``llama-server --embedding``, llama-cpp-python's ``python -m llama_cpp.server --embedding
true``.

- **request**: ``POST {base_url}/embeddings`` with ``{"model": MODEL, "input": [texts]}``,
  at most ``batch_size`` texts a request (several requests at once, up to
  ``max_concurrency``); ``base_url`` is the API root including the version, e.g.
  ``http://127.0.0.1:8000/v1``. Retries, ``Retry-After``, time limits and error messages
  are the LLM client's (:class:`~traversals.http_json.JsonPoster`).
- **reply**: the vectors of ``data``, put back in input order by their ``index``; returned
  as the server gives them (no normalisation: :func:`~.base.cosine` divides by the norms).
  Every vector must be a non-empty list of finite numbers, as many as texts were sent and
  all of one length, or :class:`EmbedderError` says what was wrong.
- **one vector per token**: llama-cpp-python's server gives a model without a pooling layer
  (a chat model's GGUF) one vector per token; they are averaged (mean pooling, as
  sentence-transformers pools). That server (0.3.x) also misplaces the token vectors of
  every input but the first of a request, so once a reply holds token vectors the texts go
  one a request (:attr:`OpenAIEmbedder.one_per_request`).
- **tokens**: the ``usage`` of each reply (``prompt_tokens``, else ``total_tokens``) counts
  in the search's ``embedding_tokens`` (:func:`~.base.count_embedding_tokens`); a server
  that reports none counts 0.
- **empty texts** (which OpenAI's API refuses) are not sent: their vector is zeros, whose
  cosine with anything is 0.
- **failures**: :class:`EmbedderUnavailable` when the endpoint cannot be reached or
  refuses the API key (an evaluation stops, resumable; the HTTP service answers 503),
  :class:`EmbedderError` otherwise (an HTTP error with the endpoint's message, a timeout,
  a bad reply).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Self

import httpx

from ..errors import EmbedderError, EmbedderUnavailable
from .base import count_embedding_tokens
from ..http_json import JsonPoster, api_root
from ..tokens import CommandToken
from ..aio import gather

__all__ = ["OpenAIEmbedder"]


def _preview(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _tokens(usage: Any) -> int:
    """The tokens a reply's ``usage`` says the request cost (0 when it says nothing usable)."""
    if not isinstance(usage, dict):
        return 0
    for key in ("prompt_tokens", "total_tokens"):
        n = usage.get(key)
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            return n
    return 0


class OpenAIEmbedder:
    """An :class:`~.base.Embedder` backed by an OpenAI-compatible embeddings endpoint (see
    the module doc). Close it with :meth:`aclose` (or ``async with``)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        token: CommandToken | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        batch_size: int = 64,
        max_concurrency: int = 4,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        name: str | None = None,
    ) -> None:
        if not model:
            raise EmbedderError("an embeddings endpoint needs a model name")
        self.model = model
        self.name = name or f"openai:{model}"
        self.batch_size = max(1, int(batch_size))
        #: the length of the endpoint's vectors, once a reply showed it
        self.dimensions: int | None = None
        #: True once a reply held one vector per token (llama-cpp-python): one text a request
        self.one_per_request = False
        self._http = JsonPoster(
            api_root(base_url) if isinstance(base_url, str) else base_url,  # .../v1/embeddings is .../v1
            name=self.name,
            error=EmbedderError,
            unavailable=EmbedderUnavailable,
            api_key=api_key,
            headers=headers,
            token=token,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_concurrency=max_concurrency,
            max_retries=max_retries,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            transport=transport,
            sleep=sleep,
        )
        self.base_url = self._http.base_url
        self.timeout = timeout

    @property
    def url(self) -> str:
        return self._http.url_of("/embeddings")

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in the order of ``texts``."""
        texts = list(texts)
        sent = [i for i, t in enumerate(texts) if t.strip()]
        size = 1 if self.one_per_request else self.batch_size
        chunks = [sent[i : i + size] for i in range(0, len(sent), size)]
        replies = await gather(
            *(self._embed_chunk([texts[i] for i in c]) for c in chunks)
        )
        out: list[list[float]] = [[] for _ in texts]
        for chunk, vectors in zip(chunks, replies):
            for i, vector in zip(chunk, vectors):
                out[i] = vector
        lengths = {len(out[i]) for i in sent}
        if len(lengths) > 1 or (lengths and self.dimensions not in (None, *lengths)):
            found = sorted(lengths | ({self.dimensions} if self.dimensions else set()))
            raise EmbedderError(
                f"{self.name}: {self._http.shown('/embeddings')} returned vectors of different lengths ({found})"
            )
        if lengths:
            self.dimensions = lengths.pop()
        zeros = [0.0] * (self.dimensions or 0)
        return [v if texts[i].strip() else list(zeros) for i, v in enumerate(out)]

    async def _embed_chunk(self, texts: list[str]) -> list[list[float]]:
        vectors, per_token = await self._request(texts)
        if per_token:
            self.one_per_request = True
            if (
                len(texts) > 1
            ):  # only the first input's token vectors can be trusted: ask again
                singles = await gather(*(self._request([t]) for t in texts))
                return [got[0] for got, _ in singles]
        return vectors

    async def _request(self, texts: list[str]) -> tuple[list[list[float]], bool]:
        """The vectors of one request and whether the server sent vectors per token."""
        reply = await self._http.post(
            "/embeddings", {"model": self.model, "input": texts}
        )
        where = f"{self.name}: {self._http.shown('/embeddings')}"
        count_embedding_tokens(_tokens(reply.get("usage")))  # paid for whatever the reply holds
        data = reply.get("data")
        if not isinstance(data, list):
            raise EmbedderError(
                f"{where}: the reply has no 'data' list of vectors ({self._http.redact(_preview(reply))})"
            )
        if len(data) != len(texts):
            raise EmbedderError(
                f"{where}: {len(data)} vectors in the reply for {len(texts)} texts"
            )
        if not all(isinstance(item, dict) for item in data):
            raise EmbedderError(
                f"{where}: 'data' holds something other than objects ({_preview(data)})"
            )
        indices = [item.get("index") for item in data]
        if any(i is not None for i in indices):
            if sorted(
                i for i in indices if isinstance(i, int) and not isinstance(i, bool)
            ) != list(range(len(texts))):
                raise EmbedderError(
                    f"{where}: the reply's indices {indices} are not 0..{len(texts) - 1}"
                )
            data = sorted(data, key=lambda item: item["index"])
        vectors: list[list[float]] = []
        per_token = False
        for k, item in enumerate(data):
            vector, tokens = self._vector(item.get("embedding"), f"{where}: vector {k}")
            vectors.append(vector)
            per_token |= tokens
        return vectors, per_token

    @staticmethod
    def _vector(raw: Any, where: str) -> tuple[list[float], bool]:
        """A vector (``raw`` itself, or the mean of its token vectors) and whether it was
        given per token."""
        if isinstance(raw, list) and raw and all(isinstance(row, list) for row in raw):
            rows = [OpenAIEmbedder._numbers(row, where) for row in raw]
            if len({len(row) for row in rows}) > 1:
                raise EmbedderError(f"{where}: token vectors of different lengths")
            return [math.fsum(column) / len(rows) for column in zip(*rows)], True
        return OpenAIEmbedder._numbers(raw, where), False

    @staticmethod
    def _numbers(raw: Any, where: str) -> list[float]:
        if not isinstance(raw, list) or not raw:
            raise EmbedderError(f"{where} is not a list of numbers ({_preview(raw)})")
        for x in raw:
            if (
                isinstance(x, bool)
                or not isinstance(x, (int, float))
                or not math.isfinite(x)
            ):
                raise EmbedderError(f"{where} holds {_preview(x)}, not a finite number")
        return [float(x) for x in raw]

    async def aclose(self) -> None:
        await self._http.aclose()

    close = aclose  # what the LLM backends and KGs call it

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
