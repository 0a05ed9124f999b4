"""A persistent cache of remote KG answers, in one SQLite file.

Re-runs and evaluations ask the same questions over and over; the cache makes sure an
endpoint is asked each distinct query once. The key is
``sha256(endpoint \\0 query \\0 accept)`` -- the endpoint URL, the exact query text (or
the canonical parameter string of an API call) and the requested media type -- and the
value the response body. Only successful answers are stored.

* Safe across threads (one connection guarded by a lock) and across processes (SQLite
  WAL mode with a busy timeout; several evaluation workers can share a file).
* ``QueryCache(path, enabled=False)`` is the ``--no-cache`` switch: it never reads or
  writes and never creates the file.
* A file that cannot be used (damaged, not a database, a directory that cannot be written)
  is not the endpoint's failure: one warning names it, and the session goes on without
  the cache (as ``--no-cache`` would).
* No environment lookups here: the CLI computes the user cache directory once (see
  :func:`default_cache_dir`) and passes :func:`default_cache_path` of it in.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, TypeVar

from ..errors import TraversalsWarning
from ..wal import use_wal

T = TypeVar("T")

CACHE_FILENAME = "kg-queries.sqlite3"


def default_cache_dir(environ: Mapping[str, str], home: Path, platform: str = sys.platform) -> Path:
    """The user cache directory, computed from an explicitly passed environment.

    ``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
    ``%LOCALAPPDATA%`` on Windows. Call it at the edge (the CLI) with ``os.environ``.
    """
    if platform.startswith("win"):
        base = environ.get("LOCALAPPDATA")
        return Path(base) if base else home / "AppData" / "Local"
    if platform == "darwin":
        return home / "Library" / "Caches"
    xdg = environ.get("XDG_CACHE_HOME")
    return Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".cache"


def default_cache_path(cache_dir: Path) -> Path:
    """``<cache_dir>/traversals/kg-queries.sqlite3``."""
    return Path(cache_dir) / "traversals" / CACHE_FILENAME


def cache_key(endpoint: str, query: str, accept: str) -> str:
    h = hashlib.sha256()
    for part in (endpoint, query, accept):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0


class QueryCache:
    """Persistent ``(endpoint, query, accept) -> body`` store.

    ``ttl``: entries older than this many seconds are ignored (``None``: keep forever,
    which is what reproducible evaluations want).
    """

    def __init__(self, path: str | Path, *, enabled: bool = True, ttl: float | None = None) -> None:
        self.path = Path(path)
        self.enabled = enabled
        self.ttl = ttl
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def disabled(cls) -> "QueryCache":
        return cls(Path("/nonexistent/disabled-cache"), enabled=False)

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=30.0, check_same_thread=False, isolation_level=None
            )
            try:
                use_wal(conn)
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS answers ("
                    " key TEXT PRIMARY KEY,"
                    " endpoint TEXT NOT NULL,"
                    " body TEXT NOT NULL,"
                    " created REAL NOT NULL)"
                )
            except sqlite3.Error:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _usable(self, use: Callable[[sqlite3.Connection], T], default: T) -> T:
        """``use(connection)`` under the lock; on a file that cannot be used, one warning and
        ``default``, and the cache is off for the rest of the session."""
        with self._lock:
            if not self.enabled:
                return default
            try:
                return use(self._connect())
            except (sqlite3.Error, OSError) as exc:
                why = str(exc) or type(exc).__name__
                self.enabled = False
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
        warnings.warn(f"the KG query cache {self.path} cannot be used ({why}); going on without it: delete the "
                      "file to start a new one (or pass --no-cache)", TraversalsWarning, stacklevel=3)
        return default

    def get(self, endpoint: str, query: str, accept: str) -> str | None:
        if not self.enabled:
            return None
        key = cache_key(endpoint, query, accept)
        row = self._usable(
            lambda conn: conn.execute("SELECT body, created FROM answers WHERE key = ?", (key,)).fetchone(), None)
        if row is None or (self.ttl is not None and time.time() - row[1] > self.ttl):
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return row[0]

    def set(self, endpoint: str, query: str, accept: str, body: str) -> None:
        if not self.enabled:
            return
        key = cache_key(endpoint, query, accept)
        if self._usable(lambda conn: conn.execute(
                "INSERT OR REPLACE INTO answers (key, endpoint, body, created) VALUES (?, ?, ?, ?)",
                (key, endpoint, body, time.time())) is not None, False):
            self.stats.writes += 1

    async def aget(self, endpoint: str, query: str, accept: str) -> str | None:
        """:meth:`get` off the event loop (SQLite may wait on another process's lock)."""
        if not self.enabled:
            return None
        return await asyncio.to_thread(self.get, endpoint, query, accept)

    async def aset(self, endpoint: str, query: str, accept: str, body: str) -> None:
        if not self.enabled:
            return
        await asyncio.to_thread(self.set, endpoint, query, accept, body)

    def __len__(self) -> int:
        if not self.enabled or (self._conn is None and not self.path.exists()):
            return 0
        return self._usable(lambda conn: int(conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0]), 0)

    def clear(self, endpoint: str | None = None) -> None:
        if not self.enabled:
            return
        with self._lock:
            if endpoint is None:
                self._connect().execute("DELETE FROM answers")
            else:
                self._connect().execute("DELETE FROM answers WHERE endpoint = ?", (endpoint,))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
