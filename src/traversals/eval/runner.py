"""Run a solver over a dataset: resumable, concurrent, every answer on disk as it comes.

Files in ``out_dir``:

- ``run.json`` -- the run's configuration (dataset, split, strategy, LLM spec, seed,
  limit, search hyper-parameters, version, the git commit of the code when it runs from a
  checkout (:func:`code_revision`), start time, resumes and their code), the SHA-256 of
  each question file read (``dataset_sha256``), of each KG file (``kg_sha256``:
  :func:`kg_digests`) and which model answers (``llm_model``, ``llm_sha256``:
  :func:`llm_identity`); a resume is refused when a setting that changes the answers or the
  model differs, or an answered question reads differently now.
- ``results.jsonl`` -- one JSON object per answered question, appended as each finishes
  with a single ``os.write`` on an ``O_APPEND`` descriptor followed by ``fsync``: a line is
  either entirely there or (after a crash mid-write) a truncated tail that ``resume``
  cuts off.
- ``traces/<safe id>.json`` -- the search tree of each question (written before its
  result line, via a temporary file and ``os.replace``).
- ``summary.json`` -- means over every line of ``results.jsonl`` (so a resumed run
  summarises all of its questions).

``resume=True`` skips ids already in ``results.jsonl``; a run killed at any point (Ctrl-C,
``kill -9``) and resumed ends with every selected id exactly once.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import inspect
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import (
    BadInput, EmbedderUnavailable, KGUnavailable, LLMUnavailable, ModelIntegrityError, RunStopped, TraversalsError,
)
from ..kg.factory import _split_name, check_kg_spec
from ..llm.models import file_sha256, recorded_sha256
from .datasets.base import DEFAULT_SEED, Dataset, Question, sample_questions
from .metrics import METRICS, score

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
RUN = "run.json"
TRACES = "traces"
LOCK = ".lock"

#: Errors that say the infrastructure is down, not that a question is hard: the run stops
#: (nothing is recorded for the question) so that it can be resumed once it is back.
ABORT_ERRORS: tuple[type[BaseException], ...] = (LLMUnavailable, KGUnavailable, ModelIntegrityError,
                                                 EmbedderUnavailable, RunStopped)
#: error rows in a row after which a run stops (``--max-consecutive-errors``)
MAX_CONSECUTIVE_ERRORS = 5

#: run.json keys that must agree when resuming (when both runs record them).
RESUME_MUST_MATCH = (
    "dataset", "split", "answerable_only", "seed", "strategy", "llm",
    "k", "max_depth", "max_expansions", "threshold", "decoding", "search_seed", "calibrate",
    "simulations", "value_model", "screen_dead_ends", "prior_weight",
    "answer_choice", "group_selection", "answers", "calibrate_answers", "both_orders", "embedder",
    "compare_answers", "value_examples", "value_reasoning", "kg", "llm_template", "value_model_sha256",
    "max_hops", "beam_width", "beam_branch", "c_puct",
    # the model that answers: a GGUF replaced in place, or another default model of a newer
    # version under the same --llm local, is another model (--llm-url is not compared: a
    # server moved to another port serves the same model)
    "llm_sha256",
    # no flag sets these, but a library caller can and a newer version may change their
    # defaults: the KG's cuts the LLM sees, the sampling temperature, intermediate values
    "max_relations", "max_edges", "diverse_temperature", "evaluate_intermediate",
)  # fmt: skip

USAGE_KEYS = ("llm_calls", "prompt_tokens", "completion_tokens", "computed_prompt_tokens", "kg_calls")


# --------------------------------------------------------------------------- summary


@dataclass
class Summary:
    """Means over a run's results. Metrics are fractions in [0, 1]; errors count as 0."""

    n: int = 0
    errors: int = 0
    hits_at_1: float = 0.0
    em_in: float = 0.0
    f1: float = 0.0
    mean_llm_calls: float = 0.0
    mean_prompt_tokens: float = 0.0
    mean_completion_tokens: float = 0.0
    mean_computed_prompt_tokens: float = 0.0
    mean_kg_calls: float = 0.0
    mean_seconds: float = 0.0
    total_prompt_tokens: int = 0
    total_completion_tokens: int = 0
    total_seconds: float = 0.0
    selected: int | None = None  # how many questions the run selected
    #: how many of the selected questions have no row yet (None: not known, as in a report,
    #: which does not know the selected ids); rows outside the selection (an earlier, larger
    #: --limit) count in ``n`` but do not make the run complete
    unanswered: int | None = None
    dataset: str = ""
    split: str = ""
    strategy: str = ""
    llm: str = ""
    out_dir: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        if self.unanswered is not None:
            return self.unanswered == 0
        return self.selected is None or self.n >= self.selected

    def to_json(self) -> dict:
        r = lambda x: round(x, 4)  # noqa: E731
        return {
            "dataset": self.dataset,
            "split": self.split,
            "strategy": self.strategy,
            "llm": self.llm,
            "n": self.n,
            "selected": self.selected,
            "errors": self.errors,
            "metrics_scale": "fraction in [0, 1]",
            "hits@1": r(self.hits_at_1),
            "em_in": r(self.em_in),
            "f1": r(self.f1),
            "mean_llm_calls": r(self.mean_llm_calls),
            "mean_prompt_tokens": r(self.mean_prompt_tokens),
            "mean_completion_tokens": r(self.mean_completion_tokens),
            "mean_computed_prompt_tokens": r(self.mean_computed_prompt_tokens),
            "mean_kg_calls": r(self.mean_kg_calls),
            "mean_seconds": r(self.mean_seconds),
            "total_prompt_tokens": self.total_prompt_tokens,
            "total_completion_tokens": self.total_completion_tokens,
            "total_seconds": round(self.total_seconds, 3),
            **({"unanswered": self.unanswered} if self.unanswered is not None else {}),
            **self.extra,
        }

    def format(self) -> str:
        """A few human-readable lines."""
        head = f"{self.dataset} {self.split} · {self.strategy or '?'} · {self.llm or '?'}"
        sel = f"/{self.selected}" if self.selected is not None else ""
        if not self.n:  # nothing answered: no score, not a score of 0
            return f"{head}\n  n=0{sel}  errors={self.errors}\n  Hits@1=–  EM-in=–  F1=– (no question answered)"
        return (
            f"{head}\n"
            f"  n={self.n}{sel}  errors={self.errors}\n"
            f"  Hits@1={100 * self.hits_at_1:.1f}%  EM-in={100 * self.em_in:.1f}%  F1={100 * self.f1:.1f}%\n"
            f"  per question: {self.mean_llm_calls:.1f} LLM calls, {self.mean_prompt_tokens:.0f} prompt + "
            f"{self.mean_completion_tokens:.0f} completion tokens, {self.mean_kg_calls:.1f} KG calls, "
            f"{self.mean_seconds:.2f} s"
        )


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0


