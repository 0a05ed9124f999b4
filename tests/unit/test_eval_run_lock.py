"""One eval at a time per run directory: a second invocation on the same --out is refused
(it would answer the same questions again, and a --retry-errors rewrite would lose the
other's appends); the lock goes with the run, however it ends."""

from __future__ import annotations

import pytest

from traversals.errors import BadInput, LLMUnavailable
from traversals.eval.runner import RunLock, read_results, run_eval

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
