"""Resume refuses every recorded search setting that changes the answers, including the
SearchConfig fields no flag sets (their defaults can change between versions of the code)."""

from __future__ import annotations

import pytest

from traversals.errors import BadInput
from traversals.eval.runner import run_eval

from .test_runner import FakeSolver, make_dataset


@pytest.mark.parametrize(
    "key, old, new",
    [("max_edges", 50, 20), ("max_relations", 100, 40), ("diverse_temperature", 1.0, 0.7),
     ("evaluate_intermediate", None, True)],
)
async def test_a_resume_with_another_search_setting_is_refused(tmp_path, key, old, new):
    ds = make_dataset(3)
    base = {"strategy": "tree", "llm": "x"}
    await run_eval(ds, FakeSolver(), tmp_path, limit=2, progress=False, config={**base, key: old})
    with pytest.raises(BadInput, match=f"{key}: {old!r} \\(recorded\\) vs {new!r}"):
        await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=3, progress=False, config={**base, key: new})
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=3, progress=False, config={**base, key: old})
    assert s.n == 3


async def test_a_sampled_run_is_not_resumed_over_a_dataset_of_another_size(tmp_path):
    """Your own questions file, edited between two invocations: --limit shuffles the indices
    of all questions, so 8 questions give another sample of 3 than 6 did, and the resume
    answered a second sample into the same run (n = 5 of a --limit 3)."""
    cfg = {"strategy": "tree", "llm": "x"}
    await run_eval(make_dataset(6), FakeSolver(), tmp_path, limit=3, progress=False, config=cfg)
    with pytest.raises(BadInput, match="dataset_size: 6 \\(recorded\\) vs 8 \\(now\\)"):
        await run_eval(make_dataset(8), FakeSolver(), tmp_path, resume=True, limit=3, progress=False, config=cfg)
    s = await run_eval(make_dataset(6), FakeSolver(), tmp_path, resume=True, limit=4, progress=False, config=cfg)
    assert s.n == 4
    # every question in file order (no --limit): a longer file only adds questions
    whole = tmp_path / "whole"
    await run_eval(make_dataset(6), FakeSolver(), whole, progress=False, config=cfg)
    s = await run_eval(make_dataset(8), FakeSolver(), whole, resume=True, progress=False, config=cfg)
    assert s.n == 8


async def test_a_resume_scores_the_recorded_answers_again_with_the_current_metrics(tmp_path, capsys):
    """A run resumed after a metric fix summarised old rows by the old definition and new
    rows by the new one: summary.json mixed two metrics."""
    import json

    from traversals.eval.runfiles import read_results

    ds = make_dataset(4)
    cfg = {"strategy": "tree", "llm": "x"}
    await run_eval(ds, FakeSolver(), tmp_path, limit=3, progress=False, config=cfg)
    path = tmp_path / "results.jsonl"
    rows = read_results(path)
    good = {r["id"]: (r["hits@1"], r["em_in"], r["f1"]) for r in rows}
    for r in rows:  # as an older scorer recorded them
        r.update({"hits@1": 0.0, "em_in": 0.0, "f1": 0.0})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = await run_eval(ds, FakeSolver(), tmp_path, resume=True, limit=4, progress=True, config=cfg)
    assert "answer(s) scored again with the current metrics" in capsys.readouterr().err
    again = {r["id"]: (r["hits@1"], r["em_in"], r["f1"]) for r in read_results(path)}
    assert {i: again[i] for i in good} == good and len(again) == 4
    assert s.hits_at_1 == sum(v[0] for v in again.values()) / 4


async def test_a_resume_whose_llm_decides_another_decoding_is_refused(tmp_path):
    """--decoding auto: a run started against an endpoint that could not score (sampled) and
    resumed against one that can went on constrained, half the rows each, unsaid."""
    import json

    from traversals.api import build_solver
    from traversals.errors import BadInput
    from traversals.eval.datasets import load_dataset
    from traversals.eval.runner import run_eval
    from traversals.llm.scripted import ScriptedLLM

    from .kgdouble import dylan_kg

    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": "who is the mother of [Bob Dylan]",
                                        "answers": ["Beatrice Stone"]}) + "\n" for i in range(4)))
    cfg = {"strategy": "chain", "llm": "x", "kg": []}
    replies = ScriptedLLM(lambda prompt, prefix, n, t: "ANSWER: Beatrice Stone")
    sampled = build_solver("chain", replies, [dylan_kg()])
    out = tmp_path / "run"
    await run_eval(load_dataset("questions", data), sampled, out, limit=2, progress=False, config=cfg)
    scoring = ScriptedLLM(lambda prompt, prefix, n, t: "ANSWER: Beatrice Stone",
                          score=lambda prompt, options, prefix: [-1.0] * len(options))
    constrained = build_solver("chain", scoring, [dylan_kg()])
    with pytest.raises(BadInput, match="decided with sampled decoding and this LLM gives constrained"):
        await run_eval(load_dataset("questions", data), constrained, out, limit=4, resume=True, progress=False,
                       config=cfg)
    await run_eval(load_dataset("questions", data), build_solver("chain", replies, [dylan_kg()]), out, limit=4,
                   resume=True, progress=False, config=cfg)  # the same LLM: resumes
