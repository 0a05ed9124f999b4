"""What ``--strategy retrieve`` puts in front of the LLM: how often the facts it lists hold
a gold answer, with no LLM call.

For the questions an eval asks (the first ``--limit`` of the seed-233 shuffle, after
``--skip``), links each question's entities without an LLM (exact labels, as ``traversals
train-value`` does), gathers and ranks the facts around them as retrieve does
(``RetrieveThenRead.gather``, the same ``--max-hops``, ``--top-facts`` and ``--embedder``)
and prints: the questions whose listed lines name a gold answer (the ceiling of what the
LLM can read off them), the mean lines listed (the prompt's size), and the hop of the best
fact naming a gold answer. A retrieve run's Hits@1 over these questions, split by whether
the gold was listed, tells the retriever's misses from the reader's::

    python bench/retrieve_recall.py metaqa-2hop --data ../shared/data/metaqa --answerable-only \
        --max-hops 2 --limit 100 --run runs/r2

Takes a few seconds a question on the CPU (the embeddings). Figures, not assertions.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from traversals.api import close_all
from traversals.embed import open_embedder
from traversals.errors import BadInput
from traversals.eval.datasets import DEFAULT_SEED, load_dataset, sample_questions
from traversals.eval.metrics import hits_at_1
from traversals.eval.runfiles import read_results
from traversals.eval.training import link
from traversals.kg.factory import open_kgs
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet
from traversals.search.linking import without_brackets
from traversals.search.retrieve import DEFAULT_TOP_FACTS, MAX_HOPS, Fact, RetrieveThenRead, with_walks


def names_gold(fact: Fact, gold: object) -> bool:
    """Whether either end of the fact is a gold answer, as ``eval``'s Hits@1 would judge it."""
    return any(hits_at_1(e.label, gold) for e in (fact.edge.subject, fact.edge.object))


async def main(args: argparse.Namespace) -> None:
    if not 1 <= args.max_hops <= MAX_HOPS:
        raise BadInput(f"--max-hops is 1 to {MAX_HOPS}")
    ds = load_dataset(args.dataset, args.data, args.split, args.answerable_only)
    questions = sample_questions(ds.questions, args.limit, args.sample_seed, args.skip)
    hits = {}
    if args.run:
        hits = {r["id"]: r.get("hits@1", 0.0) for r in read_results(Path(args.run) / "results.jsonl") if "id" in r}
    kgs_list = open_kgs(list(ds.kg_specs))
    embedder = open_embedder(args.embedder)
    llm = ScriptedLLM([])  # never called: linking and gathering ask no LLM
    solver = RetrieveThenRead(llm, KGSet(kgs_list), embedder, hops=args.max_hops, top_facts=args.top_facts)
    listed_gold = lines = 0
    best_hop: Counter[str] = Counter()
    split: dict[bool, list[float]] = {True: [], False: []}
    try:
        for q in questions:
            entities = await link(solver.kgs, q)
            query = without_brackets(q.text)
            gathered = await solver.gather(solver.kgs, entities, query, Usage()) if entities else None
            given = gathered.best(args.top_facts) if gathered else []
            listed = with_walks(given)
            gold = q.gold
            found = any(names_gold(f, gold) for f in listed)
            listed_gold += found
            lines += len(listed)
            first = next((f for f in given if names_gold(f, gold)), None)
            best_hop["none" if first is None else f"hop {first.hop}"] += 1
            if q.id in hits:
                split[found].append(hits[q.id])
    finally:
        await close_all(llm, kgs_list, embedder)
    n = len(questions)
    print(f"{args.dataset}, {n} questions, --max-hops {args.max_hops}, --top-facts {args.top_facts}, "
          f"--embedder {args.embedder}")
    print(f"  a gold answer among the lines listed: {listed_gold} of {n} ({100 * listed_gold / max(1, n):.1f} %)")
    print(f"  lines listed per question: {lines / max(1, n):.1f}")
    print("  the best-ranked fact naming a gold answer: " + ", ".join(f"{k} {v}" for k, v in sorted(best_hop.items())))
    for found, scores in split.items():
        if scores:
            print(f"  {args.run}, Hits@1 where the gold was {'' if found else 'not '}listed: "
                  f"{100 * sum(scores) / len(scores):.1f} ({len(scores)} questions)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="a benchmark name, as traversals eval takes it (metaqa-2hop, pq-3h, ...)")
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="dev")
    p.add_argument("--answerable-only", action="store_true")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--skip", type=int, default=0)
    p.add_argument("--seed", dest="sample_seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--max-hops", type=int, default=1)
    p.add_argument("--top-facts", type=int, default=DEFAULT_TOP_FACTS)
    p.add_argument("--embedder", default="sbert")
    p.add_argument("--run", help="a retrieve eval run of the same questions: its Hits@1, split by whether the gold was listed")
    return p.parse_args(argv)


if __name__ == "__main__":
    from clean_exit import run_script

    raise SystemExit(run_script(main, parse_args()))
