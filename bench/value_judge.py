"""Can this LLM be the tree's value function? Rate the answers a tree would propose for
MetaQA questions — the right one and the near misses — and see which ones cross τ.

A Tree-of-Traversals search stops at the first answer its value rates ≥ τ (0.8), so the
value must rate the right answer high *and* its near misses low. For each question (by
default the dev questions after the 100 that ``traversals eval`` measures: ``--skip 100``)
this walks the KG with the Action State Machine along the question's gold relations
(``qa_dev_qtype_*hop.txt``) and along three near misses, and rates the answer a tree would
propose at the end of each walk (the first of the machine's answer candidates) with the
same value function the tree uses:

- **right**: the gold relations;
- **beyond**: one relation more (a film's year, a person's films …);
- **short**: one relation less (2- and 3-hop questions);
- **sibling**: the last relation swapped for a related one (writer for director …).

Prints, per hop count and kind, how many answers were rated ≥ τ, the mean value, how often
the right answer was rated above every near miss, and in how many questions the right
answer alone crossed τ (what a search that stops at τ needs)::

    python bench/value_judge.py                                  # 1- and 2-hop, 20 questions each
    python bench/value_judge.py --hops 2 --limit 30 --value-reasoning --value-examples
    python bench/value_judge.py --value-model models/metaqa-value.json   # the trained value, same terms
    python bench/value_judge.py --llm openai:MODEL --llm-url http://127.0.0.1:8000/v1 --out judge.jsonl

Minutes, not hours: one rating per candidate (a reasoning generation with
``--value-reasoning``). The tree runs of docs/results.md are the measure of a whole search;
this is the measure of its judge. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from traversals.api import close_all
from traversals.eval.datasets import DEFAULT_SEED, load_dataset, sample_questions
from traversals.eval.datasets.base import Question
from traversals.eval.metrics import score
from traversals.eval.training import link
from traversals.kg.factory import open_kgs
from traversals.llm.base import Usage
from traversals.llm.factory import open_llm
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet
from traversals.search.machine import (
    MAX_GROUP,
    Action,
    ActionType,
    Machine,
    Node,
    latest_targets,
)
from traversals.search.policy import answer_candidates
from traversals.search.rwt.valuemodel import ValueModel
from traversals.search.subgraph import Subgraph
from traversals.search.trained_value import TrainedValue
from traversals.search.value import NodeValue, ValueFunction

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("right", "beyond", "short", "sibling")

#: MetaQA's entity types (``qa_*_qtype_*hop.txt``) -> the kb.txt relation from a film to them
RELATION = {"director": "directed_by", "writer": "written_by", "actor": "starred_actors", "year": "release_year",
            "language": "in_language", "genre": "has_genre", "tags": "has_tags", "tag": "has_tags",
            "imdbvotes": "has_imdb_votes", "imdbrating": "has_imdb_rating"}
#: the near miss of a last step: a related relation the question did not ask for
SIBLING = {"director": "writer", "writer": "director", "actor": "director", "year": "genre", "genre": "language",
           "language": "year", "tags": "genre", "tag": "genre", "imdbvotes": "imdbrating", "imdbrating": "imdbvotes"}


def relation_keys(types: Sequence[str]) -> list[str]:
    """``director_to_movie_to_genre`` -> ``["~directed_by", "has_genre"]`` (kb.txt stores
    every edge from the film; the machine walks it backwards as ``~relation``)."""
    keys = []
    for a, b in zip(types, types[1:]):
        keys.append(RELATION[b] if a == "movie" else "~" + RELATION[a])
    return keys


def near_misses(types: list[str]) -> dict[str, list[str]]:
    """The entity-type walks of every kind (:data:`KINDS`) for a question of ``types``."""
    end = types[-1]
    walks = {"right": types}
    if end == "movie":
        walks["beyond"] = types + ["director" if types[-2] == "year" else "year"]
        prev = types[-2]
        if prev in SIBLING:
            walks["sibling"] = types[:-2] + [SIBLING[prev], "movie"]
    else:
        walks["beyond"] = types + ["movie"]
        walks["sibling"] = types[:-1] + [SIBLING.get(end, "year")]
    if len(types) > 2:
        walks["short"] = types[:-1]
    return walks


async def walk(machine: Machine, root: Node, keys: Sequence[str], usage: Usage) -> Node | None:
    """EXPAND_KG, select what the previous hop reached (at most the machine's group size),
    select the relation; ``None`` when a relation is not offered (nothing to walk)."""
    node, roots = root, root.subgraph.entities
    for key in keys:
        node = await machine.transition(node, Action(ActionType.EXPAND_KG, "follow the question"), usage)
        reached = [e for e in latest_targets(node) if e.id not in node.exhausted and e not in roots]
        chosen = tuple(reached[:MAX_GROUP]) if node.parent is not root else tuple(roots)
        if not chosen:
            return None
        node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=chosen), usage)
        keyed = dict(zip(node.relation_keys, node.relation_options))
        if key not in keyed:
            return None
        node = await machine.transition(
            node, Action(ActionType.SELECT_RELATION, relation=keyed[key], relation_key=key), usage)
    return node


async def judge(question: Question, machine: Machine, value: NodeValue, usage: Usage) -> dict | None:
    types = str(question.meta.get("qtype", "")).split("_to_")
    if len(types) < 2 or any(t != "movie" and t not in RELATION for t in types):
        return None
    entities = await link(machine.kgs, question)
    if not entities:
        return None
    root = machine.root(Subgraph().with_entities(entities))
    record: dict = {"id": question.id, "question": question.text, "qtype": question.meta["qtype"], "kinds": {}}
    for kind, kind_types in near_misses(types).items():
        end = await walk(machine, root, relation_keys(kind_types), usage)
        candidates = answer_candidates(end) if end is not None else {}
        if end is None or not candidates:
            continue
        text = next(iter(candidates))
        hits = score(text, question.gold)["hits@1"]
        if kind != "right" and hits:
            continue  # a near miss that reaches a gold answer is no miss
        answer = await machine.transition(end, Action(ActionType.ANSWER, text), usage)
        rated = await value.evaluate(question.text, answer, usage)
        record["kinds"][kind] = {"answer": text, "value": rated, "hits@1": hits, "note": answer.note}
    return record if "right" in record["kinds"] and len(record["kinds"]) > 1 else None


def table(records: list[dict], threshold: float) -> None:
    by_hops: dict[int, list[dict]] = defaultdict(list)
    for r in records:
        by_hops[r["hops"]].append(r)
    print(f"| hops | questions | kind | rated ≥ {threshold} | mean value | right above it |")
    print("|---|---|---|---|---|---|")
    for hops, rs in sorted(by_hops.items()):
        for kind in KINDS:
            vals = [(r["kinds"][kind]["value"], r["kinds"]["right"]["value"]) for r in rs if kind in r["kinds"]]
            if not vals:
                continue
            over = sum(v >= threshold for v, _ in vals)
            above = "–" if kind == "right" else f"{sum(right > v for v, right in vals)} / {len(vals)}"
            print(f"| {hops} | {len(rs)} | {kind} | {over} / {len(vals)} | {statistics.mean(v for v, _ in vals):.2f} "
                  f"| {above} |")
        # the search's view: the right answer first above every near miss
        first = sum(all(r["kinds"]["right"]["value"] > k["value"] for name, k in r["kinds"].items() if name != "right")
                    for r in rs)
        print(f"| {hops} | {len(rs)} | right above every near miss | | | {first} / {len(rs)} |")
        # what a tree that stops at τ needs: the right answer over it, no near miss
        alone = sum(r["kinds"]["right"]["value"] >= threshold
                    and all(k["value"] < threshold for name, k in r["kinds"].items() if name != "right") for r in rs)
        print(f"| {hops} | {len(rs)} | only the right answer ≥ {threshold} | {alone} / {len(rs)} | | |")


async def main(args: argparse.Namespace) -> None:
    datasets = {h: load_dataset(f"metaqa-{h}hop", str(args.data), "dev", True) for h in args.hops}
    # a trained value calls no LLM: opening one would load (or first fetch) the local model for nothing
    llm = ScriptedLLM([]) if args.value_model else open_llm(args.llm, url=args.llm_url)
    kgs = open_kgs(list(datasets[args.hops[0]].kg_specs))  # every hop count's kb.txt
    machine = Machine(KGSet(kgs))
    value: NodeValue = (
        TrainedValue(ValueModel.load(args.value_model)) if args.value_model else
        ValueFunction(llm, machine, constrained=llm.can_score, reasoning=args.value_reasoning,
                      examples=args.value_examples))
    usage = Usage()
    records: list[dict] = []
    out = open(args.out, "w") if args.out else None
    try:
        for hops, ds in datasets.items():
            for q in sample_questions(ds.questions, args.limit, args.sample_seed, skip=args.skip):
                record = await judge(q, machine, value, usage)
                if record is None:
                    continue
                record["hops"] = hops
                records.append(record)
                if out:
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                if not args.quiet:
                    vals = "  ".join(f"{k} {v['value']:.2f}" for k, v in record["kinds"].items())
                    print(f"{q.text[:70]:70}  {vals}", flush=True)
    finally:
        if out:
            out.close()
        await close_all(llm, kgs)
    judged = (f"trained value {args.value_model}" if args.value_model else
              f"{args.llm}, reasoning {'on' if args.value_reasoning else 'off'}, examples "
              f"{'on' if args.value_examples else 'off'}")
    print(f"\n{judged}; MetaQA dev answerable, seed {args.sample_seed}, "
          f"questions {args.skip + 1}-{args.skip + args.limit} of each hop; {usage.llm_calls} LLM calls\n")
    table(records, args.threshold)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hops", type=lambda s: [int(h) for h in s.split(",")], default=[1, 2],
                    help="comma-separated hop counts (default 1,2)")
    ap.add_argument("--limit", type=int, default=20, help="questions per hop count (before those left out)")
    ap.add_argument("--skip", type=int, default=100, help="questions of the shuffle left out first (the eval's)")
    ap.add_argument("--sample-seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--llm", default="local")
    ap.add_argument("--llm-url", default=None)
    ap.add_argument("--value-reasoning", action="store_true", help="the answer rating reasons first")
    ap.add_argument("--value-examples", action="store_true", help="worked ratings in the answer prompt")
    ap.add_argument("--value-model", default=None,
                    help="rate with a model of `traversals train-value` instead of the LLM (the tree's --value-model)")
    ap.add_argument("--threshold", type=float, default=0.8, help="τ, the tree's answer threshold")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "metaqa")
    ap.add_argument("--out", default=None, help="write one JSON line per question (answers, values, notes)")
    ap.add_argument("--quiet", action="store_true", help="only the table")
    from clean_exit import run_script

    raise SystemExit(run_script(main, ap.parse_args()))
