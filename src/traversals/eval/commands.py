"""``traversals eval`` and ``traversals report`` (added to the main CLI by ``cli.py``)."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Mapping

from ..api import SearchConfig, default_max_hops
from ..search.templates import BUILT_IN as BUILT_IN_PROMPTS, load_prompts
from ..errors import BadInput, RunStopped
from ..interrupt import run_interruptible
from ..kg.credentials import shown_kg_spec
from ..validate import shown_url
from ..options import (
    SEARCH_FLAG_STRATEGIES, SEARCH_SETTING_STRATEGIES, add_decoding_flag, decoding_settings, add_kg_flags, add_llm_flags, add_prompts_flag, add_rwt_flags,
    add_tree_flags, add_value_flags, check_kg_specs, flag_dest, kg_headers_from_args, label_predicates_from_args,
    open_embedder_from_args, open_llm_from_args, prepare_llm, redact_secrets, refuse_scoring_flags_when_sampled, refuse_unread_prompts,
    refuse_unused_flags, refuse_unused_llm_flags, remote_kg_options, unopened_kgs_note,
)
from .datasets import DATASETS, DEFAULT_SEED, Dataset, load_dataset, sample_questions
from ..llm.local import DEFAULT_N_CTX
from .runner import MAX_CONSECUTIVE_ERRORS


def refuse_missing_kgs(dataset: str, kg_specs: list[str], *, given: bool) -> None:
    """A :class:`BadInput` when a dataset's own KGs (``given``: or ``--kg``) name one that is
    not available here: Freebase, or MusicBrainz without a ``--kg`` saying where it is."""
    if "freebase" in kg_specs:
        raise BadInput(f"{dataset} is asked over Freebase, which is not available: pass --kg (e.g. --kg wikidata)")
    if not given and "musicbrainz" in kg_specs:  # the dataset's own KG names no spec open_kgs knows
        raise BadInput(f"{dataset} is asked over Wikidata and MusicBrainz, and no MusicBrainz KG is "
                       "built in: pass both, e.g. --kg wikidata --kg musicbrainz=http://HOST/sparql "
                       "(a SPARQL endpoint serving MusicBrainz)")


def add_question_flags(p: argparse.ArgumentParser, *, data_required: bool = True) -> None:
    """Where a benchmark's questions and KG come from (``eval`` and ``train-value``)."""
    p.add_argument("--data", required=data_required, metavar="DIR",
                   help="the benchmark's folder (or the folder above it, or the file)")
    p.add_argument("--split", default="dev", help="split to read where the benchmark has several (default dev)")
    p.add_argument("--answerable-only", action="store_true",
                   help="MetaQA: keep the answerable_{split}_{h}hop.idx lines; others: drop questions without gold")
    p.add_argument("--sample-seed", type=int, default=DEFAULT_SEED, metavar="SEED", help="default 233 (the paper's)")
    p.add_argument("--kg", action="append", default=None, metavar="SPEC",
                   help="a KG replacing the dataset's own (a triple file, a store, an endpoint, wikidata); "
                        "repeat --kg for several, as with ask")


