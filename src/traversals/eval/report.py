"""``traversals report``: tables and plots over one or more run directories.

Writes ``report.md`` with

- a table like the paper's Table 1: strategies (rows) × datasets (columns), each cell
  ``Hits@1 / EM-in (n)`` in percent;
- per run: n, errors, Hits@1, EM-in, F1 and the mean LLM calls, prompt and completion
  tokens, KG calls and seconds per question;
- with ``--price`` (:class:`Prices`), what each run's tokens cost: per question, per right
  answer and in all;
- ``value_vs_accuracy.png`` (paper Fig. 5/7): every *proposed* answer in the traces (every
  node carrying an ``answer``, not just the final one), its value against its EM-in,
  jittered, with the mean EM-in per value bucket (width 0.1);
- ``backtracking.png`` (paper Fig. 6): on questions where the search backtracked -- an
  answer was proposed in the first subtree of the root (the subtree of the root's first
  expanded child) and a node outside that subtree was expanded after that answer
  appeared -- the EM-in of the best-valued answer of the first subtree (what the search
  would have returned without backtracking) against the final answer's;
- the answer threshold replayed: with the LLM as the value function τ only decides when
  a tree or chain search stops, so each search is replayed exactly at lower thresholds
  (:func:`threshold_cut`) — Hits@1, EM-in and LLM calls per τ. A small model's answer
  values rarely reach the paper's 0.8, so its searches spend the whole expansion budget;
  this table says what a lower ``--threshold`` would have saved and cost.

A plot without data is not drawn; the report says so. The plots need matplotlib (the
``eval`` extra): without it the report has every table and says which plot it did not draw.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..errors import BadInput
from ..search.tree import ANSWER_CHOICES, answer_key, choose_answer
from .metrics import em_in, hits_at_1
from .runfiles import RESULTS, RUN, SUMMARY, TRACES, Summary, as_number, read_results, rescore_row, safe_id, summarize
from .stats import paired, wilson_interval

VALUE_PNG = "value_vs_accuracy.png"
BACKTRACK_PNG = "backtracking.png"
NO_MATPLOTLIB = "matplotlib is not installed (pip install 'traversals[eval]')"


def plot_name(md: Path, plot: str) -> str:
    """The file name of a report's plot: ``plot`` beside ``report.md``, else named after the
    report (``a.md`` -> ``a.value_vs_accuracy.png``), so two reports in one folder keep their own."""
    return plot if md.name == "report.md" else f"{md.stem}.{plot}"
#: answer thresholds the report replays LLM-valued searches at (those up to the run's own)
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


@dataclass
class Run:
    dir: Path
    config: dict
    rows: list[dict]
    summary: Summary
    label: str = ""
    #: rows whose recorded scores differ from the current metrics' (rescored on load)
    rescored: int = 0
    #: traces read so far (every report section reads them; each file is read once)
    _traces: dict = field(default_factory=dict, repr=False)

    @property
    def dataset(self) -> str:
        named = self.config.get("dataset") or self.summary.dataset
        if not named:  # a run without run.json: its ids name their dataset ("pq-2h:666")
            prefixes = {str(r.get("id", "")).split(":")[0] for r in self.rows if ":" in str(r.get("id", ""))}
            named = prefixes.pop() if len(prefixes) == 1 else ""
        return str(named or "?")

    @property
    def strategy(self) -> str:
        s = self.config.get("strategy")
        if not s:
            s = next((r.get("strategy") for r in self.rows if r.get("strategy")), "")
        return str(s or "?")

    @property
    def llm(self) -> str:
        return str(self.config.get("llm") or "")

    def trace(self, row: dict) -> dict | None:
        rel = row.get("trace") or f"{TRACES}/{safe_id(str(row.get('id', '')))}.json"
        if rel not in self._traces:
            try:
                trace = json.loads((self.dir / rel).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                trace = None
            self._traces[rel] = trace if isinstance(trace, dict) else None  # not a trace: read as none
        return self._traces[rel]


def load_run(run_dir: str | Path) -> Run:
    d = Path(run_dir)
    if d.name == RESULTS and d.is_file():  # the run's results file named instead of its folder
        d = d.parent
    if not (d / RESULTS).is_file() and not (d / RUN).is_file():  # run.json alone: stopped before its first answer
        raise BadInput(f"{d}: no {RESULTS} (not a run directory)")
    config: dict = {}
    if (d / RUN).is_file():
        try:
            config = json.loads((d / RUN).read_text(encoding="utf-8"))
        except ValueError as e:
            raise BadInput(f"{d / RUN}: not valid JSON ({e})") from e
        if not isinstance(config, dict):
            raise BadInput(f"{d / RUN}: not a run's settings (a JSON object expected)")
    seen: set = set()
    rows = []
    for r in read_results(d / RESULTS):
        if r["id"] not in seen:
            seen.add(r["id"])
            rows.append(r)
    if not rows and not config:
        raise BadInput(f"{d}: {RESULTS} has no results and there is no {RUN} (nothing to report)")
    rescored = sum(rescore_row(r) for r in rows)
    summary = summarize(
        rows,
        dataset=str(config.get("dataset", "")),
        split=str(config.get("split", "")),
        strategy=str(config.get("strategy", "")),
        llm=str(config.get("llm", "")),
        selected=config.get("selected"),
        out_dir=str(d),
    )
    summary.unanswered = _unanswered(d, len(rows), config.get("selected"))
    return Run(dir=d, config=config, rows=rows, summary=summary, rescored=rescored)


def _unanswered(d: Path, n: int, selected: object = None) -> int | None:
    """The selected questions without a row, as the run's last summary.json counted them
    when it counted the rows there are now, of the selection run.json records now (a later
    invocation stopped before its summary -- a resume to a larger --limit killed before its
    first row --: not known, and the report falls back on rows vs the number selected)."""
    try:
        last = json.loads((d / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = isinstance(last, dict) and last.get("n") == n and (selected is None or last.get("selected") == selected)
    got = last.get("unanswered") if same else None
    return got if isinstance(got, int) and not isinstance(got, bool) else None


# --------------------------------------------------------------------------- trace analysis


def _nodes(trace: dict | None) -> list[dict]:
    nodes = (trace or {}).get("nodes") or []
    return [n for n in nodes if isinstance(n, dict) and "id" in n]


def _value(node: dict) -> float | None:
    v = node.get("value")
    if v is None:
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if v == v else None  # NaN -> None


def proposed_answers(trace: dict | None) -> list[dict]:
    """Nodes that carry a proposed answer (non-empty ``answer`` text, not marked invalid)."""
    return [
        n
        for n in _nodes(trace)
        if isinstance(n.get("answer"), str) and n["answer"].strip() and not n.get("invalid")
    ]


@dataclass(frozen=True)
class Efficiency:
    """Issue-4 figures of a run: how many actions were valid, the median seconds per
    question, and the share of prompt tokens the LLM actually computed (the rest came
    from its KV cache)."""

    actions: int
    valid_actions: int
    median_seconds: float | None
    computed_over_sent: float | None

    @property
    def valid_rate(self) -> float | None:
        return self.valid_actions / self.actions if self.actions else None


def efficiency(run: Run) -> Efficiency:
    """Every node made by an action counts; an invalid one (unparseable output, a dead-end
    selection) is not valid; the actions of questions that ended in an error are left out.
    The median seconds and computed / sent take every row, errors with what they spent, as
    the table's means do (the median had left errors out beside a mean with them)."""
    actions = valid = 0
    seconds, sent, computed = [], 0, 0
    for row in run.rows:
        seconds.append(as_number(row.get("seconds")))  # a hand-edited "slow": 0, as the summary counts it
        sent += int(as_number(row.get("prompt_tokens")))
        computed += int(as_number(row.get("computed_prompt_tokens", row.get("prompt_tokens"))))
        if row.get("error"):
            continue
        for node in _nodes(run.trace(row)):
            if node.get("action"):
                actions += 1
                valid += not node.get("invalid")
    return Efficiency(actions, valid, statistics.median(seconds) if seconds else None, computed / sent if sent else None)


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens (``report --price``): ``prompt`` for each prompt token
    the LLM computed, ``cached`` for each one its server served from a cache (None: at the
    ``prompt`` price, as an API bills a prompt when it reports no cached tokens — and
    llama.cpp's KV cache is this process's own, not a hosted API's), ``completion`` for
    each generated token."""

    prompt: float
    completion: float
    cached: float | None = None

    @classmethod
    def parse(cls, text: str) -> "Prices":
        """``PROMPT,COMPLETION[,CACHED]`` (``0.15,0.60`` or ``1.25,10,0.125``);
        :class:`BadInput` naming the flag for anything else."""
        parts = [p.strip().lstrip("$") for p in str(text).split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) not in (2, 3) or not all(v >= 0 and v != float("inf") for v in values):
            raise BadInput(f"--price {text!r}: give US dollars per million tokens as PROMPT,COMPLETION[,CACHED], "
                           "numbers of 0 or more (e.g. --price 0.15,0.60)")
        return cls(values[0], values[1], values[2] if len(values) == 3 else None)

    def __str__(self) -> str:
        cached = "" if self.cached is None else f", ${self.cached:g} cached"
        return f"${self.prompt:g} prompt / ${self.completion:g} completion{cached} per million tokens"

    def dollars(self, row: dict, *, server_cache: bool = True) -> float:
        """What ``row``'s tokens cost at these prices; ``server_cache`` False (a model run in
        this process): the prompt tokens its own KV cache spared are billed as computed."""
        sent = int(as_number(row.get("prompt_tokens")))
        computed = min(sent, int(as_number(row.get("computed_prompt_tokens", sent)))) if server_cache else sent
        cached = self.prompt if self.cached is None else self.cached
        return (computed * self.prompt + (sent - computed) * cached
                + int(as_number(row.get("completion_tokens"))) * self.completion) / 1e6


@dataclass(frozen=True)
class Cost:
    """A run's tokens at :class:`Prices`: in all, per question, per question answered right."""

    total: float
    per_question: float | None
    per_right: float | None


