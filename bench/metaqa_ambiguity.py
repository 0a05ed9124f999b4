"""How many MetaQA 1-hop questions no system can be sure to get right, and what a run
scored without them.

WikiMovies' KB (kb.txt) names films by title, so films that share a title are one entity:
"A Midsummer Night's Dream" has release years 1935, 1968 and 1999. MetaQA made each
question from one of those films, so the gold answer of "what year was the movie [A
Midsummer Night's Dream] released" is 1999 alone, while the KB's answer to the question is
all three. Nothing in the question tells them apart: Hits@1 on such a question is a draw.
This counts them among the questions ``traversals eval`` asks (the seed-233 shuffle of the
answerable subset, first ``--limit``) — a question is *ambiguous* when its relation
(``qa_dev_qtype_1hop.txt``) reaches more entities from its topic entity than its gold lists
— and prints the Hits@1 a system would expect if it answered every other question right and
picked at random among the KB's answers on these (the ceiling). Given run folders, it
splits their Hits@1 into the two parts::

    python bench/metaqa_ambiguity.py                              # first 100 1-hop questions
    python bench/metaqa_ambiguity.py --limit 60 runs/t1 runs/t1-other
    python bench/metaqa_ambiguity.py runs/held-out                # its run.json's --skip/--limit/seed

Given runs and no ``--limit``/``--skip``/``--seed``, the questions are those the first run
asked (its run.json's ``limit``, ``skip`` and ``seed``), so a held-out run (``eval --skip 600``)
is split over its own questions.

1-hop only: 2-hop gold sets are exactly what the KB reaches (the topic entity left out) in
every answerable dev question, and 3-hop gold sets follow a rule kb.txt does not reproduce
(40 % of them are smaller than the walk's reach for reasons other than shared titles), so
there this count would not mean what it says. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from value_judge import relation_keys  # the bench folder is on the path when run as a script

from traversals.eval.datasets import DEFAULT_SEED, load_dataset, sample_questions
from traversals.eval.datasets.base import Question

ROOT = Path(__file__).resolve().parents[1]


def read_kb(path: Path) -> dict[str, dict[str, set[str]]]:
    """kb.txt as entity -> relation key (``~`` for an edge walked backwards) -> labels."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("|")
        if len(parts) == 3:
            s, r, o = parts
            out[s][r].add(o)
            out[o]["~" + r].add(s)
    return out


def reach(kb: dict[str, dict[str, set[str]]], question: Question) -> set[str]:
    """What the KB answers to a 1-hop question: its relation's ends from its topic entity."""
    (key,) = relation_keys(str(question.meta["qtype"]).split("_to_"))
    return set(kb[question.topic_entities[0]][key])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run folders of `traversals eval metaqa-1hop` to split")
    ap.add_argument("--limit", type=int, default=None,
                    help="questions of the shuffle (what `eval --limit` asks; default the first run's, else 100)")
    ap.add_argument("--skip", type=int, default=None,
                    help="questions of the shuffle left out first (`eval --skip`; default the first run's, else 0)")
    ap.add_argument("--seed", type=int, default=None, help=f"the shuffle's seed (default the first run's, else {DEFAULT_SEED})")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "metaqa")
    args = ap.parse_args()
    recorded = json.loads((args.runs[0] / "run.json").read_text()) if args.runs else {}
    limit = args.limit if args.limit is not None else recorded.get("limit", 100)  # a run's None: every question
    skip = args.skip if args.skip is not None else recorded.get("skip") or 0
    seed = args.seed if args.seed is not None else recorded.get("seed", DEFAULT_SEED)

    ds = load_dataset("metaqa-1hop", str(args.data), "dev", True)
    kb = read_kb(Path(ds.kg_specs[0]))
    asked = sample_questions(ds.questions, limit, seed, skip=skip)
    draw: dict[str, float] = {}  # ambiguous question id -> chance a random KB answer is gold
    for q in asked:
        gold, reached = {g.answer for g in q.gold}, reach(kb, q)
        if gold < reached:
            draw[q.id] = len(gold) / len(reached)
    n = len(asked)
    ceiling = (n - len(draw) + sum(draw.values())) / n
    which = f"first {n}" if not skip else f"questions {skip + 1}-{skip + n} of the shuffle"
    print(f"MetaQA 1-hop dev answerable, seed {seed}, {which}: {len(draw)} ambiguous "
          f"(a title several films share); ceiling of the expected Hits@1 {100 * ceiling:.1f}")
    for run in args.runs:
        rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines() if x.strip()]
        rows = [r for r in rows if r.get("id") in {q.id for q in asked}]
        amb = [r for r in rows if r["id"] in draw]
        rest = [r for r in rows if r["id"] not in draw]

        def pct(rs: list[dict]) -> str:
            return f"{100 * sum(r.get('hits@1') or 0 for r in rs) / len(rs):.1f} of {len(rs)}" if rs else "–"

        print(f"{run}: Hits@1 {pct(rows)}; unambiguous {pct(rest)}; ambiguous {pct(amb)}")


if __name__ == "__main__":
    from clean_exit import run_script

    raise SystemExit(run_script(main))
