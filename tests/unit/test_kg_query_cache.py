"""The KG query cache (``kg/cache.py``) when its file cannot be used: the session goes on
without it after one warning, as with ``--no-cache`` (it failed every call to a remote KG
with "search() raised DatabaseError: file is not a database")."""

from __future__ import annotations

import warnings

import pytest

from traversals.errors import TraversalsWarning
from traversals.kg.cache import QueryCache


def test_a_damaged_file_is_one_warning_and_no_cache(tmp_path) -> None:
    path = tmp_path / "kg-queries.sqlite3"
    path.write_bytes(b"\x8f\x00 not a database " * 100)
    cache = QueryCache(path)
    with pytest.warns(TraversalsWarning, match=rf"the KG query cache {path} cannot be used \(file is not a "
                                               r"database\); going on without it"):
        assert cache.get("http://e/q", "SELECT 1", "json") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        cache.set("http://e/q", "SELECT 1", "json", "{}")
        assert cache.get("http://e/q", "SELECT 1", "json") is None and len(cache) == 0
    assert not cache.enabled and path.read_bytes().startswith(b"\x8f")  # the file is left as it was


def test_a_cache_directory_that_cannot_be_made_is_one_warning(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    cache = QueryCache(tmp_path / "file" / "traversals" / "kg-queries.sqlite3")
    with pytest.warns(TraversalsWarning, match="cannot be used"):
        cache.set("http://e/q", "SELECT 1", "json", "{}")
    assert cache.get("http://e/q", "SELECT 1", "json") is None


def test_a_working_cache_still_serves_what_it_stored(tmp_path) -> None:
    cache = QueryCache(tmp_path / "c.sqlite3")
    cache.set("http://e/q", "SELECT 1", "json", "{}")
    assert cache.get("http://e/q", "SELECT 1", "json") == "{}" and len(cache) == 1
    assert cache.stats.writes == 1 and cache.stats.hits == 1
    cache.close()
