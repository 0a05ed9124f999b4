"""The library's front door: pick a strategy, give it an LLM and KGs, ask questions.

>>> from traversals import api
>>> solver = api.build_solver("tree", llm, [kg])          # doctest: +SKIP
>>> answer = await solver.ask("Who is Bob Dylan's maternal grandmother?")  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from .embed import Embedder, close_embedder, open_embedder
from .embed.base import checked_embedder
from .errors import BadInput, TraversalsWarning
from .kg.base import DEFAULT_MAX_EDGES, DEFAULT_MAX_RELATIONS, KnowledgeGraph
from .llm.base import LLM
from .llm.checked import checked
from .search.cot import ChainOfThought
from .search.events import EventSink
from .search.kgset import KGSet
from .search.machine import DEFAULT_SCREEN_LIMIT
from .search.result import Answer, Solver
from .search.retrieve import DEFAULT_HOPS as RETRIEVE_HOPS, DEFAULT_TOP_FACTS, MAX_HOPS as RETRIEVE_MAX_HOPS, RetrieveThenRead
from .search.templates import PromptSet, load_prompts
from .search.tree import ANSWER_CHOICES, TreeConfig, TreeOfTraversals
from .search.value import check_examples_place

if TYPE_CHECKING:
    from .search.rwt.valuemodel import ValueModel

STRATEGIES = ("tree", "chain", "cot", "mcts", "beam", "retrieve")
#: the hops mcts/beam walk at most when ``SearchConfig.max_hops`` is None (the paper's T)
RWT_HOPS = 3


@dataclass
class SearchConfig:
    """Hyper-parameters; defaults are the paper's (Appendix B.2)."""

    k: int | None = None  # None: 3 for "tree", 1 for "chain"
    max_depth: int = 7
    max_expansions: int = 20
    threshold: float = 0.8
    diverse_temperature: float = 1.0
    decoding: str = "auto"  # "auto" (constrained when the LLM can score), "constrained", "sampled"
    calibrate: float = 0.0  # constrained: weight of the neutral prompt in relation choices (0: off; opt-in)
    #: constrained: rank the KG's answer candidates by what the query adds to their probability (opt-in)
    calibrate_answers: bool = False
    #: constrained: relation choices asked with the options in both orders, geometric mean (opt-in)
    both_orders: bool = False
    #: constrained: an answer is chosen among the groups of reached entities (one per relation
    #: path) by asking which one answers the query, in both orders (opt-in)
    compare_answers: bool = False
    #: LLM value: the answer-rating prompt (F.5) shows worked examples of right answers and of
    #: answers one relation short, one beyond or on the wrong relation (opt-in)
    value_examples: bool = False
    #: constrained, LLM value: an answer's rating first generates its reasoning (F.5), then reads
    #: the score's expectation after it (opt-in)
    value_reasoning: bool = False
    seed: int = 0
    evaluate_intermediate: bool | None = None  # None: only when k > 1
    max_relations: int = DEFAULT_MAX_RELATIONS
    max_edges: int = DEFAULT_MAX_EDGES
    #: entities an expansion reached that are checked at once for dead ends (0: none).
    #: None: 50 when every KG is embedded (``kg.embedded``), 0 with a remote one
    screen_dead_ends: int | None = None
    #: tree/chain frontier order: logit(value) + w·log(prior / best prior) (0: value alone,
    #: the paper's). None: 1 with a value model, 0 with the LLM value
    prior_weight: float | None = None
    #: tree/chain: the answer returned when none crossed τ: "value" (the best-valued) or
    #: "support" (values pooled per answer)
    answer_choice: str = "value"
    #: tree/chain: selections also offer all the entities the latest expansion reached as one option
    group_selection: bool = False
    #: tree/chain, constrained decoding: distinct answers an ANSWER proposes, each rated by the
    #: value. None: k and at least 3 with a value model, 1 with the LLM value
    answers: int | None = None
    simulations: int = 16  # mcts: simulations per question
    #: mcts: PUCT's exploration weight, the prior's share against the mean value (RwTConfig.c_puct's default)
    c_puct: float = 1.25
    #: mcts/beam: the most hops a path walks (T); retrieve: the hops of facts gathered around the
    #: question's entities (1 to 3). None: 3 for mcts/beam, 1 for retrieve (KAPING's one hop)
    max_hops: int | None = None
    #: beam: states kept per hop (B1) and relations tried from each (B2); the paper's Table 6
    #: sweeps B1 = 1..5 with B2 = 5
    beam_width: int = 3
    beam_branch: int = 3
    #: mcts/beam: the critical model's sentence embeddings; retrieve: those ranking its facts
    #: (:func:`~traversals.embed.open_embedder`: "sbert", the paper's Sentence-BERT family, all-MiniLM-L6-v2; "sbert:DIR"; "lexical";
    #: "openai:MODEL", an embeddings endpoint, whose URL and key are not part of the config:
    #: pass ``build_solver(..., embedder=open_embedder(spec, url=..., api_key=...))``)
    embedder: str = "sbert"
    #: retrieve: the facts most similar to the question that its prompt lists (KAPING's top N)
    top_facts: int = DEFAULT_TOP_FACTS
    value_model: str | None = None  # a model trained by `traversals train-value` (None: the LLM rates states)
    #: seconds one call to a KG may take before the search fails with ``KGTimeout`` naming
    #: it (None: no bound of the search's own; remote backends have their request timeout)
    kg_timeout: float | None = None
    #: the prompts' templates (:func:`~traversals.search.templates.load_prompts`): "default"
    #: (instructions first, for prefix reuse), "paper" (Appendix F's order and words) or a
    #: directory of NAME.txt files replacing default prompts
    prompts: str = "default"