def add_eval_commands(subparsers: Any) -> None:
    """Add the ``eval`` and ``report`` sub-commands; each sets ``func(args) -> int``."""
    ev = subparsers.add_parser(
        "eval",
        help="run a strategy over a benchmark or your own questions (resumable, concurrent)",
        description="Answer a benchmark's questions, or your own (DATASET questions: a JSONL, JSON, CSV or "
        "TSV file of questions and gold answers, with --kg), and write results.jsonl, traces/, summary.json "
        "and run.json to --out. Metrics: Hits@1, EM-in, F1 (see docs/evaluation.md).",
    )
    ev.add_argument("dataset", metavar="DATASET", help="one of: " + ", ".join(DATASETS))
    add_question_flags(ev)
    ev.add_argument("--limit", type=int, default=None, metavar="N",
                    help="evaluate N questions: the first N of the indices shuffled with --sample-seed")
    ev.add_argument("--skip", type=int, default=0, metavar="N",
                    help="leave out the first N questions of the shuffle (those --limit N answers): questions "
                         "held out from what was tuned or trained on the first ones; with --limit M, questions "
                         "N+1 to N+M")
    ev.add_argument("--strategy", required=True, metavar="S",
                    help="tree, chain, cot, mcts (RwT), beam (RwT hop-level beam search), retrieve (KAPING: ranked "
                         "KG facts, one LLM call)")
    add_llm_flags(ev)
    add_kg_flags(ev)
    add_decoding_flag(ev)
    add_value_flags(ev)
    add_prompts_flag(ev)
    ev.add_argument("--k", type=int, default=None, metavar="N", help="branching factor (default 3 for tree, 1 for chain)")
    ev.add_argument("--max-depth", type=int, default=None, metavar="N", help="default 7")
    ev.add_argument("--max-expansions", type=int, default=None, metavar="N", help="default 20")
    ev.add_argument("--threshold", type=float, default=None, metavar="X", help="answer threshold τ (default 0.8)")
    ev.add_argument("--simulations", type=int, default=None, metavar="N", help="mcts: simulations per question (default 16)")
    add_rwt_flags(ev, defaults=False)
    ev.add_argument("--seed", type=int, default=None, metavar="N",
                    help="tree/chain: the search's random seed, the same for every question (default 0; "
                         "run.json records it as search_seed); not --sample-seed, which picks the questions")
    add_tree_flags(ev)
    ev.add_argument("--out", required=True, metavar="DIR", help="run directory")
    ev.add_argument("--concurrency", type=int, default=1, metavar="N", help="questions answered at once (default 1)")
    ev.add_argument("--resume", action="store_true", help="continue the run in --out, skipping answered questions")
    ev.add_argument("--retry-errors", action="store_true",
                    help="with --resume: answer again the questions recorded as errors (their rows are removed)")
    ev.add_argument("--max-consecutive-errors", type=int, default=MAX_CONSECUTIVE_ERRORS, metavar="N",
                    help=f"stop the run after N questions in a row failed, a sign that the LLM or KG is broken "
                         f"rather than the questions hard (default {MAX_CONSECUTIVE_ERRORS}; 0: never stop)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.set_defaults(func=cmd_eval)

    rep = subparsers.add_parser(
        "report",
        help="tables and plots over run directories",
        description="Write report.md (strategies × datasets, cost per question) and PNG plots "
        "(answer value vs accuracy, backtracking counterfactual).",
    )
    rep.add_argument("dirs", nargs="+", metavar="DIR", help="run directories made by traversals eval")
    rep.add_argument("--out", default=None, metavar="FILE", help="report file (default: DIR/report.md of the first run)")
    rep.add_argument("--price", default=None, metavar="PROMPT,COMPLETION[,CACHED]",
                     help="US dollars per million tokens (e.g. 0.15,0.60): adds what each run's tokens cost, per "
                          "question, per right answer and in all; CACHED prices the prompt tokens a server reported "
                          "as cached (default: the prompt price)")
    rep.set_defaults(func=cmd_report)


def _command_line() -> list[str]:
    """The command being run, as run.json records it and the resume hint prints it (an API
    key given on the command line shows as ``***``)."""
    argv = list(sys.argv)
    if argv and Path(argv[0]).name in ("traversals", "__main__.py", "cli.py"):
        argv[0] = "traversals"
    return redact_secrets(argv)


def unread_settings(strategy: str) -> list[str]:
    """The run.json keys of the search settings ``strategy`` does not read (those of its
    flags :data:`~traversals.options.SEARCH_FLAG_STRATEGIES` refuses with it): a resume
    compares a key only when both runs record it, so leaving them out breaks no resume."""
    keys = [flag_dest(flag) for flag, readers in SEARCH_FLAG_STRATEGIES.items() if strategy not in readers]
    keys += [name for name, readers in SEARCH_SETTING_STRATEGIES.items() if strategy not in readers]
    return ["search_seed" if k == "seed" else k for k in keys]


def prompts_spec(given: str | None) -> str | None:
    """``--prompts`` as run.json records it: a built-in set's name, or a directory's absolute path."""
    if given is None or given in BUILT_IN_PROMPTS:
        return given
    return str(Path(given).expanduser().resolve())


def _search_config(args: argparse.Namespace) -> SearchConfig:
    k = args.k if args.k is not None else {"tree": 3, "chain": 1}.get(args.strategy)
    # run.json records the hops the strategy walks (3 for mcts/beam, 1 for retrieve), not None
    max_hops = args.max_hops if args.max_hops is not None else default_max_hops(args.strategy)
    wanted = {"k": k, "max_depth": args.max_depth, "max_expansions": args.max_expansions,
              "threshold": args.threshold, **decoding_settings(args),
              "simulations": args.simulations, "c_puct": args.c_puct, "seed": args.seed, "max_hops": max_hops,
              "top_facts": args.top_facts,
              "beam_width": args.beam_width, "beam_branch": args.beam_branch, "screen_dead_ends": args.screen_dead_ends,
              "prior_weight": args.prior_weight, "answer_choice": args.answer_choice,
              "group_selection": args.group_selection, "answers": args.answers, "embedder": args.embedder,
              "value_model": str(Path(args.value_model).resolve()) if args.value_model else None,
              "prompts": prompts_spec(args.prompts)}
    return SearchConfig(**{name: v for name, v in wanted.items() if v is not None})


async def _eval(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """``traversals eval``; ``environ``: the process environment, read by the caller
    (:func:`cmd_eval`), for ``$OPENAI_BASE_URL`` and the model cache a resume checks."""
    from .runner import run_eval

    if args.retry_errors and not args.resume:
        raise BadInput("--retry-errors goes with --resume (it answers again a run's error rows)")
    if args.max_consecutive_errors < 0:
        raise BadInput(f"--max-consecutive-errors must be >= 0, got {args.max_consecutive_errors}")
    refuse_unused_flags(args.strategy, args)
    refuse_unused_llm_flags(args, environ)  # before the run directory is made
    if args.strategy == "cot":  # opened by no cot run, but a malformed --kg is refused as with the others
        check_kg_specs(args.kg or [])
        if unused := unopened_kgs_note(args):
            print(f"note: {unused}", file=sys.stderr)
    dataset = load_dataset(args.dataset, args.data, args.split, args.answerable_only)
    for note in dataset.notes:
        print(f"note: {note}", file=sys.stderr)
    if without := sum(not q.gold for q in dataset.questions):
        print(f"note: {without} of the {len(dataset)} questions have no gold answer: they are answered and "
              "score 0 (--answerable-only drops them)", file=sys.stderr)
    strategy = args.strategy
    kg_specs = list(args.kg or dataset.kg_specs)
    if strategy != "cot":
        if not kg_specs:
            raise BadInput(f"{dataset.name}: no KG file found next to the data; pass --kg SPEC, the KG the "
                           "questions are asked over (a triple file, a store, an endpoint, wikidata)")
        refuse_missing_kgs(dataset.name, kg_specs, given=bool(args.kg))
    from ..kg.factory import credentials_for, label_predicates_for
    from ..kg.iris import DEFAULT_LABEL_PREDICATES

    if strategy != "cot":  # credentials no endpoint would take, before the run directory is made
        credentials_for(kg_specs, kg_headers_from_args(args, environ), args.kg_token_command or [])

    # what the KGs are labelled with, refused for Wikidata alone before the run directory is made
    label_predicates = (label_predicates_for(kg_specs, label_predicates_from_args(args))
                        if strategy != "cot" else None)
    search = _search_config(args)
    from ..api import load_value_model

    # read (and refused if unusable) before the run directory is made; its hash goes into
    # run.json, so a resume after the file was retrained in place is refused
    value_model = load_value_model(search)
    prompts = load_prompts(search.prompts)  # a directory's templates checked, and hashed for run.json
    refuse_unread_prompts(strategy, args.prompts, prompts)
    url = args.llm_url or environ.get("OPENAI_BASE_URL")
    config: dict[str, Any] = {
        "strategy": strategy,
        "llm": args.llm,
        "llm_url": shown_url(url) if url else url,  # a password in it is not recorded
        # --llm-cache: replies from it cost no LLM call and few seconds (counted per question as llm_cache_hits);
        # not compared on resume, which may add or drop the cache
        "llm_cache": str(Path(args.llm_cache).expanduser().resolve()) if getattr(args, "llm_cache", None) else None,
        # openai: the prompt template that lets the endpoint score options (constrained decoding) or not
        "llm_template": args.llm_template if args.llm.strip().lower().startswith("openai") else None,
        # local: the llama.cpp context size (--n-ctx; an endpoint's server sets its own, not recorded)
        "n_ctx": (args.n_ctx or DEFAULT_N_CTX) if args.llm.strip().lower().startswith("local") else None,
        # as typed, but an endpoint's password (a resume with a new password reads the same KG)
        "kg": [shown_kg_spec(spec) for spec in kg_specs] if strategy != "cot" else [],
        # the predicates entities are labelled with (--label-predicate, else the default ones); cot opens no KG
        **({"label_predicates": list(label_predicates or DEFAULT_LABEL_PREDICATES)} if strategy != "cot" else {}),
        "data": str(Path(args.data).resolve()),
        # the search's own hyper-parameters; its RNG seed is not the sampling seed
        **{("search_seed" if k == "seed" else k): v for k, v in dataclasses.asdict(search).items()},
        "command": shlex.join(_command_line()),
    }
    config["prompts_sha256"] = prompts.sha256  # the words sent: a template edited in place is another run
    if value_model is not None:  # the bytes the run uses, read once, and what they predict with
        config["value_model_sha256"] = value_model.sha256
        config["value_model_digest"] = value_model.digest
        _check_trained_on(args, dataset, value_model.meta, config)
    for key in unread_settings(strategy):  # the strategy's defaults, never used: not recorded as if used
        config.pop(key, None)
    embeds = strategy in ("mcts", "beam", "retrieve")  # the strategies with an embedder (retrieve ranks its facts)
    if embeds and str(search.embedder).startswith("openai:"):  # where its vectors came from (never the key)
        config["embedder_url"] = shown_url((args.embedder_url or url or "").rstrip("/")) or None
    opened: list[Any] = []

    async def factory() -> Any:
        from ..api import build_solver
        from ..kg.factory import open_kgs

        embedder = open_embedder_from_args(args, environ) if embeds else None  # RwT's critical model, retrieve's ranking
        if hasattr(embedder, "close"):  # an endpoint's client (a local model holds no connection)
            opened.append(embedder)
        llm = open_llm_from_args(args, environ)
        opened.append(llm)
        await prepare_llm(llm)
        refuse_scoring_flags_when_sampled(args, llm)
        kgs = open_kgs(kg_specs, **remote_kg_options(args, environ)) if strategy != "cot" else []  # once, shared
        opened.extend(kgs)
        shared: dict[str, Any] = {"embedder": embedder, "value_model": value_model, "prompts": prompts}  # opened or read once here
        return build_solver(strategy, llm, kgs, search, **{k: v for k, v in shared.items() if v is not None})

    try:
        summary = await run_eval(
            dataset,
            factory,
            args.out,
            concurrency=args.concurrency,
            resume=args.resume,
            limit=args.limit,
            seed=args.sample_seed,
            skip=args.skip,
            progress=not args.no_progress,
            config=config,
            retry_errors=args.retry_errors,
            max_consecutive_errors=args.max_consecutive_errors,
            environ=environ,
        )
    finally:
        for thing in reversed(opened):
            try:
                await thing.close()
            except Exception:  # noqa: BLE001 - closing must not hide the run's outcome
                pass
    print(summary.format())
    print(f"  results: {Path(args.out) / 'results.jsonl'} · summary: {Path(args.out) / 'summary.json'}")
    return 0


def _check_trained_on(args: argparse.Namespace, dataset: Dataset, meta: dict, config: dict[str, Any]) -> None:
    """A warning, and ``value_model_trained_questions`` in run.json, when questions this run
    evaluates are among those ``--value-model`` was trained on (with their gold answers): their
    scores are not held out. Not refused: a user may mean it (a check of what training learnt)."""
    from .runfiles import RESULTS, read_results
    from .training import trained_among

    evaluated = sample_questions(dataset.questions, args.limit, args.sample_seed, skip=args.skip)
    # the rows a folder already holds count too: the report's n covers them (a resume to a
    # smaller --limit keeps an earlier, larger sample's rows)
    by_id, asked = dataset.by_id(), {q.id for q in evaluated}
    for row in read_results(Path(args.out) / RESULTS):  # a torn last line left out, as the resume does
        if row.get("id") in by_id and row["id"] not in asked:
            asked.add(row["id"])
            evaluated.append(by_id[row["id"]])
    seen = trained_among(meta, dataset, evaluated, data=args.data, split=args.split,
                         answerable_only=args.answerable_only)
    if seen is None:  # not trained on this benchmark, or its meta does not say how: nothing to compare
        return
    config["value_model_trained_questions"] = seen
    if seen:
        print(f"warning: {seen} of the {len(evaluated)} questions evaluated are among those --value-model "
              f"{args.value_model} was trained on (--sample-seed {meta.get('sample_seed')} --skip {meta.get('skip')} "
              f"--limit {meta.get('limit')}): their scores are not held out (an eval with --limit N and train-value "
              "--skip N, the same seed, share none)", file=sys.stderr)


#: what stops a run's writes: a full disk or quota, a file too big, a read-only or failing disk
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def cmd_eval(args: argparse.Namespace) -> int:
    from .resume import resume_hint
    from .runfiles import RESULTS
    from .runner import ABORT_ERRORS

    out = Path(args.out)
    try:
        return run_interruptible(_eval(args, os.environ))  # the environment, read at the edge
    except KeyboardInterrupt:
        if (out / RESULTS).exists():
            print(f"\ninterrupted: {resume_hint(out, _command_line())}", file=sys.stderr)
        else:
            print("\ninterrupted before any question was answered", file=sys.stderr)
        return 130
    except ABORT_ERRORS as e:  # LLM / KG unavailable: the run stopped cleanly
        if (out / RESULTS).exists():
            argv = _command_line()
            if isinstance(e, RunStopped) and "--retry-errors" not in argv:  # errors in a row: answer them again
                argv = [*argv, "--retry-errors"]
            raise type(e)(f"{e} -- the run stopped; {resume_hint(out, argv)}") from e
        raise
    except OSError as e:  # a full disk, a run directory gone read-only: the rows written are whole
        if e.errno not in _WRITE_ERRNOS and "short write" not in str(e):
            raise
        what = f"cannot write the run's files ({e.strerror or e}{f': {e.filename}' if e.filename else ''})"
        if (out / RESULTS).exists():
            raise RunStopped(f"{what} -- the run stopped; after freeing space, {resume_hint(out, _command_line())}") from e
        raise RunStopped(what) from e


def cmd_report(args: argparse.Namespace) -> int:
    from .report import BACKTRACK_PNG, NO_MATPLOTLIB, VALUE_PNG, Prices, can_plot, plot_name, write_report

    prices = Prices.parse(args.price) if args.price is not None else None
    path = write_report(args.dirs, out=args.out, prices=prices)
    print(f"wrote {path}")
    pngs = sorted(name for name in (plot_name(path, VALUE_PNG), plot_name(path, BACKTRACK_PNG))
                  if (path.parent / name).is_file())
    if pngs:
        print("  plots: " + ", ".join(pngs))
    if not can_plot():
        print(f"  no plots drawn: {NO_MATPLOTLIB}", file=sys.stderr)
    return 0
