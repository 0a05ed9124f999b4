"""A resume over question files whose content changed (run.json records the SHA-256 of each
file read) is refused when an answered question reads differently now or is gone; edited
gold re-scores the answered rows, added questions are answered; a moved file with the same
content, and a run recorded before the hashes were, still resume."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from traversals.errors import BadInput
from traversals.eval.datasets import load_dataset
from traversals.eval.runfiles import read_results
from traversals.eval.runner import run_eval

from .test_runner import FakeSolver

CFG = {"strategy": "cot", "llm": "x", "kg": []}  # as eval records a cot run
ANSWERS = {"who directed [Alpha]": "Ann Lee", "who wrote [Beta]": "Bo Ray", "where is [Delta]": "Rome"}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_questions(path: Path, gold_alpha: str = "Ann Lee") -> Path:
    rows = [{"id": "a", "question": "who directed [Alpha]", "answers": [gold_alpha]},
            {"id": "b", "question": "who wrote [Beta]", "answers": ["Bo Ray"]},
            {"id": "d", "question": "where is [Delta]", "answers": ["Rome"]}]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


async def test_run_json_records_the_hash_of_the_question_file(tmp_path):
    mine = write_questions(tmp_path / "mine.jsonl")
    out = tmp_path / "run"
    await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, limit=2, progress=False, config=CFG)
    run = json.loads((out / "run.json").read_text())
    assert run["dataset_files"] == [str(mine.resolve())] and run["dataset_sha256"] == [sha(mine)]


def write_renamed(path: Path) -> Path:
    """The file with question "a" asking something else under the same id."""
    text = path.read_text().replace("who directed [Alpha]", "who produced [Alpha]")
    path.write_text(text)
    return path


async def test_a_resume_over_an_answered_question_that_reads_differently_now_is_refused(tmp_path):
    """The recorded answer was to another question: one run over two datasets, unnoticed."""
    mine = write_questions(tmp_path / "mine.jsonl")
    out = tmp_path / "run"
    await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, progress=False, config=CFG)
    before = sha(mine)
    write_renamed(mine)
    with pytest.raises(BadInput) as e:
        await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, resume=True, progress=False,
                       config=CFG)
    msg = str(e.value)
    assert "\n" not in msg and "cannot resume" in msg
    assert f"question file {mine.resolve()} changed: sha256 {before} (recorded) vs {sha(mine)} (now)" in msg
    assert "question questions:a was answered as 'who directed [Alpha]' and reads 'who produced [Alpha]' now" in msg
    assert len(read_results(out / "results.jsonl")) == 3  # nothing answered, nothing rewritten
    # the caller's override lets it through
    s = await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, resume=True, progress=False,
                       config=CFG, changed_data_ok=True)
    assert s.n == 3


async def test_edited_gold_rescores_the_answered_rows_and_added_questions_are_answered(tmp_path):
    """What docs/evaluation.md promises for a file with ids: edit it and resume."""
    mine = write_questions(tmp_path / "mine.jsonl")
    out = tmp_path / "run"
    await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, progress=False, config=CFG)
    assert {r["id"]: r["hits@1"] for r in read_results(out / "results.jsonl")}["questions:a"] == 1.0
    write_questions(mine, gold_alpha="Someone Else")
    with mine.open("a") as f:
        f.write(json.dumps({"id": "e", "question": "who wrote [Beta]?", "answers": ["Bo Ray"]}) + "\n")
    s = await run_eval(load_dataset("questions", mine), FakeSolver({**ANSWERS, "who wrote [Beta]?": "Bo Ray"}), out,
                       resume=True, progress=False, config=CFG)
    rows = {r["id"]: r for r in read_results(out / "results.jsonl")}
    assert s.n == 4 and set(rows) == {"questions:a", "questions:b", "questions:d", "questions:e"}
    assert rows["questions:a"]["gold"] == [["Someone Else"]] and rows["questions:a"]["hits@1"] == 0.0
    assert json.loads((out / "run.json").read_text())["dataset_sha256"] == [sha(mine)]
    # an answered question gone from the file is named
    mine.write_text("".join(line for line in mine.read_text().splitlines(keepends=True) if '"b"' not in line))
    with pytest.raises(BadInput, match="question questions:b was answered and is not in the files now"):
        await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, resume=True, progress=False,
                       config=CFG)


async def test_a_moved_file_with_the_same_content_resumes(tmp_path):
    mine = write_questions(tmp_path / "a" / "mine.jsonl")
    out = tmp_path / "run"
    await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, limit=1, progress=False, config=CFG)
    moved = tmp_path / "b" / "mine.jsonl"
    moved.parent.mkdir()
    mine.rename(moved)
    s = await run_eval(load_dataset("questions", moved), FakeSolver(ANSWERS), out, resume=True, limit=3,
                       progress=False, config=CFG)
    assert s.n == 3
    assert json.loads((out / "run.json").read_text())["dataset_files"] == [str(moved.resolve())]


async def test_a_run_recorded_without_hashes_still_resumes(tmp_path):
    mine = write_questions(tmp_path / "mine.jsonl")
    out = tmp_path / "run"
    await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, limit=1, progress=False, config=CFG)
    run = json.loads((out / "run.json").read_text())
    del run["dataset_sha256"]  # as an older version wrote it
    (out / "run.json").write_text(json.dumps(run))
    write_questions(mine, gold_alpha="Someone Else")  # not known to have changed: not checked
    s = await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, resume=True, limit=3,
                       progress=False, config=CFG)
    assert s.n == 3
    assert json.loads((out / "run.json").read_text())["dataset_sha256"] == [sha(mine)]  # from now on


def write_metaqa(d: Path, second: str = "who wrote [Beta]\tBo Ray") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "qa_dev_1hop.txt").write_text(f"who directed [Alpha]\tAnn Lee\n{second}\nwhere is [Delta]\tRome\n")
    (d / "answerable_dev_1hop.idx").write_text("0\n1\n2\n")
    (d / "kb.txt").write_text("Alpha|directed_by|Ann Lee\n")
    return d


async def test_a_bundled_benchmark_read_from_data_dir_is_checked_too(tmp_path):
    data = write_metaqa(tmp_path / "metaqa")
    out = tmp_path / "run"
    ds = load_dataset("metaqa-1hop", tmp_path, "dev", True)
    await run_eval(ds, FakeSolver(ANSWERS), out, progress=False, config=CFG)
    run = json.loads((out / "run.json").read_text())
    qa, idx = data / "qa_dev_1hop.txt", data / "answerable_dev_1hop.idx"
    assert run["dataset_sha256"] == [sha(qa), sha(idx)]
    before = sha(qa)
    write_metaqa(data, second="who wrote [Gamma]\tBo Ray")  # line 1 asks another question
    with pytest.raises(BadInput) as e:
        await run_eval(load_dataset("metaqa-1hop", tmp_path, "dev", True), FakeSolver(ANSWERS), out, resume=True,
                       progress=False, config=CFG)
    assert f"question file {qa.resolve()} changed: sha256 {before} (recorded) vs {sha(qa)} (now)" in str(e.value)
    assert "answerable_dev_1hop.idx" not in str(e.value)  # the unchanged file is not named
    assert "reads 'who wrote [Gamma]' now" in str(e.value)
    # back as it was, in another folder (the folder above given as --data): resumes
    write_metaqa(data)
    moved = tmp_path / "elsewhere" / "metaqa"
    moved.parent.mkdir()
    data.rename(moved)
    s = await run_eval(load_dataset("metaqa-1hop", moved, "dev", True), FakeSolver(ANSWERS), out, resume=True,
                       progress=False, config=CFG)
    assert s.n == 3


async def test_a_file_read_now_and_not_then_gives_the_answered_rows_its_gold(tmp_path):
    """QALD-10's labels.json put beside the questions mid-run changes the gold labels."""
    d = tmp_path / "qald10"
    d.mkdir()
    qald = {"questions": [{"id": i, "question": [{"language": "en", "string": f"q{i}?"}],
                           "answers": [{"results": {"bindings": [{"x": {"type": "uri",
                                        "value": "http://www.wikidata.org/entity/Q42"}}]}}]}
                          for i in range(3)]}  # fmt: skip
    (d / "qald_10.json").write_text(json.dumps(qald))
    out = tmp_path / "run"
    solver = FakeSolver({f"q{i}?": "Q42" for i in range(3)})
    await run_eval(load_dataset("qald10", tmp_path), solver, out, limit=1, progress=False, config=CFG)
    gold_before = read_results(out / "results.jsonl")[0]["gold"]
    (d / "labels.json").write_text(json.dumps({"Q42": ["Douglas Adams"]}))
    s = await run_eval(load_dataset("qald10", tmp_path), solver, out, resume=True, limit=3, progress=False, config=CFG)
    assert s.n == 3
    row = read_results(out / "results.jsonl")[0]
    assert row["gold"] != gold_before and "Douglas Adams" in json.dumps(row["gold"])  # the labels reach the old row



