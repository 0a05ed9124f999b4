"""One eval at a time per run directory: a second invocation on the same --out is refused
(it would answer the same questions again, and a --retry-errors rewrite would lose the
other's appends); the lock goes with the run, however it ends."""

from __future__ import annotations

import pytest

from traversals.errors import BadInput, KGTimeout, LLMUnavailable
from traversals.eval.runfiles import RunLock, read_results
from traversals.eval.runner import run_eval

from .test_runner import QUESTIONS, FakeSolver, make_dataset


async def test_a_second_eval_on_a_run_directory_in_use_is_refused(tmp_path):
    ds = make_dataset(3)
    cfg = {"strategy": "tree", "llm": "x"}
    held = RunLock(tmp_path)  # another process's eval, writing this directory
    with pytest.raises(BadInput, match="another eval is writing this run directory"):
        await run_eval(ds, FakeSolver(), tmp_path, progress=False, config=cfg)
    assert not (tmp_path / "results.jsonl").exists() and not (tmp_path / "run.json").exists()
    held.release()
    await run_eval(ds, FakeSolver(), tmp_path, limit=2, progress=False, config=cfg)
    # released however the run ends: an abort, then a resume in the same process
    down = FakeSolver(raises={QUESTIONS[2][0]: LLMUnavailable("down")})
    with pytest.raises(LLMUnavailable):
        await run_eval(ds, down, tmp_path, resume=True, progress=False, config=cfg)
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, progress=False, config=cfg)
    assert s.n == 3 and len(read_results(tmp_path / "results.jsonl")) == 3


async def test_retry_errors_keeps_the_error_rows_of_questions_it_will_not_ask(tmp_path):
    """Resumed with a smaller --limit, --retry-errors removed every error row, those outside
    the selection too: they were never answered again and the run lost them."""
    ds = make_dataset(8)
    cfg = {"strategy": "tree", "llm": "x"}
    failing = FakeSolver(raises={text: KGTimeout("slow") for text, _, _ in QUESTIONS})
    await run_eval(ds, failing, tmp_path, limit=4, progress=False, config=cfg, max_consecutive_errors=0)
    first = [r["id"] for r in read_results(tmp_path / "results.jsonl")]
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, retry_errors=True, limit=2, progress=False, config=cfg)
    rows = {r["id"]: r for r in read_results(tmp_path / "results.jsonl")}
    assert set(rows) == set(first) and s.n == 4
    assert [bool(rows[i]["error"]) for i in first] == [False, False, True, True]
