"""report.md and the two plots from small synthetic run directories."""

from __future__ import annotations

import json
import shutil

import pytest

from traversals.errors import BadInput
from traversals.eval.datasets import Dataset, Gold, Question
from traversals.eval.report import Prices, backtracking_case, load_run, value_points, write_report
from traversals.eval.runner import run_eval
from traversals.llm.base import Usage
from traversals.search.result import Answer

PNG = b"\x89PNG\r\n\x1a\n"


def node(i, parent, expansion=None, value=None, answer=None, state="default"):
    n = {"id": i, "parent": parent, "depth": 0, "state": state, "action": None, "value": value, "expansion": expansion}
    if answer is not None:
        n["answer"] = answer
        n["state"] = "done"
    return n


def backtracked_trace(wrong, right):
    """Root expands (0); its first child 1 is expanded (1) and proposes ``wrong``; the
    search backtracks to the root's other child 2 (2), which proposes ``right``."""
    return [
        node(0, None, 0),
        node(1, 0, 1, 0.6),
        node(2, 0, 2, 0.5),
        node(3, 1, None, 0.4, wrong),
        node(4, 2, None, 1.0, right),
    ]


def straight_trace(answer, value):
    return [node(0, None, 0), node(1, 0, 1, 0.7), node(2, 1, None, value, answer)]


class TraceSolver:
    name = "scripted"

    def __init__(self, plans):
        self.plans = plans  # question -> (final answer, nodes)

    async def ask(self, question, *, topic_entities=None):
        text, nodes = self.plans[question]
        return Answer(
            question=question,
            text=text,
            value=1.0,
            usage=Usage(llm_calls=10, prompt_tokens=1000, completion_tokens=50, kg_calls=4),
            seconds=2.0,
            strategy="tree",
            trace={"question": question, "answer": text, "nodes": nodes},
        )


def dataset(name="toy"):
    gold = {"q0": "Rome", "q1": "Oslo", "q2": "Lima", "q3": "Kiev"}
    qs = [Question(id=f"{name}:{i}", text=t, gold=[Gold(g)]) for i, (t, g) in enumerate(gold.items())]
    return Dataset(name=name, split="dev", questions=qs)


async def make_runs(tmp_path):
    ds = dataset()
    tree = TraceSolver(
        {
            "q0": ("Rome", backtracked_trace("Paris", "Rome")),  # backtracking helped
            "q1": ("Oslo", straight_trace("Oslo", 1.0)),
            "q2": ("Quito", backtracked_trace("Lima", "Quito")),  # backtracking hurt
            "q3": ("Kiev", straight_trace("Kiev", 0.0)),
        }
    )
    chain = TraceSolver({q.text: ("Rome" if q.text == "q0" else "Nope", straight_trace("x", None)) for q in ds.questions})
    await run_eval(ds, tree, tmp_path / "tree", progress=False, config={"strategy": "tree", "llm": "fake", "k": 3})
    await run_eval(ds, chain, tmp_path / "chain", progress=False, config={"strategy": "chain", "llm": "fake", "k": 1})
    ds2 = dataset("toy2")
    tree2 = TraceSolver({q.text: ("Rome Lima Oslo Kiev", straight_trace("Rome", 0.5)) for q in ds2.questions})
    await run_eval(ds2, tree2, tmp_path / "tree2", progress=False, config={"strategy": "tree", "llm": "fake", "k": 3})
    return tmp_path / "tree", tmp_path / "chain", tmp_path / "tree2"


def test_backtracking_case_detection():
    best, backtracked = backtracking_case({"nodes": backtracked_trace("Paris", "Rome")})
    assert backtracked and best["answer"] == "Paris"
    best, backtracked = backtracking_case({"nodes": straight_trace("Kiev", 0.0)})
    assert not backtracked and best["answer"] == "Kiev"
    # first subtree without an answer: no counterfactual
    nodes = [node(0, None, 0), node(1, 0, 1, 0.5), node(2, 0, 2, 0.5), node(3, 2, None, 1.0, "A")]
    assert backtracking_case({"nodes": nodes}) is None
    assert backtracking_case({"nodes": []}) is None and backtracking_case(None) is None
    # best-valued answer of the first subtree, not the first proposed
    nodes = [node(0, None, 0), node(1, 0, 1, 0.5), node(2, 0, 3, 0.5),
             node(3, 1, None, 0.2, "Low"), node(4, 1, 2, 0.5), node(5, 4, None, 0.8, "High"), node(6, 2, None, 0.9, "Z")]  # fmt: skip
    best, backtracked = backtracking_case({"nodes": nodes})
    assert best["answer"] == "High" and backtracked