def cost(run: Run, prices: Prices) -> Cost:
    """Every row counts, an error row with what it spent before it failed. Only an endpoint's
    cache reuse (``--llm openai:``) goes at the cached price; a local model's is its own."""
    llm = str(run.config.get("llm") or "")
    server_cache = not run.config or llm.lower().startswith("openai:") or bool(run.config.get("llm_url"))
    total = sum(prices.dollars(row, server_cache=server_cache) for row in run.rows)
    right = sum(as_number(row.get("hits@1")) for row in run.rows if not row.get("error"))
    return Cost(total, total / len(run.rows) if run.rows else None, total / right if right else None)


def value_points(run: Run) -> list[tuple[float, float]]:
    """(value, EM-in) of every valued proposed answer in the run's traces."""
    points = []
    for row in run.rows:
        if row.get("error"):
            continue
        for node in proposed_answers(run.trace(row)):
            v = _value(node)
            if v is not None:
                points.append((v, em_in(node["answer"], row.get("gold"))))
    return points


@dataclass
class Backtrack:
    id: str
    first_subtree_answer: str
    first_subtree_em_in: float
    final_answer: str
    final_em_in: float


def _born(node: dict, by_id: dict) -> float:
    """When a node appeared: the expansion of its parent (inf when unknown)."""
    parent = by_id.get(node.get("parent"))
    e = parent.get("expansion") if parent else None
    return float(e) if e is not None else float("inf")