def build_solver(
    strategy: str,
    llm: LLM,
    kgs: Sequence[KnowledgeGraph],
    config: SearchConfig | None = None,
    *,
    on_event: EventSink | None = None,
    embedder: Embedder | None = None,
    value_model: ValueModel | None = None,
    prompts: PromptSet | None = None,
) -> Solver:
    """The solver for ``strategy``. ``on_event`` receives the search's events as they
    happen (:mod:`traversals.search.events`; the KG strategies only). ``embedder`` serves
    RwT's critical model (mcts/beam) and ranks retrieve's facts; without one,
    ``config.embedder`` is opened (pass one to share a loaded model between solvers, as the
    service does). ``value_model`` is
    ``config.value_model`` already loaded (:func:`load_value_model`), shared the same way;
    without it the file is read here. ``prompts`` is ``config.prompts`` already loaded
    (:func:`~traversals.search.templates.load_prompts`), shared the same way."""
    cfg = config or SearchConfig()
    check_config_types(cfg)
    llm = checked(llm)  # a user's LLM that returns the wrong shape fails with a message naming it
    if on_event is not None and inspect.iscoroutinefunction(on_event):
        raise BadInput("on_event is called synchronously, so a coroutine function would never run: pass a plain "
                       "function (one that puts events on an asyncio.Queue, for instance)")
    prompt_set = prompts or load_prompts(cfg.prompts)
    if strategy == "cot":  # no KG states: a value model (e.g. a server's default) has nothing to rate
        return ChainOfThought(llm, prompts=prompt_set)
    if strategy not in STRATEGIES:
        raise BadInput(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if cfg.decoding not in ("auto", "constrained", "sampled"):
        raise BadInput(f"unknown decoding {cfg.decoding!r}; choose auto, constrained or sampled")
    if cfg.decoding == "constrained" and not getattr(llm, "can_score", False):
        why = getattr(llm, "scoring_reason", None)
        raise BadInput(f"the LLM {getattr(llm, 'name', llm)!r} cannot score options{f' ({why})' if why else ''}; "
                       "use --decoding sampled or auto (SearchConfig(decoding='sampled') or 'auto' in Python)")
    if cfg.decoding == "auto" and not getattr(llm, "can_score", False):
        from .llm.openai import NOT_PROBED

        if getattr(llm, "scoring_reason", None) == NOT_PROBED:  # a template asks for scoring; nothing checked it
            warnings.warn(f"the LLM {getattr(llm, 'name', llm)!r} has a completion_template but cannot score options "
                          f"yet ({NOT_PROBED}); the search samples", TraversalsWarning, stacklevel=2)
    if hasattr(kgs, "get_edges"):  # one KG given where a list is expected
        raise BadInput("kgs is a list of knowledge graphs: pass [kg]")
    if not kgs:
        raise BadInput("at least one knowledge graph is needed")
    if not 0.0 <= cfg.threshold < math.inf:  # over 1: no answer stops the search early (allowed)
        raise BadInput(f"--threshold is a value of 0 or more (in [0, 1] to stop at an answer), got {cfg.threshold}")
    for flag, n in (("--max-depth", cfg.max_depth), ("--max-expansions", cfg.max_expansions),
                    ("--simulations", cfg.simulations), ("--max-hops", cfg.max_hops), ("--top-facts", cfg.top_facts),
                    ("--beam-width", cfg.beam_width), ("--beam-branch", cfg.beam_branch)):
        if n is not None and n < 1:
            raise BadInput(f"{flag} must be at least 1, got {n}")
    if not 0.0 <= cfg.c_puct < math.inf:  # 0: the values alone choose; NaN would choose at random
        raise BadInput(f"--c-puct is a weight of 0 or more, got {cfg.c_puct}")
    if cfg.kg_timeout is not None and not cfg.kg_timeout > 0:
        raise BadInput(f"kg_timeout is a number of seconds over 0 (or None), got {cfg.kg_timeout}")
    kgset = KGSet(kgs, max_relations=cfg.max_relations, max_edges=cfg.max_edges, timeout=cfg.kg_timeout)
    if strategy == "retrieve":  # one generation over ranked facts: no state to rate, no value model
        hops = RETRIEVE_HOPS if cfg.max_hops is None else cfg.max_hops
        if hops > RETRIEVE_MAX_HOPS:
            raise BadInput(f"--max-hops with retrieve is 1 to {RETRIEVE_MAX_HOPS} (the facts that many hops around "
                           f"the question's entities), got {hops}")
        return RetrieveThenRead(llm, kgset, _embedder(embedder, cfg), hops=hops,
                                top_facts=cfg.top_facts, on_event=on_event, prompts=prompt_set)
    model = value_model or load_value_model(cfg)
    if model is not None:
        check_value_model(model, kgs)
    if strategy in ("mcts", "beam"):
        from .search.rwt import (
            CriticalModel, HopBeamSearch, MonteCarloTreeSearch, RwTConfig, TrainedRollout,
        )

        cls = MonteCarloTreeSearch if strategy == "mcts" else HopBeamSearch
        rollout = TrainedRollout(model) if model else None
        critical = CriticalModel(_embedder(embedder, cfg))
        hops = RWT_HOPS if cfg.max_hops is None else cfg.max_hops
        rwt_cfg = RwTConfig(constrained=cfg.decoding != "sampled", simulations=cfg.simulations, max_hops=hops,
                            beam_width=cfg.beam_width, beam_branch=cfg.beam_branch, c_puct=cfg.c_puct)
        return cls(llm, kgset, rwt_cfg, rollout=rollout, critical=critical, on_event=on_event, prompts=prompt_set)
    k = cfg.k if cfg.k is not None else (1 if strategy == "chain" else 3)
    if k < 1:
        raise BadInput("--k must be at least 1")
    if cfg.prior_weight is not None and not 0 <= cfg.prior_weight < math.inf:
        raise BadInput(f"--prior-weight must be a finite number, 0 or more, got {cfg.prior_weight}")
    if not 0 <= cfg.calibrate < math.inf:  # nan too
        raise BadInput(f"--calibrate-weight must be a finite number, 0 or more, got {cfg.calibrate}")
    if cfg.answer_choice not in ANSWER_CHOICES:
        raise BadInput(f"unknown answer choice {cfg.answer_choice!r}; choose one of {', '.join(ANSWER_CHOICES)}")
    if cfg.answers is not None and cfg.answers < 1:
        raise BadInput(f"--answers must be at least 1, got {cfg.answers}")
    if strategy == "chain" and k != 1:
        raise BadInput(f"'chain' is Chain-of-Traversals, the k = 1 search; use strategy 'tree' for k = {k}")
    if cfg.value_examples and model is None:  # the LLM value's prompt: before a question, not at its first rating
        check_examples_place(prompt_set)
    tree_cfg = TreeConfig(
        k=k,
        max_depth=cfg.max_depth,
        max_expansions=cfg.max_expansions,
        threshold=cfg.threshold,
        diverse_temperature=cfg.diverse_temperature,
        constrained=cfg.decoding != "sampled",
        seed=cfg.seed,
        evaluate_intermediate=cfg.evaluate_intermediate,
        calibrate=cfg.calibrate,
        calibrate_answers=cfg.calibrate_answers,
        both_orders=cfg.both_orders,
        compare_answers=cfg.compare_answers,
        value_examples=cfg.value_examples,
        value_reasoning=cfg.value_reasoning,
        screen_dead_ends=screen_limit(cfg.screen_dead_ends, kgs),
        prior_weight=cfg.prior_weight,
        answer_choice=cfg.answer_choice,
        group_selection=cfg.group_selection,
        answers=cfg.answers,
    )
    value = None
    if model is not None:
        from .search.trained_value import TrainedValue

        value = TrainedValue(model)
    return TreeOfTraversals(llm, kgset, tree_cfg, name=strategy, on_event=on_event, value=value, prompts=prompt_set)


#: SearchConfig's fields by kind: whole numbers (with the least each may be, where no later
#: check names its flag), numbers, flags
_WHOLE = {"max_depth": None, "max_expansions": None, "seed": None, "max_relations": 1, "max_edges": 1,
          "simulations": None, "beam_width": None, "beam_branch": None, "top_facts": None}
_WHOLE_OR_NONE: dict[str, int | None] = {"k": None, "screen_dead_ends": None, "answers": None, "max_hops": None}
_NUMBERS = ("threshold", "diverse_temperature", "calibrate", "c_puct")
_NUMBERS_OR_NONE = ("prior_weight", "kg_timeout")
_FLAGS = ("calibrate_answers", "both_orders", "compare_answers", "value_examples", "value_reasoning", "group_selection")
_TEXTS = ("decoding", "answer_choice", "embedder", "prompts")


def check_config_types(cfg: SearchConfig) -> None:
    """:class:`BadInput` for a :class:`SearchConfig` field of the wrong kind: a whole number
    given as ``"5"``, ``2.5`` or NaN, a number as None, a flag as ``"yes"`` (a NaN
    ``max_expansions`` had made no LLM call and answered nothing; ``k=2.5`` failed with a
    TypeError after calls were spent), and a size under its least (``max_edges=0`` walked
    nothing). The ranges of the other settings are checked where they are read."""
    def whole(v: object) -> bool:  # numpy's integers too
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)

    def number(v: object) -> bool:  # numpy's too; NaN and infinities: told by each setting's range check
        return isinstance(v, numbers.Real) and not isinstance(v, bool)

    for name, least in {**_WHOLE, **_WHOLE_OR_NONE}.items():
        v = getattr(cfg, name)
        if v is None and name in _WHOLE_OR_NONE:
            continue
        if not whole(v):
            raise BadInput(f"SearchConfig.{name} is a whole number{' or None' if name in _WHOLE_OR_NONE else ''}, "
                           f"got {v!r}")
        if least is not None and v < least:
            raise BadInput(f"SearchConfig.{name} must be at least {least}, got {v}")
    for name in (*_NUMBERS, *_NUMBERS_OR_NONE):
        v = getattr(cfg, name)
        if not (number(v) or (v is None and name in _NUMBERS_OR_NONE)):
            raise BadInput(f"SearchConfig.{name} is a number{' or None' if name in _NUMBERS_OR_NONE else ''}, "
                           f"got {v!r}")
    for name in _FLAGS:
        if not isinstance(getattr(cfg, name), bool):
            raise BadInput(f"SearchConfig.{name} is True or False, got {getattr(cfg, name)!r}")
    if cfg.evaluate_intermediate is not None and not isinstance(cfg.evaluate_intermediate, bool):
        raise BadInput(f"SearchConfig.evaluate_intermediate is True, False or None, got {cfg.evaluate_intermediate!r}")
    for name in _TEXTS:
        if not isinstance(getattr(cfg, name), str) and not (name == "prompts" and isinstance(cfg.prompts, os.PathLike)):
            raise BadInput(f"SearchConfig.{name} is a string, got {getattr(cfg, name)!r}")
    if cfg.value_model is not None and not isinstance(cfg.value_model, (str, os.PathLike)):
        raise BadInput(f"SearchConfig.value_model is a file name or None, got {cfg.value_model!r}")
    if not 0 <= cfg.diverse_temperature < math.inf:
        raise BadInput(f"SearchConfig.diverse_temperature is a finite number, 0 or more, got {cfg.diverse_temperature}")


