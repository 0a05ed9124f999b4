"""How well ``initialize`` finds a question's entity when nobody marks it.

A user's question has no ``[brackets]`` and no gold topic entity: the linker must find
the names in the text (the ``extract_entities`` prompt, then the question's own spans, see
docs/decisions.md "Linking"). This takes the questions an eval asks (the first
``--limit`` of the seed-233 shuffle after ``--skip``), drops the brackets, links each
question with the real LLM and no search after it, and prints:

- linked: questions where an entity labelled as the dataset's topic entity was linked;
- extra: other entities linked, a question (each one more start the search explores);
- LLM calls and seconds a question (median).

``--lowercase`` asks each question in lowercase, as people type them ("who directed
heat"): no capitalised span is left to find a name by.

::

    python bench/linking.py metaqa-1hop metaqa-2hop metaqa-3hop --data ../shared/data/metaqa \
        --answerable-only --limit 30

Figures, not assertions. About 1 to 3 s a question with the default local model.
"""

from __future__ import annotations

import argparse
import statistics
import time

from traversals.api import close_all
from traversals.eval.datasets import DEFAULT_SEED, load_dataset, sample_questions
from traversals.kg.factory import open_kgs
from traversals.llm.base import Usage
from traversals.llm.factory import open_llm
from traversals.search.kgset import KGSet
from traversals.search.linking import Linker, without_brackets
from traversals.search.machine import normalise_label


async def main(args: argparse.Namespace) -> None:
    # every dataset first: a wrong name or --data is told before the LLM opens
    datasets = [load_dataset(name, args.data, args.split, args.answerable_only) for name in args.datasets]
    llm = open_llm(args.llm, url=args.llm_url)
    rows: list[tuple[str, bool, int, int, float]] = []
    try:
        for name, ds in zip(args.datasets, datasets):
            kgs_list = open_kgs(list(ds.kg_specs))
            kgs = KGSet(kgs_list)
            linker = Linker(llm, kgs, constrained=llm.can_score)
            try:
                for q in sample_questions(ds.questions, args.limit, args.sample_seed, args.skip):
                    gold = {normalise_label(t) for t in q.topic_entities}
                    text = without_brackets(q.text).lower() if args.lowercase else without_brackets(q.text)
                    usage = Usage()
                    start = time.perf_counter()
                    linked = await linker.initialize(text, usage)
                    seconds = time.perf_counter() - start
                    hit = any(normalise_label(e.label) in gold for e in linked)
                    extra = sum(normalise_label(e.label) not in gold for e in linked)
                    rows.append((name, hit, extra, usage.llm_calls, seconds))
                    if args.verbose:
                        print(f"{'ok  ' if hit else 'MISS'} {text!r}: "
                              f"{[e.label for e in linked]} (gold {q.topic_entities})")
            finally:
                await kgs.close()
    finally:
        await close_all(llm, [])
    print(f"{'dataset':<14} {'n':>4} {'linked %':>9} {'extra/q':>8} {'LLM calls/q':>12} {'median s':>9}")
    for name in args.datasets + ["all"]:
        mine = [r for r in rows if name in ("all", r[0])]
        if not mine:
            continue
        n = len(mine)
        print(f"{name:<14} {n:>4} {100 * sum(r[1] for r in mine) / n:>9.1f} {sum(r[2] for r in mine) / n:>8.2f} "
              f"{sum(r[3] for r in mine) / n:>12.2f} {statistics.median(r[4] for r in mine):>9.2f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("datasets", nargs="+", help="benchmarks with topic entities (metaqa-1hop, pq-2h, ...)")
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="dev")
    p.add_argument("--answerable-only", action="store_true")
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--skip", type=int, default=0)
    p.add_argument("--sample-seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--llm", default="local")
    p.add_argument("--llm-url", default=None)
    p.add_argument("--lowercase", action="store_true", help="ask each question in lowercase")
    p.add_argument("--verbose", "-v", action="store_true", help="print each question's links")
    from clean_exit import run_script

    raise SystemExit(run_script(main, p.parse_args()))