def test_value_points_and_backtracking_cases_score_by_em_in(tmp_path):
    """A gold of two labels, an answer naming one of them: EM-in 0.5, where Hits@1 is 1."""
    from traversals.eval.report import backtracking_cases

    run = tmp_path / "r"
    (run / "traces").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "tree", "llm": "local"}))
    row = {"id": "x:0", "question": "q", "answer": "Ann", "gold": [["Ann"], ["Bob"]], "hits@1": 1.0, "em_in": 0.5,
           "f1": 2 / 3, "trace": "traces/x_0.json"}
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    nodes = backtracked_trace("Ann", "Bob")  # the first subtree proposes Ann; the search backtracks
    (run / "traces" / "x_0.json").write_text(json.dumps({"nodes": nodes}))
    loaded = load_run(run)
    assert sorted(value_points(loaded)) == [(0.4, 0.5), (1.0, 0.5)]
    [case] = backtracking_cases(loaded)
    assert (case.first_subtree_answer, case.first_subtree_em_in) == ("Ann", 0.5)
    assert (case.final_answer, case.final_em_in) == ("Ann", 0.5)  # the row's EM-in, not its Hits@1


async def test_report_tables_and_plots(tmp_path):
    tree, chain, tree2 = await make_runs(tmp_path)
    pts = value_points(load_run(tree))
    assert (0.4, 0.0) in pts and (1.0, 1.0) in pts  # proposed answers, not only final ones
    md = write_report([tree, chain, tree2])
    assert md == tree / "report.md"
    text = md.read_text()
    assert "| strategy | toy | toy2 |" in text
    assert "| tree | 75.0 / 75.0 (n=4) | 100.0 / 100.0 (n=4) |" in text
    assert "| chain | 25.0 / 25.0 (n=4) | – |" in text
    assert "LLM calls" in text and "| 10.0 | 1000 | 50 | 4.0 | 2.00 |" in text
    assert (tree / "value_vs_accuracy.png").read_bytes().startswith(PNG)
    assert (tree / "backtracking.png").read_bytes().startswith(PNG)
    assert "value_vs_accuracy.png" in text and "backtracking.png" in text
    # q0 (Paris -> Rome) and q2 (Lima -> Quito) backtracked: 50% without, 50% with
    assert "| tree · toy | 2 | 50.0 | 50.0 |" in text
    # the same 4 questions: q0 both right, q1 and q3 only tree, q2 neither; toy2 is not paired
    assert "| toy | tree vs chain | 4 | 1 | 2 | 0 | 1 | 0.500 |" in text and "toy2 | tree vs" not in text
    assert "| 75.0 | 30.1–95.4 |" in text  # Hits@1 and its Wilson interval for 3 of 4


async def test_report_out_and_no_data(tmp_path):
    _, chain, _ = await make_runs(tmp_path)
    out = tmp_path / "reports" / "r.md"
    md = write_report([chain], out=out)
    assert md == out and md.exists()
    text = md.read_text()
    assert "No data" in text and "backtrack" in text
    assert not (out.parent / "backtracking.png").exists()
    # a directory as --out
    d = tmp_path / "rd"
    d.mkdir()
    assert write_report([chain], out=d) == d / "report.md"


