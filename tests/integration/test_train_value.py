"""`traversals train-value` on the real MetaQA KB (embedded store), then the trained model
used by `ask --strategy beam` with the default local model."""

from __future__ import annotations

import json
import re
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


@pytest.mark.model
@pytest.mark.timeout(900)
async def test_the_real_model_phrases_a_relation_in_both_directions(SHARED, local_llm):
    """The phrasings a synthetic question is made of, from the default local model: the
    relation's direction kept apart (asked one direction at a time, it was not)."""
    from traversals.eval.synthetic import SyntheticConfig, SyntheticQuestions
    from traversals.kg.factory import open_kgs
    from traversals.llm.base import Usage
    from traversals.search.kgset import KGSet
    from traversals.search.rwt.state import PathNode, step

    kb = SHARED / "data" / "metaqa" / "kb.txt"
    if not kb.exists():
        pytest.skip(f"{kb} is not there")
    kgs = KGSet(open_kgs([str(kb)]))
    try:
        maker = SyntheticQuestions(kgs, local_llm, SyntheticConfig(variants=2))
        film = next(e for e in await kgs.search("Man of Aran", Usage()) if e.label == "Man of Aran")
        relation = next(r for r in (await kgs.get_relations([film], Usage())).items if r.key == "directed_by")
        root = PathNode(id=0, entities=(film,))
        reached, edges, _ = await step(kgs, root, relation, Usage())
        forward, reverse = await maker.phrase(relation, [PathNode(1, reached, root, relation, edges, 1)])
    finally:
        await kgs.close()
    assert forward.questions and forward.phrases and reverse.questions and reverse.phrases
    # a person one way ("Who directed {}?", "{} was directed by whom?"), films the other
    asks_for_a_person = re.compile(r"\bwhom?\b", re.IGNORECASE)
    # (the first question of each uses the relation's word; the others may say it in other words)
    assert all(asks_for_a_person.search(q) for q in forward.questions) and "direct" in forward.questions[0], forward
    assert not any(asks_for_a_person.search(q) for q in reverse.questions) and "direct" in reverse.questions[0], reverse
    assert all(p.count("{}") == 1 for p in forward.phrases + reverse.phrases)
    assert set(forward.checked) >= set(forward.questions + forward.phrases)


@pytest.mark.model
@pytest.mark.timeout(1800)  # a guard against a hang, not a speed target (see below)
def test_training_without_labelled_questions(SHARED, default_model_path, tmp_path):
    """`train-value --synthetic N --kg FILE`: the questions come from random walks phrased by
    the real local model; no benchmark file is read."""
    kb = SHARED / "data" / "metaqa" / "kb.txt"
    if not kb.exists():
        pytest.skip(f"{kb} is not there")
    out = tmp_path / "synthetic.json"
    # 429 s alone on a 2-core machine whose llama.cpp reads ~33 prompt tokens/s, and over 600 s
    # when an eval shares the cores: the guard leaves room for both
    done = traversals("train-value", "--synthetic", "6", "--kg", str(kb), "--rounds", "1", "--out", str(out),
                      timeout=1700)
    assert done.returncode == 0, done.stderr
    assert "6 questions on random walks (2 of 1 hops, 2 of 2 hops, 2 of 3 hops)" in done.stderr
    made = [json.loads(line) for line in Path(str(out) + ".questions.jsonl").read_text().splitlines()]
    assert len(made) == 6 and all(f"[{q['start']['label']}]" in q["question"] and q["answers"] for q in made)
    phrasings_file = Path(str(out) + ".phrasings.json")
    phrasings = json.loads(phrasings_file.read_text())
    assert phrasings["llm"].startswith("local:") and all(key in phrasings["relations"] for q in made for key in q["path"])
    # the model's other words for each relation walked were asked once and kept with the phrasings
    assert all(isinstance(phrasings["relations"][key.lstrip("~")]["synonyms"], list) for q in made for key in q["path"])
    meta = ValueModel.load(out).meta
    assert meta["synthetic"]["questions"] == 6 and "datasets" not in meta
    # another LLM's rerun is told whose phrasings the file holds, not handed them as its own
    other = traversals("train-value", "--synthetic", "6", "--kg", str(kb), "--rounds", "1", "--out", str(out),
                       "--llm", "openai:none", "--llm-url", "http://127.0.0.1:9/v1")
    assert other.returncode != 0 and f"holds phrasings written by {phrasings['llm']}, not by openai:none" in other.stderr
    # the same LLM's rerun reads the phrasings back instead of asking again (the file is not rewritten)
    written = phrasings_file.stat().st_mtime_ns
    again = traversals("train-value", "--synthetic", "6", "--kg", str(kb), "--rounds", "1", "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert phrasings_file.stat().st_mtime_ns == written
    assert [json.loads(line)["question"] for line in Path(str(out) + ".questions.jsonl").read_text().splitlines()] \
        == [q["question"] for q in made]
