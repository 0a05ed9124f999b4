"""A file of the LLM's replies, so that a prompt asked again is not paid again.

:class:`CachedLLM` wraps any :class:`~.base.LLM`. Each reply it gets is stored in a SQLite
file under a key that hashes everything that decides the reply: the model (``identity``),
the method (``generate`` or ``score``), the prompt, the reply's ``prefix``, and the call's
settings (``n``, ``temperature``, ``max_tokens``, ``stop``, ``seed``; a score's options).
The same call later, in this process or another, gets the stored reply without reaching
the model. That is what a researcher wants when a run is repeated with other reporting,
another ``--threshold`` or ``--max-expansions`` (the search asks mostly the same prompts),
or a hosted model must not be paid twice; with a server whose sampling is not repeatable
it also makes a re-run give the same trace.

What is stored, and what is not:

- **Repeatable calls only**: greedy ones (``temperature`` 0) and seeded ones (the search
  draws a seed for each sampled call from ``--seed``). A call sampled without a seed asks
  for fresh randomness each time, so it always reaches the model and is not stored.
- **Whole, well-formed replies only**: a failed call stores nothing; texts that are not
  strings, or a number of log-probabilities other than the options', are passed on
  unstored (:class:`~.checked.CheckedLLM` refuses them after this).
- A generation's texts are stored with their finish reasons (``"length"``: cut at
  ``max_tokens``), so a cut reply read from the file is known as cut; a reply stored
  before they were has none (unknown).
- ``transient`` (a calibration prompt's hint to llama.cpp's KV cache) does not change a
  score, so it is not part of the key.

A reply from the file costs nothing: its :class:`~.base.Generation` or
:class:`~.base.Scores` has ``cached`` set and no tokens, so a run's ``llm_calls`` and token
counts say what reached the model and ``llm_cache_hits`` what did not
(:class:`~.base.Usage`). Seconds measured with hits are not the model's seconds.

The ``identity`` must name the model exactly: two models under one identity would answer
each other's prompts. The CLI uses the GGUF's SHA-256 for a local model and the endpoint's
URL and model name (and ``--llm-template``) for a server
(:func:`traversals.options.llm_cache_identity`). A file is
safe to share between processes (SQLite's write-ahead log) and to delete at any time.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import math
import sqlite3
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeGuard

from ..errors import BadInput
from .base import LLM, Generation, Scores
from ..wal import use_wal

__all__ = ["CachedLLM", "check_cache_file"]

#: the layout of the file; another layout is refused, not read
FORMAT = 1


class CachedLLM:
    """``llm`` whose repeatable replies are kept in the SQLite file ``path`` (module
    docstring). ``identity`` names the model (default: the backend's class and ``name``);
    ``warn`` reports a reply that could not be written (the reply is still returned)."""

    def __init__(self, llm: LLM, path: str | Path, *, identity: str | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.llm = llm
        self.path = Path(path).expanduser()
        self.identity = identity or f"{type(llm).__module__}.{type(llm).__qualname__}:{getattr(llm, 'name', '')}"
        self._warn = warn or (lambda message: warnings.warn(message, RuntimeWarning, stacklevel=2))
        self._warned = False
        self._lock = threading.Lock()
        self._db = _open(self.path)
        #: replies being written: not awaited by the call that got them (see :meth:`_put`), and
        #: read from here until they are in the file
        self._writing: set[asyncio.Task[None]] = set()
        self._unwritten: dict[str, dict] = {}
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name: str) -> Any:  # name, can_score, a backend's own attributes
        if name == "llm":  # not set yet (a failed __init__): no recursion
            raise AttributeError(name)
        return getattr(self.llm, name)

    async def generate(self, prompt: str, *, prefix: str = "", n: int = 1, temperature: float = 0.0,
                       max_tokens: int = 256, stop: Sequence[str] | None = None, seed: int | None = None) -> Generation:
        call = dict(prompt=prompt, prefix=prefix, n=n, temperature=temperature, max_tokens=max_tokens,
                    stop=list(stop) if stop is not None else None, seed=seed)
        key = self._key("generate", call) if temperature == 0 or seed is not None else None
        if key is not None and (got := await self._get(key)) is not None:
            if _strings(texts := got.get("texts")):
                # a reply stored before finish reasons were has none: unknown, as from a backend that does not say
                reasons = got.get("finish_reasons")
                return Generation(texts, prompt_tokens=0, completion_tokens=0, computed_prompt_tokens=0, cached=True,
                                  finish_reasons=reasons if _reasons(reasons, len(texts)) else None)
        reply = await self.llm.generate(prompt, prefix=prefix, n=n, temperature=temperature, max_tokens=max_tokens,
                                        stop=stop, seed=seed)
        if key is not None and _strings(texts := getattr(reply, "texts", None)):
            reasons = getattr(reply, "finish_reasons", None)
            self._put(key, {"texts": texts, **({"finish_reasons": reasons} if _reasons(reasons, len(texts)) else {})})
        return reply

    async def score(self, prompt: str, options: Sequence[str], *, prefix: str = "", transient: bool = False) -> Scores:
        key = self._key("score", dict(prompt=prompt, options=list(options), prefix=prefix))
        if (got := await self._get(key)) is not None and _numbers(got.get("logprobs"), len(options)):
            counts = got.get("token_counts")
            return Scores([float(x) for x in got["logprobs"]], prompt_tokens=0, computed_prompt_tokens=0,
                          token_counts=[int(c) for c in counts] if _numbers(counts, len(options)) else None, cached=True)
        reply = await self.llm.score(prompt, options, prefix=prefix, transient=transient)
        logprobs = getattr(reply, "logprobs", None)
        if _numbers(logprobs, len(options)):
            counts = getattr(reply, "token_counts", None)
            self._put(key, {"logprobs": [float(x) for x in logprobs],  # type: ignore[union-attr]
                                  "token_counts": [int(c) for c in counts] if _numbers(counts, len(options))
                                  else None})
        return reply

    async def flush(self) -> None:
        """Wait for the replies still being written (:meth:`_put`) to be in the file."""
        if self._writing:
            await asyncio.gather(*self._writing, return_exceptions=True)

    async def close(self) -> None:
        await self.flush()  # the replies still being written are kept
        try:
            close = getattr(self.llm, "close", None)  # a user's LLM may close with a plain method, or none
            pending = close() if callable(close) else None
            if inspect.isawaitable(pending):
                await pending
        finally:
            with self._lock:
                self._db.close()

    # -- the file ---------------------------------------------------------------
    def _key(self, method: str, call: Mapping[str, Any]) -> str:
        text = json.dumps({"format": FORMAT, "llm": self.identity, "method": method, **call},
                          sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    async def _get(self, key: str) -> dict | None:
        def read() -> dict | None:
            with self._lock:
                row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
            return json.loads(row[0]) if row else None

        try:
            got = self._unwritten.get(key) or await asyncio.to_thread(read)
        except (sqlite3.Error, ValueError) as exc:  # a file broken under a running process: ask the model
            self._warn_once(f"--llm-cache {self.path}: cannot read a reply ({exc}); asking the model")
            got = None
        if isinstance(got, dict):
            self.hits += 1
            return got
        self.misses += 1
        return None

    def _put(self, key: str, reply: dict) -> None:
        """Store a reply in the background. The call that got it returns it at once: awaited
        here, the write was one more point where a sibling's failure cancelled the call (``aio.
        gather``), and a reply the model had been paid for never reached the question's usage."""
        def write() -> None:
            with self._lock, self._db:
                self._db.execute("INSERT OR REPLACE INTO replies (key, reply) VALUES (?, ?)",
                                 (key, json.dumps(reply, ensure_ascii=False)))

        async def store() -> None:
            try:
                await asyncio.to_thread(write)
            except sqlite3.Error as exc:  # a full disk: the reply is used, only not kept
                self._warn_once(f"--llm-cache {self.path}: cannot store a reply ({exc}); the run goes on without "
                                "storing replies it cannot write")
            finally:
                if self._unwritten.get(key) is reply:
                    del self._unwritten[key]

        self._unwritten[key] = reply

        task = asyncio.get_running_loop().create_task(store())
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)

    def _warn_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            self._warn(message)


