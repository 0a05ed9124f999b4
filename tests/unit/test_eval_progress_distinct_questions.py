"""The progress bar of ``eval`` counts questions, not result rows: a results.jsonl may hold
two rows of one id (an error row answered again by an older version's resume, rows joined
by hand), and the bar counted both -- past its total, and more answered than the summary
said. Like the summary, it takes the first row of each id."""

from __future__ import annotations

import io
import json
import sys
import types

from traversals.eval.runfiles import read_results
from traversals.eval.runner import run_eval

from .test_runner import FakeSolver, make_dataset


class FakeBar:
    """Stands in for ``tqdm.tqdm``: where the bar is and what its postfix says."""

    made: list[FakeBar] = []

    def __init__(self, *, total: int, initial: int = 0, **_: object):
        self.total, self.n, self.postfix = total, initial, ""
        FakeBar.made.append(self)

    def update(self, k: int = 1) -> None:
        self.n += k

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text

    def close(self) -> None:
        pass


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_duplicate_rows_count_once_and_the_bar_never_passes_its_total(tmp_path, monkeypatch):
    ds = make_dataset(4)
    cfg = {"strategy": "tree", "llm": "x"}
    await run_eval(ds, FakeSolver(), tmp_path, limit=3, progress=False, config=cfg)
    path = tmp_path / "results.jsonl"
    rows = read_results(path)
    # the first question failed once and was answered again later: two rows of one id, the
    # error row first (the one that counts, in the summary as on the bar)
    failed = {**rows[0], "error": "KGTimeout: slow", "answer": "", "hits@1": 0.0, "em_in": 0.0, "f1": 0.0}
    path.write_text("".join(json.dumps(r) + "\n" for r in [failed, *rows]))

    tqdm = types.ModuleType("tqdm")
    tqdm.tqdm = FakeBar  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tqdm", tqdm)
    monkeypatch.setattr(sys, "stderr", Terminal())
    FakeBar.made.clear()
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=4, progress=True, config=cfg)

    [bar] = FakeBar.made
    answered = s.selected - s.unanswered
    assert (bar.total, bar.n, answered, s.n) == (4, 4, 4, 4)  # not 5 of 4
    # the running figures are the summary's: the error row counts, the later row does not
    assert f"hits@1={100 * s.hits_at_1:.1f}%" in bar.postfix and f"err={s.errors}" in bar.postfix
    assert s.errors == 1
