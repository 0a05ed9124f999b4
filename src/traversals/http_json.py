"""POST JSON to an OpenAI-compatible API: the HTTP plumbing the LLM client
(:mod:`traversals.llm.openai`) and the embeddings client (:mod:`traversals.embed.openai`)
share.

- **retries**: 408/409/429/5xx answers and connection errors are retried with exponential
  backoff and jitter, honouring ``Retry-After`` (capped at ``backoff_max``), up to
  ``max_retries`` times; a connect timeout is retried, a read timeout is not;
- **errors**: one line naming the URL and, for an HTTP error, the endpoint's own error
  message. Which classes are raised is the caller's: ``unavailable`` when no request can
  succeed now -- the endpoint cannot be reached, refuses the credentials (401/403: "check
  the API key"), has no such path or model (404), or still answers 5xx/429 after every
  retry -- so that an evaluation stops instead of recording every question as an error;
  ``error`` for what is this request's own (a timeout, another 4xx, a reply that is not a
  JSON object).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from .retry import backoff_delay, parse_retry_after
from .validate import http_url

__all__ = ["RETRY_STATUS", "JsonPoster", "error_detail"]

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def error_detail(resp: httpx.Response) -> str:
    """The endpoint's own error message of a failed response, on one line (200 characters
    at most): ``{"error": {"message": ...}}``, ``{"detail": ...}``, or the body's text."""
    try:
        body = resp.json()
    except (json.JSONDecodeError, ValueError):
        text = resp.text.strip().replace("\n", " ")
        return text[:200]
    err = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail") or json.dumps(err)[:200]
    else:
        msg = str(err)
    return str(msg).replace("\n", " ")[:200]


class JsonPoster:
    """An ``httpx.AsyncClient`` for one API root (``base_url``, e.g.
    ``http://127.0.0.1:8000/v1``) that posts JSON objects and returns JSON objects (module
    doc). ``name`` starts every error message; at most ``max_concurrency`` requests are in
    flight at once."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str,
        error: type[Exception],
        unavailable: type[Exception],
        api_key: str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_concurrency: int = 8,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.base_url = http_url(base_url, "base_url", error).rstrip("/")
        self.name = name
        self.error = error
        self.unavailable = unavailable
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._rng = random.Random()
        self._sleep = sleep
        self._sem = asyncio.Semaphore(max(1, int(max_concurrency)))
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            limits=httpx.Limits(
                max_connections=max(1, int(max_concurrency)),
                max_keepalive_connections=max(1, int(max_concurrency)),
            ),
            transport=transport,
        )

    def _backoff(self, attempt: int) -> float:
        return backoff_delay(attempt, self.backoff_base, self.backoff_max, self._rng)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``base_url + path``; the reply's JSON object."""
        url = f"{self.base_url}{path}"
        attempt = 0
        while True:
            try:
                async with self._sem:
                    resp = await self._client.post(url, json=body)
            except httpx.TimeoutException as e:
                if isinstance(e, httpx.ConnectTimeout) and attempt < self.max_retries:
                    await self._sleep(self._backoff(attempt))
                    attempt += 1
                    continue
                kind = type(e).__name__
                raise self.error(
                    f"{self.name}: POST {url} timed out ({kind}, limit {self.timeout:g} s)"
                ) from e
            except UnicodeEncodeError as e:
                raise self.error(
                    f"{self.name}: the request to {url} holds text that is not valid Unicode ({e.reason})"
                ) from None
            except (httpx.TransportError, OSError) as e:
                if attempt < self.max_retries:
                    await self._sleep(self._backoff(attempt))
                    attempt += 1
                    continue
                raise self.unavailable(
                    f"{self.name}: cannot reach {url} after {attempt + 1} attempts: "
                    f"{type(e).__name__}: {e or 'connection failed'}"
                ) from e
            if resp.status_code < 400:
                try:
                    data = resp.json()
                except (json.JSONDecodeError, ValueError) as e:
                    raise self.error(
                        f"{self.name}: POST {url} returned non-JSON ({resp.text[:100]!r})"
                    ) from e
                if not isinstance(data, dict):
                    raise self.error(
                        f"{self.name}: POST {url} returned {type(data).__name__}"
                    )
                return data
            if resp.status_code in RETRY_STATUS and attempt < self.max_retries:
                wait = parse_retry_after(resp.headers.get("retry-after"))
                delay = (
                    self._backoff(attempt)
                    if wait is None
                    else min(wait, self.backoff_max)
                )
                await self._sleep(delay)
                attempt += 1
                continue
            detail = error_detail(resp)
            msg = f"{self.name}: POST {url} -> HTTP {resp.status_code}: {detail}"
            if resp.status_code in (401, 403):
                raise self.unavailable(msg + " (check the API key)")
            if resp.status_code == 404:  # a wrong base URL or model: every request would fail
                hint = "base URL usually ends with /v1" if not self.base_url.endswith("/v1") else "check the base URL and the model name"
                raise self.unavailable(f"{msg} ({hint})")
            if resp.status_code in RETRY_STATUS:  # down or overloaded, not this request's fault
                raise self.unavailable(f"{msg} (gave up after {attempt + 1} attempts)")
            raise self.error(msg)

    async def aclose(self) -> None:
        await self._client.aclose()