def check_cache_file(path: str | Path) -> None:
    """:class:`BadInput` now, before a model loads, for a ``path`` that cannot be a reply
    cache (made empty if missing)."""
    _open(Path(path).expanduser()).close()


def _open(path: Path) -> sqlite3.Connection:
    """The cache file at ``path``, made if missing; :class:`BadInput` for a file that
    cannot be opened or is not a cache of this layout."""
    where = f"--llm-cache {path}"
    if path.is_dir():
        raise BadInput(f"{where} is a directory: name a file (e.g. {path / 'llm-cache.sqlite3'})")
    if not path.parent.is_dir():
        raise BadInput(f"{where}: the folder {path.parent} does not exist")
    try:
        db = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as exc:
        raise BadInput(f"{where}: cannot open it: {exc}") from exc
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables - {"meta", "replies"} or (tables and "meta" not in tables):  # another program's database
            db.close()
            raise BadInput(f"{where} is another SQLite database (tables {', '.join(sorted(tables))}), not an LLM "
                           "reply cache: name another file (it was left as it is)")
        use_wal(db)  # other processes read while one writes
        db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
        db.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('format', ?)", (str(FORMAT),))
        found = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    except sqlite3.DatabaseError as exc:
        db.close()
        if "readonly" in str(exc) or "unable to open" in str(exc):  # the file, or the folder of its journal
            raise BadInput(f"{where} cannot be written ({exc}): the file or its folder is read-only (SQLite writes "
                           "beside the file too); copy it to a folder you can write, or name another file") from exc
        raise BadInput(f"{where} is not an LLM reply cache ({exc}): name another file, or delete this one "
                       "if it is an old cache") from exc
    if found is None or found[0] != str(FORMAT):
        db.close()
        raise BadInput(f"{where} holds replies in another layout (format {found[0] if found else '?'}, this "
                       f"version reads {FORMAT}): delete it or name another file")
    return db


def _strings(texts: Any) -> TypeGuard[list[str]]:
    """Whether ``texts`` is a list of strings (a generation worth storing or returning)."""
    return isinstance(texts, list) and all(isinstance(t, str) for t in texts)


def _reasons(reasons: Any, count: int) -> TypeGuard[list[str | None]]:
    """Whether ``reasons`` is one finish reason (a string or None) for each of ``count`` texts."""
    return isinstance(reasons, list) and len(reasons) == count and all(r is None or isinstance(r, str) for r in reasons)


def _numbers(values: Any, count: int) -> TypeGuard[Sequence[float]]:
    """Whether ``values`` is a list of ``count`` numbers (not booleans, not NaN)."""
    return (isinstance(values, (list, tuple)) and len(values) == count
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x) for x in values))

