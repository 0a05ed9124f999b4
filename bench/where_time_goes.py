"""Where a search's seconds go: every LLM call of a few questions, timed and grouped by
what it is for (action choice, thought, relation choice, calibration, answer, value …).

    python bench/where_time_goes.py                          # chain, 5 MetaQA 1-hop dev questions
    python bench/where_time_goes.py --strategy tree --hops 2 --limit 2 --calibrate
    python bench/where_time_goes.py --calibrate --value-model models/metaqa-value.json
    python bench/where_time_goes.py --limit 2 --trace           # every call, in order

Prints one row per kind of call: calls, prompt tokens the model computed (the rest came
from its KV cache), tokens generated, seconds and their share. Figures, not assertions;
run it on an idle machine (seconds are wall-clock).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from traversals.api import SearchConfig, build_solver, close_all
from traversals.eval.datasets import load_dataset, sample_questions
from traversals.kg.factory import open_kg
from traversals.llm.base import LLM, Generation, Scores
from traversals.llm.factory import open_llm
from traversals.options import add_decoding_flag, decoding_settings

ROOT = Path(__file__).resolve().parents[1]


class TimedLLM:
    """An :class:`LLM` that passes every call on and books its cost under a kind."""

    def __init__(self, inner: LLM, trace: bool = False) -> None:
        self.inner = inner
        self.trace = trace
        self.name = inner.name
        self.can_score = inner.can_score
        #: kind -> [calls, computed prompt tokens, generated tokens, seconds]
        self.book: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])

    def _add(self, kind: str, computed: int, generated: int, seconds: float, sent: int) -> None:
        if self.trace:
            print(f"    {seconds:5.2f} s  {computed:5d} / {sent:5d} tokens computed / sent  +{generated:3d}  {kind}")
        row = self.book[kind]
        row[0] += 1
        row[1] += computed
        row[2] += generated
        row[3] += seconds

    async def generate(self, prompt: str, *, prefix: str = "", **kw) -> Generation:
        t = time.perf_counter()
        g = await self.inner.generate(prompt, prefix=prefix, **kw)
        computed = g.computed_tokens
        self._add(f"generate {prefix.strip()[-24:] or '(no prefix)'}", computed, g.completion_tokens,
                  time.perf_counter() - t, g.prompt_tokens)
        return g

    async def score(self, prompt: str, options: Sequence[str], *, prefix: str = "", transient: bool = False) -> Scores:
        t = time.perf_counter()
        s = await self.inner.score(prompt, options, prefix=prefix, transient=transient)
        computed = s.computed_tokens
        what = (prompt.rstrip().splitlines()[-1] + " " + prefix).strip()[-48:]
        self._add(f"score {what}{' (transient)' if transient else ''}", computed, 0, time.perf_counter() - t, s.prompt_tokens)
        return s

    async def close(self) -> None:
        await self.inner.close()


def search_config(args: argparse.Namespace) -> SearchConfig:
    """The search the CLI would run with these flags: every decoding flag is passed on."""
    return SearchConfig(**decoding_settings(args), max_depth=12 if args.hops == 3 else 7, value_model=args.value_model)


async def main(args: argparse.Namespace) -> None:
    dataset = load_dataset(f"metaqa-{args.hops}hop", str(args.data), "dev", True)
    questions = sample_questions(dataset.questions, args.limit, 233)
    llm = TimedLLM(open_llm(args.llm), trace=args.trace)
    kgs = [open_kg(dataset.kg_spec)]
    solver = build_solver(args.strategy, llm, kgs, search_config(args))
    try:
        load = getattr(llm.inner, "load", None)
        if load is not None:  # the local model: load it before the clock starts
            await load()
        started = time.perf_counter()
        for q in questions:
            answer = await solver.ask(q.text, topic_entities=q.topic_entities or None)
            print(f"{answer.seconds:6.1f} s  {q.text} -> {answer.text[:60]}")
        total = time.perf_counter() - started
    finally:
        await close_all(llm, kgs)
    n = len(questions)
    print(f"\n{args.strategy} on {n} MetaQA dev {args.hops}-hop questions: {total / n:.1f} s per question\n")
    print("| call | calls/question | computed prompt tokens/question | generated tokens/question | s/question | share |")
    print("|---|---|---|---|---|---|")
    for kind, (calls, computed, generated, seconds) in sorted(llm.book.items(), key=lambda kv: -kv[1][3]):
        print(f"| {kind} | {calls / n:.1f} | {computed / n:.0f} | {generated / n:.0f} | {seconds / n:.2f} | {seconds / total:.0%} |")
    rest = total - sum(row[3] for row in llm.book.values())
    print(f"| (KG, Python, …) | | | | {rest / n:.2f} | {rest / total:.0%} |")


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strategy", default="chain")
    ap.add_argument("--hops", type=int, choices=(1, 2, 3), default=1)
    ap.add_argument("--limit", type=int, default=5)
    ap.add_argument("--llm", default="local")
    add_decoding_flag(ap)  # --decoding, --calibrate, --compare-answers, --value-reasoning … as in the CLI
    ap.add_argument("--trace", action="store_true", help="print every call as it ends, in order")
    ap.add_argument("--value-model", default=None, help="a model of `traversals train-value` rating the nodes")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "metaqa")
    return ap


if __name__ == "__main__":
    from clean_exit import run_script

    raise SystemExit(run_script(main, arguments().parse_args()))
