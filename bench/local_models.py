"""Model choice by measurement (issue 4): run the candidate local GGUF models on a fixed
MetaQA dev sample and print, per model and strategy, the valid-action rate, Hits@1, the
median seconds per question and prompt tokens computed / sent.

    python bench/local_models.py                       # 20 questions, 1-hop, cot + chain
    python bench/local_models.py --limit 100 --hops 1 2 3 --strategies cot chain tree

Runs go to ``runs/bench/<model>/<dataset>-<strategy>`` and are resumable (re-running the
script only answers what is missing). The figures are those of the ``--limit`` questions
asked this time: a run folder keeps the rows of an earlier, larger ``--limit`` too, and its
summary.json counts them. Figures, not assertions: nothing here fails a build.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")


def run(model: str, dataset: str, strategy: str, limit: int, data: Path, out: Path) -> None:
    exe = Path(sys.executable).parent / "traversals"
    cmd = [str(exe), "eval", dataset, "--data", str(data), "--split", "dev", "--answerable-only",
           "--limit", str(limit), "--strategy", strategy, "--llm", f"local:{model}", "--out", str(out),
           "--no-progress"]
    if dataset == "metaqa-3hop" and strategy in ("tree", "chain"):  # the only ones with a depth
        cmd += ["--max-depth", "12"]
    if (out / "results.jsonl").exists():
        cmd.append("--resume")
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL)
    if done.returncode:  # `traversals eval` has said why, in one line on stderr
        raise SystemExit(done.returncode)


def selected_ids(dataset: str, data: Path, limit: int) -> set[str]:
    """The ids of the questions ``run`` has ``traversals eval`` answer (its default seed)."""
    from traversals.eval.datasets import DEFAULT_SEED, load_dataset, sample_questions

    return {q.id for q in sample_questions(load_dataset(dataset, str(data), "dev", True).questions, limit, DEFAULT_SEED)}


def figures(out: Path, selected: set[str]) -> dict:
    """The run's issue-4 figures over the ``selected`` questions' rows, as ``traversals
    report`` computes them."""
    from traversals.eval.report import efficiency, load_run
    from traversals.eval.runfiles import summarize

    run_ = load_run(out)
    run_ = dataclasses.replace(run_, rows=[row for row in run_.rows if row["id"] in selected])
    summary = summarize(run_.rows)
    eff = efficiency(run_)
    nan = float("nan")
    return {
        "n": summary.n,
        "valid": nan if eff.valid_rate is None else eff.valid_rate,
        "hits": summary.hits_at_1 if summary.n else nan,
        "median_s": nan if eff.median_seconds is None else eff.median_seconds,
        "computed_over_sent": nan if eff.computed_over_sent is None else eff.computed_over_sent,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--strategies", nargs="+", default=["cot", "chain"])
    ap.add_argument("--hops", nargs="+", type=int, default=[1])
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "metaqa")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench")
    args = ap.parse_args()
    print("| model | dataset | strategy | n | valid actions | Hits@1 | median s/question | prompt tokens computed / sent |")
    print("|---|---|---|---|---|---|---|---|")
    for model in args.models:
        for hop in args.hops:
            dataset = f"metaqa-{hop}hop"
            selected = selected_ids(dataset, args.data, args.limit)
            for strategy in args.strategies:
                out = args.out / model / f"{dataset}-{strategy}"
                run(model, dataset, strategy, args.limit, args.data, out)
                f = figures(out, selected)
                valid = "n/a (no KG actions)" if strategy == "cot" else f"{f['valid']:.1%}"
                print(f"| {model} | {dataset} | {strategy} | {f['n']} | {valid} | {f['hits']:.1%} | "
                      f"{f['median_s']:.1f} | {f['computed_over_sent']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    from clean_exit import run_script

    raise SystemExit(run_script(main))