async def test_a_limit_resume_over_a_reordered_file_is_refused(tmp_path):
    """The same questions, ids and gold in another order: --limit drew another sample (the
    number of questions, all a resume compared, was the same), and the run mixed two."""
    rows = [{"id": f"q{i}", "question": f"who directed [Film {i}]", "answers": [f"Person {i}"]} for i in range(12)]
    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = {r["question"]: r["answers"][0] for r in rows}
    out = tmp_path / "run"
    await run_eval(load_dataset("questions", mine), FakeSolver(answers), out, limit=4, progress=False, config=CFG)
    mine.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))
    with pytest.raises(BadInput, match="was made with another sample"):
        await run_eval(load_dataset("questions", mine), FakeSolver(answers), out, limit=4, resume=True,
                       progress=False, config=CFG)
    mine.write_text("".join(json.dumps(r) + "\n" for r in rows))  # as it was: resumes, and a bigger --limit too
    await run_eval(load_dataset("questions", mine), FakeSolver(answers), out, limit=8, resume=True,
                   progress=False, config=CFG)
    assert len(read_results(out / "results.jsonl")) == 8


async def test_a_whole_run_resumed_with_a_limit_over_its_size_goes_on(tmp_path):
    """A run of every question (file order), resumed with --limit 10 on 4 questions (a
    shuffled order): refused as "another sample", though the questions were the same."""
    mine = write_questions(tmp_path / "mine.jsonl")
    out = tmp_path / "run"
    await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, progress=False, config=CFG)
    await run_eval(load_dataset("questions", mine), FakeSolver(ANSWERS), out, limit=10, resume=True, progress=False,
                   config=CFG)
    assert len(read_results(out / "results.jsonl")) == 3
