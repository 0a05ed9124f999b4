"""The evaluation runner with a scripted solver: files, summary, resume after a crash,
concurrency, errors, refusals."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from traversals.errors import BadInput, KGTimeout, LLMUnavailable, RunStopped
from traversals.eval.datasets import Dataset, Gold, Question
from traversals.eval.runfiles import read_results, safe_id, summarize
from traversals.eval.runner import run_eval
from traversals.llm.base import Usage
from traversals.search.result import NO_ANSWER, Answer

QUESTIONS = [
    ("Who directed [Alpha]?", ["Ann Lee"], "Ann Lee"),
    ("Who wrote [Beta]?", ["Bo Ray", "Cy Day"], "Bo Ray"),  # EM-in 0.5
    ("When was [Gamma] released?", ["1999"], "It came out in 1999."),
    ("Where is [Delta]?", [["Roma", "Rome"]], "Rome"),  # alias
    ("Who starred in [Eps]?", ["Dee Tan"], NO_ANSWER),
    ("What genre is [Zeta]?", ["Drama"], "Comedy"),
    ("What language is [Eta]?", ["French"], "French"),
    ("Who composed [Theta]?", ["Max Ode"], "Max Ode, Lu Bo"),
]


def make_dataset(n: int = len(QUESTIONS)) -> Dataset:
    qs = []
    for i, (text, gold, _) in enumerate(QUESTIONS[:n]):
        qs.append(
            Question(
                id=f"toy:dev:{i}",
                text=text,
                gold=[Gold.from_json(g) for g in gold],
                topic_entities=[text[text.index("[") + 1 : text.index("]")]],
            )
        )
    return Dataset(name="toy", split="dev", questions=qs, kg_specs=["toy.txt"])


ANSWERS = {text: ans for text, _, ans in QUESTIONS}


class FakeSolver:
    """Answers from a dict, optionally after a random short sleep; raises on request."""

    name = "fake"

    def __init__(self, answers=ANSWERS, *, sleep: float = 0.0, seed: int = 0, raises=None):
        self.answers = answers
        self.sleep = sleep
        self.rng = random.Random(seed)
        self.raises = raises or {}
        self.calls: list[str] = []
        self.topics: list = []
        self.active = 0
        self.max_active = 0

    async def ask(self, question, *, topic_entities=None):
        self.calls.append(question)
        self.topics.append(topic_entities)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.sleep:
                await asyncio.sleep(self.rng.uniform(0, self.sleep))
            if question in self.raises:
                raise self.raises[question]
            text = self.answers[question]
            return Answer(
                question=question,
                text=text,
                value=0.9,
                usage=Usage(llm_calls=4, prompt_tokens=100, completion_tokens=10, kg_calls=2),
                seconds=0.5,
                decoding="constrained",
                strategy="tree",
                trace={
                    "question": question,
                    "answer": text,
                    "nodes": [
                        {"id": 0, "parent": None, "depth": 0, "state": "default", "action": None, "value": None, "expansion": 0},
                        {"id": 1, "parent": 0, "depth": 1, "state": "done", "action": "answer", "value": 0.9, "expansion": None, "answer": text},
                    ],
                },
            )
        finally:
            self.active -= 1


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


async def test_run_writes_results_traces_summary(tmp_path):
    ds = make_dataset()
    solver = FakeSolver()
    out = tmp_path / "run"
    summary = await run_eval(ds, lambda: solver, out, progress=False, config={"strategy": "tree", "llm": "fake"})
    rows = lines(out / "results.jsonl")
    assert [r["id"] for r in rows] == [q.id for q in ds.questions]
    r0 = rows[0]
    for key in ("id", "question", "answer", "gold", "hits@1", "em_in", "f1", "value", "llm_calls",
                "prompt_tokens", "completion_tokens", "kg_calls", "seconds", "strategy", "decoding", "stopped", "error"):  # fmt: skip
        assert key in r0
    assert r0["gold"] == [["Ann Lee"]] and r0["em_in"] == 1.0 and r0["error"] is None
    assert rows[1]["em_in"] == 0.5 and rows[3]["hits@1"] == 1.0
    assert rows[4]["answer"] == NO_ANSWER and rows[4]["em_in"] == 0.0
    assert solver.topics[0] == ["Alpha"]  # topic entities passed through
    # traces
    for q in ds.questions:
        trace = json.loads((out / "traces" / f"{safe_id(q.id)}.json").read_text())
        assert trace["id"] == q.id and trace["nodes"][1]["answer"] == ANSWERS[q.text]
    assert rows[0]["trace"] == "traces/toy_dev_0.json"
    # summary: fractions, means
    em = [1, 0.5, 1, 1, 0, 0, 1, 1]
    assert summary.n == 8 and summary.errors == 0
    assert summary.em_in == pytest.approx(sum(em) / 8)
    assert summary.mean_llm_calls == 4 and summary.mean_prompt_tokens == 100 and summary.mean_seconds == 0.5
    saved = json.loads((out / "summary.json").read_text())
    assert saved["n"] == 8 and saved["em_in"] == pytest.approx(sum(em) / 8, abs=1e-4)
    assert set(saved) >= {"hits@1", "em_in", "f1", "mean_llm_calls", "mean_prompt_tokens",
                          "mean_completion_tokens", "mean_kg_calls", "mean_seconds", "errors"}  # fmt: skip
    run = json.loads((out / "run.json").read_text())
    assert run["dataset"] == "toy" and run["strategy"] == "tree" and run["seed"] == 233 and "started" in run
    assert "version" in run


async def test_refuses_existing_results_without_resume(tmp_path):
    ds = make_dataset(2)
    await run_eval(ds, FakeSolver(), tmp_path, progress=False)
    called = []
    with pytest.raises(BadInput, match="--resume or another --out"):
        await run_eval(ds, lambda: called.append(1) or FakeSolver(), tmp_path, progress=False)
    assert not called  # refused before building the solver
    # an empty results file is not a reason to refuse
    other = tmp_path / "empty"
    other.mkdir()
    (other / "results.jsonl").write_text("")
    assert (await run_eval(ds, FakeSolver(), other, progress=False)).n == 2


async def test_resume_after_crash_mid_line(tmp_path, capsys):
    ds = make_dataset()
    ref = tmp_path / "ref"
    await run_eval(ds, FakeSolver(), ref, progress=False, config={"strategy": "tree"})
    good = (ref / "results.jsonl").read_text().splitlines(keepends=True)

    out = tmp_path / "crashed"
    out.mkdir()
    half = good[3][: len(good[3]) // 2]
    (out / "results.jsonl").write_text("".join(good[:3]) + half)  # 3 good lines + a torn one
    (out / "run.json").write_text(json.dumps({"dataset": "toy", "split": "dev", "strategy": "tree", "seed": 233}))

    solver = FakeSolver()
    summary = await run_eval(ds, solver, out, resume=True, progress=True, config={"strategy": "tree"})
    said = capsys.readouterr().err  # the user is told what the resume kept and cut
    assert f"3 of 8 questions already answered, 5 to go (an unfinished last line of {len(half)} bytes was cut)" in said
    rows = lines(out / "results.jsonl")  # every line parses: the torn tail was cut
    ids = [r["id"] for r in rows]
    assert sorted(ids) == sorted(q.id for q in ds.questions) and len(ids) == len(set(ids))
    assert ids[:3] == ["toy:dev:0", "toy:dev:1", "toy:dev:2"]
    assert len(solver.calls) == len(ds.questions) - 3  # the 3 saved answers were not redone
    assert summary.n == 8
    assert json.loads((out / "run.json").read_text())["resumed"]
    # resuming a finished run does nothing and builds no solver
    again = await run_eval(ds, lambda: pytest.fail("solver built"), out, resume=True, progress=False)
    assert again.n == 8 and len(lines(out / "results.jsonl")) == 8


def test_read_results_tolerates_only_the_last_line(tmp_path):
    p = tmp_path / "results.jsonl"
    p.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "ans')
    assert [r["id"] for r in read_results(p)] == ["a", "b"]
    assert p.read_text().endswith('"ans')  # untouched without repair
    read_results(p, repair=True)
    assert p.read_text() == '{"id": "a"}\n{"id": "b"}\n'
    p.write_text('{"id": "a"}\n{"id": "b", garbage}\n')  # a complete but corrupt last line
    assert [r["id"] for r in read_results(p, repair=True)] == ["a"]
    assert p.read_text() == '{"id": "a"}\n'
    p.write_text('{"id": "a"}\nnot json\n{"id": "c"}\n')
    with pytest.raises(BadInput, match="corrupt line"):
        read_results(p)


async def test_resume_refuses_other_settings(tmp_path):
    ds = make_dataset(3)
    await run_eval(ds, FakeSolver(), tmp_path, limit=2, progress=False,
                   config={"strategy": "tree", "llm": "x", "calibrate": False})
    with pytest.raises(BadInput, match="strategy"):
        await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=2, progress=False, config={"strategy": "chain", "llm": "x"})
    with pytest.raises(BadInput, match="calibrate: False"):  # calibration changes the answers: no mixing
        await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=2, progress=False,
                       config={"strategy": "tree", "llm": "x", "calibrate": 0.5})
    other = Dataset(name="other", split="dev", questions=ds.questions)
    with pytest.raises(BadInput, match="dataset"):
        await run_eval(other, FakeSolver(), tmp_path, resume=True, progress=False, config={"strategy": "tree", "llm": "x"})
    # a larger limit extends the same sample (a prefix of the same shuffle)
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=3, progress=False, config={"strategy": "tree", "llm": "x"})
    assert s.n == 3


async def test_concurrency_gives_the_same_results(tmp_path):
    ds = make_dataset()
    seq = await run_eval(ds, FakeSolver(sleep=0.02, seed=1), tmp_path / "seq", progress=False)
    fast = FakeSolver(sleep=0.05, seed=2)
    par = await run_eval(ds, fast, tmp_path / "par", concurrency=4, progress=False)
    assert fast.max_active == 4  # really concurrent, and bounded

    def key(path):
        return sorted(
            (r["id"], r["answer"], r["hits@1"], r["em_in"], r["f1"], r["llm_calls"])
            for r in lines(path / "results.jsonl")
        )

    assert key(tmp_path / "seq") == key(tmp_path / "par")
    assert seq.to_json()["em_in"] == par.to_json()["em_in"] and par.n == 8


async def test_limit_and_seed_select_questions(tmp_path):
    ds = make_dataset()
    s = await run_eval(ds, FakeSolver(), tmp_path, limit=3, seed=233, progress=False)
    idxs = list(range(len(ds.questions)))
    random.Random(233).shuffle(idxs)
    assert [r["id"] for r in lines(tmp_path / "results.jsonl")] == [ds.questions[i].id for i in idxs[:3]]
    assert s.n == 3 and s.selected == 3


async def test_errors_are_rows_and_the_run_goes_on(tmp_path):
    ds = make_dataset()
    raises = {QUESTIONS[1][0]: KGTimeout("KG took too long"), QUESTIONS[2][0]: ZeroDivisionError("boom")}
    summary = await run_eval(ds, FakeSolver(raises=raises), tmp_path, progress=False)
    rows = {r["id"]: r for r in lines(tmp_path / "results.jsonl")}
    assert len(rows) == 8 and summary.errors == 2
    assert rows["toy:dev:1"]["error"] == "KGTimeout: KG took too long" and rows["toy:dev:1"]["answer"] == ""
    assert rows["toy:dev:2"]["error"] == "ZeroDivisionError: boom" and rows["toy:dev:2"]["em_in"] == 0.0
    trace = json.loads((tmp_path / "traces" / "toy_dev_2.json").read_text())
    assert "ZeroDivisionError" in trace["traceback"]


async def test_unavailable_llm_stops_the_run_resumably(tmp_path):
    ds = make_dataset()
    raises = {QUESTIONS[3][0]: LLMUnavailable("connection refused")}
    with pytest.raises(LLMUnavailable):
        await run_eval(ds, FakeSolver(raises=raises), tmp_path, progress=False)
    rows = lines(tmp_path / "results.jsonl")
    assert [r["id"] for r in rows] == ["toy:dev:0", "toy:dev:1", "toy:dev:2"]  # nothing recorded for 3
    assert json.loads((tmp_path / "summary.json").read_text())["n"] == 3
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, progress=False)
    assert s.n == 8 and s.errors == 0


async def test_errors_in_a_row_stop_the_run_and_retry_errors_answers_them_again(tmp_path):
    """A hung or broken server fails every question: after N error rows in a row the run
    stops instead of recording them all, and `--retry-errors` answers those again."""
    ds = make_dataset()
    broken = {text: KGTimeout("no answer within 30 s") for text, _, _ in QUESTIONS[2:]}
    with pytest.raises(RunStopped, match="3 questions in a row failed.*KGTimeout: no answer within 30 s"):
        await run_eval(ds, FakeSolver(raises=broken), tmp_path, progress=False, max_consecutive_errors=3)
    rows = lines(tmp_path / "results.jsonl")
    assert [bool(r["error"]) for r in rows] == [False, False, True, True, True]  # the rest not asked
    # a plain resume keeps the error rows; --retry-errors removes and re-asks them
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, retry_errors=True, progress=False)
    rows = lines(tmp_path / "results.jsonl")
    assert s.n == 8 and s.errors == 0 and sorted(r["id"] for r in rows) == sorted(q.id for q in ds.questions)
    # 0 never stops; errors that are not in a row never stop either
    s = await run_eval(ds, FakeSolver(raises=broken), tmp_path / "all", progress=False, max_consecutive_errors=0)
    assert s.errors == 6
    spread = {QUESTIONS[i][0]: KGTimeout("hub") for i in (1, 3, 5, 7)}
    s = await run_eval(ds, FakeSolver(raises=spread), tmp_path / "spread", progress=False, max_consecutive_errors=2)
    assert s.n == 8 and s.errors == 4


async def test_resume_refuses_another_kg_but_not_another_path_to_it(tmp_path, monkeypatch):
    kb = tmp_path / "kb.txt"
    kb.write_text("a|r|b\n")
    ds = make_dataset(3)
    await run_eval(ds, FakeSolver(), tmp_path / "run", limit=2, progress=False, config={"kg": [str(kb)]})
    monkeypatch.chdir(tmp_path)  # the same file by a relative path
    s = await run_eval(ds, FakeSolver(), tmp_path / "run", resume=True, limit=3, progress=False, config={"kg": ["kb.txt"]})
    assert s.n == 3
    with pytest.raises(BadInput, match="kg: "):
        await run_eval(ds, FakeSolver(), tmp_path / "run", resume=True, progress=False, config={"kg": ["other.txt"]})


async def test_an_out_that_cannot_be_a_directory_is_bad_input(tmp_path):
    (tmp_path / "file").write_text("x")
    for out in (tmp_path / "file", tmp_path / "file" / "run"):
        with pytest.raises(BadInput, match="cannot make the run directory"):
            await run_eval(make_dataset(2), FakeSolver(), out, progress=False)


async def test_cancel_leaves_consistent_files(tmp_path):
    ds = make_dataset()
    task = asyncio.create_task(run_eval(ds, FakeSolver(sleep=0.2, seed=3), tmp_path, concurrency=2, progress=False))
    while not (tmp_path / "results.jsonl").exists() or len(lines(tmp_path / "results.jsonl")) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    done = lines(tmp_path / "results.jsonl")  # every line whole
    assert 2 <= len(done) < 8
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, progress=False)
    ids = [r["id"] for r in lines(tmp_path / "results.jsonl")]
    assert s.n == 8 and len(ids) == len(set(ids)) == 8


SCRIPT = """
import asyncio, random, sys
sys.path.insert(0, {tests!r})
from test_runner import FakeSolver, make_dataset
from traversals.eval.runner import run_eval

