"""SQLite files several processes share: the reply and query caches, in WAL mode."""

from __future__ import annotations

import sqlite3
import time

__all__ = ["use_wal"]


def use_wal(db: sqlite3.Connection, timeout: float = 30.0) -> None:
    """Put ``db`` in WAL mode (other processes read while one writes). Switching takes a
    moment's lock, and SQLite answers "database is locked" at once, without its busy
    timeout, when another process opens the same new file just then: asked again until
    ``timeout`` seconds have passed (two evaluations started together failed on it)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