def summarize(rows: Sequence[Mapping], **info: Any) -> Summary:
    """Summary of result rows (first row of each id only)."""
    seen: set[str | None] = set()
    uniq = []
    for row in rows:
        if row.get("id") in seen:
            continue
        seen.add(row.get("id"))
        uniq.append(row)
    n = len(uniq)
    mean = lambda key: sum(_num(r.get(key)) for r in uniq) / n if n else 0.0  # noqa: E731
    return Summary(
        n=n,
        errors=sum(1 for r in uniq if r.get("error")),
        hits_at_1=mean("hits@1"),
        em_in=mean("em_in"),
        f1=mean("f1"),
        mean_llm_calls=mean("llm_calls"),
        mean_prompt_tokens=mean("prompt_tokens"),
        mean_completion_tokens=mean("completion_tokens"),
        mean_computed_prompt_tokens=mean("computed_prompt_tokens"),
        mean_kg_calls=mean("kg_calls"),
        mean_seconds=mean("seconds"),
        total_prompt_tokens=int(sum(_num(r.get("prompt_tokens")) for r in uniq)),
        total_completion_tokens=int(sum(_num(r.get("completion_tokens")) for r in uniq)),
        total_seconds=sum(_num(r.get("seconds")) for r in uniq),
        **info,
    )


# --------------------------------------------------------------------------- files


