"""Ways a run could lose or mix up a question's files: a short write (disk full) left a
part-line that the next append buried in the middle of results.jsonl; two ids with one
trace file name; a solver that swallowed the cancellation of Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from traversals.eval.datasets import Dataset, Gold, Question
from traversals.eval.runfiles import ResultsFile, read_results, trace_names
from traversals.eval.runner import run_eval

from .test_runner import FakeSolver, make_dataset


def test_a_short_write_leaves_no_part_line_before_the_next_append(tmp_path, monkeypatch):
    path = tmp_path / "results.jsonl"
    results = ResultsFile(path)
    results.append({"id": "a"})
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[: len(data) // 2]))  # disk full
    with pytest.raises(OSError, match="short write"):
        results.append({"id": "b", "answer": "x" * 100})
    monkeypatch.setattr(os, "write", real_write)
    results.append({"id": "c"})  # another question finishing before the run stops
    results.close()
    assert [r["id"] for r in read_results(path)] == ["a", "c"]  # not "corrupt line 2"


def test_after_a_part_line_that_could_not_be_cut_nothing_is_appended(tmp_path, monkeypatch):
    path = tmp_path / "results.jsonl"
    results = ResultsFile(path)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:5]))
    monkeypatch.setattr(os, "ftruncate", lambda fd, n: (_ for _ in ()).throw(OSError("no")))
    with pytest.raises(OSError, match="short write"):
        results.append({"id": "b"})
    monkeypatch.setattr(os, "write", real_write)
    with pytest.raises(OSError, match="part-line"):
        results.append({"id": "c"})
    results.close()
    assert read_results(path, repair=True) == [] and path.read_bytes() == b""  # the tail a resume cuts


def questions(*ids: str) -> Dataset:
    texts = ["Who directed [Alpha]?", "Who wrote [Beta]?", "Where is [Delta]?"]
    gold = ["Ann Lee", "Bo Ray", "Rome"]
    return Dataset(name="toy", split="dev", kg_specs=["toy.txt"],
                   questions=[Question(id=i, text=t, gold=[Gold(g)]) for i, t, g in zip(ids, texts, gold)])


async def test_ids_with_one_safe_name_keep_their_own_traces(tmp_path):
    """``toy:a b`` and ``toy:a_b`` are both ``toy_a_b``: the second trace replaced the first,
    and the report read the second question's search for the first's row."""
    ds = questions("toy:a b", "toy:a_b", "toy:A_B")
    out = tmp_path / "run"
    await run_eval(ds, FakeSolver(), out, limit=1, progress=False, config={"llm": "x"})
    await run_eval(ds, FakeSolver(), out, resume=True, progress=False, config={"llm": "x"})  # later, resumed
    rows = read_results(out / "results.jsonl")
    assert len({r["trace"].casefold() for r in rows}) == 3  # also on a file system that ignores case
    for r in rows:
        trace = json.loads((out / r["trace"]).read_text())
        assert trace["id"] == r["id"] and trace["question"] == r["question"]
    assert rows[0]["trace"] == "traces/toy_a_b.json"  # the usual name while it is free


def test_trace_names_are_the_usual_ones_without_a_clash():
    ds = make_dataset(3)
    assert trace_names(ds.questions) == {q.id: f"traces/toy_dev_{i}.json" for i, q in enumerate(ds.questions)}
    long = questions("q:" + "x" * 200 + "1", "q:" + "x" * 200 + "2")  # the same first 180 characters
    assert len(set(trace_names(long.questions).values())) == 2
    # a recorded row's trace takes its name whatever the case: Q1's file is q1's on a file
    # system that ignores case, so q1 gets another
    q1 = questions("q1").questions
    named = trace_names(q1, [{"id": "Q1", "trace": "traces/Q1.json"}])["q1"]
    assert named.casefold() != "traces/q1.json" and named.startswith("traces/q1-")
    assert trace_names(q1, [{"id": "q1", "trace": "traces/q1.json"}]) == {"q1": "traces/q1.json"}  # its own


class Swallower(FakeSolver):
    """Answers the first question; the second waits and turns its cancellation into an
    ordinary exception, as a client with a broad ``except BaseException`` would."""

    async def ask(self, question, *, topic_entities=None):
        if question != "Who directed [Alpha]?":
            self.calls.append(question)
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                raise RuntimeError("the request was interrupted") from None
        return await super().ask(question, topic_entities=topic_entities)


async def test_a_swallowed_cancellation_records_no_error_and_asks_no_more(tmp_path):
    ds = make_dataset(5)
    out = tmp_path / "run"
    solver = Swallower()
    task = asyncio.create_task(run_eval(ds, solver, out, progress=False, config={"llm": "x"}))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if len(solver.calls) >= 2:
            break
    task.cancel()  # Ctrl-C
    with pytest.raises(asyncio.CancelledError):
        await task
    rows = read_results(out / "results.jsonl")
    assert [r["id"] for r in rows] == ["toy:dev:0"]  # the interrupted question is not an error row
    assert len(solver.calls) == 2  # and no question was started after Ctrl-C
    s = await run_eval(ds, FakeSolver(), out, resume=True, progress=False, config={"llm": "x"})
    assert s.n == 5 and s.errors == 0


def test_a_summary_is_complete_when_every_selected_question_has_a_row_not_when_rows_are_many():
    from traversals.eval.runfiles import Summary

    # rows of an earlier, larger --limit count in n, but a selected question without a row
    # (a resume with a smaller --limit and --retry-errors, interrupted) is still to answer
    assert not Summary(n=5, selected=3, unanswered=1).complete
    assert Summary(n=5, selected=3, unanswered=0).complete
    assert Summary(n=3, selected=3).complete and not Summary(n=2, selected=3).complete  # ids unknown: by count


async def test_run_eval_says_how_many_selected_questions_are_unanswered(tmp_path):
    s = await run_eval(make_dataset(4), FakeSolver(), tmp_path / "run", limit=3, progress=False, config={})
    assert s.unanswered == 0 and s.complete
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["unanswered"] == 0


async def test_a_selected_question_without_a_row_is_unanswered_however_many_rows_there_are(tmp_path):
    """A full run stopped at its last question (the server went down), resumed with --limit 2,
    whose sample holds that question, while the server is still down: three rows, two
    selected questions, one of them never answered -- not a complete run."""
    from traversals.errors import LLMUnavailable
    from traversals.eval.report import write_report

    ds = make_dataset(4)  # --limit 2 selects toy:dev:3 and toy:dev:0
    down = FakeSolver(raises={ds.questions[3].text: LLMUnavailable("connection refused")})
    out = tmp_path / "run"
    with pytest.raises(LLMUnavailable):
        await run_eval(ds, down, out, progress=False, config={"strategy": "cot"})
    with pytest.raises(LLMUnavailable):
        await run_eval(ds, down, out, resume=True, limit=2, progress=False, config={"strategy": "cot"})
    assert [r["id"] for r in read_results(out / "results.jsonl")] == ["toy:dev:0", "toy:dev:1", "toy:dev:2"]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["n"], summary["selected"], summary["unanswered"]) == (3, 2, 1)
    assert "(n=3, partial of 2)" in write_report([out], out=tmp_path / "report.md").read_text()


async def test_a_resume_without_progress_still_says_what_it_cut(tmp_path, capsys):
    """--no-progress hides the progress line, not what a resume changed in the run's files."""
    out = tmp_path / "run"
    await run_eval(make_dataset(3), FakeSolver(), out, limit=1, progress=False, config={"llm": "x"})
    with open(out / "results.jsonl", "a") as f:
        f.write('{"id": "toy:half')  # a write the kill cut short
    capsys.readouterr()
    await run_eval(make_dataset(3), FakeSolver(), out, resume=True, progress=False, config={"llm": "x"})
    err = capsys.readouterr().err
    assert "resuming" in err and "an unfinished last line of 16 bytes was cut" in err