async def test_report_on_runs_without_traces(tmp_path):
    run = tmp_path / "bare"
    run.mkdir()
    (run / "results.jsonl").write_text(json.dumps({"id": "x:1", "answer": "A", "gold": [["A"]], "em_in": 1.0, "hits@1": 1.0}) + "\n")
    text = write_report([run]).read_text()
    assert "n=1" in text and text.count("No data") == 3  # value plot, stops, backtracking
    assert load_run(run).dataset == "x"  # no run.json: the ids name the dataset
    with pytest.raises(BadInput, match="not a run directory"):
        write_report([tmp_path / "nothing"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(BadInput, match="cannot write"):
        write_report([run], out=tmp_path / "file" / "r.md")
    (run / "run.json").write_text("[1]")
    with pytest.raises(BadInput, match="not a run's settings"):
        write_report([run])


async def test_a_run_named_twice_is_reported_once(tmp_path):
    _, chain, _ = await make_runs(tmp_path)
    text = write_report([chain, tmp_path / "." / "chain"], out=tmp_path / "r.md").read_text()
    assert text.count("(n=4") == 1


def test_efficiency_counts_valid_actions_median_seconds_and_cache_reuse(tmp_path):
    from traversals.eval.report import efficiency

    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    act = {"type": "THINK", "text": "t"}
    traces = {
        "a": [{"id": 0, "action": None}, {"id": 1, "action": act}, {"id": 2, "action": act, "invalid": True}],
        "b": [{"id": 0, "action": None}, {"id": 1, "action": act}, {"id": 2, "action": act}, {"id": 3, "action": act}],
        "c": [{"id": 0, "action": act}],  # an errored question: its actions left out
    }
    rows = []
    for i, (name, nodes) in enumerate(traces.items()):
        (run / "traces" / f"{name}.json").write_text(json.dumps({"nodes": nodes}))
        rows.append({"id": name, "question": name, "answer": "x", "gold": [["x"]], "hits@1": 1.0, "seconds": [1.0, 5.0, 30.0][i],
                     "prompt_tokens": 1000, "computed_prompt_tokens": [200, 300, 1000][i],
                     "error": "KGTimeout" if name == "c" else None, "trace": f"traces/{name}.json"})
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    eff = efficiency(load_run(run))
    assert (eff.actions, eff.valid_actions) == (5, 4) and eff.valid_rate == 0.8
    # the errored question's actions are left out, its seconds and tokens counted, as the means
    # count them (the median had been 3.0 and computed / sent 0.25, without it); a median,
    # not the mean of 12.0 the slow question makes
    assert eff.median_seconds == 5.0 and eff.computed_over_sent == 0.5
    text = write_report([run]).read_text()
    assert "| 5.00 | 80.0 | 0.50 |" in text


async def test_a_trained_value_model_labels_its_run(tmp_path):
    """beam with and without --value-model are different methods: separate rows, not one cell."""
    ds = dataset()
    solver = TraceSolver({q.text: ("Rome", straight_trace("Rome", 0.5)) for q in ds.questions})
    await run_eval(ds, solver, tmp_path / "b", progress=False, config={"strategy": "beam", "llm": "fake"})
    await run_eval(ds, solver, tmp_path / "bt", progress=False,
                   config={"strategy": "beam", "llm": "fake", "value_model": "/m/metaqa-value.json"})
    text = write_report([tmp_path / "b", tmp_path / "bt"]).read_text()
    assert "| beam | 25.0 / 25.0 (n=4) |" in text
    assert "| beam + metaqa-value | 25.0 / 25.0 (n=4) |" in text
    assert "| toy | beam vs beam + metaqa-value | 4 |" in text


def llm_valued_trace(answer_values, *, final, threshold=0.8, value_function="llm"):
    """A chain of expansions 1, 2, ...: node i (expanded at i) proposes one answer rated
    ``answer_values[i - 1]``; every node's usage is 3 LLM calls (an answer's: 1)."""
    nodes = [{**node(0, None, 1), "usage": {"llm_calls": 3}}]
    for i, v in enumerate(answer_values, 1):
        if i > 1:
            nodes.append({**node(len(nodes), nodes[-2]["id"] if i > 2 else 0, i, 0.5), "usage": {"llm_calls": 3}})
        parent = nodes[-1]["id"]
        nodes.append({**node(len(nodes), parent, None, v, f"A{i}"), "usage": {"llm_calls": 1}})
    return {"answer": final, "value_function": value_function, "config": {"threshold": threshold}, "nodes": nodes}


class Replayable(TraceSolver):
    """Answers with the planned trace's every key (stop reason, config, value function)."""

    async def ask(self, question, *, topic_entities=None):
        answer = await super().ask(question)
        answer.trace.update(self.plans[question][1])
        return answer


def test_an_llm_valued_search_is_replayed_at_a_lower_threshold():
    from traversals.eval.report import threshold_cut

    # answers born at expansions 1, 2, 3 rated 0.3, 0.6, 0.5; none crossed the run's 0.8
    trace = llm_valued_trace([0.3, 0.6, 0.5], final="A2")
    cut = threshold_cut(trace, 0.5)  # stops after expansion 2 (0.6 > 0.5)
    assert cut.answer == "A2" and cut.stopped_early
    # calls: root (3) + answer A1 (1) + node expanded at 2 (3) + answer A2 (1) + the rating
    # of the node born at 2 and expanded at 3 (1, not its 3)
    assert cut.llm_calls == 9
    cut = threshold_cut(trace, 0.2)  # stops after expansion 1 with the only answer born by then
    assert (cut.answer, cut.stopped_early, cut.llm_calls) == ("A1", True, 5)  # root, A1, node 2's rating
    cut = threshold_cut(trace, 0.7)  # nothing crosses: the search as it ran
    assert (cut.answer, cut.stopped_early, cut.llm_calls) == ("A2", False, 12)
    # the best answer born by the stop, not the one that crossed: 0.6 at 1, 0.9 at 2
    cut = threshold_cut(llm_valued_trace([0.6, 0.9, 0.1], final="A2", threshold=0.95), 0.5)
    assert cut.answer == "A1"
    assert threshold_cut(llm_valued_trace([0.7, 0.9], final="A2", threshold=0.95), 0.65).answer == "A1"
    # not replayable: above the run's own τ (that search stopped there), a trained value
    assert threshold_cut(trace, 0.9) is None
    assert threshold_cut(llm_valued_trace([0.3], final="A1", value_function="TrainedValue"), 0.2) is None
    assert threshold_cut({"nodes": []}, 0.5) is None


async def test_the_report_replays_llm_valued_runs_at_lower_thresholds(tmp_path):
    ds = dataset()
    gold = {"q0": "Rome", "q1": "Oslo", "q2": "Lima", "q3": "Kiev"}

    # q0: right at once (0.6), the search ran on and answered a wrong, higher-rated answer
    plans = {q: ("Wrong", llm_valued_trace([0.6, 0.7], final="Wrong")) for q in gold}
    plans["q0"][1]["nodes"][1]["answer"] = "Rome"
    for q in ("q1", "q2", "q3"):  # the others: wrong both ways
        plans[q][1]["nodes"][1]["answer"] = "Nope"
    for q, (final, trace) in plans.items():
        trace["nodes"][-1]["answer"] = final
    await run_eval(ds, Replayable(plans), tmp_path / "t", progress=False,
                   config={"strategy": "tree", "llm": "fake", "k": 3, "threshold": 0.8})
    text = write_report([tmp_path / "t"]).read_text().split("## Answer threshold replayed (LLM value)")[1]
    assert "| tree · toy | 0.5 | 4 | 25.0 | 25.0 | 5.0 | 4 |" in text  # stopped at expansion 1
    assert "| tree · toy | 0.8 | 4 | 0.0 | 0.0 | 8.0 | 0 |" in text  # the run as it was
    assert "| tree · toy | 0.6 |" not in text  # nothing stops earlier at 0.6 (0.7 crosses at 2, the end)


def test_a_threshold_is_replayed_only_when_every_questions_search_can_be(tmp_path):
    """A question whose trace is gone cannot be replayed: the table would be of the other
    questions (and its replayed answers were paired with the wrong questions' gold)."""
    from traversals.eval.report import threshold_table

    run = tmp_path / "t"
    (run / "traces").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "tree", "llm": "local", "threshold": 0.8}))
    (run / "results.jsonl").write_text(_row("x:0", "A2", "Nope", 0.0, trace="traces/x_0.json")
                                       + _row("x:1", "A2", "A1", 0.0, trace="traces/x_1.json"))
    for name in ("x_0", "x_1"):
        (run / "traces" / f"{name}.json").write_text(json.dumps(llm_valued_trace([0.6, 0.7], final="A2")))
    whole = {t.threshold: (t.n, t.hits_at_1) for t in threshold_table(load_run(run))}
    assert whole[0.5] == (2, 0.5)  # both stop at A1: x:1 right
    (run / "traces" / "x_1.json").unlink()
    assert threshold_table(load_run(run)) == []