def safe_id(qid: str) -> str:
    """A file name for a question id: ``metaqa-1hop:dev:17`` -> ``metaqa-1hop_dev_17``."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", qid).strip("._") or "q"
    return s[:180]


def trace_names(questions: Sequence[Question], rows: Sequence[Mapping] = ()) -> dict[str, str]:
    """The trace file (relative to the run directory) of each question: ``traces/<safe
    id>.json``, unless that name is taken -- by a recorded row of another question (its
    ``trace``) or an earlier question here -- because :func:`safe_id` maps several ids to
    one name (``q 1`` and ``q_1``; ``Q1`` and ``q1`` on a file system that ignores case; ids
    that differ after 180 characters): then the name gets a hash of the id, and the second
    trace no longer replaces the first's."""
    taken: dict[str, Any] = {}
    for row in rows:
        rel = row.get("trace") or f"{TRACES}/{safe_id(str(row.get('id', '')))}.json"
        taken.setdefault(str(rel).casefold(), row.get("id"))
    names: dict[str, str] = {}
    for q in questions:
        if q.id in names:
            continue
        rel = f"{TRACES}/{safe_id(q.id)}.json"
        if taken.get(rel.casefold(), q.id) != q.id:
            digest = hashlib.sha256(q.id.encode("utf-8")).hexdigest()[:12]
            rel = f"{TRACES}/{safe_id(q.id)[:160]}-{digest}.json"
        taken.setdefault(rel.casefold(), q.id)
        names[q.id] = rel
    return names


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` through a temporary file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(_json_safe(data), f, ensure_ascii=False, indent=1, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _result_line(row: Mapping) -> str:
    """One ``results.jsonl`` line: the row as JSON, then a newline."""
    return json.dumps(_json_safe(dict(row)), ensure_ascii=False, default=str) + "\n"


def _rewrite_results(path: Path, rows: Sequence[Mapping]) -> None:
    """Replace ``results.jsonl`` with ``rows`` (temporary file, fsync, ``os.replace``)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(_result_line(row))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunLock:
    """An exclusive lock on a run directory (``flock`` on ``.lock``), held while a run writes.

    Two ``eval`` invocations on one ``--out`` would answer the same questions twice, and a
    ``--retry-errors`` that rewrites ``results.jsonl`` would lose the other's appends (its
    descriptor still points at the replaced file). The operating system drops the lock when
    its process dies, ``kill -9`` included, so a crashed run never leaves a stale lock."""

    def __init__(self, out: Path):
        self.fd = -1
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock
            return
        fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                return  # a file system without flock (some network mounts): run unlocked
            raise BadInput(f"--out {out}: another eval is writing this run directory right now; wait for it "
                           "to finish (or stop it), then --resume") from None
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the descriptor releases the lock
            self.fd = -1


class ResultsFile:
    """``results.jsonl`` opened for appending whole lines atomically."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.torn = False

    def append(self, row: Mapping) -> None:
        if self.torn:  # a line after the torn one would make it a corrupt line in the middle
            raise OSError(f"{self.path} ends with a part-line of an earlier failed write: not appending after it")
        data = _result_line(row).encode("utf-8")
        written = os.write(self.fd, data)
        if written != len(data):
            # disk full: cut the part-line off again. Left there, the next append (another
            # question finishing before the run stops) would follow it, and the torn line,
            # no longer the last, would make every resume refuse the file as corrupt
            try:
                os.ftruncate(self.fd, os.lseek(self.fd, 0, os.SEEK_END) - written)
            except OSError:
                self.torn = True  # a tail that resume will cut, as after a crash
            raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def read_results(path: str | Path, *, repair: bool = False) -> list[dict]:
    """The rows of a ``results.jsonl``.

    A last line that is incomplete (no final newline) or not valid JSON -- what a crash in
    the middle of a write can leave -- is ignored, and with ``repair=True`` cut off the file
    so that appending continues on a clean line. A bad line elsewhere is an error.
    """
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    good_end = len(data) if data.endswith(b"\n") else data.rfind(b"\n") + 1
    lines = data[:good_end].split(b"\n")[:-1] if good_end else []
    rows: list[dict] = []
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
            if not isinstance(row, dict) or "id" not in row:
                raise ValueError("not a result object")
        except ValueError as e:
            if i == len(lines) - 1:  # a corrupt last line: drop it like a truncated one
                good_end -= len(raw) + 1
                break
            raise BadInput(f"{path}:{i + 1}: corrupt line ({e}); fix or remove it") from e
        rows.append(row)
    if repair and good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
            f.flush()
            os.fsync(f.fileno())
    return rows


# --------------------------------------------------------------------------- rows


def rescore_row(row: dict) -> bool:
    """Score an answered row again with the current metrics (from its ``answer`` and
    ``gold``), in place; True when a score changed (the row was scored by an older version
    of the metrics). Error rows and rows without gold keep their recorded scores."""
    if row.get("error") or "gold" not in row:
        return False
    try:
        now = score(str(row.get("answer") or ""), row.get("gold"))
    except (BadInput, TypeError, KeyError):  # a hand-edited gold no metric reads: as recorded
        return False
    changed = any(_num(row.get(m)) != now[m] for m in METRICS)
    row.update(now)
    return changed


def answer_row(q: Question, answer: Any, elapsed: float, trace_rel: str | None) -> dict:
    text = str(getattr(answer, "text", "") or "")
    usage = getattr(answer, "usage", None)
    usage_json = usage.to_json() if usage is not None and hasattr(usage, "to_json") else {}
    seconds = float(getattr(answer, "seconds", 0.0) or 0.0) or elapsed
    edges = [e.to_json() if hasattr(e, "to_json") else e for e in getattr(answer, "supporting_edges", []) or []]
    gold = q.gold_json()
    return {
        "id": q.id,
        "question": q.text,
        "answer": text,
        "gold": gold,
        **score(text, gold),
        "value": getattr(answer, "value", None),
        **{k: int(usage_json.get(k, 0) or 0) for k in USAGE_KEYS},
        "seconds": round(seconds, 3),
        "strategy": getattr(answer, "strategy", "") or "",
        "decoding": getattr(answer, "decoding", "") or "",
        "stopped": getattr(answer, "stopped", None),  # tree/chain: "threshold" when the answer crossed τ
        "error": None,
        "topic_entities": q.topic_entities,
        "supporting_edges": edges,
        "trace": trace_rel,
    }


def error_row(q: Question, exc: BaseException, elapsed: float, strategy: str, trace_rel: str | None) -> dict:
    return {
        "id": q.id,
        "question": q.text,
        "answer": "",
        "gold": q.gold_json(),
        **{m: 0.0 for m in METRICS},
        "value": None,
        **{k: 0 for k in USAGE_KEYS},
        "seconds": round(elapsed, 3),
        "strategy": strategy,
        "decoding": "",
        "stopped": None,
        "error": f"{type(exc).__name__}: {exc}",
        "topic_entities": q.topic_entities,
        "supporting_edges": [],
        "trace": trace_rel,
    }


# --------------------------------------------------------------------------- run


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("traversals")
    except Exception:  # pragma: no cover - not installed
        return "unknown"


def code_revision(source: Path | None = None) -> dict[str, Any] | None:
    """The git commit of the code that runs (``{"commit": sha, "dirty": bool}``, dirty when
    the package's files differ from it), or None when the package is not in a git checkout
    (an installed wheel, even inside the user's own repository: ``version`` says what ran)
    or git is missing. Recorded in ``run.json`` so that a
    published figure names the code behind it."""
    src = source or Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10)  # fmt: skip
        if commit.returncode != 0:  # not a checkout
            return None
        tracked = subprocess.run(["git", "-C", str(src), "ls-files", "--", "."], capture_output=True, text=True,
                                 timeout=10)  # fmt: skip
        if not tracked.stdout.strip():  # a checkout the package is not part of
            return None
        status = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no", "--", "."],
                                capture_output=True, text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def dataset_digests(files: Sequence[str | Path]) -> list[str | None]:
    """The SHA-256 of each question file a loader read (``Dataset.files``), None for one that
    cannot be read any more. Recorded in ``run.json`` as ``dataset_sha256`` (beside
    ``dataset_files``), so that a resume notices edited questions or gold
    (:func:`_check_questions`) while a file moved elsewhere with the same content is the
    same file."""
    out: list[str | None] = []
    for f in files:
        try:
            out.append(file_sha256(f))
        except OSError:
            out.append(None)
    return out


def _changed_data(old: Mapping, new: Mapping) -> list[str]:
    """How the question files of ``new`` differ in content from those ``old`` recorded (one
    phrase per file, naming it and both hashes); empty when the content is the same,
    whatever the paths, or when ``old`` recorded no hashes (a run of an older version)."""
    old_h, new_h = old.get("dataset_sha256"), new.get("dataset_sha256")
    if not isinstance(old_h, list) or not isinstance(new_h, list):
        return []

    def files(run: Mapping, hashes: list) -> list[tuple[str, str | None]]:
        names = run.get("dataset_files")
        if not isinstance(names, list) or len(names) != len(hashes):
            names = [f"file {i + 1}" for i in range(len(hashes))]
        return [(str(n), h if isinstance(h, str) else None) for n, h in zip(names, hashes)]

    before, now = files(old, old_h), files(new, new_h)
    # the same content (a moved or renamed file) is the same file
    for item in list(now):
        match = next((b for b in before if b[1] is not None and b[1] == item[1]), None)
        if match is not None:
            before.remove(match)
            now.remove(item)
    # the rest in the order read (a loader reads its files in a fixed order)
    pairs: list[tuple[tuple[str, str | None] | None, tuple[str, str | None] | None]] = list(zip(before, now))
    pairs += [(b, None) for b in before[len(now):]] + [(None, n) for n in now[len(before):]]
    out = []
    for was, is_ in pairs:
        if was is not None and is_ is not None:
            if was[1] is None or is_[1] is None:
                continue  # unreadable then or now: nothing to compare
            out.append(f"question file {is_[0]} changed: sha256 {was[1]} (recorded) vs {is_[1]} (now)")
        elif was is not None:
            out.append(f"question file {was[0]} (sha256 {was[1]}) was read then and is not now")
        elif is_ is not None:
            out.append(f"question file {is_[0]} (sha256 {is_[1]}) is read now and was not then")
    return out


def _check_questions(old: Mapping, new: Mapping, rows: list[dict], questions: Sequence[Question], run_json: Path,
                     changed_data_ok: bool) -> int:
    """On a resume over question files whose content changed (:func:`_changed_data`):
    refuse when a question already answered is gone or reads differently now (its answer was
    to another question), unless ``changed_data_ok``; otherwise the run goes on — questions
    added to the file are answered, and an answered row whose gold was edited takes the new
    gold (scored again, no LLM call). Returns how many rows took new gold."""
    changed = _changed_data(old, new)
    if not changed:
        return 0
    by_id = {q.id: q for q in questions}
    regolded = 0
    for row in rows:
        q = by_id.get(row["id"])
        if q is None or ("question" in row and row["question"] != q.text):
            if changed_data_ok:
                continue
            why = (f"question {row['id']} was answered and is not in the files now" if q is None else
                   f"question {row['id']} was answered as {row['question']!r} and reads {q.text!r} now")
            raise BadInput(f"cannot resume: {run_json} was made over other questions -- {'; '.join(changed)}; "
                           f"{why} (use another --out for a new run; give your questions ids to edit the file "
                           "and resume)")
        if "gold" in row and row["gold"] != q.gold_json():
            row["gold"] = q.gold_json()
            regolded += 1
    return regolded


def _gguf_sha256(path: Path, old: Mapping) -> str:
    """The SHA-256 of a GGUF file named by ``--llm local:PATH.gguf``, as cheaply as it is
    known: the ``FILE.sha256`` sidecar of a verified registry model
    (:mod:`traversals.llm.models`) when its size agrees, the hash ``old`` (the recorded
    run.json) holds for the same file, size and modification time, else read (about a second
    per GB, once per run)."""
    marked = recorded_sha256(path)
    if marked is not None:
        return marked
    st = path.stat()
    seen = old.get("llm_file")
    if (isinstance(seen, dict) and isinstance(old.get("llm_sha256"), str)
            and seen == {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}):
        return str(old["llm_sha256"])
    return file_sha256(path)


def llm_identity(spec: Any, old: Mapping | None = None) -> dict[str, Any]:
    """What names the model behind an ``--llm`` spec, without loading it or any network
    call: ``llm_model`` (the registry name, the GGUF's file name, the endpoint's model name)
    and, for a local model, ``llm_sha256`` (a registry model's pinned hash, which the file
    is verified against before use; a GGUF file's content hash, with ``llm_file`` saying
    which file it was). Empty for a spec that names no model this way (a library caller's
    own label). ``old``: the recorded run.json, whose hash of the same unchanged file is
    reused."""
    if not isinstance(spec, str):
        return {}
    kind, _, arg = spec.strip().partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if kind == "openai":  # the endpoint's model name; what it serves under it is not known offline
        return {"llm_model": arg} if arg else {}
    if kind != "local":
        return {}
    from ..llm.models import DEFAULT_MODEL, MODELS

    name = arg or DEFAULT_MODEL
    if name in MODELS:
        return {"llm_model": name, "llm_sha256": MODELS[name].sha256} if MODELS[name].kind == "llm" else {}
    path = Path(name).expanduser()
    try:
        if not path.is_file():
            return {}  # opening the LLM says what is wrong
        path = path.resolve()
        st = path.stat()
        return {"llm_model": path.name, "llm_sha256": _gguf_sha256(path, old or {}),
                "llm_file": {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}}
    except OSError:
        return {}


def _local_model_file(spec: Any, environ: Mapping[str, str]) -> Path | None:
    """The model file a local ``--llm`` spec runs, resolved, whether it is there or not:
    ``local`` and ``local:NAME`` the registry model's file in the model cache (where
    :func:`~traversals.llm.factory.resolve_local_model` puts it), ``local:PATH`` that file;
    None for another spec."""
    if not isinstance(spec, str):
        return None
    kind, _, arg = spec.strip().partition(":")
    if kind.strip().lower() != "local":
        return None
    from ..llm.models import DEFAULT_MODEL, MODELS, default_cache_dir, model_path

    name = arg.strip() or DEFAULT_MODEL
    path = model_path(name, default_cache_dir(environ)) if name in MODELS else Path(name).expanduser()
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _same_llm(old: Mapping, new: Mapping, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the ``llm`` specs of the recorded run and this one name one model: the same
    text, or two local specs (``local``, ``local:NAME``, ``local:PATH.gguf``) that run one
    model file -- the same ``llm_sha256`` when both runs record it (a registry model's pinned
    hash is the hash of its file), else the same resolved path. Another model under the
    same spec is refused by ``llm_sha256`` itself."""
    if old.get("llm") == new.get("llm"):
        return True
    was, now = _local_model_file(old.get("llm"), environ), _local_model_file(new.get("llm"), environ)
    if was is None or now is None:
        return False
    before, after = old.get("llm_sha256"), new.get("llm_sha256")
    if isinstance(before, str) and isinstance(after, str):
        return before == after
    return was == now


def kg_digests(specs: Sequence[Any]) -> list[str | None]:
    """The SHA-256 of each KG spec that is a triple file (kind ``file`` of
    :func:`~traversals.kg.factory.check_kg_spec`), None for the others (a store directory, an
    endpoint, ``wikidata``) and for a file that cannot be read. Recorded in ``run.json`` as
    ``kg_sha256`` beside ``kg``, so that a resume takes a KG file moved elsewhere with the same
    content as the same KG (:func:`_kg_changes`)."""
    out: list[str | None] = []
    for spec in specs:
        try:
            kind, target, _ = check_kg_spec(str(spec))
            out.append(file_sha256(target) if kind == "file" else None)
        except (BadInput, OSError):
            out.append(None)
    return out


def _kg_hashes(run: Mapping) -> list[str | None]:
    """The ``kg_sha256`` a run records, one per ``kg`` spec (all None when it records none)."""
    specs, hashes = run.get("kg"), run.get("kg_sha256")
    n = len(specs) if isinstance(specs, list) else 0
    if not isinstance(hashes, list) or len(hashes) != n:
        return [None] * n
    return [h if isinstance(h, str) else None for h in hashes]


def _kg_where(spec: Any) -> str:
    """A KG spec as the file it names when that file exists (any path to it), else its text."""
    text = str(spec)
    return str(Path(text).resolve()) if Path(text).exists() else text


def _kg_changes(old: Mapping, new: Mapping) -> tuple[bool, list[str], list[str]]:
    """How the KGs of this run (``new``) compare with the recorded ones (``old``): whether
    they differ, a phrase per KG file whose content differs (both paths, both hashes), and
    each KG file found at another path with the same content (``OLD -> NEW``). A spec is the
    same KG when it names the same file by any path, or the same text; a file at another
    path is the same KG when both runs record its ``kg_sha256`` and the hashes (and the
    ``NAME=`` given) agree. A run recorded without hashes compares paths only."""
    a, b = old.get("kg"), new.get("kg")
    if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
        return a != b, [], []
    differ = False
    why: list[str] = []
    moved: list[str] = []
    for x, y, hx, hy in zip(a, b, _kg_hashes(old), _kg_hashes(new)):
        if _kg_where(x) == _kg_where(y):
            continue
        (nx, px), (ny, py) = _split_name(str(x)), _split_name(str(y))
        if hx is not None and hx == hy and nx == ny:
            moved.append(f"{px} -> {py}")
            continue
        differ = True
        if hx is not None and hy is not None and hx != hy:
            why.append(f"KG file {px} has sha256 {hx} (recorded), {py} has {hy} (now): other triples")
    return differ, why, moved


def _same_setting(key: str, old: Mapping, new: Mapping) -> bool:
    """Whether setting ``key`` agrees between the recorded run (``old``) and this one."""
    if key == "llm":
        return _same_llm(old, new)
    if key == "kg":
        return not _kg_changes(old, new)[0]
    return bool(old[key] == new[key])


def _setting_diff(key: str, old: Mapping, new: Mapping) -> str:
    if key == "llm_sha256":  # a hash alone does not say which model: its name too
        return (f"llm_sha256: {old[key]!r} (recorded, model {old.get('llm_model')!r}) vs {new[key]!r} "
                f"(now, model {new.get('llm_model')!r}): another model answers")
    if key == "kg":
        return f"kg: {old[key]!r} (recorded) vs {new[key]!r} (now)" + "".join(
            f" ({why})" for why in _kg_changes(old, new)[1])
    return f"{key}: {old[key]!r} (recorded) vs {new[key]!r} (now)"


def _check_resume(old: Mapping, new: Mapping, run_json: Path) -> None:
    diffs = [
        _setting_diff(k, old, new)
        for k in RESUME_MUST_MATCH
        if k in old and k in new and not _same_setting(k, old, new)
    ]
    if (resampled := _resampled(old, new)) is not None:
        diffs.append(resampled)
    if diffs:
        raise BadInput(
            f"cannot resume: {run_json} was made with different settings -- "
            + "; ".join(diffs)
            + " (resume with the recorded settings, or use another --out for a new run)"
        )


def _resampled(old: Mapping, new: Mapping) -> str | None:
    """Why a sample would not extend the recorded one, or None: ``--limit`` shuffles the
    indices of the questions, so a dataset with another number of questions (your own file,
    edited) gives another sample, and a resume would mix two samples under one run."""
    sampled = old.get("limit") is not None or new.get("limit") is not None
    before, now = old.get("dataset_size"), new.get("dataset_size")
    if not sampled or before is None or now is None or before == now:
        return None
    return (f"dataset_size: {before!r} (recorded) vs {now!r} (now), and --limit samples from the "
            "shuffled indices of all of them, so another number of questions is another sample")


async def _make_solver(factory: Any) -> Any:
    if hasattr(factory, "ask"):
        return factory
    solver = factory()
    if inspect.isawaitable(solver):
        solver = await solver
    return solver


class _Progress:
    """tqdm on stderr with running Hits@1; silent when disabled or not a TTY.

    It counts questions, not rows: ``results.jsonl`` may hold several rows of one id (an
    error row answered again, rows of an older version), and as in :func:`summarize` the
    first row of each id is the one that counts -- so the bar never passes ``total`` and
    says as many answered as the summary does."""

    def __init__(self, enabled: bool, total: int, done_rows: list[dict]):
        self.bar = None
        self.seen: set[Any] = set()
        self.hits = 0.0
        self.errors = 0
        for row in done_rows:
            self._add(row)
        if enabled and total and sys.stderr.isatty():
            try:
                from tqdm import tqdm  # type: ignore[import-untyped]  # tqdm ships no type hints
            except ImportError:  # pragma: no cover - tqdm is an eval extra
                return
            self.bar = tqdm(total=total, initial=self.count, file=sys.stderr, unit="q", dynamic_ncols=True)
            self._postfix()

    @property
    def count(self) -> int:
        """How many distinct questions are done."""
        return len(self.seen)

    def _add(self, row: Mapping) -> bool:
        """Count ``row`` unless its question is counted already; True when it was new."""
        if row.get("id") in self.seen:
            return False
        self.seen.add(row.get("id"))
        self.hits += _num(row.get("hits@1"))
        self.errors += 1 if row.get("error") else 0
        return True

    def _postfix(self) -> None:
        if self.bar is not None:
            acc = self.hits / self.count if self.count else 0.0
            self.bar.set_postfix_str(f"hits@1={100 * acc:.1f}% err={self.errors}", refresh=False)

    def update(self, row: Mapping) -> None:
        if self._add(row) and self.bar is not None:
            self._postfix()
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


async def run_eval(
    dataset: Dataset,
    solver_factory: Callable[[], Any] | Any,
    out_dir: str | Path,
    *,
    concurrency: int = 1,
    resume: bool = False,
    limit: int | None = None,
    seed: int = DEFAULT_SEED,
    progress: bool = True,
    config: Mapping[str, Any] | None = None,
    retry_errors: bool = False,
    max_consecutive_errors: int = MAX_CONSECUTIVE_ERRORS,
    changed_data_ok: bool = False,
) -> Summary:
    """Answer the selected questions of ``dataset`` and write the run's files.

    ``solver_factory`` is a Solver or a callable (sync or async) returning one; it is
    called once, only if there is something left to answer. ``limit``/``seed`` select the
    questions (:func:`~traversals.eval.datasets.sample_questions`). ``config`` is stored in
    ``run.json`` (strategy, llm, k, ...) and checked on resume. Returns the summary over
    every line of ``results.jsonl``.

    Raises :class:`BadInput` when ``results.jsonl`` already has lines and ``resume`` is
    false, or when resuming with different settings. When the LLM or KG is unavailable
    the run stops and the error is raised after in-flight questions finish; on
    cancellation (Ctrl-C) in-flight questions are abandoned. In both cases the files stay
    consistent and the run can be resumed. After ``max_consecutive_errors`` error rows in
    a row (0: never) the run stops with :class:`RunStopped`: a hung server or a broken
    setup would otherwise be recorded as an error for every question. ``retry_errors``
    (with ``resume``) removes the error rows first, so those questions are answered again.

    ``run.json`` records the SHA-256 of each question file read (``dataset_sha256``) and,
    for an ``llm`` spec that names a model (``local``, ``local:NAME``, ``local:PATH.gguf``,
    ``openai:MODEL``), which model answers (:func:`llm_identity`). A resume with another
    model file is refused; two local specs of one model file (``local`` and ``local:PATH`` of
    the default model's file) are one model (:func:`_same_llm`). A KG file found at another
    path with the content ``kg_sha256`` recorded is the same KG (:func:`_kg_changes`). Over
    question files whose content changed, a resume is refused
    when an answered question is gone or reads differently now (unless ``changed_data_ok``);
    added questions are answered and edited gold re-scores the answered rows. A run recorded
    without hashes is not checked.
    """
    if concurrency < 1:
        raise BadInput(f"--concurrency must be >= 1, got {concurrency}")
    out = Path(out_dir)
    results_path = out / RESULTS
    run_path = out / RUN
    selection = sample_questions(dataset.questions, limit, seed)
    selected_ids = [q.id for q in selection]
    if len(set(selected_ids)) != len(selected_ids):
        raise BadInput(f"dataset {dataset.name} has duplicate question ids")

    cfg: dict[str, Any] = {"kg": list(dataset.kg_specs)}  # the caller's config may override
    cfg.update(dict(config or {}))
    cfg.update(  # what this function decides is authoritative
        {
            "dataset": dataset.name,
            "split": dataset.split,
            "answerable_only": dataset.answerable_only,
            "limit": limit,
            "seed": seed,
            "selected": len(selection),
            "dataset_size": len(dataset.questions),
            "dataset_files": [str(Path(f).resolve()) for f in dataset.files],
            "dataset_sha256": dataset_digests(dataset.files),
            "concurrency": concurrency,
        }
    )
    if isinstance(cfg["kg"], list):  # a KG file's content: the same KG when it moves (resume)
        cfg["kg_sha256"] = kg_digests(cfg["kg"])
    cfg.setdefault("version", _version())
    code = code_revision()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")

    if results_path.exists() and results_path.stat().st_size > 0 and not resume:
        raise BadInput(f"{results_path} already has results: use --resume or another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / TRACES).mkdir(exist_ok=True)
    except OSError as e:  # a file of that name, a path through a file, no permission
        raise BadInput(f"--out {out}: cannot make the run directory ({e.strerror or type(e).__name__})") from None

    lock = RunLock(out)  # one invocation at a time per run directory
    try:
        old: dict[str, Any] = {}
        if resume and run_path.exists():
            try:
                old = json.loads(run_path.read_text(encoding="utf-8"))
            except ValueError as e:
                raise BadInput(f"{run_path} is not valid JSON ({e})") from e
            if not isinstance(old, dict):
                raise BadInput(f"{run_path} is not a run's settings (a JSON object expected)")
        for key, value in llm_identity(cfg.get("llm"), old).items():  # which model answers
            cfg.setdefault(key, value)
        if resume and run_path.exists():
            _check_resume(old, cfg, run_path)
            moved = _kg_changes(old, cfg)[2]
            cfg["started"] = old.get("started", now)
            cfg["resumed"] = [*old.get("resumed", []), now]
            cfg["code"] = old.get("code", code)  # the code the run started with; resumes say theirs
            cfg["resumed_code"] = [*old.get("resumed_code", []), code]
            if "command" in old:
                cfg["command"] = old["command"]
        else:
            cfg["started"] = now
            cfg["code"] = code
            moved = []

        size = results_path.stat().st_size if resume and results_path.exists() else 0
        rows = read_results(results_path, repair=True) if resume else []
        cut = size - (results_path.stat().st_size if results_path.exists() else 0) if resume else 0
        # only the selected questions' error rows: one outside the selection (a smaller
        # --limit than before) would be removed and never answered again
        wanted = set(selected_ids)
        retried = [r for r in rows if r.get("error") and r["id"] in wanted] if resume and retry_errors else []
        if retried:
            rows = [r for r in rows if not (r.get("error") and r["id"] in wanted)]
        regolded = _check_questions(old, cfg, rows, dataset.questions, run_path, changed_data_ok) if resume else 0
        rescored = sum(rescore_row(r) for r in rows)  # an older version's scores: one definition per run
        if retried or rescored or regolded:
            _rewrite_results(results_path, rows)
        done = {r["id"] for r in rows}
        todo = [q for q in selection if q.id not in done]
        traces = trace_names(todo, rows)
        write_json_atomic(run_path, cfg)
        if resume and progress:
            print(f"resuming {out}: {len(selection) - len(todo)} of {len(selection)} questions already answered, "
                  f"{len(todo)} to go" + (f" (an unfinished last line of {cut} bytes was cut)" if cut else "")
                  + (f" ({len(retried)} error row(s) removed, to be answered again)" if retried else "")
                  + (f" ({regolded} answer(s) scored against the edited gold)" if regolded else "")
                  + (f" ({rescored} answer(s) scored again with the current metrics)" if rescored else "")
                  + (f" (KG file moved, same content: {', '.join(moved)})" if moved else ""),
                  file=sys.stderr)

        info = {
            "selected": len(selection),
            "dataset": dataset.name,
            "split": dataset.split,
            "strategy": str(cfg.get("strategy", "")),
            "llm": str(cfg.get("llm", "")),
            "out_dir": str(out),
        }

        def finish() -> Summary:
            rows_now = read_results(results_path)
            summary = summarize(rows_now, **info)
            summary.unanswered = len(wanted - {r.get("id") for r in rows_now})
            write_json_atomic(out / SUMMARY, summary.to_json())
            return summary

        if not todo:
            return finish()

        solver = await _make_solver(solver_factory)
        strategy = str(cfg.get("strategy", "") or getattr(solver, "name", ""))
        results = ResultsFile(results_path)
        bar = _Progress(progress, len(selection), [r for r in rows if r["id"] in wanted])
        pending = iter(todo)
        state: dict[str, Any] = {"stop": False, "abort": None, "streak": 0}

        async def answer(q: Question) -> dict:
            trace_rel = traces[q.id]
            t0 = time.perf_counter()
            try:
                ans = await solver.ask(q.text, topic_entities=q.topic_entities or None)
            except ABORT_ERRORS:
                raise
            except Exception as e:  # noqa: BLE001 - recorded as an error row, the run goes on
                elapsed = time.perf_counter() - t0
                row = error_row(q, e, elapsed, strategy, trace_rel)
                tb = "".join(traceback.format_exception(e)) if not isinstance(e, TraversalsError) else ""
                write_json_atomic(
                    out / trace_rel,
                    {"id": q.id, "question": q.text, "gold": q.gold_json(), "error": row["error"], "traceback": tb},
                )
                return row
            elapsed = time.perf_counter() - t0
            row = answer_row(q, ans, elapsed, trace_rel)
            trace = dict(getattr(ans, "trace", None) or {})
            trace.setdefault("question", q.text)
            trace.setdefault("answer", row["answer"])
            trace.setdefault("nodes", [])
            write_json_atomic(out / trace_rel, {"id": q.id, "gold": q.gold_json(), **trace})
            return row

        async def worker() -> None:
            for q in pending:  # one shared iterator: each question is taken by one worker
                if state["stop"]:
                    return
                try:
                    row = await answer(q)
                except ABORT_ERRORS as e:
                    state["stop"] = True
                    state["abort"] = state["abort"] or e
                    return
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # cancelled (Ctrl-C) while the solver ran, and the solver turned the
                    # cancellation into an answer or an error: abandoned like any question
                    # in flight (answered again on resume), not recorded as an error row;
                    # and no further question is started
                    raise asyncio.CancelledError
                results.append(row)
                bar.update(row)
                state["streak"] = state["streak"] + 1 if row.get("error") else 0
                if max_consecutive_errors and state["streak"] >= max_consecutive_errors and not state["stop"]:
                    state["stop"] = True
                    state["abort"] = state["abort"] or RunStopped(
                        f"{state['streak']} questions in a row failed (the last: {row['error'][:200]}), so the "
                        "cause is not the questions: the run stopped rather than record every question as an "
                        "error. Fix the cause, then resume with --retry-errors to answer those questions again"
                    )
                    return

        tasks = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(todo)))]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            bar.close()
            results.close()
            summary = finish()
        if state["abort"] is not None:
            raise state["abort"]
        return summary
    finally:
        lock.release()


def resume_hint(out_dir: str | Path, argv: Sequence[str] | None = None) -> str:
    """How to continue an interrupted run."""
    n = len(read_results(Path(out_dir) / RESULTS))
    cmd = shlex.join(argv) if argv else "the same command"  # quoted: a path with a space pastes back whole
    if argv and "--resume" not in argv:
        cmd += " --resume"
    elif not argv:
        cmd += " with --resume"
    return f"{n} question(s) saved in {out_dir}; continue with: {cmd}"
