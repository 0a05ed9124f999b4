"""``traversals.wal.use_wal``: a file another process holds for a moment is waited for
(SQLite answers "database is locked" to the switch at once, without its busy timeout: one
in 40 pairs of evaluations started together failed with "--llm-cache … is not an LLM reply
cache (database is locked)")."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from traversals.wal import use_wal


def test_the_switch_waits_for_a_lock_held_a_moment(tmp_path) -> None:
    path = tmp_path / "c.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0.0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        other.execute("PRAGMA journal_mode=WAL")  # what the caches did: failed at once
    threading.Timer(0.3, lambda: holder.execute("COMMIT")).start()
    use_wal(other, timeout=5.0)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    holder.close()
    other.close()


def test_a_lock_held_longer_than_the_timeout_is_the_error_it_was(tmp_path) -> None:
    path = tmp_path / "c.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0.0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(other, timeout=0.2)
    holder.execute("COMMIT")
    holder.close()
    other.close()