def test_the_answer_choice_is_replayed_from_the_proposed_answers():
    from traversals.eval.report import choice_cut, threshold_cut

    trace = llm_valued_trace([0.4, 0.5, 0.3], final="A2")
    trace["nodes"][-1]["answer"] = "a1"  # the third proposal names the first answer again
    trace["stopped"] = "max_expansions"
    assert choice_cut(trace, "value") == "A2"
    assert choice_cut(trace, "support") == "A1"  # 0.4 + 0.3 > 0.5; its better-valued proposal
    assert choice_cut({**trace, "stopped": "threshold"}, "support") == "A2"  # stopped at τ: as it ran
    assert choice_cut({"nodes": trace["nodes"]}, "value") is None  # no search config: not a tree trace
    tie = llm_valued_trace([0.5, 0.5], final="A1")
    tie["stopped"] = "max_expansions"
    tie["nodes"][-1]["grounded"] = True  # the second is an entity list, the first a sentence
    assert choice_cut(tie, "value") == "A2"
    assert choice_cut(tie, "support") == "A1"  # two answers pooling 0.5 each: the one proposed first
    assert threshold_cut(tie, 0.4).answer == "A1"  # stopped after expansion 1: A2 not born yet
    assert choice_cut(None, "value") is None


async def test_the_report_replays_each_run_with_both_answer_choices(tmp_path):
    ds = dataset()
    gold = {"q0": "Rome", "q1": "Oslo", "q2": "Lima", "q3": "Kiev"}

    plans = {}
    for q, right in gold.items():  # right twice at 0.4 and 0.3, wrong once at 0.5: the run said wrong
        trace = llm_valued_trace([0.4, 0.5, 0.3], final="Wrong")
        trace["stopped"] = "max_expansions"
        for n, text in zip((n for n in trace["nodes"] if "answer" in n), (right, "Wrong", right)):
            n["answer"] = text
        plans[q] = ("Wrong", trace)
    plans["q3"][1]["stopped"] = "threshold"  # stopped at τ: keeps its answer either way
    await run_eval(ds, Replayable(plans), tmp_path / "t", progress=False,
                   config={"strategy": "tree", "llm": "fake", "k": 3, "threshold": 0.8})
    text = write_report([tmp_path / "t"]).read_text().split("## Answer choice replayed")[1]
    assert "| tree · toy | value (the run's) | 4 | 0.0 | 0.0 | 0 |" in text
    assert "| tree · toy | support | 4 | 75.0 | 75.0 | 3 |" in text


async def test_a_beam_run_is_not_replayed_with_answer_choices(tmp_path):
    """Beam and MCTS have no answer choice (``eval --strategy beam --answer-choice support``
    is refused), but the report listed a beam run with both, each its own answer."""
    from traversals.eval.report import choice_cut

    ds = dataset()
    plans = {}
    for q in ("q0", "q1", "q2", "q3"):  # a beam trace as the search writes it: no answer nodes
        trace = {"strategy": "beam", "config": {"beam_width": 3, "beam_branch": 3}, "stopped": "max_hops",
                 "nodes": [node(0, None, 0), node(1, 0, 1, 0.7), node(2, 1, None, 0.9)]}
        plans[q] = ("Rome", trace)
    assert choice_cut(plans["q0"][1], "value") is None
    await run_eval(ds, Replayable(plans), tmp_path / "b", progress=False,
                   config={"strategy": "beam", "llm": "fake"})
    text = write_report([tmp_path / "b"]).read_text().split("## Answer choice replayed")[1]
    assert "| beam" not in text
    assert "Nothing to replay" in text