def backtracking_case(trace: dict | None) -> tuple[dict, bool] | None:
    """``(best answer node of the root's first subtree, backtracked?)`` or None when the
    first subtree proposed no answer (no counterfactual)."""
    nodes = _nodes(trace)
    if not nodes:
        return None
    by_id = {n["id"]: n for n in nodes}
    root = next((n for n in nodes if n.get("parent") is None), None)
    if root is None:
        return None
    children: dict[Any, list[dict]] = {}
    for n in nodes:
        if n.get("parent") is not None:
            children.setdefault(n["parent"], []).append(n)
    expanded = [c for c in children.get(root["id"], []) if c.get("expansion") is not None]
    if not expanded:
        return None
    first = min(expanded, key=lambda c: c["expansion"])
    subtree: set = set()
    stack = [first["id"]]
    while stack:
        nid = stack.pop()
        if nid in subtree:
            continue
        subtree.add(nid)
        stack.extend(c["id"] for c in children.get(nid, []))
    answers = [n for n in proposed_answers(trace) if n["id"] in subtree]
    if not answers:
        return None
    first_answer_at = min(_born(n, by_id) for n in answers)
    backtracked = any(
        n["id"] not in subtree
        and n is not root
        and n.get("expansion") is not None
        and n["expansion"] > first_answer_at
        for n in nodes
    )
    order = {n["id"]: i for i, n in enumerate(nodes)}
    best = max(answers, key=lambda n: (_value(n) if _value(n) is not None else float("-inf"), -order[n["id"]]))
    return best, backtracked


def backtracking_cases(run: Run) -> list[Backtrack]:
    out = []
    for row in run.rows:
        if row.get("error"):
            continue
        case = backtracking_case(run.trace(row))
        if case is None or not case[1]:
            continue
        best = case[0]
        out.append(
            Backtrack(
                id=row["id"],
                first_subtree_answer=best["answer"],
                first_subtree_em_in=em_in(best["answer"], row.get("gold")),
                final_answer=str(row.get("answer", "")),
                final_em_in=float(row.get("em_in") or 0.0),
            )
        )
    return out


@dataclass(frozen=True)
class ThresholdCut:
    """What one search would have answered with another answer threshold."""

    answer: str
    #: it stopped before the search in the trace did
    stopped_early: bool
    #: LLM calls up to the stop (a node rated before the stop but expanded after it counts
    #: its rating call only: an estimate)
    llm_calls: float


def _calls(node: dict) -> int:
    return int(((node.get("usage") or {}).get("llm_calls")) or 0)


def threshold_cut(trace: dict | None, threshold: float) -> ThresholdCut | None:
    """Replay an LLM-valued tree or chain search at answer threshold ``threshold``.

    With the LLM as the value function τ only decides when the search stops (Algorithm 1:
    after the expansion in which an answer's value exceeds τ), so everything before that
    stop is what the trace holds: the search would have stopped after the first expansion
    that produced an answer valued above ``threshold`` and answered with the best-valued
    answer born by then (ties: the grounded one, then the first). None when the replay
    would not be exact: a trained value (its early answers depend on τ), a trace without
    nodes or values, or a threshold above the run's own (that search stopped there)."""
    nodes = _nodes(trace)
    if not trace or not nodes or trace.get("value_function") != "llm":
        return None
    run_threshold = (trace.get("config") or {}).get("threshold")
    if not isinstance(run_threshold, (int, float)) or threshold > run_threshold:
        return None
    by_id = {n["id"]: n for n in nodes}
    answers = proposed_answers(trace)
    crossing = [_born(n, by_id) for n in answers if (_value(n) or 0.0) > threshold]
    total = sum(_calls(n) for n in nodes)
    stop = min(crossing, default=float("inf"))
    ran = [e for n in nodes if (e := n.get("expansion")) is not None]
    if stop == float("inf") or stop >= max(ran, default=0):
        return ThresholdCut(str(trace.get("answer", "")), False, float(total))
    born = sorted((n for n in answers if _born(n, by_id) <= stop), key=lambda n: n["id"])
    best = born[_choose(born, "value")]
    calls = 0
    for n in nodes:
        e = n.get("expansion")
        if e is not None and e <= stop:
            calls += _calls(n)
        elif _born(n, by_id) <= stop and _value(n) is not None:
            calls += min(1, _calls(n))  # its rating, not the proposal made after the stop
    return ThresholdCut(best["answer"], True, float(calls))


