"""``eval --skip N``: questions held out from the first N of the seeded shuffle -- the ones
``--limit N`` runs and ``train-value --skip N`` trains after -- recorded, checked on resume
and named by the report."""

from __future__ import annotations

import json

import pytest

from traversals.cli import build_parser
from traversals.errors import BadInput
from traversals.eval.datasets import Dataset, Gold, Question, sample_questions
from traversals.eval.report import write_report
from traversals.eval.runner import run_eval
from traversals.eval.training import training_questions

from .test_runner import FakeSolver, make_dataset


def numbered(n: int) -> list[Question]:
    return [Question(id=f"q{i}", text=f"question {i}", gold=[Gold(str(i))]) for i in range(n)]


def ids(questions) -> list[str]:
    return [q.id for q in questions]


def test_skip_takes_the_questions_after_those_a_limit_takes():
    qs = numbered(50)
    first, after = sample_questions(qs, 10, 233), sample_questions(qs, 10, 233, skip=10)
    assert not set(ids(first)) & set(ids(after))  # held out: none of the first ten
    assert ids(first) + ids(after) == ids(sample_questions(qs, 20, 233))  # the same shuffle, next ten
    assert ids(sample_questions(qs, 3, 233, skip=10)) == ids(after)[:3]  # a smaller limit is a prefix
    rest = sample_questions(qs, None, 233, skip=10)  # no limit: every question after the first ten
    assert len(rest) == 40 and ids(rest) == ids(sample_questions(qs, 50, 233))[10:]
    assert sample_questions(qs, 5, 233, skip=60) == []  # past the end: nothing, not an error
    assert sample_questions(qs, None, 233, skip=0) == qs  # no limit, no skip: file order
    # train-value's --skip is the same selection
    assert ids(training_questions(qs, 10, 10, 233)) == ids(after)
    with pytest.raises(BadInput, match="--skip must be >= 0"):
        sample_questions(qs, 5, 233, skip=-1)


async def test_a_run_records_its_skip_and_a_resume_with_another_is_refused(tmp_path):
    ds, cfg = make_dataset(6), {"strategy": "tree", "llm": "x"}
    solver = FakeSolver()
    await run_eval(ds, solver, tmp_path, limit=2, skip=3, progress=False, config=cfg)
    text = {q.id: q.text for q in ds.questions}
    assert solver.calls == [text[i] for i in ids(sample_questions(ds.questions, 6, 233))[3:5]]
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["skip"] == 3 and run["limit"] == 2
    with pytest.raises(BadInput, match=r"skip: 3 \(recorded\) vs 0 \(now\), so other questions are left out"):
        await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=3, progress=False, config=cfg)
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=3, skip=3, progress=False, config=cfg)
    assert s.n == 3  # a larger limit with the same skip extends the held-out sample


async def test_a_run_recorded_before_skip_existed_skipped_none(tmp_path):
    ds, cfg = make_dataset(6), {"strategy": "tree", "llm": "x"}
    await run_eval(ds, FakeSolver(), tmp_path, limit=2, progress=False, config=cfg)
    run = json.loads((tmp_path / "run.json").read_text())
    del run["skip"]  # an older version's run.json
    (tmp_path / "run.json").write_text(json.dumps(run))
    with pytest.raises(BadInput, match=r"skip: 0 \(recorded\) vs 2 \(now\)"):
        await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=2, skip=2, progress=False, config=cfg)
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=3, progress=False, config=cfg)
    assert s.n == 3


async def test_a_skipped_sample_is_not_resumed_over_a_dataset_of_another_size(tmp_path):
    """--skip without --limit still shuffles: another number of questions is another sample."""
    cfg = {"strategy": "tree", "llm": "x"}
    await run_eval(make_dataset(6), FakeSolver(), tmp_path, skip=2, progress=False, config=cfg)
    with pytest.raises(BadInput, match=r"dataset_size: 6 \(recorded\) vs 8 \(now\)"):
        await run_eval(make_dataset(8), FakeSolver(), tmp_path, resume=True, skip=2, progress=False, config=cfg)


async def test_the_report_names_the_held_out_range(tmp_path):
    qs = numbered(30)
    ds = Dataset(name="toy", split="dev", questions=qs)
    cfg = {"strategy": "tree", "llm": "x"}
    answers = {q.text: q.gold[0].answer for q in qs}
    await run_eval(ds, FakeSolver(answers), tmp_path / "first", limit=5, progress=False, config=cfg)
    await run_eval(ds, FakeSolver(answers), tmp_path / "held", limit=5, skip=20, progress=False, config=cfg)
    text = write_report([tmp_path / "first", tmp_path / "held"], tmp_path / "rep").read_text()
    assert "dev, 5 sampled (seed 233)" in text
    assert "dev, questions 21-25 of the shuffle (seed 233)" in text


def test_eval_takes_skip_on_the_command_line():
    args = build_parser().parse_args(
        ["eval", "metaqa-1hop", "--data", "d", "--strategy", "tree", "--out", "o", "--skip", "600", "--limit", "100"])
    assert (args.skip, args.limit) == (600, 100)
    assert build_parser().parse_args(["eval", "metaqa-1hop", "--data", "d", "--strategy", "tree", "--out", "o"]).skip == 0
