"""``traversals train-value``: train RwT's roll-out model on a benchmark's questions.

The questions come from the same loaders as ``traversals eval``. To keep an evaluation
honest, ``--skip N`` leaves out the first N questions of the ``--sample-seed`` shuffle —
exactly the questions ``traversals eval --limit N`` (same seed) evaluates — and training
takes the next ``--limit`` ones; a share of them (``--heldout``) is only searched, to
report how well each round generalises. The reward of a state is the F1 of its entities
against the gold answers (:func:`.metrics.f1`). With ``--synthetic N`` no benchmark is read:
the questions are made from random walks over ``--kg`` by :mod:`.synthetic`, their gold
answers the walks' ends.

After every round the model is written to ``--out`` and, beside it, the training's state
(``FILE.state.json.gz``: every example so far as question, head, path and target, and the
state of the random draws). ``--resume`` goes on from the rounds the model holds when it
was trained with the same settings (:func:`_settings_differ`; ``--rounds`` may be higher)
and over KG files of the same content (their SHA-256, ``kg_sha256``: :func:`_kg_differs`):
the rounds done are not searched again, and the model is the one an uninterrupted training
writes. The state stays after the last round, on purpose: a later run with a higher
``--rounds`` and ``--resume`` extends the model from it.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import BadInput, ScoringNotSupported
from ..interrupt import run_interruptible
from ..kg.base import Entity
from ..kg.credentials import shown_kg_spec
from ..llm.base import Usage
from ..llm.models import file_sha256
from ..options import (
    add_kg_flags, add_llm_flags, label_predicates_from_args, open_llm_from_args, prepare_llm, remote_kg_options,
)
from ..search.kgset import KGSet
from ..search.linking import bracketed_mentions
from ..search.machine import normalise_label
from ..search.rwt.train import RoundReport, TrainConfig, Trainer, TrainingQuestion, TrainState, fingerprint
from ..search.rwt.valuemodel import FEATURES, ListedWords, ValueModel, is_model_file
from .commands import add_question_flags, refuse_missing_kgs
from .datasets import DATASETS, DEFAULT_SEED, Dataset, Question, canonical_name, load_dataset, sample_questions
from .metrics import f1
from .resume import RECORDED_SINCE, kg_changes, kg_digests, kg_paths
from .synthetic import SyntheticConfig, SyntheticQuestions, listed_words, read_phrasings

SKIP, LIMIT = 100, 200  # --skip and --limit by default
STATE_SUFFIX = ".state.json.gz"  # beside the model: what --resume needs (:func:`state_path`)
STATE_FORMAT = "traversals-rwt-train-state/1"


def add_training_command(subparsers: Any) -> None:
    tv = subparsers.add_parser(
        "train-value",
        help="train RwT's roll-out model from search trees on benchmark questions (docs/rwt.md)",
        description="Grow search trees over the KG on questions with gold answers, round after round, and fit "
        "the roll-out model to them (RwT §3.3). The questions are a benchmark's, or with --synthetic N made from "
        "random walks over --kg and phrased by the LLM (no labels needed). Writes a JSON model for `--value-model` "
        "of tree, chain, mcts and beam.",
    )
    tv.add_argument("datasets", nargs="*", metavar="DATASET",
                    help="one or more of: " + ", ".join(DATASETS) + " (none with --synthetic)")
    add_question_flags(tv, data_required=False)
    tv.add_argument("--skip", type=int, default=SKIP, metavar="N",
                    help="leave out the first N shuffled questions of each dataset: what `eval --limit N` "
                         f"evaluates (default {SKIP})")
    tv.add_argument("--limit", type=int, default=LIMIT, metavar="N",
                    help=f"training questions per dataset (default {LIMIT})")
    tv.add_argument("--heldout", type=float, default=0.1, metavar="SHARE",
                    help="share of them only searched, to measure generalisation (default 0.1)")
    tv.add_argument("--rounds", type=int, default=TrainConfig.rounds, help=f"default {TrainConfig.rounds}")
    tv.add_argument("--trees", type=int, default=TrainConfig.trees, help=f"trees per question and round "
                    f"(default {TrainConfig.trees})")
    tv.add_argument("--max-hops", type=int, default=TrainConfig.max_hops, help=f"default {TrainConfig.max_hops}")
    tv.add_argument("--seed", type=int, default=0)
    add_kg_flags(tv)
    syn = tv.add_argument_group(
        "training without labelled questions",
        "--synthetic N: questions written by the LLM for random relation walks over --kg (docs/rwt.md)")
    syn.add_argument("--synthetic", type=int, default=None, metavar="N",
                     help="make N training questions from the KG instead of reading a benchmark")
    syn.add_argument("--questions-out", default=None, metavar="STEM",
                     help="where the walks' questions (STEM.questions.jsonl) and the LLM's relation phrasings "
                          "(STEM.phrasings.json, reused by a rerun) go (default: the --out path)")
    add_llm_flags(syn)
    tv.add_argument("--out", required=True, metavar="FILE", help="the model file to write (JSON); beside it "
                    f"FILE{STATE_SUFFIX}, the examples of the rounds done, for --resume: kept after the last round "
                    "on purpose, so that a higher --rounds with --resume extends the model (some 0.5 MB per "
                    "100,000 examples: about 0.5 MB for the MetaQA recipe of docs/rwt.md); delete it when no "
                    "extension is wanted")
    tv.add_argument("--resume", action="store_true",
                    help="go on from the rounds the model at --out holds, if it was trained with the same settings "
                         "and KG files of the same content (--rounds may be higher: a finished model is extended "
                         f"from its FILE{STATE_SUFFIX}); no model there: train from round 1")
    tv.set_defaults(func=cmd_train_value)


def training_questions(questions: Sequence[Question], skip: int, limit: int, seed: int) -> list[Question]:
    """The ``limit`` questions after the first ``skip`` of the seeded shuffle (the ones an
    eval with ``--limit skip`` and the same seed does not ask)."""
    return sample_questions(questions, limit, seed, skip=skip)


def trained_among(meta: object, dataset: Dataset, evaluated: Sequence[Question], *, data: str, split: str,
                  answerable_only: bool) -> int | None:
    """How many of ``evaluated`` (the questions an eval of ``dataset`` selected) a value model
    whose ``meta`` this is was trained on: the questions ``train-value`` selected from the same
    benchmark (its ``--skip`` and ``--limit`` of the ``--sample-seed`` shuffle, with gold
    answers), matched by id and wording. The training's questions are read again from the
    eval's ``data`` (a file, no KG or LLM); its linking and held-out share are not redone, so a
    question counted may have been held out or left unlinked. None when the model was not
    trained on this benchmark (another one, synthetic questions) or its meta does not say how."""
    if not isinstance(meta, dict) or not isinstance(meta.get("datasets"), list):
        return None
    try:
        if canonical_name(dataset.name) not in {canonical_name(str(n)) for n in meta["datasets"]}:
            return None
    except BadInput:  # a name this version does not know
        return None
    seed, skip, limit = meta.get("sample_seed"), meta.get("skip"), meta.get("limit")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (seed, skip, limit)):
        return None
    assert isinstance(seed, int) and isinstance(skip, int) and isinstance(limit, int)
    questions: Sequence[Question] = dataset.questions
    if (meta.get("split"), bool(meta.get("answerable_only"))) != (split, answerable_only):  # another question list
        try:
            questions = load_dataset(dataset.name, data, str(meta.get("split")), bool(meta.get("answerable_only"))).questions
        except (BadInput, OSError):
            return None
    try:
        picked = training_questions(questions, skip, limit, seed)
    except BadInput:
        return None
    recorded = meta.get("trained_selection_sha256")
    if recorded is None and canonical_name(dataset.name) == "questions":
        return None  # a file of one's own, and an older model that does not say which: no claim
    if recorded is not None and recorded != selection_sha256(picked):
        return None  # trained on another file (train.jsonl, evaluated on test.jsonl): nothing shared to count
    trained = {(q.id, q.text) for q in picked if any(g.alternatives for g in q.gold)}  # as with_gold keeps them
    return sum((q.id, q.text) in trained for q in evaluated)


def selection_sha256(picked: Sequence[Question]) -> str:
    """A digest of the questions ``train-value`` selected that have gold answers, by id and
    wording (``trained_selection_sha256`` in a model's meta): what tells :func:`trained_among`
    the eval's file is the one trained on (ids like ``questions:3`` name no file)."""
    keys = sorted(f"{q.id}\0{q.text}" for q in picked if any(g.alternatives for g in q.gold))
    return hashlib.sha256("\n".join(keys).encode("utf-8")).hexdigest()


def with_gold(questions: Sequence[Question]) -> tuple[list[Question], int]:
    """The questions that have gold answers, and how many had none: a question without answers
    rewards every state 0, so training on it teaches that every path is wrong (a user's own
    file may hold such questions, ``eval`` answers them). :class:`BadInput` when none has."""
    kept = [q for q in questions if any(g.alternatives for g in q.gold)]
    if questions and not kept:
        raise BadInput(f"none of the {len(questions)} training questions has gold answers, and train-value learns "
                       "from them: give each question its answers (docs/evaluation.md, \"Your own questions\"), "
                       "or train without labels with --synthetic N --kg SPEC")
    return kept, len(questions) - len(kept)


def gold_reward(gold: object):
    """F1 of a state's entity labels (as one answer list) against ``gold``."""

    def reward(entities: Sequence[Entity]) -> float:
        return f1(" | ".join(e.label.replace("|", " ") for e in entities), gold)

    return reward


async def link(kgs: KGSet, q: Question) -> tuple[Entity, ...]:
    """The question's entities without an LLM: each mention's exact-label matches (or the
    first candidate when none matches exactly)."""
    usage = Usage()
    out: list[Entity] = []
    for mention in q.topic_entities or bracketed_mentions(q.text):
        cands = await kgs.search(mention, usage, limit=10)
        exact = [c for c in cands if normalise_label(c.label) == normalise_label(mention)]
        for e in exact or cands[:1]:
            if e not in out:
                out.append(e)
    return tuple(out)


def _benchmark_questions(args: argparse.Namespace) -> tuple[list[Question], list[str]]:
    """The training questions of the named benchmarks and the KG specs they are asked over."""
    if not args.datasets or not args.data:
        raise BadInput("name the benchmark(s) and --data DIR, or make questions from a KG with --synthetic N --kg SPEC")
    picked: list[Question] = []
    specs: list[str] | None = None
    for name in args.datasets:
        ds = load_dataset(name, args.data, args.split, args.answerable_only)
        mine = list(args.kg or ds.kg_specs)
        if not mine:
            raise BadInput(f"{ds.name}: no KG file found next to the data; pass --kg SPEC")
        refuse_missing_kgs(ds.name, mine, given=bool(args.kg))  # as eval says it
        if specs is not None and mine != specs:
            raise BadInput(f"the datasets use different KGs ({specs} vs {mine}): train one model per KG")
        specs = mine
        mine_picked = training_questions(ds.questions, args.skip, args.limit, args.sample_seed)
        if not mine_picked and args.limit > 0:  # before any KG is opened
            raise BadInput(f"{ds.name}: --skip {args.skip} passes over all its {len(ds)} questions (the ones an eval "
                           f"with --limit {args.skip} asks), so none is left to train on: lower --skip")
        picked.extend(mine_picked)
    assert specs is not None
    return picked, specs


@dataclass
class _Progress:
    """How far a training got, for the message of an interruption (:func:`interrupted`)."""

    out: Path
    existed: bool  # --out held a model before this run
    stage: str = "start"  # then "questions" (--synthetic) and "training"
    phrasings: Path | None = None
    maker: SyntheticQuestions | None = None
    rounds: int = 0  # rounds finished (and written)
    total: int = 0


def interrupted(progress: _Progress) -> str:
    """What an interrupted training kept, in one line."""
    out = progress.out
    before = f" ({out} holds the one it held before)" if progress.existed else ""
    if progress.stage == "questions" and progress.phrasings is not None:
        try:
            kept = [k for k in json.loads(progress.phrasings.read_text()).get("relations", {}) if not k.startswith("~")]
        except (OSError, ValueError, AttributeError):
            kept = []
        if kept:
            now = progress.maker.phrased if progress.maker else 0
            return (f"interrupted while making the synthetic questions: the phrasings of {_relations(len(kept))} "
                    f"are kept in {progress.phrasings} ({now} phrased in this run), and a rerun reads them back; "
                    f"no model was written{before}")
        return f"interrupted while making the synthetic questions: no relation was phrased yet; no model was written{before}"
    if progress.stage == "training":
        at = f"interrupted in round {progress.rounds + 1} of {progress.total}"
        if progress.rounds:
            return (f"{at}: {out} holds the model of round {progress.rounds}; the same command with --resume goes "
                    f"on from round {progress.rounds + 1}")
        return f"{at}: no model was written{before}"
    return f"interrupted before training: no model was written{before}"


async def _synthetic_questions(args: argparse.Namespace, kgs: KGSet,
                               progress_of: _Progress) -> tuple[list[TrainingQuestion], dict, ListedWords]:
    """``--synthetic N``: questions composed from the LLM's phrasings of random walks
    (:mod:`.synthetic`), and the words the LLM gave for the relations (for the model's lexicon)."""
    stem = args.questions_out or args.out
    phrasings, questions_file = Path(stem + ".phrasings.json"), Path(stem + ".questions.jsonl")
    progress_of.stage, progress_of.phrasings = "questions", phrasings
    cfg = SyntheticConfig(questions=args.synthetic, max_hops=args.max_hops, seed=args.seed)
    llm = open_llm_from_args(args)
    try:
        await prepare_llm(llm)  # an endpoint's log-probabilities are probed, as ask and eval do

        def progress(i: int, n: int) -> None:
            if sys.stderr.isatty():
                print(f"\r  {i}/{n} walks", end="", file=sys.stderr, flush=True)

        maker = progress_of.maker = SyntheticQuestions(kgs, llm, cfg)
        try:
            made = await maker.run(phrasings, questions_file, progress)
        except ScoringNotSupported as e:
            reason = getattr(llm, "scoring_reason", "") or e
            raise BadInput(f"--synthetic checks each phrasing by scoring options, which {args.llm} cannot do "
                           f"({reason}): use the local model, or an endpoint with log-probabilities and "
                           "--llm-template chatml|raw") from None
        if not maker.walked:  # nothing phrased: no phrasings file either
            raise BadInput(f"no synthetic question could be made: no walk of 1-{cfg.max_hops} relations from the "
                           f"{maker.drawn} entities drawn reached 1-{cfg.max_answers} other entities (does the KG "
                           "have relations besides labels?)")
        listed = listed_words(read_phrasings(phrasings, llm.name))
    finally:
        await llm.close()
    if not made:
        raise BadInput(f"no synthetic question could be made: the LLM gave no usable phrasing for the relations of "
                       f"the {maker.walked} walks (see {phrasings})")
    hops = Counter(len(q.path) for q in made)
    print(("\r" if sys.stderr.isatty() else "") + f"{len(made)} questions on random walks "
          f"({', '.join(f'{n} of {h} hops' for h, n in sorted(hops.items()))}), phrased by {args.llm}: "
          f"{questions_file} (phrasings: {phrasings}; {_relations(maker.reused)} read from it, "
          f"{_relations(maker.phrased)} phrased now)", file=sys.stderr)
    if len(made) < cfg.questions:
        print(few_questions(len(made), cfg, maker.drawn, maker.walked), file=sys.stderr)
    if maker.written_for and maker.reused:
        print(f"note: {phrasings} was written for the KG {', '.join(maker.written_for)}: the phrasings of its "
              f"relations with the keys walked here were reused; move it away to have them phrased over this KG",
              file=sys.stderr)
    training = [TrainingQuestion(f"synthetic:{q.index}", q.question, (q.entity(),),
                                 gold_reward([[a] for a in q.answers]), gold=q.answers) for q in made]
    meta = {"synthetic": {"asked": args.synthetic, "questions": len(made),
                          "hops": {str(h): n for h, n in sorted(hops.items())}, "llm": args.llm,
                          "questions_file": str(questions_file), "phrasings": str(phrasings),
                          "max_hops": cfg.max_hops, "seed": cfg.seed, "paraphrases": cfg.paraphrases,
                          "passes": cfg.passes, "calibrated_check": cfg.calibrated_check}}
    return training, meta, listed


def few_questions(made: int, cfg: SyntheticConfig, drawn: int, walked: int) -> str:
    """The note for a run that made fewer questions than ``--synthetic N`` asked for, in one line."""
    why = (f"{walked - made} walk{'' if walked - made == 1 else 's'} had no usable phrasing"
           if walked > made else
           f"the {drawn} entities drawn, walked {cfg.passes} times, gave no other walk of 1-{cfg.max_hops} relations "
           f"ending on 1-{cfg.max_answers} entities (a small KG, or relations whose ends are hubs)")
    return (f"note: only {made} of the {cfg.questions} questions asked for could be made: {why}; a model trained on "
            "few questions knows few relation paths — read the questions file before trusting it")


def _relations(n: int) -> str:
    return f"{n} relation{'' if n == 1 else 's'}"


def _check_flags(args: argparse.Namespace) -> None:
    """One line for a flag that cannot work, before any KG is opened or LLM called."""
    if not 0.0 <= args.heldout < 1.0:  # also refuses NaN
        raise BadInput(f"--heldout is a share in [0, 1), got {args.heldout}")
    for flag, n in (("--rounds", args.rounds), ("--trees", args.trees), ("--max-hops", args.max_hops)):
        if n < 1:
            raise BadInput(f"{flag} must be at least 1, got {n}")
    if args.synthetic is None:
        given = [f for f, v in (("--llm-url", args.llm_url), ("--questions-out", args.questions_out)) if v]
        if given or args.llm != "local":
            raise BadInput(f"{', '.join(given or ['--llm'])} only matter(s) with --synthetic: benchmark "
                           "training asks no LLM")
    else:  # flags that read a benchmark's questions: ignored, they would seem to do what they do not
        given = [f for f, v, default in (
            ("--data", args.data, None), ("--split", args.split, "dev"), ("--answerable-only", args.answerable_only, False),
            ("--sample-seed", args.sample_seed, DEFAULT_SEED), ("--skip", args.skip, SKIP), ("--limit", args.limit, LIMIT),
        ) if v != default]
        if given:
            raise BadInput(f"{', '.join(given)} only matter(s) for a benchmark's questions: --synthetic N makes N "
                           "questions from the KG")
    if len(set(args.datasets)) != len(args.datasets):
        raise BadInput("a dataset is named twice: its questions would be trained and held out twice")
    out = Path(args.out)
    if out.is_dir():
        raise BadInput(f"--out {out} is a directory; name the model file")
    if args.out.endswith(("/", os.sep)):
        raise BadInput(f"--out {args.out} names a folder; name the model file (e.g. {args.out.rstrip('/' + os.sep)}/value.json)")
    if out.exists() and not is_model_file(out):  # `--out kb.txt` would write the model over the KG
        raise BadInput(f"--out {out} exists and is not a value model: name a new file (or remove that one)")
    _can_write("--out", out)  # a model is written after every round: find out now that it can be
    if args.synthetic is not None and args.questions_out:  # the phrasings are written as they come
        if args.questions_out.endswith(("/", os.sep)):
            raise BadInput(f"--questions-out names a folder; name a file stem (e.g. "
                           f"{args.questions_out.rstrip('/' + os.sep)}/mine, for mine.phrasings.json)")
        _can_write("--questions-out", Path(args.questions_out))


def _can_write(flag: str, path: Path) -> None:
    """:class:`BadInput` unless a file can be written where ``path`` is. Folders made to find
    out are removed again (the files' writers make them): a run refused later leaves none."""
    missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.with_name(f".{path.name}.probe")
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise BadInput(f"{flag} {path}: cannot write there ({e.strerror or type(e).__name__})") from None
    finally:
        for d in missing:  # innermost first
            try:
                d.rmdir()
            except OSError:
                pass


def state_path(out: str | Path) -> Path:
    """Where the training state of the model file ``out`` goes (``FILE.state.json.gz``)."""
    return Path(str(out) + STATE_SUFFIX)


def _write_state(path: Path, state: TrainState, settings: dict, model_sha256: str) -> None:
    """The training state after a round, through a temporary file (whole or as it was), with
    the settings of the training and the SHA-256 of the model file it goes with."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
            json.dump({"format": STATE_FORMAT, "model_sha256": model_sha256, "settings": settings, **state.to_json()},
                      f, ensure_ascii=False, separators=(",", ":"))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


#: the settings a model's ``meta`` records, as the flags that set them (what --resume compares)
_SETTING_FLAGS = {
    "datasets": "the datasets", "split": "--split", "answerable_only": "--answerable-only",
    "sample_seed": "--sample-seed", "skip": "--skip", "limit": "--limit", "kg": "--kg", "heldout": "--heldout",
    "label_predicates": "--label-predicate",
    "config.trees": "--trees", "config.max_hops": "--max-hops", "config.seed": "--seed",
    "synthetic.asked": "--synthetic", "synthetic.llm": "--llm", "synthetic.max_hops": "--max-hops",
    "synthetic.seed": "--seed", "synthetic.questions": "the number of synthetic questions made",
    "synthetic.hops": "the hops of the synthetic questions", "train_questions": "the number of training questions",
    "heldout_questions": "the number of held-out questions",
    "questions_sha256": "the training questions (their wording, linked entities or gold answers)",
}
#: recorded, not compared: --rounds may grow, and where the synthetic questions were written does not matter
_UNCHECKED = frozenset({"config.rounds", "synthetic.questions_file", "synthetic.phrasings",
                        # a digest of the questions selected: questions_sha256 compares them (older models lack it)
                        "trained_selection_sha256"})


def _shown(value: object) -> str:
    if isinstance(value, list):
        return " ".join(map(str, value)) or "none"
    if isinstance(value, str) and len(value) == 64:  # a SHA-256
        return value[:12]
    return "nothing" if value is None else str(value)


def _settings_differ(old: dict, new: dict) -> str | None:
    """The first setting of ``new`` (this run's, or those known so far) that ``old`` (a
    model's ``meta``) records otherwise, in words; None when they agree. The KGs are
    :func:`_kg_differs`'s. A setting a model of an older version did not record
    (:data:`~.resume.RECORDED_SINCE`: the label predicates) is compared with what it used."""
    old = {**{k: v for k, v in RECORDED_SINCE.items() if k in new}, **old}
    if ("synthetic" in old) != ("synthetic" in new):
        def source(m: dict) -> str:
            return "synthetic questions (--synthetic)" if "synthetic" in m else _shown(m.get("datasets"))
        return f"the model was trained on {source(old)}, this run trains on {source(new)}"
    for key, value in new.items():
        if key in ("kg", "kg_sha256", "kg_paths"):  # _kg_differs's
            continue
        if key in ("config", "synthetic") and isinstance(value, dict):
            recorded = old.get(key)
            was: dict = recorded if isinstance(recorded, dict) else {}
            pairs = [(f"{key}.{k}", was.get(k), v) for k, v in value.items()]
        else:
            pairs = [(key, old.get(key), value)]
        for name, then, now in pairs:
            if name not in _UNCHECKED and then != now:
                flag = _SETTING_FLAGS.get(name, f"the training's {name.split('.')[-1]} (fixed by traversals)")
                return f"{flag}: the model was trained with {_shown(then)}, this run has {_shown(now)}"
    return None


def _kg_differs(old: dict, new: dict) -> str | None:
    """How the KGs of ``new`` differ from those ``old`` (a model's ``meta``) was trained on,
    in words, or None: the rule of an evaluation's resume (:func:`.resume.kg_changes`) -- the
    same file by any path is the same KG unless its SHA-256 (``kg_sha256``) changed, and a
    file found at another path with the same content is the same KG if it keeps its KG name
    (a file renamed is refused as such: the training questions' entities carry the name,
    :func:`.resume.rename_advice`); the model's side is
    where its meta says each file was (``kg_paths``, absolute; a model without them resolves
    its ``kg`` from the current directory). Other triples can
    leave the questions' linking alone (``questions_sha256``), and the examples of two KGs
    would be mixed in one model. A model trained before the hashes were recorded compares
    paths only."""
    differ, why, _moved = kg_changes(old, new)
    if not differ:
        return None
    return (f"--kg: the model was trained with {_shown(old.get('kg'))}, this run has {_shown(new.get('kg'))}"
            + "".join(f" ({w})" for w in why))


def _refuse_other(out: Path, old: dict, new: dict) -> None:
    changed = _kg_differs(old, new)
    if changed is not None:  # before the questions: other triples can also link them otherwise
        raise BadInput(f"cannot resume {out}: {changed}; train again without --resume (or give the KG file it was "
                       "trained on)")
    why = _settings_differ(old, new)
    if why is not None:
        raise BadInput(f"cannot resume {out}: {why}; give the settings it was trained with (only --rounds may "
                       "differ), or train again without --resume")


def _model_to_resume(out: Path, known: dict) -> ValueModel | None:
    """``--resume``: the model at ``out`` to go on from, the settings ``known`` before any
    work checked against its own; None (a note said so) when ``out`` holds no model yet."""
    if not out.exists() or out.stat().st_size == 0:
        print(f"note: --resume: {out} holds no model yet: training from round 1", file=sys.stderr)
        return None
    try:
        model = ValueModel.load(out)
    except BadInput as e:  # its message ends with what --value-model takes: not this command's flag
        raise BadInput(f"cannot resume {out}: {str(e).split(': --value-model takes')[0]}; train again without "
                       "--resume (it writes the model anew)") from None
    if "questions_sha256" not in model.meta or not isinstance(model.meta.get("rounds"), list):
        raise BadInput(f"cannot resume {out}: it does not record the settings --resume checks (written by an older "
                       "traversals, or not by train-value): train again without --resume")
    if model.version != FEATURES:
        raise BadInput(f"cannot resume {out}: it was trained on feature set {model.version}, this traversals trains "
                       f"on {FEATURES}: train again without --resume")
    _refuse_other(out, model.meta, known)
    files = [spec for spec, digest in zip(known.get("kg", []), known.get("kg_sha256", [])) if digest is not None]
    if files and not isinstance(model.meta.get("kg_sha256"), list):
        print(f"note: --resume: {out} records no SHA-256 of its KG files (trained by an older traversals), so "
              f"whether {', '.join(map(str, files))} still hold{'s' if len(files) == 1 else ''} the triples it was "
              "trained on is not checked", file=sys.stderr)
    return model


def _state_to_resume(out: Path, model: ValueModel, settings: dict) -> TrainState | None:
    """The training state beside ``model`` (read from ``out``), once this run's ``settings``
    are found the same as the model's and the state's: the state of the model's last round
    or, when an interruption came between writing the model and its state, of the round
    before (that round is then trained again, to the same model); None when that round is
    the first (no state was ever written: training starts again from round 1)."""
    _refuse_other(out, model.meta, settings)
    path = state_path(out)
    again = "train again without --resume"
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        if len(model.meta["rounds"]) == 1:
            print(f"note: {path} is missing: the run that wrote the model of round 1 was interrupted before its state "
                  "was written, so round 1 is trained again", file=sys.stderr)
            return None
        raise BadInput(f"cannot resume {out}: {path}, the examples of the rounds it holds (written beside the model "
                       f"after every round), is missing: {again}") from None
    except (OSError, EOFError, ValueError) as e:
        raise BadInput(f"cannot resume {out}: {path} cannot be read ({e}): {again}") from None
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT or not isinstance(data.get("settings"), dict):
        raise BadInput(f"cannot resume {out}: {path} is not a training state ({STATE_FORMAT!r} expected): {again}")
    state = TrainState.from_json(data, str(path))
    done = len(model.meta["rounds"])
    linked = data.get("model_sha256") == model.sha256 and state.rounds == done
    if not linked and state.rounds != done - 1:  # one behind: interrupted between the two writes
        raise BadInput(f"cannot resume {out}: {path} is not the state of the model it holds (the state of round "
                       f"{state.rounds} of another training, the model of round {done}): {again}")
    _refuse_other(out, data["settings"], settings)
    if state.rounds < done:
        print(f"note: {path} holds round {state.rounds}: the run that wrote the model of round {done} was "
              f"interrupted before its state was written, so round {done} is trained again", file=sys.stderr)
    return state


async def _train(args: argparse.Namespace, progress_of: _Progress) -> int:
    from ..kg.factory import label_predicates_for, open_kgs
    from ..kg.iris import DEFAULT_LABEL_PREDICATES

    _check_flags(args)
    out = Path(args.out)
    progress_of.existed = is_model_file(args.out) and out.stat().st_size > 0
    if args.synthetic is not None:
        if args.datasets:
            raise BadInput("--synthetic makes its own questions: name no benchmark")
        if not args.kg:
            raise BadInput("--synthetic needs --kg SPEC: the KG to walk")
        if args.synthetic < 1:
            raise BadInput("--synthetic N needs N >= 1")
        picked: list[Question] = []
        specs = list(args.kg)
        source: dict[str, Any] = {"synthetic": {"asked": args.synthetic, "llm": args.llm, "max_hops": args.max_hops,
                                                "seed": args.seed}}  # the rest once the questions are made
    else:
        picked, specs = _benchmark_questions(args)
        source = {"datasets": list(args.datasets), "split": args.split, "answerable_only": args.answerable_only,
                  "sample_seed": args.sample_seed, "skip": args.skip, "limit": args.limit,
                  "trained_selection_sha256": selection_sha256(picked)}
    cfg = TrainConfig(rounds=args.rounds, trees=args.trees, max_hops=args.max_hops, seed=args.seed)
    digests = kg_digests(specs)  # each KG file's content: --resume refuses other triples (_kg_differs)
    places = kg_paths(specs)  # and where it is: a --resume from another directory compares that file
    # what the KGs' entities are labelled with (refused for Wikidata alone before anything is opened)
    labels = list(label_predicates_for(specs, label_predicates_from_args(args)) or DEFAULT_LABEL_PREDICATES)
    shown = [shown_kg_spec(spec) for spec in specs]  # recorded as typed, but an endpoint's password
    known = {**source, "kg": shown, "kg_sha256": digests, "kg_paths": places, "label_predicates": labels,
             "heldout": args.heldout, "config": dict(cfg.__dict__)}
    previous = _model_to_resume(out, known) if args.resume else None
    if previous is not None:
        held = len(previous.meta["rounds"])
        if held >= cfg.rounds:
            more = "" if held == cfg.rounds else f", more than the {cfg.rounds} asked"
            print(f"{out} already holds the model of {held} round{'' if held == 1 else 's'}{more}: nothing to train "
                  "(a higher --rounds trains more)")
            return 0
    elif progress_of.existed and not args.resume:
        held = _rounds_held(out)
        if held and held < cfg.rounds:
            print(f"note: {out} holds the model of round {held}: it is trained again from round 1 (--resume goes on "
                  "from the rounds it holds, if they were trained with the same settings)", file=sys.stderr)
    kgs_list = open_kgs(specs, **remote_kg_options(args))
    try:
        kgs = KGSet(kgs_list)
        listed: ListedWords | None = None  # the LLM's words for the relations (synthetic questions only)
        if args.synthetic is not None:
            linked, source, listed = await _synthetic_questions(args, kgs, progress_of)
            unlinked = ""
        else:
            linked = []
            picked, no_gold = with_gold(picked)
            named = sum(bool(q.topic_entities or bracketed_mentions(q.text)) for q in picked)
            if picked and not named:
                raise BadInput(f"none of the {len(picked)} training questions names an entity to link: train-value "
                               "links a question's [bracketed] mentions or its dataset's topic entities, without an "
                               f"LLM, and {', '.join(args.datasets)} gives neither")
            for q in picked:
                entities = await link(kgs, q)
                if entities:
                    linked.append(TrainingQuestion(q.id, q.text, entities, gold_reward(q.gold), gold=q.gold_json()))
            if not picked:
                raise BadInput(f"no training question was selected (--skip {args.skip}, --limit {args.limit})")
            if not linked:
                raise BadInput(f"none of the {len(picked)} training questions could be linked to {', '.join(shown)}: "
                               "no entity's label matches their mentions")
            left = f"; {no_gold} without gold answers, not trained on" if no_gold else ""
            unlinked = f" ({len(picked) - len(linked)} not linked{left}) from {', '.join(args.datasets)}"
        random.Random(args.seed).shuffle(linked)
        # at least one question is trained on: 0.75 of 2 had held out both and written an empty model
        n_held = min(int(round(len(linked) * args.heldout)), len(linked) - 1)
        heldout, train = linked[:n_held], linked[n_held:]
        print(f"{len(train)} training and {len(heldout)} held-out questions{unlinked}", file=sys.stderr)
        settings = {**source, "kg": shown, "kg_sha256": digests, "kg_paths": places, "label_predicates": labels,
                    "train_questions": len(train),
                    "heldout_questions": len(heldout), "heldout": args.heldout, "questions_sha256": fingerprint([*train, *heldout]),
                    "config": dict(cfg.__dict__)}
        resume = None if previous is None else _state_to_resume(out, previous, settings)
        if resume is not None:
            done_rounds = "round 1" if resume.rounds == 1 else f"rounds 1-{resume.rounds}"
            print(f"resuming {out} from round {resume.rounds + 1} of {cfg.rounds} (the examples of {done_rounds} "
                  f"read back from {state_path(out)})", file=sys.stderr)
            progress_of.rounds = resume.rounds
        progress_of.stage, progress_of.total = "training", cfg.rounds
        started = time.perf_counter()
        trainer = Trainer(kgs, cfg, synonyms=listed)

        def progress(i: int, n: int) -> None:
            if sys.stderr.isatty():
                print(f"\r  {i}/{n} questions", end="", file=sys.stderr, flush=True)

        def done(report: RoundReport, model: ValueModel) -> None:
            model.meta.update(settings)
            try:
                model.save(out)  # after every round: an interrupted training keeps its last round
            except OSError as e:
                raise BadInput(f"cannot write the model of round {report.round} to {out} "
                               f"({e.strerror or type(e).__name__})") from None
            assert trainer.state is not None
            try:  # after the model, with the SHA-256 of its file: a state is only ever read with its model
                _write_state(state_path(out), trainer.state, settings, file_sha256(out))
            except OSError as e:
                raise BadInput(f"cannot write the training state of round {report.round} to {state_path(out)} "
                               f"({e.strerror or type(e).__name__})") from None
            progress_of.rounds = report.round
            print(("\r" if sys.stderr.isatty() else "") + report.format(), file=sys.stderr)
            if report.round == 1 and report.reached == 0:
                print(f"note: no tree reached a state whose entities match the gold answers within {cfg.max_hops} "
                      "hops, so the model learns only what is wrong: check that the answers are the KG's labels "
                      "(or raise --max-hops)", file=sys.stderr)

        model = await trainer.train(train, heldout, on_round=done, on_question=progress, resume=resume)
        print(f"wrote {out} ({time.perf_counter() - started:.0f} s; the model's digest {model.digest}, "
              f"the same for the same training repeated); use it with --value-model {out} "
              "(strategies tree, chain, beam, mcts)")
        return 0
    finally:
        for kg in kgs_list:
            await kg.close()


def _rounds_held(out: Path) -> int:
    """How many rounds the model at ``out`` holds (0: none, or not a readable model)."""
    try:
        rounds = ValueModel.load(out).meta.get("rounds")
    except BadInput:
        return 0
    return len(rounds) if isinstance(rounds, list) else 0


def cmd_train_value(args: argparse.Namespace) -> int:
    progress = _Progress(Path(args.out), existed=False)
    try:
        return run_interruptible(_train(args, progress))
    except KeyboardInterrupt:
        print("\n" + interrupted(progress), file=sys.stderr)
        return 130
