"""bench/value_judge.py: the answers it rates are the ones a tree would propose at the end
of the gold walk and of each near miss, rated by the tree's own value function (scripted
LLM here; the figures come from the real model)."""
import importlib.util
from pathlib import Path

from traversals.eval.datasets import load_dataset
from traversals.kg.factory import open_kgs
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet
from traversals.search.machine import Machine
from traversals.search.value import ValueFunction

BENCH = Path(__file__).resolve().parents[2] / "bench" / "value_judge.py"


def bench():
    spec = importlib.util.spec_from_file_location("value_judge", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_near_misses_are_one_relation_more_less_or_aside():
    vj = bench()
    assert vj.relation_keys(["director", "movie", "genre"]) == ["~directed_by", "has_genre"]
    assert vj.near_misses(["actor", "movie", "year"]) == {
        "right": ["actor", "movie", "year"], "beyond": ["actor", "movie", "year", "movie"],
        "sibling": ["actor", "movie", "genre"], "short": ["actor", "movie"]}
    # a question ending on films: one step beyond is their year, the sibling another person's films
    assert vj.near_misses(["director", "movie"]) == {
        "right": ["director", "movie"], "beyond": ["director", "movie", "year"], "sibling": ["writer", "movie"]}


async def test_each_kind_is_rated_on_the_answer_and_path_a_tree_would_propose(SHARED):
    vj = bench()
    ds = load_dataset("metaqa-2hop", str(SHARED / "data" / "metaqa"), "dev", True)
    question = next(q for q in ds.questions if q.text.startswith("what were the release years of the movies acted by "
                                                                 "[Lauren Stamile]"))
    prompts: list[str] = []

    def rate(prompt, options, prefix):  # every answer "definitely correct"
        prompts.append(prompt)
        return [0.0 if o == "1.0" else -9.0 for o in options]

    kgs = KGSet(open_kgs(list(ds.kg_specs)))
    try:
        machine = Machine(kgs)
        value = ValueFunction(ScriptedLLM(rules=[], score=rate), machine, constrained=True)
        record = await vj.judge(question, machine, value, Usage())
    finally:
        for kg in kgs.kgs:
            await kg.close()
    kinds = record["kinds"]
    assert {"right", "beyond", "short"} <= set(kinds)  # her film has no genre in kb.txt: no sibling
    assert kinds["right"]["answer"] == "2009" and kinds["right"]["hits@1"] == 1.0
    assert kinds["short"]["answer"] == "Midnight Bayou"  # the film, one relation short
    assert not any(v["hits@1"] for k, v in kinds.items() if k != "right")
    assert all(k["value"] > 0.99 for k in kinds.values())
    # the value saw the path of the walk, as in a tree
    right = next(p for p in prompts if "Provided answer: 2009" in p)
    assert "Lauren Stamile -> is starred actors of -> Midnight Bayou -> release year -> 2009" in right


async def test_a_trained_value_is_judged_without_opening_an_llm(SHARED, monkeypatch, capsys):
    """--value-model rates with the trained value alone: the LLM (by default the local model,
    fetched on first use) is never opened."""
    import argparse

    vj = bench()

    def no_llm(*args, **kwargs):
        raise AssertionError("the LLM was opened")

    class Trained:
        def __init__(self, model):
            self.model = model

        async def evaluate(self, question, node, usage):
            return 0.9 if node.answer == "2009" else 0.1

    monkeypatch.setattr(vj, "open_llm", no_llm)
    monkeypatch.setattr(vj.ValueModel, "load", staticmethod(lambda path: path))
    monkeypatch.setattr(vj, "TrainedValue", Trained)
    args = argparse.Namespace(data=SHARED / "data" / "metaqa", hops=[1], limit=2, skip=100, sample_seed=233,
                              llm="local", llm_url=None, value_reasoning=False, value_examples=False,
                              value_model="value.json", threshold=0.8, out=None, quiet=True)
    await vj.main(args)
    out = capsys.readouterr().out
    assert "trained value value.json;" in out and "0 LLM calls" in out and "| 1 | " in out
