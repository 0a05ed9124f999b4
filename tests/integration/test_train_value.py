"""`traversals train-value` on the real MetaQA KB (embedded store), then the trained model
used by `ask --strategy beam` with the default local model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from traversals.eval.datasets import DEFAULT_SEED, load_dataset, sample_questions
from traversals.eval.training import training_questions
from traversals.search.rwt import ValueModel
from traversals.search.rwt.valuemodel import question_words

QUESTION = "what films did [Charles Bail] direct"


def traversals(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "traversals"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def trained(SHARED, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    data = SHARED / "data" / "metaqa"
    if not (data / "kb.txt").exists():
        pytest.skip(f"{data} is not there")
    out = tmp_path_factory.mktemp("value") / "metaqa.json"
    done = traversals("train-value", "metaqa-1hop", "metaqa-2hop", "--data", str(data), "--answerable-only",
                      "--skip", "20", "--limit", "60", "--rounds", "2", "--out", str(out))
    return out, done


def test_training_writes_a_model_that_knows_the_relations_and_the_hop(trained, SHARED):
    out, done = trained
    assert done.returncode == 0, done.stderr
    assert "round 2:" in done.stderr and f"wrote {out}" in done.stdout
    model = ValueModel.load(out)
    meta = model.meta
    assert meta["datasets"] == ["metaqa-1hop", "metaqa-2hop"] and meta["skip"] == 20 and len(meta["rounds"]) == 2
    assert meta["train_questions"] + meta["heldout_questions"] == 120
    assert meta["rounds"][-1]["heldout_hits"] >= 0.5
    # the skipped questions are the ones `eval --limit 20` asks: none was trained on
    ds = load_dataset("metaqa-1hop", SHARED / "data" / "metaqa", "dev", True)
    asked = {q.id for q in sample_questions(ds.questions, 20)}
    trained = {q.id for q in training_questions(ds.questions, 20, 60, DEFAULT_SEED)}
    assert len(asked) == 20 and len(trained) == 60 and asked.isdisjoint(trained)
    assert trained == {q.id for q in sample_questions(ds.questions, 80)[20:]}  # the next 60 of the same shuffle
    words = question_words("which films did [Somebody Unseen] direct")
    direct, act = model.predict(words, ["~directed_by"]), model.predict(words, ["~starred_actors"])
    assert direct["stop"] > act["stop"] and direct["stop"] > 0.5
    assert direct["stop"] > model.predict(words, ["~directed_by", "release_year"])["stop"]


def ask_with_model(strategy: str, trained, SHARED, tmp_path) -> tuple[dict, dict]:
    """``traversals ask QUESTION --strategy S --value-model`` with the default local model:
    the answer and the trace."""
    out, done = trained
    assert done.returncode == 0, done.stderr
    trace = tmp_path / "t.json"
    got = traversals("ask", QUESTION, "--kg", str(SHARED / "data" / "metaqa" / "kb.txt"), "--strategy", strategy,
                     "--value-model", str(out), "--json", "--trace", str(trace))
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout), json.loads(trace.read_text())


@pytest.mark.model
@pytest.mark.timeout(900)
def test_beam_search_with_the_trained_model_and_the_real_llm(trained, SHARED, default_model_path, embedding_model_dir,
                                                           tmp_path):
    answer, t = ask_with_model("beam", trained, SHARED, tmp_path)
    assert "The Gumball Rally" in answer["answer"] and answer["decoding"] == "constrained"
    assert [e["label"] for e in answer["linked_entities"]] == ["Charles Bail"]
    assert t["rollout"] == "TrainedRollout" and t["embedder"] == "sbert:all-minilm-l6-v2"  # the default critical model
    best = next(n for n in t["nodes"] if n["id"] == t["answer_node"])
    assert best["depth"] == 1 and best["action"]["relation"]["key"] == "~directed_by"


@pytest.mark.model
@pytest.mark.timeout(900)
def test_tree_search_with_the_trained_model_as_its_value_and_the_real_llm(trained, SHARED, default_model_path, tmp_path):
    answer, t = ask_with_model("tree", trained, SHARED, tmp_path)
    assert "The Gumball Rally" in answer["answer"] and answer["value"] > 0.8
    # the model's value crossed τ: the tree stopped there, and no LLM call rated a node
    assert t["value_function"] == "TrainedValue" and t["stopped"] == "threshold"
    assert all(n["value"] is not None for n in t["nodes"][1:])
