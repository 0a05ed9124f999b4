"""The bench scripts answer bad input as `traversals` does: one line on stderr naming the
script, exit code 2, no traceback (bench/clean_exit.py); what they return otherwise is
their exit code."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from traversals.errors import BadInput

BENCH = Path(__file__).resolve().parents[2] / "bench"
DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
#: the tests that read MetaQA skip without ../shared (an unpacked sdist, say), as the others do
needs_data = pytest.mark.skipif(not (DATA / "metaqa").is_dir(), reason="../shared/data not present")


@pytest.mark.parametrize("argv, says", [
    (["rwt_without_llm.py", "nosuch", "--data", "{tmp}", "--model", "{tmp}/m.json"], "unknown dataset 'nosuch'"),
    (["value_judge.py", "--data", "{tmp}/nowhere"], "--data {tmp}/nowhere: no such file or directory"),
    (["where_time_goes.py", "--llm", "local:{tmp}/no.gguf", "--data", "{tmp}/nowhere"], "no such file or directory"),
    (["retrieve_recall.py", "metaqa-2hop", "--data", "{tmp}/nowhere"], "--data {tmp}/nowhere: no such file or directory"),
    (["linking.py", "metaqa-1hop", "--llm", "local:{tmp}/no.gguf", "--data", "{tmp}/nowhere"],
     "--data {tmp}/nowhere: no such file or directory"),
    (["linking.py", "nosuch", "--llm", "local:{tmp}/no.gguf", "--data", "{tmp}"], "unknown dataset 'nosuch'"),
    (["retrieve_recall.py", "metaqa-2hop", "--data", "{tmp}", "--max-hops", "4"], "--max-hops is 1 to 3"),
])
def test_a_bench_script_given_bad_input_says_so_in_one_line(tmp_path, argv, says):
    script, *args = (a.format(tmp=tmp_path) for a in argv)
    done = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"{script}: error: ") and says.format(tmp=tmp_path) in line


def test_run_script_awaits_a_coroutine_and_passes_its_exit_code_on(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("clean_exit", BENCH / "clean_exit.py")
    clean_exit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(clean_exit)
    monkeypatch.setattr(sys, "argv", ["some_bench.py"])

    async def fine(code: int) -> int:
        await asyncio.sleep(0)
        return code

    async def refuses() -> None:
        raise BadInput("--data x: no such file or directory")

    assert clean_exit.run_script(fine, 0) == 0 and clean_exit.run_script(fine, 3) == 3
    assert clean_exit.run_script(lambda: None) == 0
    assert clean_exit.run_script(refuses) == 2
    assert capsys.readouterr().err == "some_bench.py: error: --data x: no such file or directory\n"
    with pytest.raises(ZeroDivisionError):  # a bug keeps its traceback
        clean_exit.run_script(lambda: 1 / 0)


@needs_data
def test_metaqa_ambiguity_splits_a_held_out_run_over_its_own_questions(tmp_path):
    """Given a run, the questions are the run's (its run.json's limit, skip and seed): a run
    of `eval --skip 600 --limit 100` is split over questions 601-700, not the first 100."""
    from traversals.eval.datasets import load_dataset, sample_questions

    data = BENCH.parents[1] / "shared" / "data" / "metaqa"
    asked = sample_questions(load_dataset("metaqa-1hop", str(data), "dev", True).questions, 100, 233, skip=600)
    run = tmp_path / "held-out"
    run.mkdir()
    (run / "run.json").write_text('{"limit": 100, "skip": 600, "seed": 233}')
    (run / "results.jsonl").write_text("".join(f'{{"id": "{q.id}", "hits@1": 1.0}}\n' for q in asked))
    done = subprocess.run([sys.executable, str(BENCH / "metaqa_ambiguity.py"), str(run), "--data", str(data)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    head, split = done.stdout.splitlines()
    assert "seed 233, questions 601-700 of the shuffle:" in head
    ambiguous = int(head.split(": ")[1].split()[0])
    assert split == f"{run}: Hits@1 100.0 of 100; unambiguous 100.0 of {100 - ambiguous}; ambiguous 100.0 of {ambiguous}"
    # the flags still choose: the first 100 share no question with this run
    done = subprocess.run([sys.executable, str(BENCH / "metaqa_ambiguity.py"), str(run), "--data", str(data),
                           "--skip", "0"], capture_output=True, text=True, timeout=300)
    assert "first 100:" in done.stdout and f"{run}: Hits@1 –;" in done.stdout


@needs_data
def test_retrieve_recall_counts_the_gold_answers_retrieve_would_list_and_splits_a_run_by_them(tmp_path):
    """Two hops of facts list the gold answers of 2-hop questions that one hop cannot reach;
    a run's Hits@1 is split over the questions whose gold was listed and the others."""
    from traversals.eval.datasets import load_dataset, sample_questions

    data = BENCH.parents[1] / "shared" / "data" / "metaqa"
    asked = sample_questions(load_dataset("metaqa-2hop", str(data), "dev", True).questions, 4, 233)
    run = tmp_path / "r2"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(f'{{"id": "{q.id}", "hits@1": 1.0}}\n' for q in asked))

    def recall(hops: int) -> dict[str, str]:
        done = subprocess.run([sys.executable, str(BENCH / "retrieve_recall.py"), "metaqa-2hop", "--data", str(data),
                               "--answerable-only", "--limit", "4", "--embedder", "lexical", "--max-hops", str(hops),
                               "--run", str(run)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return dict(line.strip().rsplit(": ", 1) for line in done.stdout.splitlines()[1:])

    one, two = recall(1), recall(2)
    assert two["a gold answer among the lines listed"].startswith("4 of 4")
    assert int(one["a gold answer among the lines listed"].split()[0]) < 4
    assert "hop 2 4" == two["the best-ranked fact naming a gold answer"]
    assert two[f"{run}, Hits@1 where the gold was listed"] == "100.0 (4 questions)"
    assert f"{run}, Hits@1 where the gold was not listed" not in two
    assert float(two["lines listed per question"]) > float(one["lines listed per question"]) > 0


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), BENCH / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_add_decoding_flags_settings_are_all_passed_on():
    import argparse

    from traversals.api import SearchConfig
    from traversals.options import DECODING_SETTINGS, add_decoding_flag

    p = argparse.ArgumentParser()
    add_decoding_flag(p)
    assert {a.dest for a in p._actions} - {"help"} == set(DECODING_SETTINGS)
    assert set(DECODING_SETTINGS) <= set(SearchConfig.__dataclass_fields__)


async def test_where_time_goes_times_the_search_its_decoding_flags_ask_for(tmp_path, monkeypatch, capsys):
    """--compare-answers, --value-reasoning and --value-examples were accepted and left out of
    the search it timed."""
    import argparse

    from traversals.eval.datasets.base import Dataset, Gold, Question
    from traversals.llm.base import Usage
    from traversals.llm.scripted import ScriptedLLM
    from traversals.options import add_decoding_flag
    from traversals.search.result import Answer

    wtg = _load_script("where_time_goes.py")
    p = argparse.ArgumentParser()
    add_decoding_flag(p)
    flags = ["--decoding", "constrained", "--calibrate", "--both-orders", "--calibrate-answers", "--compare-answers",
             "--value-reasoning", "--value-examples"]
    args = p.parse_args(flags, argparse.Namespace(strategy="chain", hops=1, limit=1, llm="scripted", trace=False,
                                                  value_model=None, data=tmp_path))
    questions = [Question(id="m:1", text="who directed [Heat]", gold=[Gold("Michael Mann")])]
    monkeypatch.setattr(wtg, "load_dataset", lambda *a: Dataset("m", "dev", questions, kg_specs=["demo"]))
    monkeypatch.setattr(wtg, "open_llm", lambda spec: ScriptedLLM([]))
    configs = []

    class Solver:
        async def ask(self, question, *, topic_entities=None):
            return Answer(question=question, text="Michael Mann", usage=Usage(), seconds=0.0, strategy="chain")

    def build_solver(strategy, llm, kgs, config):
        configs.append(config)
        return Solver()

    monkeypatch.setattr(wtg, "build_solver", build_solver)
    await wtg.main(args)
    [config] = configs
    assert (config.decoding, config.calibrate) == ("constrained", 1.0)
    assert config.both_orders and config.calibrate_answers
    assert config.compare_answers and config.value_reasoning and config.value_examples
    assert "chain on 1 MetaQA dev 1-hop questions" in capsys.readouterr().out


def test_local_models_reports_the_questions_of_its_limit_not_every_row_of_the_folder(SHARED, tmp_path, monkeypatch,
                                                                                      capsys):
    """A re-run with a smaller --limit finds the rows of the earlier, larger one in its run
    folder (and a summary.json counting them): the table is over the questions it asked."""
    import json

    from traversals.eval.datasets import load_dataset, sample_questions

    lm = _load_script("local_models.py")
    data = SHARED / "data" / "metaqa"
    first3 = sample_questions(load_dataset("metaqa-1hop", str(data), "dev", True).questions, 3, 233)
    out = tmp_path / "bench"
    run = out / "m" / "metaqa-1hop-chain"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"dataset": "metaqa-1hop", "strategy": "chain", "limit": 2,
                                              "selected": 2}))
    rows = [(q, q.gold[0].to_json()[0] if i < 2 else "nobody", float(i < 2), 2.0 + 10 * i)
            for i, q in enumerate(first3)]  # the third, of the earlier --limit 3: wrong and slow
    (run / "results.jsonl").write_text("".join(json.dumps(
        {"id": q.id, "question": q.text, "answer": answer, "gold": q.gold_json(), "hits@1": hit, "em_in": hit,
         "f1": hit, "seconds": seconds, "prompt_tokens": 100}) + "\n" for q, answer, hit, seconds in rows))
    (run / "summary.json").write_text(json.dumps({"n": 3, "selected": 2, "hits@1": 0.6667}))
    monkeypatch.setattr(lm, "run", lambda *args: None)  # the runs are there: no `traversals eval`
    monkeypatch.setattr(sys, "argv", ["local_models.py", "--models", "m", "--strategies", "chain", "--limit", "2",
                                      "--data", str(data), "--out", str(out)])
    assert lm.main() == 0
    row = capsys.readouterr().out.splitlines()[-1]
    assert row.startswith("| m | metaqa-1hop | chain | 2 | ") and "| 100.0% | 7.0 |" in row
