"""The files of a run directory: what ``traversals eval`` writes there, and how it is read back.

Files in ``out_dir``:

- ``run.json`` -- the run's configuration (dataset, split, strategy, LLM spec, seed,
  limit, search hyper-parameters, version, the git commit of the code when it runs from a
  checkout (:func:`~.resume.code_revision`), start time, resumes and their code), the
  SHA-256 of each question file read (``dataset_sha256``), of each KG file (``kg_sha256``:
  :func:`~.resume.kg_digests`) and which model answers (``llm_model``, ``llm_sha256``:
  :func:`~.resume.llm_identity`); a resume is refused when a setting that changes the
  answers or the model differs, or an answered question reads differently now
  (:mod:`.resume`).
- ``results.jsonl`` -- one JSON object per answered question, appended as each finishes
  with a single ``os.write`` on an ``O_APPEND`` descriptor followed by ``fsync``: a line is
  either entirely there or (after a crash mid-write) a truncated tail that ``resume``
  cuts off.
- ``traces/<safe id>.json`` -- the search tree of each question (written before its
  result line, via a temporary file and ``os.replace``).
- ``summary.json`` -- means over every line of ``results.jsonl`` (so a resumed run
  summarises all of its questions).

Here: the names of those files, how they are written (:func:`write_json_atomic`,
:class:`ResultsFile`, under a :class:`RunLock`; :func:`rewrite_results` replaces
``results.jsonl`` whole) and read back (:func:`read_results`), a row of
``results.jsonl`` (:func:`answer_row`, :func:`error_row`, :func:`rescore_row`) and the
summary over the rows (:class:`Summary`, :func:`summarize`, adding up each value as
:func:`as_number`). The loop that writes them: :mod:`.runner`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import numbers
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import BadInput
from ..llm.base import Usage
from ..validate import scrub_surrogates
from .datasets.base import Question
from .metrics import METRICS, score

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
RUN = "run.json"
TRACES = "traces"
LOCK = ".lock"

USAGE_KEYS = ("llm_calls", "prompt_tokens", "completion_tokens", "computed_prompt_tokens", "kg_calls")
#: the embedder's counts (mcts, beam, retrieve): in a row only when it was called, so rows
#: written before they were counted read as rows of a search that called none
EMBEDDING_KEYS = ("embedder_calls", "embedded_texts", "embedding_tokens")


def _embedding(usage_json: Mapping) -> dict:
    return {k: int(usage_json[k]) for k in EMBEDDING_KEYS if usage_json.get(k)}


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
    #: replies served by --llm-cache, not the model (their seconds are not the model's)
    total_llm_cache_hits: int = 0
    #: the embedder's calls and texts a question (mcts, beam, retrieve; 0 in rows without them)
    mean_embedder_calls: float = 0.0
    mean_embedded_texts: float = 0.0
    #: the tokens embeddings endpoints reported, all questions'
    total_embedding_tokens: int = 0
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
            **({"total_llm_cache_hits": self.total_llm_cache_hits} if self.total_llm_cache_hits else {}),
            **({"mean_embedder_calls": r(self.mean_embedder_calls), "mean_embedded_texts": r(self.mean_embedded_texts)}
               if self.mean_embedder_calls else {}),
            **({"total_embedding_tokens": self.total_embedding_tokens} if self.total_embedding_tokens else {}),
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
            + (f"\n  embedder: {self.mean_embedder_calls:.1f} calls, {self.mean_embedded_texts:.0f} texts per question"
               + (f", {self.total_embedding_tokens} tokens in all" if self.total_embedding_tokens else "")
               if self.mean_embedder_calls else "")
            + (f"\n  {self.total_llm_cache_hits} LLM replies came from --llm-cache (not counted as LLM calls or "
               "tokens; the seconds are not the model's)" if self.total_llm_cache_hits else "")
        )


def as_number(x: Any) -> float:
    """``x`` as a finite float, 0.0 for a missing, non-numeric or non-finite value (a row's
    metric or cost as summaries add it up: an error row counts 0)."""
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
    mean = lambda key: sum(as_number(r.get(key)) for r in uniq) / n if n else 0.0  # noqa: E731
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
        total_prompt_tokens=int(sum(as_number(r.get("prompt_tokens")) for r in uniq)),
        total_completion_tokens=int(sum(as_number(r.get("completion_tokens")) for r in uniq)),
        total_seconds=sum(as_number(r.get("seconds")) for r in uniq),
        total_llm_cache_hits=int(sum(as_number(r.get("llm_cache_hits")) for r in uniq)),
        mean_embedder_calls=mean("embedder_calls"),
        mean_embedded_texts=mean("embedded_texts"),
        total_embedding_tokens=int(sum(as_number(r.get("embedding_tokens")) for r in uniq)),
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
    """``value`` as JSON can hold it: a NaN or infinity as null, a lone surrogate (from a
    plug-in's text) as U+FFFD, so one odd reply cannot stop a run at each resume. A number
    of another type (NumPy's float32, int64, bool_, an array of them: a solver's or a
    plug-in's) is written as the JSON number (or list) it holds: the files' ``default=str``
    wrote ``"value": "0.83744204"``, a string that ``summarize`` and ``report`` skip as no
    value. Anything else JSON has no form for (a ``Path`` in a config) is still written as
    its ``str``, rather than stop the run."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return scrub_surrogates(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if callable(getattr(value, "tolist", None)):  # a NumPy scalar or array: Python's numbers, bools, lists
        try:
            plain = value.tolist()
        except Exception:  # noqa: BLE001 - someone else's tolist: written as its str, as before
            return value
        if plain is not value:
            return _json_safe(plain)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):  # a Fraction
        return _json_safe(float(value))
    return value


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` through a temporary file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(_json_safe(data), f, ensure_ascii=False, indent=1, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:  # a full disk: no half-written hidden file left taking space
        tmp.unlink(missing_ok=True)


def _result_line(row: Mapping) -> str:
    """One ``results.jsonl`` line: the row as JSON, then a newline."""
    return json.dumps(_json_safe(dict(row)), ensure_ascii=False, default=str) + "\n"


def rewrite_results(path: Path, rows: Sequence[Mapping]) -> None:
    """Replace ``results.jsonl`` with ``rows`` (temporary file, fsync, ``os.replace``)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(_result_line(row))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:  # a full disk: no half-written hidden file left taking space
        tmp.unlink(missing_ok=True)


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
            if not isinstance(row["id"], str) or not isinstance(row.get("trace"), (str, type(None))):
                raise ValueError("its id or trace is not a string")
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
    changed = any(as_number(row.get(m)) != now[m] for m in METRICS)
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
        # --llm-cache: replies that came from the file, not the model (not in llm_calls, no tokens)
        **({"llm_cache_hits": int(usage_json["llm_cache_hits"])} if usage_json.get("llm_cache_hits") else {}),
        **_embedding(usage_json),  # RwT's critical model, retrieve's ranking: only when called
        "seconds": round(seconds, 3),
        "strategy": getattr(answer, "strategy", "") or "",
        "decoding": getattr(answer, "decoding", "") or "",
        "stopped": getattr(answer, "stopped", None),  # tree/chain: "threshold" when the answer crossed τ
        "error": None,
        "topic_entities": q.topic_entities,
        "supporting_edges": edges,
        "trace": trace_rel,
    }


def error_row(q: Question, exc: BaseException, elapsed: float, strategy: str, trace_rel: str | None,
              spent: Usage | None = None) -> dict:
    """A question whose solver raised: scored 0, with what it spent before (``spent``, from
    :func:`~traversals.llm.base.spending`) so that a run's cost counts its failures."""
    usage_json = spent.to_json() if spent is not None else {}
    return {
        "id": q.id,
        "question": q.text,
        "answer": "",
        "gold": q.gold_json(),
        **{m: 0.0 for m in METRICS},
        "value": None,
        **{k: int(usage_json.get(k, 0)) for k in USAGE_KEYS},
        **({"llm_cache_hits": int(usage_json["llm_cache_hits"])} if usage_json.get("llm_cache_hits") else {}),
        **_embedding(usage_json),
        "seconds": round(elapsed, 3),
        "strategy": strategy,
        "decoding": "",
        "stopped": None,
        "error": f"{type(exc).__name__}: {exc}",
        "topic_entities": q.topic_entities,
        "supporting_edges": [],
        "trace": trace_rel,
    }