def _embedder(given: Embedder | None, cfg: SearchConfig) -> Embedder:
    """The caller's embedder, checked at the boundary (a user's that fails is an
    ``EmbedderError`` naming it), or the one ``cfg.embedder`` names."""
    return checked_embedder(given) if given is not None else open_embedder(cfg.embedder)


def default_max_hops(strategy: str) -> int | None:
    """``SearchConfig.max_hops`` when it is None: :data:`RWT_HOPS` for mcts/beam, one hop
    for retrieve; None for the strategies that do not read it."""
    return {"mcts": RWT_HOPS, "beam": RWT_HOPS, "retrieve": RETRIEVE_HOPS}.get(strategy)


def check_value_model(model: ValueModel, kgs: Sequence[KnowledgeGraph]) -> None:
    """When every KG lists its relations (``relation_ids()``: the embedded ones), warn at
    once if the model knows none of them (``ValueModelMismatch``); otherwise the search
    checks the relations it rates. A model already settled (a server's, shared by every
    request) is not checked again."""
    if not model.check_schema:
        return
    lists = [listed() for kg in kgs if callable(listed := getattr(kg, "relation_ids", None))]
    if kgs and len(lists) == len(kgs):
        model.check_kg(set().union(*lists))


def load_value_model(config: SearchConfig) -> ValueModel | None:
    """The value model ``config.value_model`` names, read once (None without one): pass it
    to every :func:`build_solver` call of a server instead of reading the file per request."""
    if not config.value_model:
        return None
    from .search.rwt.valuemodel import ValueModel

    return ValueModel.load(config.value_model)