@dataclass(frozen=True)
class ThresholdRow:
    threshold: float
    n: int
    hits_at_1: float
    em_in: float
    llm_calls: float
    stopped_early: int


def threshold_table(run: Run, thresholds: Sequence[float] = THRESHOLDS) -> list[ThresholdRow]:
    """Hits@1, EM-in and mean LLM calls of ``run`` replayed at each threshold at which
    every question's search can be replayed and some would have stopped earlier, and at
    the run's own threshold (the run as it is). Empty for runs with a trained value, CoT
    and runs without traces."""
    rows = [r for r in run.rows if not r.get("error")]
    traces = [run.trace(r) for r in rows]
    own = run.config.get("threshold")
    taus = sorted({*thresholds, *([float(own)] if isinstance(own, (int, float)) else [])})
    out = []
    for tau in taus:
        cuts = [c for t in traces if (c := threshold_cut(t, tau)) is not None]
        if not cuts or len(cuts) < len(traces):
            continue
        if tau != own and not any(c.stopped_early for c in cuts):
            continue
        n = len(cuts)
        out.append(ThresholdRow(
            tau, n,
            sum(hits_at_1(c.answer, r.get("gold")) for c, r in zip(cuts, rows)) / n,
            sum(em_in(c.answer, r.get("gold")) for c, r in zip(cuts, rows)) / n,
            sum(c.llm_calls for c in cuts) / n,
            sum(c.stopped_early for c in cuts),
        ))  # fmt: skip
    return out


#: the strategies that choose among proposed answers (``--answer-choice``; the CLI's
#: ``options.TREE_SEARCH``): beam and MCTS return their own answer, with no such choice
CHOOSING_STRATEGIES = ("tree", "chain")


def choice_cut(trace: dict | None, how: str) -> str | None:
    """The answer a tree or chain search would have returned with answer choice ``how``
    (``TreeConfig.answer_choice``), replayed exactly: the choice decides only which answer
    a search returns when none crossed τ, never what it expands. A search that stopped at
    τ keeps its answer. None for a trace without search nodes (CoT, no trace) and for
    another strategy's (beam, mcts: they have no answer choice)."""
    nodes = _nodes(trace)
    if not trace or not nodes or "config" not in trace:
        return None
    if trace.get("strategy") and trace["strategy"] not in CHOOSING_STRATEGIES:
        return None
    if trace.get("stopped") == "threshold":
        return str(trace.get("answer", ""))
    answers = sorted(proposed_answers(trace), key=lambda n: n["id"])
    chosen = _choose(answers, how) if answers else None
    return answers[chosen]["answer"] if chosen is not None else str(trace.get("answer", ""))


def _choose(answers: list[dict], how: str) -> int:
    """:func:`~traversals.search.tree.choose_answer` over trace answer nodes (in id order),
    their ``grounded`` flags included, as the search chose."""
    chosen = choose_answer([(n["answer"], _value(n)) for n in answers], how,
                           [n.get("grounded") is True for n in answers])
    assert chosen is not None  # answers is not empty
    return chosen


@dataclass(frozen=True)
class ChoiceRow:
    choice: str
    #: the choice the run was made with (traces before the option: "value")
    own: bool
    n: int
    hits_at_1: float
    em_in: float
    #: questions whose answer differs from the run's
    changed: int


def choice_table(run: Run) -> list[ChoiceRow]:
    """Hits@1 and EM-in of ``run`` with each answer choice, replayed from its traces; empty
    unless every question's search can be replayed (tree and chain runs with traces: a beam
    or mcts run, which ``eval --answer-choice`` refuses, was listed with both choices)."""
    if run.strategy not in (*CHOOSING_STRATEGIES, "?"):
        return []
    rows = [r for r in run.rows if not r.get("error")]
    traces = [run.trace(r) for r in rows]
    cuts = {how: [a for t in traces if (a := choice_cut(t, how)) is not None] for how in ANSWER_CHOICES}
    if not traces or any(len(answers) < len(traces) for answers in cuts.values()):
        return []
    own = {((t or {}).get("config") or {}).get("answer_choice", "value") for t in traces}
    out = []
    n = len(rows)
    for how, answers in cuts.items():
        out.append(ChoiceRow(
            how, own == {how}, n,
            sum(hits_at_1(a, r.get("gold")) for a, r in zip(answers, rows)) / n,
            sum(em_in(a, r.get("gold")) for a, r in zip(answers, rows)) / n,
            sum(answer_key(a) != answer_key(str(r.get("answer", ""))) for a, r in zip(answers, rows)),
        ))  # fmt: skip
    return out


# --------------------------------------------------------------------------- plots


@dataclass
class StopRow:
    """The questions of a run whose search stopped one way (``Answer.stopped``)."""

    stopped: str
    n: int
    hits_at_1: float
    mean_value: float | None