async def main():
    await run_eval(make_dataset(), FakeSolver(sleep=float(sys.argv[2])), sys.argv[1],
                   resume=True, concurrency=2, progress=False)
asyncio.run(main())
"""


def test_kill_9_and_resume(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(tests=str(Path(__file__).parent)))
    out = tmp_path / "out"
    # 1 s per question (2 at a time): the kill lands mid-run even on a loaded machine
    proc = subprocess.Popen([sys.executable, str(script), str(out), "1.0"])
    deadline = time.time() + 30
    while time.time() < deadline:
        if (out / "results.jsonl").exists() and len(read_results(out / "results.jsonl")) >= 2:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(read_results(out / "results.jsonl"))
    assert 2 <= before < 8
    subprocess.run([sys.executable, str(script), str(out), "0"], check=True, timeout=60)
    ids = [r["id"] for r in lines(out / "results.jsonl")]
    assert sorted(ids) == sorted(q.id for q in make_dataset().questions)
    assert len(ids) == len(set(ids))
    assert json.loads((out / "summary.json").read_text())["n"] == 8


def test_summarize_counts_each_id_once():
    rows = [{"id": "a", "em_in": 1.0, "seconds": 2}, {"id": "a", "em_in": 0.0}, {"id": "b", "em_in": 0.0, "error": "X: y"}]
    s = summarize(rows)
    assert s.n == 2 and s.em_in == 0.5 and s.errors == 1 and s.mean_seconds == 1.0
    assert summarize([]).n == 0
    # the counts and totals too: a later error row of an answered id is neither an error
    # nor tokens spent (the report reads the same first row)
    s = summarize([{"id": "a", "hits@1": 1.0, "prompt_tokens": 10, "completion_tokens": 1},
                   {"id": "a", "error": "LLMError: x", "prompt_tokens": 99, "completion_tokens": 9}])
    assert (s.n, s.errors, s.total_prompt_tokens, s.total_completion_tokens) == (1, 0, 10, 1)


def test_safe_id():
    assert safe_id("metaqa-1hop:dev:17") == "metaqa-1hop_dev_17"
    assert safe_id("../../etc/passwd") == "etc_passwd"
    assert "/" not in safe_id("a/b\\c d")


# ---------------------------------------------------------------------------- CLI

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not (SHARED_DATA / "metaqa").is_dir(), reason="../shared/data not present")


class Closable:
    def __init__(self, name):
        self.name = name
        self.closed = False

    async def close(self):
        self.closed = True


@needs_data
def test_cli_eval_chain_builds_llm_kg_and_solver_once(tmp_path, monkeypatch, capsys):
    import traversals.api as api
    import traversals.kg.factory as kg_factory
    import traversals.llm.factory as llm_factory
    from traversals.cli import main

    opened = {"llm": [], "kg": [], "solver": []}
    llm, kg = Closable("llm"), Closable("kg")

    def open_llm(spec="local", *, url=None, api_key=None, **kw):
        opened["llm"].append((spec, url))
        return llm

    def open_kg(spec, **kw):
        opened["kg"].append(spec)
        return kg

    def build_solver(strategy, llm_, kgs, config=None, **kw):
        opened["solver"].append((strategy, llm_, list(kgs), config))
        return FakeSolver(answers={}, raises={})  # every question -> KeyError -> error row

    monkeypatch.setattr(llm_factory, "open_llm", open_llm)
    monkeypatch.setattr(kg_factory, "open_kg", open_kg)
    monkeypatch.setattr(api, "build_solver", build_solver)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    out = tmp_path / "e"
    args = ["eval", "metaqa-1hop", "--data", str(SHARED_DATA / "metaqa"), "--split", "dev", "--answerable-only",
            "--limit", "6", "--strategy", "chain", "--out", str(out), "--concurrency", "2", "--no-progress",
            "--max-consecutive-errors", "0"]  # fmt: skip
    assert main(args) == 0
    assert opened["llm"] == [("local", "http://127.0.0.1:9/v1")]
    assert opened["kg"] == [str((SHARED_DATA / "metaqa" / "kb.txt").resolve())]  # once, shared
    [(strategy, llm_, kgs, config)] = opened["solver"]
    assert strategy == "chain" and llm_ is llm and kgs == [kg] and config.k == 1
    assert llm.closed and kg.closed
    assert len(lines(out / "results.jsonl")) == 6
    run = json.loads((out / "run.json").read_text())
    assert run["k"] == 1 and run["max_depth"] == 7 and run["limit"] == 6 and run["answerable_only"] is True
    assert run["threshold"] == 0.8 and "simulations" not in run and "embedder" not in run  # RwT's own
    assert run["seed"] == 233 and run["search_seed"] == 0  # the sampling seed is not the search's
    assert run["dataset_files"][0] == str((SHARED_DATA / "metaqa" / "qa_dev_1hop.txt").resolve())
    assert "Hits@1=" in capsys.readouterr().out
    # again without --resume: refused (exit 2, one line)
    assert main(args) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0 and len(opened["solver"]) == 1  # nothing left: no solver
    # another search seed changes the answers: its resume is refused, and a new run records it
    assert main(args + ["--resume", "--seed", "7"]) == 2
    assert "search_seed" in capsys.readouterr().err
    assert main([*args[:-6], str(tmp_path / "s7"), *args[-5:], "--seed", "7"]) == 0
    assert opened["solver"][-1][3].seed == 7
    assert json.loads((tmp_path / "s7" / "run.json").read_text())["search_seed"] == 7


@needs_data
def test_cli_eval_cot_then_report(tmp_path, monkeypatch, capsys):
    import traversals.llm.factory as llm_factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    def reply(prompt, prefix, n, temperature):
        return "Let me think.\nANSWER: [Tracker, Once Were Warriors]" if "Temuera" in prompt else "ANSWER: Drama"

    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(reply))
    out = tmp_path / "cot"
    assert main(["eval", "metaqa-1hop", "--data", str(SHARED_DATA), "--limit", "5", "--strategy", "cot",
                 "--out", str(out), "--no-progress", "--kg", "wikidata"]) == 0  # fmt: skip
    rows = lines(out / "results.jsonl")
    assert len(rows) == 5 and all(r["llm_calls"] == 1 and r["error"] is None for r in rows)
    run = json.loads((out / "run.json").read_text())
    assert run["kg"] == [] and run["strategy"] == "cot"
    # cot reads no search setting: none is recorded as if it had been used
    assert not {"k", "max_depth", "threshold", "decoding", "search_seed", "calibrate", "value_model"} & set(run)
    assert main(["report", str(out)]) == 0
    assert (out / "report.md").exists() and "| cot |" in (out / "report.md").read_text()


@needs_data
def test_cli_eval_records_the_llm_template_and_a_resume_with_another_is_refused(tmp_path, monkeypatch, capsys):
    """--llm-template decides whether an endpoint decodes constrained: answers of both kinds
    must not mix in one run."""
    import traversals.llm.factory as llm_factory
    from traversals.cli import main
    from traversals.llm.scripted import ScriptedLLM

    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: ScriptedLLM(["ANSWER: Drama"] * 9))
    out = tmp_path / "cot"
    args = ["eval", "metaqa-1hop", "--data", str(SHARED_DATA), "--limit", "1", "--strategy", "cot", "--out", str(out),
            "--no-progress", "--llm", "openai:m", "--llm-url", "http://127.0.0.1:9/v1"]
    assert main([*args, "--llm-template", "chatml"]) == 0
    assert json.loads((out / "run.json").read_text())["llm_template"] == "chatml"
    capsys.readouterr()
    assert main([*args, "--limit", "2", "--resume"]) == 2
    assert "llm_template: 'chatml' (recorded) vs None (now)" in capsys.readouterr().err


def test_cli_eval_freebase_needs_kg(tmp_path, capsys):
    from traversals.cli import main

    if not (SHARED_DATA / "questions-only").is_dir():
        pytest.skip("../shared/data not present")
    assert main(["eval", "cwq", "--data", str(SHARED_DATA), "--strategy", "tree", "--out", str(tmp_path / "x")]) == 2
    assert "Freebase" in capsys.readouterr().err


def test_cli_eval_musicbrainz_names_the_kgs_to_pass(tmp_path, capsys):
    """The dataset's own KGs are Wikidata and MusicBrainz, and no MusicBrainz KG is built in."""
    from traversals.cli import main

    csv = tmp_path / "MusicbrainzxWikidata.csv"
    csv.write_text("Question,Answer,Type\nWho recorded X?,Someone,one\n")
    args = ["eval", "musicbrainz-x-wikidata", "--data", str(csv), "--strategy", "chain", "--out", str(tmp_path / "x")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--kg wikidata --kg musicbrainz=" in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()  # refused before the run directory is made
    # train-value says the same (it said "unknown KG 'musicbrainz': no such file or directory")
    assert main(["train-value", "musicbrainz-x-wikidata", "--data", str(csv), "--out", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "no MusicBrainz KG is built in: pass both, e.g. --kg wikidata --kg musicbrainz=" in err and err.count("\n") == 1


CLI_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import traversals.api as api, traversals.kg.factory as kgf, traversals.llm.factory as llmf
from test_runner import Closable, FakeSolver
from traversals.cli import main

llmf.open_llm = lambda spec="local", **kw: Closable("llm")
kgf.open_kg = lambda spec, **kw: Closable("kg")
api.build_solver = lambda *a, **kw: FakeSolver(answers={{}}, sleep=float(sys.argv[2]))
sys.exit(main(["eval", "metaqa-1hop", "--data", {data!r}, "--answerable-only", "--limit", "8",
               "--strategy", "tree", "--out", sys.argv[1], "--no-progress",
               "--max-consecutive-errors", "0"] + sys.argv[3:]))  # every row is an error here
"""


@needs_data
def test_cli_ctrl_c_prints_how_to_resume(tmp_path):
    script = tmp_path / "cli.py"
    script.write_text(CLI_SCRIPT.format(tests=str(Path(__file__).parent), data=str(SHARED_DATA / "metaqa")))
    out = tmp_path / "out"
    # 1 s per question: after the 2nd result the run has ~6 s left, so the SIGINT lands
    # mid-run even on a loaded machine (0.3 s once let the run finish first under load)
    # preexec: a shell's background job (`make test &`, some CI runners) ignores SIGINT and
    # the child would inherit that; the test is about our handling, so restore the default
    proc = subprocess.Popen([sys.executable, str(script), str(out), "1.0"], stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while time.time() < deadline and len(read_results(out / "results.jsonl")) < 2:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "--resume" in err and "interrupted" in err
    n = len(lines(out / "results.jsonl"))  # whole lines only
    assert 2 <= n < 8 and json.loads((out / "summary.json").read_text())["n"] == n
    done = subprocess.run([sys.executable, str(script), str(out), "0", "--resume"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ids = [r["id"] for r in lines(out / "results.jsonl")]
    assert len(ids) == len(set(ids)) == 8


def test_calibrate_flag_reaches_the_search_config():
    from traversals.cli import build_parser
    from traversals.eval.commands import _search_config

    base = ["eval", "metaqa-1hop", "--data", "d", "--strategy", "chain", "--out", "o"]
    assert _search_config(build_parser().parse_args(base)).calibrate == 0.0  # off
    assert _search_config(build_parser().parse_args(base + ["--calibrate"])).calibrate == 1.0
    assert _search_config(build_parser().parse_args(base + ["--calibrate-weight", "0.5"])).calibrate == 0.5
    assert build_parser().parse_args(["ask", "q", "--calibrate"]).calibrate == 1.0


def test_kg_flag_takes_one_spec_each_so_the_dataset_after_it_is_not_swallowed():
    from traversals.cli import build_parser

    args = build_parser().parse_args(["eval", "--kg", "a.ttl", "--kg", "b.ttl", "metaqa-1hop", "--data", "d",
                                      "--strategy", "chain", "--out", "o"])
    assert (args.dataset, args.kg) == ("metaqa-1hop", ["a.ttl", "b.ttl"])
    args = build_parser().parse_args(["train-value", "--kg", "kb.txt", "metaqa-1hop", "--data", "d", "--out", "m"])
    assert (args.datasets, args.kg) == (["metaqa-1hop"], ["kb.txt"])


def test_both_orders_and_compare_answers_flags_reach_the_search_config():
    from traversals.cli import _search_config as ask_config
    from traversals.cli import build_parser
    from traversals.eval.commands import _search_config

    base = ["eval", "metaqa-1hop", "--data", "d", "--strategy", "chain", "--out", "o"]
    for flag, field in (("--both-orders", "both_orders"), ("--compare-answers", "compare_answers"),
                        ("--value-examples", "value_examples"), ("--value-reasoning", "value_reasoning")):
        assert getattr(_search_config(build_parser().parse_args(base)), field) is False  # off
        assert getattr(_search_config(build_parser().parse_args(base + [flag])), field) is True
        assert getattr(ask_config(build_parser().parse_args(["ask", "q", flag]), k=1), field) is True


async def test_the_embedder_flag_reaches_the_config_and_is_checked_on_resume(tmp_path):
    from traversals.cli import _search_config as ask_config
    from traversals.cli import build_parser
    from traversals.eval.commands import _search_config

    base = ["eval", "metaqa-1hop", "--data", "d", "--strategy", "beam", "--out", "o"]
    assert _search_config(build_parser().parse_args(base)).embedder == "sbert"
    assert _search_config(build_parser().parse_args(base + ["--embedder", "lexical"])).embedder == "lexical"
    assert ask_config(build_parser().parse_args(["ask", "q", "--embedder", "lexical"]), k=None).embedder == "lexical"
    ds = make_dataset(3)
    await run_eval(ds, FakeSolver(), tmp_path, limit=1, progress=False,
                   config={"strategy": "beam", "llm": "x", "embedder": "lexical"})
    with pytest.raises(BadInput, match=r"embedder: 'lexical' \(recorded\) vs 'sbert' \(now\)"):
        await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=2, progress=False,
                       config={"strategy": "beam", "llm": "x", "embedder": "sbert"})


async def test_a_run_recorded_with_the_calibrate_switch_resumes_with_it(tmp_path):
    # run.json before --calibrate-weight records "calibrate": true, the weight 1 the flag still means
    ds = make_dataset(3)
    await run_eval(ds, FakeSolver(), tmp_path, limit=1, progress=False,
                   config={"strategy": "chain", "llm": "x", "calibrate": True})
    with pytest.raises(BadInput, match=r"calibrate: True \(recorded\) vs 0.5 \(now\)"):
        await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=2, progress=False,
                       config={"strategy": "chain", "llm": "x", "calibrate": 0.5})
    await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=2, progress=False,
                   config={"strategy": "chain", "llm": "x", "calibrate": 1.0})
    assert len(read_results(tmp_path / "results.jsonl")) == 2


def test_code_revision_names_the_commit_and_whether_files_differ(tmp_path):
    import shutil
    import subprocess

    from traversals.eval.resume import code_revision

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    assert code_revision(tmp_path) is None  # not a checkout
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert code_revision(tmp_path) == {"commit": sha, "dirty": False}
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_revision(tmp_path) == {"commit": sha, "dirty": True}
    (tmp_path / "site").mkdir()  # a package installed inside someone's repository is not its code
    (tmp_path / "site" / "b.py").write_text("")
    assert code_revision(tmp_path / "site") is None


async def test_run_json_records_the_code_start_and_command_of_the_run_and_of_each_resume(tmp_path):
    from traversals.eval.resume import code_revision

    ds = make_dataset(4)
    await run_eval(ds, FakeSolver(), tmp_path, progress=False, limit=2, config={"command": "traversals eval FIRST"})
    run = json.loads((tmp_path / "run.json").read_text())
    assert "code" in run and run["code"] == code_revision()
    run["code"] = {"commit": "0" * 40, "dirty": False}  # as if an older commit had started it
    run["started"] = "2001-01-01T00:00:00+00:00"  # ... long ago
    (tmp_path / "run.json").write_text(json.dumps(run))
    await run_eval(ds, FakeSolver(), tmp_path, progress=False, limit=2, resume=True,
                   config={"command": "traversals eval SECOND --resume"})
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["code"] == {"commit": "0" * 40, "dirty": False}
    assert run["resumed_code"] == [code_revision()] and len(run["resumed"]) == 1
    # when and how the run started stay those of its first invocation
    assert run["started"] == "2001-01-01T00:00:00+00:00" and run["resumed"][0] > run["started"]
    assert run["command"] == "traversals eval FIRST"


def test_a_run_that_answered_nothing_prints_no_score_rather_than_zero():
    from traversals.eval.runfiles import Summary

    empty = Summary(n=0, selected=0, dataset="metaqa-1hop", split="dev", strategy="cot", llm="local").format()
    assert "Hits@1=–" in empty and "no question answered" in empty and "0.0%" not in empty
    failed = Summary(n=2, errors=2, selected=2).format()  # errors count as wrong: a real 0
    assert "Hits@1=0.0%" in failed


def test_the_resume_hint_is_a_command_that_pastes_back_whole(tmp_path):
    """An --out with a space (or any shell character) is quoted in the printed command."""
    import shlex

    from traversals.eval.resume import resume_hint

    out = tmp_path / "my run"
    out.mkdir()
    (out / "results.jsonl").write_text('{"id": "q1"}\n')
    argv = ["traversals", "eval", "metaqa-1hop", "--strategy", "chain", "--out", str(out)]
    hint = resume_hint(out, argv)
    command = hint.split("continue with: ", 1)[1]
    assert shlex.split(command) == [*argv, "--resume"] and hint.startswith("1 question(s) saved")


@needs_data
def test_cli_eval_a_value_model_retrained_in_place_is_not_resumed_with(tmp_path, monkeypatch, capsys):
    """run.json holds the path and the hash of --value-model: a resume after the file was
    retrained in place would answer the rest with another model (the same weights written
    again, with other seconds in its meta, are the same model: its digest); a damaged model is refused
    before the run directory is made."""
    import traversals.api as api
    import traversals.kg.factory as kg_factory
    import traversals.llm.factory as llm_factory
    from traversals.cli import main
    from traversals.search.rwt.valuemodel import ValueModel

    seen = []

    def build_solver(strategy, llm, kgs, config, **kw):
        seen.append(kw.get("value_model"))
        return FakeSolver(answers={})

    monkeypatch.setattr(llm_factory, "open_llm", lambda spec="local", **kw: Closable("llm"))
    monkeypatch.setattr(kg_factory, "open_kg", lambda spec, **kw: Closable("kg"))
    monkeypatch.setattr(api, "build_solver", build_solver)
    model = tmp_path / "m.json"
    ValueModel({"stop|bias": 0.5}).save(model)
    out = tmp_path / "run"
    args = ["eval", "metaqa-1hop", "--data", str(SHARED_DATA), "--limit", "1", "--strategy", "chain", "--out", str(out),
            "--no-progress", "--value-model", str(model)]
    assert main(args) == 0
    assert isinstance(seen[0], ValueModel) and seen[0].weights == {"stop|bias": 0.5}  # read once, passed on
    import hashlib

    # the hash of the bytes the run read, not of a second read of the file
    assert json.loads((out / "run.json").read_text())["value_model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert seen[0].sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
    ValueModel({"stop|bias": 0.5}, {"rounds": [{"seconds": 12.3}]}).save(model)  # the same training, other seconds
    assert main([*args[:5], "2", *args[6:], "--resume"]) == 0  # the same model: resumed
    assert json.loads((out / "run.json").read_text())["value_model_digest"] == seen[0].digest
    ValueModel({"stop|bias": 0.7}).save(model)  # retrained in place
    capsys.readouterr()
    assert main([*args[:5], "2", *args[6:], "--resume"]) == 2
    assert "value_model_sha256" in capsys.readouterr().err
    model.write_text("{not json")
    assert main([*args[:8], "--out", str(tmp_path / "new"), "--no-progress", "--value-model", str(model)]) == 2
    assert not (tmp_path / "new").exists()


def test_a_run_records_only_the_search_settings_its_strategy_reads():
    from traversals.eval.commands import unread_settings

    assert {"k", "max_depth", "max_expansions", "threshold", "search_seed", "calibrate"} <= set(unread_settings("mcts"))
    assert not {"simulations", "decoding", "value_model", "embedder"} & set(unread_settings("mcts"))
    assert {"simulations", "embedder"} <= set(unread_settings("tree")) and "k" not in unread_settings("tree")
    assert "simulations" in unread_settings("beam") and "decoding" in unread_settings("cot")
    assert {"diverse_temperature", "evaluate_intermediate"} <= set(unread_settings("mcts"))
    # every SearchConfig field says which strategies read it: cot records none of them but its prompts
    import dataclasses

    from traversals.api import STRATEGIES, SearchConfig

    fields = {"search_seed" if f.name == "seed" else f.name for f in dataclasses.fields(SearchConfig)}
    assert set(unread_settings("cot")) >= fields - {"prompts"}
    assert not any("prompts" in unread_settings(s) for s in STRATEGIES)  # every strategy renders prompts


async def test_an_error_row_counts_what_its_question_spent_before_failing(tmp_path):
    """The report's cost counts error rows with what they spent: a search that made calls
    and then raised spent them (recorded in its usages, lost with its exception)."""
    from traversals.llm.base import Generation

    class SpendsThenFails(FakeSolver):
        async def ask(self, question, *, topic_entities=None):
            if question == QUESTIONS[1][0]:
                node = Usage()  # a node's account, as a search keeps them
                node.add_generation(Generation(["THINK: x"], prompt_tokens=300, completion_tokens=5))
                node.add_kg_call()
                await asyncio.sleep(0)
                raise KGTimeout("KG took too long")
            return await super().ask(question, topic_entities=topic_entities)

    await run_eval(make_dataset(), SpendsThenFails(), tmp_path, progress=False, concurrency=3)
    rows = {r["id"]: r for r in lines(tmp_path / "results.jsonl")}
    failed = rows["toy:dev:1"]
    assert failed["error"] and (failed["llm_calls"], failed["prompt_tokens"], failed["completion_tokens"],
                                failed["kg_calls"]) == (1, 300, 5, 1)
    assert all(r["llm_calls"] == 4 for i, r in rows.items() if i != "toy:dev:1")  # the others' own accounts