def _row(qid: str, answer: str, gold: str, hit: float, **extra) -> str:
    return json.dumps({"id": qid, "question": qid, "answer": answer, "gold": [[gold]], "hits@1": hit,
                       "em_in": hit, "f1": hit, **extra}) + "\n"


def test_a_run_without_results_yet_shows_no_score_of_zero(tmp_path):
    """A run stopped before its first answer has n=0: its Hits@1 is unknown, not 0 %."""
    run = tmp_path / "started"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"dataset": "pq-2h", "strategy": "tree", "selected": 10}))
    (run / "results.jsonl").write_text("")
    text = write_report([run]).read_text()
    assert "| tree | – / – (n=0, partial of 10) |" in text
    assert "| pq-2h |  | tree | ? | 0 | 0 | – | – | – | – |" in text
    (run / "results.jsonl").unlink()  # stopped while the model loaded: run.json only
    assert "| tree | – / – (n=0, partial of 10) |" in write_report([run]).read_text()
    with pytest.raises(BadInput, match="no results.jsonl"):
        write_report([tmp_path / "nothing"])
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "results.jsonl").write_text("")
    with pytest.raises(BadInput, match="no results and there is no run.json"):
        write_report([bare])


def test_a_torn_last_line_is_left_out_and_the_run_marked_partial(tmp_path):
    run = tmp_path / "torn"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "cot", "selected": 3}))
    rows = _row("x:0", "A", "A", 1.0) + _row("x:1", "B", "C", 0.0) + _row("x:2", "C", "C", 1.0)
    (run / "results.jsonl").write_text(rows[:-25])  # killed inside the last write
    assert [r["id"] for r in load_run(run).rows] == ["x:0", "x:1"]
    assert "| cot | 50.0 / 50.0 (n=2, partial of 3) |" in write_report([run]).read_text()


def test_a_resume_to_a_larger_limit_stopped_before_its_first_row_is_partial(tmp_path):
    """--limit 2 finished (summary.json: n 2, nothing unanswered), then --resume --limit 3
    killed before a row: run.json selects 3, and the old summary made the run look complete."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "cot", "selected": 3}))
    (run / "results.jsonl").write_text(_row("x:0", "A", "A", 1.0) + _row("x:1", "B", "C", 0.0))
    (run / "summary.json").write_text(json.dumps({"n": 2, "selected": 2, "unanswered": 0}))
    assert "| cot | 50.0 / 50.0 (n=2, partial of 3) |" in write_report([run]).read_text()


def test_the_report_reads_the_first_row_of_an_id_as_the_runs_summary_does(tmp_path):
    from traversals.eval.runfiles import read_results, summarize

    run = tmp_path / "twice"
    run.mkdir()
    (run / "results.jsonl").write_text(_row("x:0", "A", "A", 1.0) + _row("x:0", "B", "A", 0.0))
    loaded = load_run(run)
    assert [r["answer"] for r in loaded.rows] == ["A"]
    assert loaded.summary.hits_at_1 == summarize(read_results(run / "results.jsonl")).hits_at_1 == 1.0
    assert "100.0 / 100.0 (n=1)" in write_report([run]).read_text()


def test_a_rerun_to_a_smaller_limit_says_its_n_counts_the_earlier_rows(tmp_path):
    """--limit 3, then --limit 2: the row said "2 sampled" beside n = 3, every answered row."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "cot", "split": "dev", "limit": 2,
                                              "selected": 2, "seed": 233}))
    (run / "results.jsonl").write_text(_row("x:0", "A", "A", 1.0) + _row("x:1", "B", "C", 0.0) + _row("x:2", "C", "C", 1.0))
    text = write_report([run]).read_text()
    assert "dev, 2 sampled (seed 233); n counts the 3 answered, an earlier, larger --limit's included | cot |" in text


