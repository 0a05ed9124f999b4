"""The report scores every answer with the current metrics, so that runs recorded by
different versions of the metrics are compared on one footing."""

from __future__ import annotations

import json

from traversals.eval.report import load_run, write_report


def _row(qid: str, answer: str, gold: list, hit: float, **extra) -> str:
    return json.dumps({"id": qid, "question": qid, "answer": answer, "gold": gold, "hits@1": hit,
                       "em_in": hit, "f1": hit, **extra}) + "\n"


def test_scores_recorded_by_an_older_metric_are_recomputed_and_the_report_says_so(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "chain", "llm": "m", "selected": 3}))
    # an older scorer missed the accent-free spelling and the year inside the full date
    (old / "results.jsonl").write_text(
        _row("x:0", "Alexander Skarsgard", [["Alexander Skarsgård"]], 0.0)
        + _row("x:1", "1976-05-02", [["1976"]], 0.0)
        + _row("x:2", "", [["A"]], 0.0, error="KGTimeout: slow"))
    new = tmp_path / "new"
    new.mkdir()
    (new / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "cot", "llm": "m", "selected": 3}))
    (new / "results.jsonl").write_text(
        _row("x:0", "Alexander Skarsgard", [["Alexander Skarsgård"]], 1.0)
        + _row("x:1", "1976", [["1976"]], 1.0) + _row("x:2", "B", [["A"]], 0.0))
    run = load_run(old)
    assert run.rescored == 2 and run.summary.hits_at_1 == 2 / 3 and run.summary.em_in == 2 / 3
    assert load_run(new).rescored == 0
    text = write_report([old, new], out=tmp_path / "r.md").read_text()
    assert "| chain | 66.7 / 66.7 (n=3) |" in text
    assert "| x | chain vs cot | 3 | 2 | 0 | 0 | 1 | 1.000 |" in text  # not 0 | 0 | 2: same footing
    assert f"`{old}` (2 of 3 answers rescored)" in text and f"`{new}`" not in text.split("older version")[1]


def test_a_small_p_value_is_not_printed_as_zero(tmp_path):
    """40 questions only one run gets right: p = 2 · 0.5^40, printed 0.000 before."""
    for name, right in (("a", True), ("b", False)):
        d = tmp_path / name
        d.mkdir()
        (d / "run.json").write_text(json.dumps({"dataset": "x", "strategy": name, "llm": "m"}))
        (d / "results.jsonl").write_text("".join(
            _row(f"x:{i}", "A" if right else "B", [["A"]], 1.0 if right else 0.0) for i in range(40)))
    text = write_report([tmp_path / "a", tmp_path / "b"], out=tmp_path / "r.md").read_text()
    assert "| x | a vs b | 40 | 0 | 40 | 0 | 0 | 1.8e-12 |" in text