def screen_limit(wanted: int | None, kgs: Sequence[KnowledgeGraph]) -> int:
    """How many entities each expansion reached the search checks for dead ends: as
    asked, or by default :data:`DEFAULT_SCREEN_LIMIT` when all KGs are embedded (each
    check is a ``get_relations`` call: microseconds in-process, a request to a remote
    endpoint) and none otherwise."""
    if wanted is not None:
        if wanted < 0:
            raise BadInput("--screen-dead-ends must be 0 or more")
        return wanted
    return DEFAULT_SCREEN_LIMIT if all(getattr(kg, "embedded", False) for kg in kgs) else 0


async def close_all(llm: LLM, kgs: Sequence[KnowledgeGraph], embedder: Embedder | None = None) -> None:
    """Close the KGs, then the LLM, then the embedder if one is given and holds a
    connection (what a command or a server opened). Each is closed even when one before it
    fails (a KG's plain, non-async ``close`` too, :meth:`KGSet.close`); the first failure
    is raised at the end."""
    try:
        if kgs:
            await KGSet(list(kgs)).close()
    finally:
        try:
            await checked(llm).close()  # a user's plain close too
        finally:
            if embedder is not None:
                await close_embedder(embedder)


__all__ = ["Answer", "SearchConfig", "STRATEGIES", "build_solver", "close_all", "default_max_hops", "load_value_model"]