def stop_table(run: Run) -> list[StopRow]:
    """A run's answered questions grouped by how their search stopped, most frequent first:
    tree/chain "threshold" (an answer was rated over τ) against "max_expansions" and
    "frontier_empty" (none was), RwT's "simulations", "exhausted", "max_hops". How often
    each is right says how far a stop can be trusted. Empty when no row says (cot, old runs)."""
    groups: dict[str, list[dict]] = {}
    for r in run.rows:
        if not r.get("error") and isinstance(r.get("stopped"), str):
            groups.setdefault(r["stopped"], []).append(r)
    out = []
    for how, rows in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        values = [float(r["value"]) for r in rows if isinstance(r.get("value"), (int, float))]
        out.append(StopRow(how, len(rows), sum(as_number(r.get("hits@1")) for r in rows) / len(rows),
                           sum(values) / len(values) if values else None))
    return out


def can_plot() -> bool:
    """Whether matplotlib (the ``eval`` extra) can be imported. Without it a report is still
    written, every table in it: the plots are the only part that needs it."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(width: float = 6.4, height: float = 4.2):
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    return Figure(figsize=(width, height), dpi=110)


def _buckets(points: Iterable[tuple[float, float]], width: float = 0.1) -> list[tuple[float, int, float]]:
    """(bucket, n, mean score) of the points by value, each value in the nearest multiple of
    ``width``, a half-way value always up (``round`` rounds halves to even, on binary floats:
    0.45 and 0.55 both went to 0.6 and bucket 0.5 stayed empty)."""
    acc: dict[float, list[float]] = {}
    for v, s in points:
        b = round(math.floor(v / width + 0.5 + 1e-9) * width, 6)
        acc.setdefault(b, []).append(s)
    return [(b, len(ss), sum(ss) / len(ss)) for b, ss in sorted(acc.items())]


def plot_values(series: dict[str, list[tuple[float, float]]], path: Path) -> None:
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    rng = random.Random(0)
    for i, (label, points) in enumerate(series.items()):
        color = f"C{i % 10}"
        xs = [v + rng.uniform(-0.025, 0.025) for v, _ in points]
        ys = [s + rng.uniform(-0.04, 0.04) for _, s in points]
        ax.scatter(xs, ys, s=10, alpha=0.35, color=color)
        b = _buckets(points)
        ax.plot([x for x, _, _ in b], [m for _, _, m in b], marker="o", color=color, label=f"{label} (n={len(points)})")
    ax.set_xlabel("value assigned by the model")
    ax.set_ylabel("EM-in of the proposed answer")
    ax.set_title("Answer value vs accuracy (all proposed answers)")
    ax.set_ylim(-0.1, 1.1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path)


def plot_backtracking(series: dict[str, list[Backtrack]], path: Path) -> None:
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    labels = list(series)
    width = 0.38
    without = [100 * sum(c.first_subtree_em_in for c in cs) / len(cs) for cs in series.values()]
    with_ = [100 * sum(c.final_em_in for c in cs) / len(cs) for cs in series.values()]
    xs = list(range(len(labels)))
    b1 = ax.bar([x - width / 2 for x in xs], without, width, label="first subtree only (no backtracking)", color="C1")
    b2 = ax.bar([x + width / 2 for x in xs], with_, width, label="final answer (with backtracking)", color="C0")
    ax.bar_label(b1, fmt="%.1f", fontsize=7)
    ax.bar_label(b2, fmt="%.1f", fontsize=7)
    ax.set_xlim(-0.9, len(labels) - 0.1)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{lab}\n(n={len(series[lab])})" for lab in labels], fontsize=7)
    ax.set_ylabel("EM-in (%)")
    ax.set_ylim(0, 110)
    ax.set_title("Backtracking counterfactual (questions that backtracked)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


# --------------------------------------------------------------------------- report


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _p_value(p: float) -> str:
    """A p-value to three decimals, or in scientific notation below 0.001 (never ``0.000``:
    an exact test's p is never 0)."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _rate(x: float, n: int) -> str:
    """A run's mean in percent, or – when it has no results yet (not a score of 0)."""
    return _pct(x) if n else "–"


def _labels(runs: Sequence[Run]) -> None:
    llms = {r.llm for r in runs}
    ks: dict[str, set] = {}
    for r in runs:
        ks.setdefault(r.strategy, set()).add(r.config.get("k"))
    for r in runs:
        label = r.strategy
        if len(ks[r.strategy]) > 1 and r.config.get("k") is not None:
            label += f" k={r.config['k']}"
        if r.config.get("value_model"):  # RwT with a trained roll-out model is another method
            label += f" + {Path(str(r.config['value_model'])).stem}"
        if len(llms) > 1:
            label += f" · {r.llm or '?'}"
        r.label = label
    # two runs of one dataset still alike (a rerun, flags the label does not show): their
    # folder names tell them apart in the tables and the paired comparisons
    alike: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        alike.setdefault((r.label, r.dataset), []).append(r)
    for group in alike.values():
        if len(group) > 1:
            for r, name in zip(group, _distinct_names([r.dir for r in group])):
                r.label += f" ({name})"


def _distinct_names(dirs: Sequence[Path]) -> list[str]:
    """The shortest trailing parts of ``dirs`` that tell them apart: the folder names, or
    with as many parents as it takes (``A/e`` and ``B/e``); a number last (the same path
    named twice)."""
    resolved = [d.resolve() for d in dirs]
    for depth in range(1, max(len(d.parts) for d in resolved) + 1):
        names = ["/".join(d.parts[-depth:]) for d in resolved]
        if len(set(names)) == len(names):
            return names
    return [f"{d.name} {i + 1}" for i, d in enumerate(resolved)]


def _section(title: str, intro: str, header: list[str], rows: list[list[str]], empty: str) -> list[str]:
    """A report section: its title, then the intro and the table, or ``empty`` with no rows."""
    body = [intro, "", *_table(header, rows)] if rows else [empty]
    return [f"## {title}", "", *body, ""]


def _dollars(x: float | None) -> str:
    if x is None:
        return "–"
    return f"${x:.2f}" if x >= 1 else f"${x:.4f}" if x >= 0.0001 or x == 0 else f"${x:.2e}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table; a "|" in a cell (a folder, a data file or an LLM spec named with
    one) escaped and a line break made a space, so no cell shifts under another header."""
    def cell(text: str) -> str:
        return " ".join(str(text).replace("|", "\\|").split())

    out = ["| " + " | ".join(map(cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return out


def write_report(run_dirs: Sequence[str | Path], out: str | Path | None = None, prices: Prices | None = None) -> Path:
    """Write ``report.md`` (and PNG plots beside it) for the given run directories;
    into the first run directory unless ``out`` (a file, or an existing directory) is
    given; with ``prices``, what each run's tokens cost. Returns the path of ``report.md``."""
    if not run_dirs:
        raise BadInput("report: give at least one run directory")
    unique: dict[Path, Run] = {}
    for d in run_dirs:  # a folder named twice counts once, by itself or by its results.jsonl
        run = load_run(d)
        unique.setdefault(run.dir.resolve(), run)
    runs = list(unique.values())
    _labels(runs)
    if out is None:
        md = runs[0].dir / "report.md"
    else:
        md = Path(out)
        if md.is_dir() or (not md.suffix and not md.exists()):
            md = md / "report.md"
        if md.suffix.lower() in (".json", ".jsonl") or any(md.resolve().is_relative_to((r.dir / TRACES).resolve())
                                                             for r in runs):
            raise BadInput(f"report: --out {out} would write the report over a run's data (JSON); name a .md file "
                           "or a folder")
    try:
        md.parent.mkdir(parents=True, exist_ok=True)
        md.touch()
    except OSError as e:
        raise BadInput(f"report: cannot write {md} ({e.strerror or type(e).__name__})") from None

    plots = can_plot()
    lines = ["# Evaluation report", ""]
    lines.append("Runs: " + ", ".join(f"`{r.dir}`" for r in runs))
    lines.append("")

    # Table 1 style: strategies x datasets
    datasets = list(dict.fromkeys(r.dataset for r in runs))
    strategies = list(dict.fromkeys(r.label for r in runs))
    cells: dict[tuple[str, str], list[str]] = {}
    for r in runs:
        s = r.summary
        partial = "" if s.complete else f", partial of {s.selected}"
        # questions the run's --value-model was trained on (eval warned): those scores are not held out
        seen = r.config.get("value_model_trained_questions")
        trained = f", {seen} in its --value-model's training" if isinstance(seen, int) and not isinstance(seen, bool) and seen > 0 else ""
        cells.setdefault((r.label, r.dataset), []).append(
            f"{_rate(s.hits_at_1, s.n)} / {_rate(s.em_in, s.n)} (n={s.n}{partial}{trained})"
        )
    lines += ["## Accuracy", "", "Cells: Hits@1 / EM-in in %, (n questions).", ""]
    lines += _table(
        ["strategy"] + datasets,
        [[st] + ["; ".join(cells.get((st, ds), ["–"])) for ds in datasets] for st in strategies],
    )
    lines.append("")

    # cost per run
    lines += ["## Per run: accuracy and cost per question", ""]
    rows = []
    for r in runs:
        s = r.summary
        eff = efficiency(r)
        subset = r.config.get("split", "")
        if r.config.get("answerable_only"):
            subset += ", answerable"
        if r.config.get("skip"):  # questions held out from the first ones of the shuffle
            first, size = r.config["skip"] + 1, r.config.get("selected", r.config.get("limit"))
            subset += f", questions {first}-{first + size - 1 if size else '…'} of the shuffle (seed {r.config.get('seed')})"
        elif r.config.get("limit") is not None:
            subset += f", {r.config['limit']} sampled (seed {r.config.get('seed')})"
        if isinstance(r.config.get("limit"), int) and s.n > r.config["limit"]:
            # the folder keeps every row answered (docs/evaluation.md): an earlier, larger --limit's too
            subset += f"; n counts the {s.n} answered, an earlier, larger --limit's included"
        rows.append(
            [
                r.dataset,
                subset,
                r.label,
                r.llm or "?",
                str(s.n),
                str(s.errors),
                _rate(s.hits_at_1, s.n),
                "–".join(_pct(x) for x in wilson_interval(s.hits_at_1 * s.n, s.n)) if s.n else "–",
                _rate(s.em_in, s.n),
                _rate(s.f1, s.n),
                f"{s.mean_llm_calls:.1f}",
                f"{s.mean_prompt_tokens:.0f}",
                f"{s.mean_completion_tokens:.0f}",
                f"{s.mean_kg_calls:.1f}",
                f"{s.mean_seconds:.2f}",
                "–" if eff.median_seconds is None else f"{eff.median_seconds:.2f}",
                "–" if eff.valid_rate is None else _pct(eff.valid_rate),
                "–" if eff.computed_over_sent is None else f"{eff.computed_over_sent:.2f}",
            ]
        )
    lines += _table(
        ["dataset", "subset", "strategy", "LLM", "n", "errors", "Hits@1", "95% CI", "EM-in", "F1",
         "LLM calls", "prompt tok", "completion tok", "KG calls", "seconds", "median s", "valid actions %",
         "computed / sent"],
        rows,
    )  # fmt: skip
    lines += [
        "",
        "95% CI: Wilson score interval of Hits@1 (a binomial proportion over n questions). Costs are means "
        "per question and median s the median, both over every question, errors with what they spent. Valid actions: share of the search's action nodes that were "
        "valid (– for CoT: no KG actions). Computed / sent: prompt tokens the LLM computed over those sent "
        "(the rest was reused from its KV cache; 1.00 for an endpoint that does not report it).",
        "",
    ]
    for r in runs:  # --llm-cache: replies no model computed, so no call, token or second of the model's
        if hits := int(sum(as_number(row.get("llm_cache_hits")) for row in r.rows)):
            lines += [f"`{r.dir}` ({r.label}): {hits} LLM replies came from `--llm-cache`. They are not counted as "
                      "LLM calls or tokens, and its seconds are not the model's: time a run without the cache.", ""]
    for r in runs:  # RwT's critical model, retrieve's ranking: an endpoint's embeddings cost too
        if r.summary.mean_embedder_calls:
            tokens = (f", {r.summary.total_embedding_tokens} tokens in all as its endpoint reported them"
                      if r.summary.total_embedding_tokens else "")
            lines += [f"`{r.dir}` ({r.label}): {r.summary.mean_embedder_calls:.1f} embedder calls and "
                      f"{r.summary.mean_embedded_texts:.0f} texts embedded per question{tokens}; not in the LLM's "
                      "calls or tokens" + (", nor in the cost below." if prices is not None else "."), ""]
    if prices is not None:
        lines += [f"## Cost at {prices}", ""]
        money = [(r, cost(r, prices)) for r in runs]
        lines += _table(
            ["dataset", "strategy", "LLM", "n", "$ per question", "$ per right answer (Hits@1)", "$ in all"],
            [[r.dataset, r.label, r.llm or "?", str(len(r.rows)), _dollars(c.per_question), _dollars(c.per_right),
              _dollars(c.total)] for r, c in money],
        )
        lines += [
            "",
            "The tokens each run recorded at these prices: prompt tokens the LLM computed at the prompt price, "
            "those its server reported as served from a cache at the cached price (the prompt price when none "
            "is given; a local llama.cpp run's reuse of its own KV cache is billed at it too, as an API without "
            "prompt caching would bill the same prompts), generated tokens at the completion price. Error rows "
            "count with what they spent; a question answered again by `--resume --retry-errors` counts its last "
            "attempt only.",
            "",
        ]
    stale = [r for r in runs if r.rescored]
    if stale:
        lines += [
            "Scores are recomputed from each answer and its gold with the current metrics; these runs' "
            "`results.jsonl` (and `summary.json`) hold scores of an older version of the metrics: "
            + ", ".join(f"`{r.dir}` ({r.rescored} of {r.summary.n} answers rescored)" for r in stale) + ".",
            "",
        ]

    # paired comparisons on shared questions
    lines += ["## Paired comparisons (same questions)", ""]
    prow = []
    others = []
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            if a.dataset != b.dataset:
                continue
            pc = paired(a.rows, b.rows)
            if pc.other:  # the same ids, other questions: two files of one's own questions
                others.append(f"{a.label} vs {b.label}: {pc.other}")
            if pc.n:
                prow.append([a.dataset, f"{a.label} vs {b.label}", str(pc.n), str(pc.both), str(pc.only_a),
                             str(pc.only_b), str(pc.neither), _p_value(pc.p_value)])
    if prow:
        lines += [
            "Hits@1 on the questions both runs were asked (an error counts as wrong, as in the table "
            "above). Only the questions one run gets right decide; p: exact McNemar test (two-sided), "
            "the chance of a split at least this uneven if neither were better.",
            "",
        ]
        lines += _table(["dataset", "A vs B", "shared", "both right", "only A", "only B", "neither", "p"], prow)
    else:
        lines.append("No two runs share questions of the same dataset.")
    if others:
        lines += ["", "Left out: question ids both runs answered whose question text differs (another question "
                  "file, or one edited between the runs), so not the same question: " + "; ".join(others) + "."]
    lines.append("")

    # value vs accuracy
    lines += ["## Answer value vs accuracy (paper Fig. 5/7)", ""]
    series: dict[str, list[tuple[float, float]]] = {}
    for r in runs:
        pts = value_points(r)
        if pts:
            key = f"{r.label} · {r.dataset}"
            series[key] = series.get(key, []) + pts
    value_png = md.parent / plot_name(md, VALUE_PNG)
    if series:
        if plots:
            plot_values(series, value_png)
            lines += [f"![answer value vs accuracy]({value_png.name})", ""]
        else:
            value_png.unlink(missing_ok=True)  # a stale plot from an earlier report
            lines += [f"No plot: {NO_MATPLOTLIB}.", ""]
        lines += [
            "All proposed answers in the traces (not only the final ones); EM-in of each "
            "against the gold answers, mean per value bucket:",
            "",
        ]
        trows = []
        for key, pts in series.items():
            for bucket, n, m in _buckets(pts):
                trows.append([key, f"{bucket:.1f}", str(n), _pct(m)])
        lines += _table(["run", "value", "answers", "EM-in %"], trows)
    else:
        value_png.unlink(missing_ok=True)  # a stale plot from an earlier report
        lines.append("No data: no trace has a proposed answer with a value, so no plot was drawn.")
    lines.append("")

    # how the searches stopped
    srows = [[r.label, r.dataset, row.stopped, str(row.n), _pct(row.hits_at_1),
              "–" if row.mean_value is None else f"{row.mean_value:.2f}"]
             for r in runs for row in stop_table(r)]
    lines += _section(
        "How the searches stopped",
        "Answered questions by how their search ended: `threshold`, an answer rated over τ "
        "(tree, chain); `max_expansions` or `frontier_empty`, none was and the best-rated "
        "of the rest was returned; RwT's `simulations`, `exhausted` or `max_hops`. Hits@1 "
        "per group says how far each kind of stop can be trusted.",
        ["run", "dataset", "stopped", "questions", "Hits@1 %", "mean value"], srows,
        "No data: no result row says how its search stopped (cot runs, and runs made before results recorded it).")

    # backtracking counterfactual
    lines += ["## Backtracking counterfactual (paper Fig. 6)", ""]
    bseries: dict[str, list[Backtrack]] = {}
    for r in runs:
        cases = backtracking_cases(r)
        if cases:
            key = f"{r.label} · {r.dataset}"
            bseries[key] = bseries.get(key, []) + cases
    if bseries:
        if plots:
            plot_backtracking(bseries, md.parent / plot_name(md, BACKTRACK_PNG))
            lines += [f"![backtracking counterfactual]({plot_name(md, BACKTRACK_PNG)})", ""]
        else:
            (md.parent / plot_name(md, BACKTRACK_PNG)).unlink(missing_ok=True)
            lines += [f"No plot: {NO_MATPLOTLIB}.", ""]
        lines += [
            "Questions where an answer was proposed in the root's first subtree and the "
            "search later expanded nodes outside it. EM-in of the best-valued answer of "
            "the first subtree vs the final answer:",
            "",
        ]
        lines += _table(
            ["run", "questions", "first subtree only %", "final (backtracking) %"],
            [
                [
                    key,
                    str(len(cs)),
                    _pct(sum(c.first_subtree_em_in for c in cs) / len(cs)),
                    _pct(sum(c.final_em_in for c in cs) / len(cs)),
                ]
                for key, cs in bseries.items()
            ],
        )
    else:
        (md.parent / plot_name(md, BACKTRACK_PNG)).unlink(missing_ok=True)
        lines.append(
            "No data: no question backtracked after proposing an answer in its first "
            "subtree (chain and CoT runs never do), so no plot was drawn."
        )
    lines.append("")

    # the answer threshold replayed
    trows = []
    for r in runs:
        for row in threshold_table(r):
            trows.append([f"{r.label} · {r.dataset}", f"{row.threshold:.1f}", str(row.n), _pct(row.hits_at_1),
                          _pct(row.em_in), f"{row.llm_calls:.1f}", str(row.stopped_early)])
    lines += _section(
        "Answer threshold replayed (LLM value)",
        "With the LLM as the value function the answer threshold τ only decides when a search "
        "stops, so each search is replayed exactly at lower thresholds: it stops after the first "
        "expansion that produced an answer valued above τ and answers with the best-valued answer "
        "found by then. LLM calls up to that stop are an estimate (a node rated before it and "
        "expanded after it counts one call). Each run's last row is its own τ (the run as it is); "
        "lower τ are listed where some search would have stopped earlier. n: the questions without "
        "an error (an error row has no search to replay), so Hits@1 here can exceed the run's own.",
        ["run", "τ", "n", "Hits@1 %", "EM-in %", "LLM calls", "stopped earlier"], trows,
        "Nothing to replay: only tree and chain runs with the LLM as the value function can be "
        "replayed at another threshold (a trained value's early answers depend on τ).")

    # the answer choice replayed
    crows = [[f"{r.label} · {r.dataset}", row.choice + (" (the run's)" if row.own else ""), str(row.n),
              _pct(row.hits_at_1), _pct(row.em_in), str(row.changed)]
             for r in runs for row in choice_table(r)]
    lines += _section(
        "Answer choice replayed",
        "When no answer's value crossed τ a search returns either the best-valued answer "
        "(`value`, Algorithm 1) or the answer whose proposals' values sum highest (`support`; "
        "`--answer-choice`). The choice does not change what a search expands, so each run is "
        "replayed exactly with both; changed: questions whose answer would differ from the run's. "
        "n: the questions without an error.",
        ["run", "answer choice", "n", "Hits@1 %", "EM-in %", "changed"], crows,
        "Nothing to replay: only tree and chain runs with traces choose among proposed answers.")
    md.write_text("\n".join(lines), encoding="utf-8")
    return md
