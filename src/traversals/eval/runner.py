"""Run a solver over a dataset: resumable, concurrent, every answer on disk as it comes.

The files a run writes in ``out_dir`` (``run.json``, ``results.jsonl``, ``traces/``,
``summary.json``) and how they are written and read: :mod:`.runfiles`. What ``run.json``
records so that a resume is safe, and how a resume is checked: :mod:`.resume`. Here: the
loop that answers the questions (:func:`run_eval`).

``resume=True`` skips ids already in ``results.jsonl``; a run killed at any point (Ctrl-C,
``kill -9``) and resumed ends with every selected id exactly once.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import (
    BadInput, EmbedderUnavailable, KGAuthError, KGUnavailable, LLMUnavailable, ModelIntegrityError, RunStopped,
    TraversalsError,
)
from ..llm.base import spending
from .datasets.base import DEFAULT_SEED, Dataset, Question, sample_questions
from .resume import (
    check_questions, check_resume, check_selection, code_revision, dataset_digests, kg_changes, kg_digests, kg_paths,
    llm_identity, package_version, selection_digest,
)
from .runfiles import (
    RESULTS, RUN, SUMMARY, TRACES, ResultsFile, RunLock, Summary, answer_row, as_number, error_row, read_results,
    rescore_row, rewrite_results, summarize, trace_names, write_json_atomic,
)

#: Errors that say the infrastructure is down, not that a question is hard: the run stops
#: (nothing is recorded for the question) so that it can be resumed once it is back.
ABORT_ERRORS: tuple[type[BaseException], ...] = (LLMUnavailable, KGUnavailable, KGAuthError, ModelIntegrityError,
                                                 EmbedderUnavailable, RunStopped)
#: error rows in a row after which a run stops (``--max-consecutive-errors``)
MAX_CONSECUTIVE_ERRORS = 5


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
    error row answered again, rows of an older version), and as in
    :func:`~.runfiles.summarize` the first row of each id is the one that counts -- so the
    bar never passes ``total`` and says as many answered as the summary does."""

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
        self.hits += as_number(row.get("hits@1"))
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
    skip: int = 0,
    progress: bool = True,
    config: Mapping[str, Any] | None = None,
    retry_errors: bool = False,
    max_consecutive_errors: int = MAX_CONSECUTIVE_ERRORS,
    changed_data_ok: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Summary:
    """Answer the selected questions of ``dataset`` and write the run's files.

    ``solver_factory`` is a Solver or a callable (sync or async) returning one; it is
    called once, only if there is something left to answer. ``limit``/``seed``/``skip`` select
    the questions (:func:`~traversals.eval.datasets.sample_questions`; ``skip`` leaves out the
    first questions of the shuffle, those a run with ``limit=skip`` answers). ``config`` is stored in
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
    ``openai:MODEL``), which model answers (:func:`~.resume.llm_identity`). A resume with
    another model file is refused; two local specs of one model file (``local`` and
    ``local:PATH`` of the default model's file) are one model (:func:`~.resume.check_resume`).
    A KG file found at another path with the content ``kg_sha256`` recorded is the same KG,
    and a KG file whose content changed at the same path is another
    (:func:`~.resume.kg_changes`); the path is the one recorded in ``kg_paths`` (absolute),
    so the same relative ``kg`` spec resumed from another working directory is compared
    as the file it names there. Over question files whose content changed, a resume is
    refused when an answered question is gone or reads differently now (unless ``changed_data_ok``);
    added questions are answered and edited gold re-scores the answered rows. A run recorded
    without hashes is not checked.

    ``environ`` is the environment the resume check finds the model cache of a ``--llm
    local`` spec in (``$TRAVERSALS_CACHE``, ...); None (a library caller's default) reads
    ``os.environ``, here at the entry and nowhere below. The CLI passes its own.
    """
    if environ is None:
        environ = os.environ
    if concurrency < 1:
        raise BadInput(f"--concurrency must be >= 1, got {concurrency}")
    out = Path(out_dir)
    results_path = out / RESULTS
    run_path = out / RUN
    selection = sample_questions(dataset.questions, limit, seed, skip=skip)
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
            "skip": skip,
            "selected": len(selection),
            "selection_sha256": selection_digest(selected_ids),  # a resume's sample must begin with it
            "dataset_size": len(dataset.questions),
            "dataset_files": [str(Path(f).resolve()) for f in dataset.files],
            "dataset_sha256": dataset_digests(dataset.files),
            "concurrency": concurrency,
        }
    )
    if isinstance(cfg["kg"], list):  # a KG file's content: the same KG when it moves (resume)
        cfg["kg_sha256"] = kg_digests(cfg["kg"])
        # where each file is: a resume from another directory compares the file read, not the text
        cfg["kg_paths"] = kg_paths(cfg["kg"])
    cfg.setdefault("version", package_version())
    code = code_revision()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")

    if results_path.exists() and results_path.stat().st_size > 0 and not resume:
        raise BadInput(f"{results_path} already has results: use --resume or another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / TRACES).mkdir(exist_ok=True)
    except OSError as e:  # a file of that name, a path through a file, no permission
        raise BadInput(f"--out {out}: cannot make the run directory ({e.strerror or type(e).__name__})") from None
    if not all(os.access(d, os.W_OK | os.X_OK) for d in (out, out / TRACES)):  # one there already (a resume)
        raise BadInput(f"--out {out}: cannot write in the run directory (permission denied)")

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
            check_resume(old, cfg, run_path, environ=environ)
            check_selection(old, cfg, selected_ids, run_path)
            moved = kg_changes(old, cfg)[2]
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
        regolded = check_questions(old, cfg, rows, dataset.questions, run_path, changed_data_ok) if resume else 0
        rescored = sum(rescore_row(r) for r in rows)  # an older version's scores: one definition per run
        if retried or rescored or regolded:
            rewrite_results(results_path, rows)
        done = {r["id"] for r in rows}
        todo = [q for q in selection if q.id not in done]
        traces = trace_names(todo, rows)
        write_json_atomic(run_path, cfg)
        if resume:  # one line, --no-progress too: what a resume changed must be said
            print(f"resuming {out}: {len(selection) - len(todo)} of {len(selection)} questions already answered, "
                  f"{len(todo)} to go" + (f" (an unfinished last line of {cut} bytes was cut)" if cut else "")
                  + (f" ({len(retried)} error row(s) removed, to be answered again)" if retried else "")
                  + (f" ({regolded} answer(s) scored against the edited gold)" if regolded else "")
                  + (f" ({rescored} answer(s) scored again with the current metrics)" if rescored else "")
                  + (f" (KG file moved, same content: {', '.join(map(str, moved))})" if moved else ""),
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
        used = getattr(solver, "constrained", None)  # --decoding auto: the LLM decides; the answers record it
        if strategy in ("tree", "chain", "mcts", "beam") and isinstance(used, bool):
            now = "constrained" if used else "sampled"
            before = sorted({str(r["decoding"]) for r in rows if not r.get("error") and r.get("decoding")})
            if before and now not in before:
                raise BadInput(f"cannot resume: the answers in {out} were decided with {' and '.join(before)} "
                               f"decoding and this LLM gives {now} (--decoding auto follows what the LLM can do: an "
                               "endpoint that scores options, or not); resume with the LLM the run started with, or "
                               "use another --out")
        results = ResultsFile(results_path)
        bar = _Progress(progress, len(selection), [r for r in rows if r["id"] in wanted])
        pending = iter(todo)
        state: dict[str, Any] = {"stop": False, "abort": None, "streak": 0}

        async def answer(q: Question) -> dict:
            trace_rel = traces[q.id]
            t0 = time.perf_counter()
            try:
                with spending() as spent:  # what it cost, should it fail
                    ans = await solver.ask(q.text, topic_entities=q.topic_entities or None)
            except ABORT_ERRORS:
                raise
            except Exception as e:  # noqa: BLE001 - recorded as an error row, the run goes on
                elapsed = time.perf_counter() - t0
                row = error_row(q, e, elapsed, strategy, trace_rel, spent)
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
