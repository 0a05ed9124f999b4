"""How much of RwT's beam search with a trained roll-out model is the model alone?

Runs the hop-level beam of ``traversals train-value`` (no LLM, no random relations) with a
trained model on the questions an eval asks (the first ``--limit`` of the seed-233
shuffle), answers with the state of the best *stop* value, and scores it like
``traversals eval``. With ``--compare DIR`` (an eval run of the same questions) it prints
the paired counts, so the LLM's share of the result is visible; ``--out DIR`` writes the
per-question scores (with the answer and the path that reached it) as ``DIR/results.jsonl``,
so two models can be paired the same way
(``--compare`` the first model's DIR).

    python bench/rwt_without_llm.py metaqa-1hop --data ../shared/data/metaqa --answerable-only \
        --model models/metaqa-value.json --limit 50 --compare runs/m1-beam-trained

Takes seconds (KG walks only). Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from traversals.eval.datasets import DEFAULT_SEED, load_dataset, sample_questions
from traversals.eval.metrics import score
from traversals.eval.training import gold_reward, link
from traversals.kg.factory import open_kgs
from traversals.search.kgset import KGSet
from traversals.search.rwt.train import TrainConfig, Trainer, Tree, TrainingQuestion
from traversals.search.rwt.valuemodel import ValueModel

MAX_ANSWER_ENTITIES = 10  # as the beam strategy's answer


async def main(args: argparse.Namespace) -> None:
    ds = load_dataset(args.dataset, args.data, args.split, args.answerable_only)
    questions = sample_questions(ds.questions, args.limit, args.sample_seed)
    model = ValueModel.load(Path(args.model))
    kgs_list = open_kgs(list(ds.kg_specs))
    trainer = Trainer(KGSet(kgs_list), TrainConfig(width=args.width, branch=args.branch, epsilon=0.0,
                                                   max_hops=args.max_hops))
    rows: dict[str, dict[str, float]] = {}
    chosen: dict[str, dict[str, str]] = {}  # what the model answered, by which path (for --out)
    try:
        for q in questions:
            entities = await link(trainer.kgs, q)
            if not entities:
                rows[q.id] = score("", q.gold)
                continue
            tq = TrainingQuestion(q.id, q.text, entities, gold_reward(q.gold))
            tree = Tree(tq)
            await trainer.grow(tq, model, random.Random(0), tree)
            best = trainer.chosen(tree, model)
            shown = best.entities[:MAX_ANSWER_ENTITIES] if best else ()
            rows[q.id] = score(", ".join(e.label for e in shown), q.gold)
            chosen[q.id] = {"answer": ", ".join(e.label for e in shown),
                            "path": best.path_text(" -> ", per_step=3) if best else ""}
    finally:
        for kg in kgs_list:
            await kg.close()
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        with open(Path(args.out, "results.jsonl"), "w") as f:
            for q in questions:
                f.write(json.dumps({"id": q.id, "question": q.text, **rows[q.id], **chosen.get(q.id, {})}) + "\n")
    n = len(rows)
    means = {k: 100 * sum(r[k] for r in rows.values()) / max(1, n) for k in ("hits@1", "em_in", "f1")}
    print(f"{args.dataset}: model alone (no LLM), n={n}: Hits@1 {means['hits@1']:.1f}  "
          f"EM-in {means['em_in']:.1f}  F1 {means['f1']:.1f}")
    if args.compare:
        other = {}
        for line in Path(args.compare, "results.jsonl").read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                other[r["id"]] = r["hits@1"]
        both = [i for i in rows if i in other]
        a = sum(1 for i in both if rows[i]["hits@1"] and other[i])
        only_model = sum(1 for i in both if rows[i]["hits@1"] and not other[i])
        only_run = sum(1 for i in both if other[i] and not rows[i]["hits@1"])
        print(f"  vs {args.compare} on {len(both)} shared questions: run {100 * sum(other[i] for i in both) / max(1, len(both)):.1f}; "
              f"both right {a}, only the model {only_model}, only the run {only_run}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset")
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="dev")
    p.add_argument("--answerable-only", action="store_true")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--sample-seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--model", required=True, help="a model file written by traversals train-value")
    p.add_argument("--width", type=int, default=3, help="states kept per hop (beam's B1)")
    p.add_argument("--branch", type=int, default=3, help="relations tried per state (beam's B2)")
    p.add_argument("--max-hops", type=int, default=3)
    p.add_argument("--compare", metavar="DIR", help="an eval run (results.jsonl) of the same questions")
    p.add_argument("--out", metavar="DIR", help="write the per-question scores to DIR/results.jsonl")
    from clean_exit import run_script

    raise SystemExit(run_script(main, p.parse_args()))