def test_a_full_disk_stops_the_eval_with_what_to_do_not_a_traceback(tmp_path, monkeypatch, capsys):
    import errno

    import traversals.eval.runfiles as runfiles
    import traversals.llm.factory as llm_factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"question": f"who is [E{i}]", "answers": ["x"]}) + "\n" for i in range(5)))
    real_write, rows = os.write, []

    def write(fd, data):
        if b'"question"' in data:
            rows.append(data)
            if len(rows) > 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(runfiles.os, "write", write)
    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(["ANSWER: x"] * 10))
    out = tmp_path / "run"
    assert main(["eval", "questions", "--data", str(data), "--strategy", "cot", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "cannot write the run's files (No space left on device)" in err and "2 question(s) saved" in err
    assert "--resume" in err and "Traceback" not in err
    assert len(read_results(out / "results.jsonl")) == 2


def test_a_write_that_fails_leaves_no_hidden_temporary_file(tmp_path, monkeypatch):
    """A full disk: the half-written .NAME.PID.tmp files stayed, taking space after the resume."""
    import os

    from traversals.eval import runfiles

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runfiles.os, "fsync", full)
    for write in (lambda: runfiles.write_json_atomic(tmp_path / "run.json", {"a": 1}),
                  lambda: runfiles.rewrite_results(tmp_path / "results.jsonl", [{"id": "x"}])):
        with pytest.raises(OSError):
            write()
    assert [p.name for p in tmp_path.iterdir()] == [] and not os.listdir(tmp_path)


class NumpySolver(FakeSolver):
    """Answers with NumPy numbers: a solver of the user's, or a plug-in's value passed on."""

    async def ask(self, question, *, topic_entities=None):
        import numpy as np

        answer = await super().ask(question, topic_entities=topic_entities)
        answer.value = np.float32(0.83744204)
        answer.trace["nodes"][1]["value"] = np.float32(0.83744204)
        answer.trace["extra"] = {"n": np.int64(3), "kept": np.bool_(True), "v": np.array([0.5, np.nan])}
        return answer


async def test_numpy_numbers_are_written_as_numbers_not_strings(tmp_path):
    """default=str wrote "value": "0.83744204" into results.jsonl and the trace: the summary
    and `traversals report` skip a string as no value ("No data: no trace has a proposed
    answer with a value")."""
    from pathlib import Path

    pytest.importorskip("numpy")
    from traversals.eval.runfiles import write_json_atomic

    out = tmp_path / "run"
    await run_eval(make_dataset(2), NumpySolver(), out, progress=False, config={"llm": "x"})
    rows = read_results(out / "results.jsonl")
    assert [type(r["value"]) for r in rows] == [float, float] and rows[0]["value"] == pytest.approx(0.83744204)
    trace = json.loads((out / rows[0]["trace"]).read_text())
    assert type(trace["nodes"][1]["value"]) is float
    assert trace["extra"] == {"n": 3, "kept": True, "v": [0.5, None]}  # NaN: null, as a float's
    # what JSON has no number for is still its string, not a stopped run
    write_json_atomic(tmp_path / "run2.json", {"prompts": Path("/p/prompts.toml")})
    assert json.loads((tmp_path / "run2.json").read_text()) == {"prompts": "/p/prompts.toml"}