def test_a_bar_in_a_name_stays_in_its_cell(tmp_path):
    """`eval questions --data 'films | 2024.jsonl'`: the split "films | 2024" split the row's
    cell in two, and every figure after it sat under the wrong header."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"dataset": "questions", "strategy": "cot", "split": "films | 2024",
                                              "llm": "a|b"}))
    (run / "results.jsonl").write_text(_row("x:0", "A", "A", 1.0))
    [row] = [ln for ln in write_report([run]).read_text().splitlines() if ln.startswith("| questions | films")]
    assert row.startswith("| questions | films \\| 2024 | cot | a\\|b | 1 | 0 | 100.0 |")


def test_the_results_file_may_be_named_instead_of_its_run(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "results.jsonl").write_text(_row("x:0", "A", "A", 1.0))
    assert load_run(run / "results.jsonl").dir == run
    assert write_report([run / "results.jsonl"]) == run / "report.md"


def test_runs_alike_are_told_apart_by_their_folders(tmp_path):
    """Two chain runs of one dataset (a rerun, or flags the label does not show) were both
    labelled `chain`: one table cell for two runs and a paired row `chain vs chain`."""
    for name, hit, err in (("first", 1.0, None), ("second", 0.0, None), ("other", 1.0, "KGTimeout: slow")):
        d = tmp_path / name
        d.mkdir()
        (d / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "chain", "llm": "m"}))
        (d / "results.jsonl").write_text(_row("x:0", "A" if hit else "Z", "A", hit)
                                         + _row("x:1", "" if err else "B", "B", 0.0 if err else 1.0, error=err))
    text = write_report([tmp_path / "first", tmp_path / "second"], out=tmp_path / "r.md").read_text()
    assert "| chain (first) | 100.0 / 100.0 (n=2) |" in text
    assert "| chain (second) | 50.0 / 50.0 (n=2) |" in text
    assert "| x | chain (first) vs chain (second) | 2 | 1 | 1 | 0 | 0 | 1.000 |" in text
    # mixed strategies: only the alike ones get their folder
    (tmp_path / "other" / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "cot", "llm": "m"}))
    text = write_report([tmp_path / "first", tmp_path / "other"], out=tmp_path / "r2.md").read_text()
    assert "| chain | 100.0 / 100.0 (n=2) |" in text and "| cot | 50.0 / 50.0 (n=2) |" in text
    assert "| x | dev" not in text and "| x |  | cot | m | 2 | 1 | 50.0 |" in text  # the error row: n=2, 1 error
    # the error row is compared as wrong, as the table's 50.0 counts it: chain's win
    assert "| x | chain vs cot | 2 | 1 | 1 | 0 | 0 | 1.000 |" in text


def test_the_report_says_how_often_each_way_of_stopping_was_right(tmp_path):
    from traversals.eval.report import stop_table

    run = tmp_path / "tree"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"dataset": "metaqa-1hop", "strategy": "tree", "selected": 5}))
    (run / "results.jsonl").write_text(
        _row("q:0", "A", "A", 1.0, stopped="threshold", value=0.9)
        + _row("q:1", "B", "B", 1.0, stopped="threshold", value=0.85)
        + _row("q:2", "C", "D", 0.0, stopped="threshold", value=0.82)
        + _row("q:3", "E", "F", 0.0, stopped="max_expansions", value=0.4)
        + json.dumps({"id": "q:4", "question": "q:4", "answer": None, "gold": [["G"]], "error": "LLMError: x",
                      "stopped": None}) + "\n")
    rows = stop_table(load_run(run))
    assert [(r.stopped, r.n, round(r.hits_at_1, 3)) for r in rows] == [("threshold", 3, 0.667), ("max_expansions", 1, 0.0)]
    assert rows[0].mean_value == pytest.approx((0.9 + 0.85 + 0.82) / 3)
    text = write_report([run]).read_text()
    assert "## How the searches stopped" in text and "| threshold | 3 | 66.7 | 0.86 |" in text
    cot = tmp_path / "cot"
    cot.mkdir()
    (cot / "results.jsonl").write_text(_row("q:0", "A", "A", 1.0))
    assert "No data: no result row says how its search stopped" in write_report([cot]).read_text()


def test_the_cost_of_each_run_at_given_prices(tmp_path):
    """--price: computed prompt tokens at the prompt price, those a server served from its cache
    at the cached one (the prompt price when none is given), completion tokens at theirs;
    per question, per right answer, in all; an error row counts what it spent."""
    from traversals.eval.report import Prices, cost, load_run

    run = tmp_path / "api"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "chain", "llm": "openai:m", "selected": 3}))
    rows = (_row("x:0", "A", "A", 1.0, prompt_tokens=1_000_000, computed_prompt_tokens=400_000, completion_tokens=10_000)
            + _row("x:1", "B", "C", 0.0, prompt_tokens=200_000, completion_tokens=0)
            + json.dumps({"id": "x:2", "question": "x:2", "answer": "", "gold": [["C"]], "hits@1": 0.0,
                          "error": "LLMError: boom", "prompt_tokens": 100_000, "completion_tokens": 0}) + "\n")
    (run / "results.jsonl").write_text(rows)
    prices = Prices.parse("1, 10, 0.1")
    assert (prices.prompt, prices.completion, prices.cached) == (1.0, 10.0, 0.1)
    c = cost(load_run(run), prices)
    # 0.4 + 0.6 x 0.1 + 0.1 (row 0) + 0.2 (row 1) + 0.1 (the error row) = 0.86
    assert c.total == pytest.approx(0.86) and c.per_question == pytest.approx(0.86 / 3)
    assert c.per_right == pytest.approx(0.86)  # one question right
    assert cost(load_run(run), Prices.parse("1,10")).total == pytest.approx(1.0 + 0.1 + 0.2 + 0.1)
    text = write_report([run], prices=prices).read_text()
    assert "## Cost at $1 prompt / $10 completion, $0.1 cached per million tokens" in text
    assert "| x | chain | openai:m | 3 | $0.2867 | $0.8600 | $0.8600 |" in text
    assert "## Cost" not in write_report([run]).read_text()  # no prices, no cost section
    # a local model's reuse of its own KV cache is no server's cache: billed as computed
    # (it was billed at the cached price)
    local = tmp_path / "local"
    shutil.copytree(run, local)
    (local / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "chain", "llm": "local", "selected": 3}))
    assert cost(load_run(local), prices).total == pytest.approx(1.0 + 0.1 + 0.2 + 0.1)
    # more computed than sent (a hand-edited or odd count) is billed as the sent tokens, no
    # negative cached ones
    over = tmp_path / "over"
    over.mkdir()
    (over / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "chain", "llm": "openai:m"}))
    (over / "results.jsonl").write_text(_row("x:0", "A", "A", 1.0, prompt_tokens=1_000_000,
                                             computed_prompt_tokens=1_500_000, completion_tokens=0))
    assert cost(load_run(over), prices).total == pytest.approx(1.0)
    # a folder with results.jsonl only (no run.json to say the LLM) bills what the server's
    # cache served at the cached price, as the counts say
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "results.jsonl").write_text(_row("x:0", "A", "A", 1.0, prompt_tokens=1_000_000,
                                             computed_prompt_tokens=0, completion_tokens=0))
    assert cost(load_run(bare), prices).total == pytest.approx(0.1)
    for bad in ("1", "a,b", "1,-2", "1,2,3,4", "1,inf"):
        with pytest.raises(BadInput, match="--price .*PROMPT,COMPLETION"):
            Prices.parse(bad)
    from traversals.cli import main

    assert main(["report", str(run), "--price", "0.15,0.60", "--out", str(tmp_path / "r.md")]) == 0
    assert "## Cost at $0.15 prompt / $0.6 completion per million tokens" in (tmp_path / "r.md").read_text()
    assert main(["report", str(run), "--price", "cheap"]) == 2


def test_the_embedders_calls_are_reported_only_for_runs_that_counted_them(tmp_path):
    """RwT's critical model and retrieve's ranking call an embedder (at an endpoint: money and
    time); rows written before its calls were counted read as a search that made none."""
    from traversals.eval.runfiles import summarize

    run, old = tmp_path / "mcts", tmp_path / "old"
    for d in (run, old):
        d.mkdir()
        (d / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "mcts", "llm": "m", "selected": 2}))
    (run / "results.jsonl").write_text(
        _row("x:0", "A", "A", 1.0, embedder_calls=3, embedded_texts=20, embedding_tokens=60)
        + json.dumps({"id": "x:1", "question": "x:1", "answer": "", "gold": [["B"]], "hits@1": 0.0,
                      "error": "EmbedderError: boom", "embedder_calls": 1, "embedded_texts": 4}) + "\n")
    (old / "results.jsonl").write_text(_row("x:0", "A", "A", 1.0) + _row("x:1", "B", "B", 1.0))
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    summary = summarize(rows).to_json()
    assert (summary["mean_embedder_calls"], summary["mean_embedded_texts"], summary["total_embedding_tokens"]) == (2, 12, 60)
    assert "embedder: 2.0 calls, 12 texts per question, 60 tokens in all" in summarize(rows).format()
    text = write_report([run, old], prices=Prices.parse("1,10")).read_text()
    lines = [line for line in text.splitlines() if "embedder calls" in line]
    assert len(lines) == 1 and lines[0].startswith(f"`{run}` (")  # the old run counted nothing: no line
    assert lines[0].endswith("2.0 embedder calls and 12 texts embedded per question, 60 tokens in all as its "
                             "endpoint reported them; not in the LLM's calls or tokens, nor in the cost below.")
    old_rows = [json.loads(line) for line in (old / "results.jsonl").read_text().splitlines()]
    assert not {"mean_embedder_calls", "total_embedding_tokens"} & set(summarize(old_rows).to_json())


def test_rows_of_questions_outside_the_selection_do_not_make_a_run_complete(tmp_path):
    """An earlier, larger selection left rows the current one did not select: as many rows
    as selected questions, one of which is still unanswered (summary.json counted it)."""
    run = tmp_path / "mixed"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "cot", "selected": 2}))
    (run / "results.jsonl").write_text(_row("x:0", "A", "A", 1.0) + _row("x:1", "B", "B", 1.0))
    (run / "summary.json").write_text(json.dumps({"n": 2, "selected": 2, "unanswered": 1}))
    assert not load_run(run).summary.complete
    assert "(n=2, partial of 2)" in write_report([run]).read_text()
    # a summary of fewer rows than there are now is stale: the count decides
    (run / "summary.json").write_text(json.dumps({"n": 1, "selected": 2, "unanswered": 1}))
    assert load_run(run).summary.complete


def test_the_report_is_never_written_over_a_runs_data(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    rows = _row("x:0", "A", "A", 1.0)
    (run / "results.jsonl").write_text(rows)
    for out in (run / "results.jsonl", run / "run.json", run / "traces" / "x_0.md"):
        with pytest.raises(BadInput, match="would write the report over a run's data"):
            write_report([run], out=out)
    assert (run / "results.jsonl").read_text() == rows


async def test_two_reports_in_one_folder_keep_their_own_plots(tmp_path):
    tree, chain, _ = await make_runs(tmp_path)
    a = write_report([tree], out=tmp_path / "cmp" / "a.md")
    b = write_report([chain], out=tmp_path / "cmp" / "b.md")  # no value to plot: it removes only its own
    assert (a.parent / "a.value_vs_accuracy.png").read_bytes().startswith(PNG)
    assert "(a.value_vs_accuracy.png)" in a.read_text() and "value_vs_accuracy.png" not in b.read_text()
    assert not (b.parent / "b.value_vs_accuracy.png").exists()


@pytest.mark.parametrize("row", ['{"id": ["a"], "question": "q"}', '{"id": 5, "trace": 7}'])
def test_a_hand_damaged_row_is_one_line_naming_it(tmp_path, row):
    run = tmp_path / "r"
    run.mkdir()
    (run / "results.jsonl").write_text(row + "\n" + _row("x:1", "A", "A", 1.0))
    with pytest.raises(BadInput, match=r"results.jsonl:1: corrupt line \(its id or trace is not a string\)"):
        write_report([run])


def test_a_hand_edited_number_that_is_no_number_counts_0(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    row = json.loads(_row("x:0", "A", "A", 1.0))
    (run / "results.jsonl").write_text(json.dumps({**row, "seconds": "slow"}) + "\n" + _row("x:1", "A", "A", 1.0))
    assert "100.0 / 100.0 (n=2)" in write_report([run]).read_text()  # reported, not a ValueError


def test_value_buckets_put_every_half_way_value_up():
    """round() rounds halves to even on binary floats: 0.45 and 0.55 both went to 0.6, 0.65
    and 0.75 to 0.8, and buckets 0.5 and 0.7 stayed empty (0.35 is a real value: a 5/10
    rating on an answer the KG did not confirm, times 0.7)."""
    from traversals.eval.report import _buckets

    values = [0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95]
    assert [b for b, _, _ in _buckets((v, 1.0) for v in values)] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert _buckets([(0.0, 1.0), (0.04, 0.0), (0.5, 1.0), (1.0, 1.0)]) == [(0.0, 2, 0.5), (0.5, 1, 1.0), (1.0, 1, 1.0)]
    # a bucket holds the mean score (the share right), not the median
    assert _buckets([(0.5, 0.0), (0.5, 0.0), (0.5, 1.0)]) == [(0.5, 3, pytest.approx(1 / 3))]


def test_runs_in_folders_of_one_name_get_labels_of_their_own_and_a_run_named_twice_counts_once(tmp_path):
    """runs/A/e and runs/B/e shared one row and read "cot (e) vs cot (e)"; DIR and
    DIR/results.jsonl were compared as two runs."""
    for parent, answer in (("A", "A"), ("B", "C")):
        run = tmp_path / parent / "e"
        run.mkdir(parents=True)
        (run / "run.json").write_text(json.dumps({"dataset": "x", "strategy": "cot", "selected": 1}))
        (run / "results.jsonl").write_text(_row("x:0", answer, "A", 1.0 if answer == "A" else 0.0))
    text = write_report([tmp_path / "A" / "e", tmp_path / "B" / "e"], out=tmp_path / "r.md").read_text()
    assert "cot (A/e)" in text and "cot (B/e)" in text
    once = write_report([tmp_path / "A" / "e", tmp_path / "A" / "e" / "results.jsonl"], out=tmp_path / "s.md")
    assert "(n=1" in once.read_text() and once.read_text().count("(n=1") == 1


async def test_without_matplotlib_the_report_has_its_tables_and_names_the_extra(tmp_path, monkeypatch, capsys):
    import sys

    from traversals.cli import main

    tree, _, _ = await make_runs(tmp_path)
    write_report([tree])  # the plots of an earlier report, with matplotlib
    assert (tree / "value_vs_accuracy.png").exists() and (tree / "backtracking.png").exists()
    for name in ("matplotlib", "matplotlib.figure"):  # the base install: no eval extra
        monkeypatch.setitem(sys.modules, name, None)
    assert main(["report", str(tree)]) == 0
    text = (tree / "report.md").read_text()
    assert "| tree | 75.0 / 75.0 (n=4) |" in text and "| tree · toy | 2 | 50.0 | 50.0 |" in text
    assert text.count("No plot: matplotlib is not installed (pip install 'traversals[eval]').") == 2
    assert ".png" not in text  # no link to a plot it did not draw, and the stale ones are gone
    assert not (tree / "value_vs_accuracy.png").exists() and not (tree / "backtracking.png").exists()
    err = capsys.readouterr().err
    assert "pip install 'traversals[eval]'" in err and "Traceback" not in err
