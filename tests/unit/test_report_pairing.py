"""The report's paired comparisons match questions by id *and* text: two files of one's own
questions both have ``questions:1``, ``questions:2`` ..., and were compared as if the same
questions."""

from __future__ import annotations

import json
from pathlib import Path

from traversals.eval.datasets import load_dataset
from traversals.eval.report import write_report
from traversals.eval.runner import run_eval
from traversals.eval.stats import paired

from .test_runner import FakeSolver


def test_the_same_id_with_another_question_is_not_a_shared_question():
    a = [{"id": "questions:1", "question": "who directed [Alpha]", "hits@1": 1.0},
         {"id": "questions:2", "question": "who wrote [Beta]", "hits@1": 1.0}]
    b = [{"id": "questions:1", "question": "who directed  [Alpha] ", "hits@1": 0.0},  # spacing aside, the same
         {"id": "questions:2", "question": "where is [Delta]", "hits@1": 0.0}]
    pc = paired(a, b)
    assert (pc.n, pc.only_a, pc.other) == (1, 1, 1)
    # rows without their text (hand-made, older tools): the id decides, as before
    assert paired([{"id": "x", "hits@1": 1.0}], [{"id": "x", "hits@1": 0.0}]).n == 1


def write(path: Path, questions: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"question": q, "answers": [a]}) + "\n" for q, a in questions))
    return path


async def test_runs_of_two_question_files_are_not_paired(tmp_path):
    one = write(tmp_path / "one.jsonl", [("who directed [Alpha]", "Ann Lee"), ("who wrote [Beta]", "Bo Ray")])
    two = write(tmp_path / "two.jsonl", [("where is [Delta]", "Rome"), ("what genre is [Zeta]", "Drama")])
    solver = {"who directed [Alpha]": "Ann Lee", "who wrote [Beta]": "Bo Ray", "where is [Delta]": "Oslo",
              "what genre is [Zeta]": "Comedy"}
    cfg = {"strategy": "cot", "llm": "x", "kg": []}
    await run_eval(load_dataset("questions", one), FakeSolver(solver), tmp_path / "r1", progress=False, config=cfg)
    await run_eval(load_dataset("questions", two), FakeSolver(solver), tmp_path / "r2", progress=False, config=cfg)
    text = write_report([tmp_path / "r1", tmp_path / "r2"]).read_text()
    section = text.split("## Paired comparisons")[1].split("## ")[0]
    assert "| questions |" not in section  # 2 of 2 right vs 0 of 2 was a paired "only A: 2"
    assert "No two runs share questions" in section and "cot (r1) vs cot (r2): 2" in section
