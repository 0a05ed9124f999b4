"""What the KG back ends cost: loading a KG, and each interface call on ordinary entities
and on hubs, embedded (pyoxigraph in process) and remote (a real Oxigraph SPARQL server
on 127.0.0.1), side by side.

    python bench/kg_backends.py                    # MetaQA + PathQuestion + synthetic hubs, about a minute
    python bench/kg_backends.py --quick            # the synthetic hubs only, small N, about 10 s
    python bench/kg_backends.py --repeat 50 --skip-remote --out kg-backends.md
    python bench/kg_backends.py --parity-only      # only: do both back ends give the same answers? about 40 s

Loading: MetaQA's ``kb.txt`` and PathQuestion's ``PQL2-KB.txt`` (read from ``--data``,
default ``../shared/data``) and a synthetic KG (one entity with 10,000 incoming edges, one
with 50,000: more than the 20,000 rows the embedded store once read), each loaded in a fresh Python process
so its peak RSS (VmHWM) is its own; into memory and into a persistent
store directory, which is then reopened read-only. Calls: ``search`` (the exact label and a
typo), ``get_relations([e])`` and ``get_edges([e], r)`` with ``r`` the entity's most frequent
relation: the first call, then the median and p95 of ``--repeat`` more. Each result is
checked: at most ``limit`` items, and for ``get_edges`` returned + ``omitted`` = the edges
the file holds. Figures, not assertions; run it on an idle machine (wall-clock seconds).

Parity (with the remote half, and alone with ``--parity-only``): the same KG loaded both
ways -- MetaQA (every entity with a cut list, the biggest hub, labels with quotes, non-ASCII
letters and accents, the entity with the most relations, and ``--parity-sample`` more drawn
with ``--seed``), the synthetic hubs, and a small N-Triples KG of what a plain file cannot
hold (literal values, a node without a label, ties and an "ß" at a hub's cut) -- must give
the same ``get_relations`` (keys, labels, directions, order, ``omitted``), the same
``get_edges`` triples and end labels when nothing was cut (when a list was cut: the same
total, and which edges each side kept, by rank in the embedded store's label order), and
the same exact-label search hits. A parity table and each difference are printed; the exit
code is 1 if an uncapped answer differs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Iterator, Sequence

from traversals.errors import BadInput, KGUnavailable
from traversals.kg import iris
from traversals.kg.sparql import fallback_label
from traversals.kg.base import (
    DEFAULT_MAX_EDGES,
    DEFAULT_MAX_RELATIONS,
    Edge,
    Edges,
    Entity,
    KnowledgeGraph,
    Relation,
    Relations,
)

ROOT = Path(__file__).resolve().parents[1]
SEARCH_LIMIT = 10
HUB_SIZES = (10_000, 50_000)


# ----------------------------------------------------------------------- pure helpers


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks."""
    if not values:
        raise ValueError("no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def typo(text: str) -> str:
    """``text`` with its second and third characters swapped ("Charles" -> "Cahrles")."""
    return text[0] + text[2] + text[1] + text[3:] if len(text) > 3 else text


def split_line(line: str) -> tuple[str, str, str] | None:
    """A plain triple line (``s|r|o`` or TAB-separated) as stripped names, else None."""
    sep = "|" if "|" in line else "\t"
    parts = [p.strip() for p in line.rstrip("\n").split(sep)]
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 and all(parts) else None


def degrees(path: Path) -> Counter[tuple[str, str, bool]]:
    """Distinct edges per ``(entity, relation, inverse)`` in a plain triple file:
    ``(s, r, False)`` and ``(o, r, True)`` for each triple ``s r o``."""
    triples = {t for line in path.open(encoding="utf-8") if (t := split_line(line))}
    counts: Counter[tuple[str, str, bool]] = Counter()
    for s, r, o in triples:
        counts[(s, r, False)] += 1
        counts[(o, r, True)] += 1
    return counts


def biggest_hubs(counts: Counter[tuple[str, str, bool]], n: int) -> list[tuple[str, str, bool, int]]:
    """The ``n`` (entity, relation, inverse) groups with the most edges, biggest first."""
    return [(e, r, inv, k) for (e, r, inv), k in counts.most_common(n)]


def write_synthetic(path: Path, sizes: Sequence[int] = HUB_SIZES) -> None:
    """A ``s|r|o`` file: for each size ``n``, ``item0 … item{n-1}`` point to ``Hub n``
    with ``tagged`` (so ``Hub n`` has ``n`` inverse edges and ``item7`` one per hub)."""
    with path.open("w", encoding="utf-8") as fh:
        for n in sizes:
            fh.writelines(f"item{i}|tagged|Hub {n}\n" for i in range(n))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    """nproc, CPU model and RAM, from /proc (Linux)."""
    cpu = ram = "?"
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
        kb = next(int(ln.split()[1]) for ln in open("/proc/meminfo") if ln.startswith("MemTotal"))
        ram = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), {ram} RAM, Python {sys.version.split()[0]}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}" if seconds < 10 else f"{seconds * 1000:.0f}"


def _mb(kb: float) -> str:
    return f"{kb / 1024:.0f}"


def _dir_kb(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) // 1024


# ----------------------------------------------------------------------- loading


def load_child(kind: str, path: str, store_dir: str) -> int:
    """In a fresh process: load (``memory``/``store``) or reopen (``reopen``) a KG and
    print its seconds and store triples as JSON (``none``: imports only)."""
    from traversals.kg.store import OxigraphKG  # in the baseline too: pyoxigraph, rapidfuzz

    started = time.perf_counter()
    triples = 0
    if kind != "none":
        if kind == "reopen":
            kg = OxigraphKG.open(store_dir, read_only=True)
        else:
            kg = OxigraphKG.from_file(path, store_dir=store_dir if kind == "store" else None)
        triples = int(kg.summary()["triples"])
        kg.close_sync()
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "triples": triples, "peak_kb": vm_hwm_kb(os.getpid())}))
    return 0


def run_measured(cmd: Sequence[str]) -> tuple[float, int, str]:
    """Run ``cmd``; its wall seconds, its peak RSS (KiB: VmHWM sampled every 10 ms once it
    runs ``cmd`` -- ``ru_maxrss`` would count this process's pages from before the exec)
    and its stdout. A failure is a :class:`KGUnavailable` with the last line it wrote."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, text=True)
        peak = 0
        while True:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                break
            if _cmdline(proc.pid) == list(cmd):
                peak = max(peak, vm_hwm_kb(proc.pid))
            time.sleep(0.01)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        last = (stderr.strip().splitlines() or ["(no output)"])[-1]
        raise KGUnavailable(f"{Path(cmd[0]).name} {' '.join(cmd[1:3])} failed: {last}")
    return seconds, peak, stdout


def _cmdline(pid: int) -> list[str]:
    try:
        return open(f"/proc/{pid}/cmdline").read().split("\0")[:-1]
    except OSError:
        return []


def measure_load(kind: str, path: Path, store_dir: Path | None = None) -> tuple[float, int, int]:
    """Seconds, peak RSS (KiB) and store triples of loading ``path`` in a child process."""
    cmd = [sys.executable, __file__, "--load-child", kind, str(path), str(store_dir or "")]
    _, sampled, stdout = run_measured(cmd)
    got = json.loads(stdout.strip().splitlines()[-1])
    return got["seconds"], max(sampled, got["peak_kb"]), got["triples"]


# ----------------------------------------------------------------------- the server


def oxigraph_binary() -> str:
    here = Path(sys.executable).parent / "oxigraph"
    found = str(here) if here.exists() else shutil.which("oxigraph")
    if not found:
        raise KGUnavailable(
            "the oxigraph server (PyPI package 'oxigraph') is not installed: "
            "pip install oxigraph, or pass --skip-remote"
        )
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vm_hwm_kb(pid: int) -> int:
    """Peak RSS (VmHWM, KiB) of a running process, 0 if unknown."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]


@contextmanager
def oxigraph_server(location: Path, log: Path) -> Iterator[Server]:
    """``oxigraph serve-read-only`` on a free 127.0.0.1 port, stopped on the way out."""
    import httpx

    port = _free_port()
    url = f"http://127.0.0.1:{port}/query"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [oxigraph_binary(), "serve-read-only", "--location", str(location), "--bind", f"127.0.0.1:{port}"],
            stdout=fh, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                tail = (log.read_text(errors="replace").strip().splitlines() or ["(no output)"])[-1]
                raise KGUnavailable(f"oxigraph serve exited: {tail}")
            try:
                if httpx.get(url, params={"query": "ASK {}"}, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise KGUnavailable("oxigraph serve did not answer within 60 s")
            time.sleep(0.1)
        yield Server(url, proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def build_server_store(kb: Path, work: Path) -> tuple[Path, list[tuple[object, ...]]]:
    """``kg convert`` + ``oxigraph load`` of a plain file; the store and its load rows."""
    from traversals.kg.formats import write_ntriples

    nt = work / (kb.stem + ".nt")
    started = time.perf_counter()
    stats = write_ntriples(kb, nt)
    convert_s = time.perf_counter() - started
    db = work / (kb.stem + "-db")
    seconds, rss, _ = run_measured([oxigraph_binary(), "load", "--location", str(db), "--file", str(nt)])
    n = stats.triples + stats.label_triples
    rows: list[tuple[object, ...]] = [
        (kb.name, n, "N-Triples (`traversals.kg.formats.write_ntriples`)", f"{convert_s:.2f}", "–", f"{nt.stat().st_size / 2**20:.0f}"),
        (kb.name, n, "server store (`oxigraph load`)", f"{seconds:.2f}", _mb(rss), _mb(_dir_kb(db))),
    ]
    nt.unlink()
    return db, rows


# ----------------------------------------------------------------------- calls


@dataclass
class Measure:
    first: float
    times: list[float] = field(default_factory=list)
    returned: int = 0
    omitted: int | None = None
    problem: str = ""


@dataclass(frozen=True)
class Target:
    kg: str  # which KG (a row label)
    name: str  # the entity's name in the triple file
    note: str  # "ordinary", "hub" …


Call = Callable[[], Awaitable[tuple[int, int | None, str]]]


async def timed(call: Call, repeat: int) -> Measure:
    """The first call, then ``repeat`` more; the last result's size and check."""
    started = time.perf_counter()
    returned, omitted, problem = await call()
    m = Measure(first=time.perf_counter() - started)
    for _ in range(repeat):
        started = time.perf_counter()
        returned, omitted, problem = await call()
        m.times.append(time.perf_counter() - started)
    m.returned, m.omitted, m.problem = returned, omitted, problem
    return m


async def measure_calls(
    kg: KnowledgeGraph, target: Target, counts: Counter[tuple[str, str, bool]], repeat: int
) -> dict[str, Measure]:
    """search (exact, and a typo for ordinary entities), get_relations and get_edges on
    the target's most frequent relation, each checked against its limit and the file."""
    entity = Entity(iris.entity_iri(target.name), iris.name_label(target.name), kg=kg.name)
    label = entity.label
    out: dict[str, Measure] = {}

    def search(text: str) -> Call:
        async def go() -> tuple[int, int | None, str]:
            found = await kg.search(text, limit=SEARCH_LIMIT)
            problem = f"{len(found)} > limit" if len(found) > SEARCH_LIMIT else ""
            if text == label and entity.id not in {e.id for e in found}:
                problem = "exact label not found"
            return len(found), None, problem
        return go

    out[f'search("{label}")'] = await timed(search(label), repeat)
    if target.note == "ordinary":
        out[f'search("{typo(label)}")'] = await timed(search(typo(label)), repeat)

    n_relations = sum(1 for (e, _, _) in counts if e == target.name)

    async def relations() -> tuple[int, int | None, str]:
        rels = await kg.get_relations([entity])
        got = len(rels.items) + rels.omitted
        problem = f"{len(rels.items)} > limit" if len(rels.items) > DEFAULT_MAX_RELATIONS else ""
        if got != n_relations:
            problem = f"{got} relations, file has {n_relations}"
        return len(rels.items), rels.omitted, problem

    out["get_relations"] = await timed(relations, repeat)
    rels = await kg.get_relations([entity])
    if not rels.items:
        return out
    top = rels.items[0]
    expected = counts[(target.name, top.id, top.inverse)]

    async def edges() -> tuple[int, int | None, str]:
        got = await kg.get_edges([entity], top)
        problem = f"{len(got.edges)} > limit" if len(got.edges) > DEFAULT_MAX_EDGES else ""
        if len(got.edges) + got.omitted != expected:
            problem = f"{len(got.edges)} + {got.omitted} omitted, file has {expected}"
        return len(got.edges), got.omitted, problem

    out[f"get_edges {top.key} ({expected:,} edges)"] = await timed(edges, repeat)
    return out


def _cells(m: Measure | None) -> list[str]:
    if m is None:
        return ["–", "–", "–", "–"]
    size = f"{m.returned}" + (f" (+{m.omitted:,})" if m.omitted else "")
    med = _ms(statistics.median(m.times)) if m.times else "–"
    p95 = _ms(percentile(m.times, 95)) if m.times else "–"
    return [_ms(m.first), med, p95, size + (f" **{m.problem}**" if m.problem else "")]


# ----------------------------------------------------------------------- parity


@dataclass(frozen=True)
class Difference:
    """One answer the two back ends gave differently."""

    check: str  # a row of the parity table ("get_edges", "search exact label" …)
    entity: str  # the entity (its label) or the query text
    what: str  # the relation key, or "" for search / get_relations
    first: str  # what the first back end (embedded) returned
    second: str  # what the second one (remote) returned
    strict: bool  # an uncapped answer the docs say is the same: fails the run
    note: str = ""  # why, when the cap explains it


@dataclass
class ParityReport:
    """Per check: how many answers were compared, equal, different; and each difference."""

    checked: Counter[str] = field(default_factory=Counter)
    equal: Counter[str] = field(default_factory=Counter)
    differences: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # capped answers: which items each side kept

    def record(self, check: str, diff: Difference | None) -> None:
        self.checked[check] += 1
        if diff is None:
            self.equal[check] += 1
        else:
            self.differences.append(diff)

    @property
    def failed(self) -> bool:
        """Did an uncapped answer differ?"""
        return any(d.strict for d in self.differences)

    def table(self) -> str:
        different = Counter(d.check for d in self.differences)
        strict = Counter(d.check for d in self.differences if d.strict)
        rows = [[c, n, self.equal[c], different[c], strict[c]] for c, n in self.checked.items()]
        return markdown_table(["check", "checked", "equal", "different", "of which uncapped (fail)"], rows)

    def details(self, most: int = 40) -> str:
        lines = []
        for d in self.differences[:most]:
            where = f"{d.entity}" + (f", {d.what}" if d.what else "")
            lines.append(f"* **{d.check}** ({where}){'' if d.strict else (' [capped]' if d.check.startswith('get_') else ' [by design]')}:\n"
                         f"  embedded: {d.first}\n  remote:   {d.second}" + (f"\n  why: {d.note}" if d.note else ""))
        if len(self.differences) > most:
            lines.append(f"* … and {len(self.differences) - most} more")
        return "\n".join(lines)


def show_id(ident: str) -> str:
    """An entity id, short: a minted or other IRI's local name, a literal's N-Triples form."""
    return iris.local_name(ident) if "://" in ident and not ident.startswith('"') else ident


def show_edge(e: Edge) -> str:
    return f"({show_id(e.subject.id)}, {e.relation.id}, {show_id(e.object.id)})"


def _listed(items: Sequence[str], most: int = 6) -> str:
    if not items:
        return "–"
    more = f" … (+{len(items) - most})" if len(items) > most else ""
    return "; ".join(items[:most]) + more


def _rel_view(rels: Relations) -> list[tuple[str, str, str]]:
    return [(r.key, r.label, r.display) for r in rels.items]


def _ends(edges: Edges) -> dict[str, str]:
    """Label of every entity the edges touch, by id."""
    return {e.id: e.label for edge in edges.edges for e in (edge.subject, edge.object)}


async def compare_relations(report: ParityReport, a: KnowledgeGraph, b: KnowledgeGraph, entity: Entity) -> tuple[Relations, Relations]:
    ra, rb = await a.get_relations([entity]), await b.get_relations([entity])
    capped = bool(ra.omitted or rb.omitted)
    va, vb = _rel_view(ra), _rel_view(rb)
    diff = None
    if (va, ra.omitted) != (vb, rb.omitted):
        if set(va) == set(vb) and ra.omitted == rb.omitted:
            first, second = "same relations, order " + " ".join(k for k, _, _ in va), "order " + " ".join(k for k, _, _ in vb)
        else:
            first = _listed([f"{k} ({lab!r}, shown {disp!r})" for k, lab, disp in va if (k, lab, disp) not in vb]) + f"; omitted {ra.omitted}"
            second = _listed([f"{k} ({lab!r}, shown {disp!r})" for k, lab, disp in vb if (k, lab, disp) not in va]) + f"; omitted {rb.omitted}"
        diff = Difference("get_relations", entity.label, "", first, second, strict=not capped)
    report.record("get_relations", diff)
    return ra, rb


def explain_cut(full: Sequence[Edge], kept: Sequence[Edge], keep: int, side: str, inverse: bool) -> str:
    """Which of ``full`` (every edge, in the embedded store's order: by the other end's
    label) ``kept`` holds, by rank, and whether ties at the cut explain the ones beyond it."""
    rank = {show_edge(e): i + 1 for i, e in enumerate(full)}
    ranks = sorted(rank.get(show_edge(e), 0) for e in kept)
    beyond = [r for r in ranks if r > keep or r == 0]
    if not beyond:
        return f"{side} keeps ranks 1–{keep} (the first {keep} by label)"

    def label(i: int) -> str:  # the other end's label
        e = full[i - 1]
        return (e.subject if inverse else e.object).label

    def key(i: int) -> str:  # … as both orders see it (lower(), SPARQL's LCASE)
        return label(i).lower()

    cut = key(keep) if keep <= len(full) else ""
    ties = [r for r in beyond if r and key(r) == cut]
    unknown = [r for r in beyond if not r]
    text = f"{side} keeps {len(kept) - len(beyond)} of ranks 1–{keep} and ranks {_listed([str(r) for r in beyond if r], 8)}"
    if unknown:
        text += f", and {len(unknown)} edges the full list does not hold"
    if len(ties) == len(beyond):
        text += f": all share the label at the cut ({cut!r}), a tie the server breaks (documented)"
    else:
        odd = [r for r in beyond if r and key(r) != cut]
        text += f"; beyond the cut ({cut!r} at #{keep}) with other labels: {_listed([f'#{r} {key(r)!r}' for r in odd], 4)}"
    return text


async def compare_edges(
    report: ParityReport, a: KnowledgeGraph, b: KnowledgeGraph, entity: Entity, ra: Relation, rb: Relation
) -> None:
    ea, eb = await a.get_edges([entity], ra), await b.get_edges([entity], rb)
    capped = bool(ea.omitted or eb.omitted)
    sa, sb = {show_edge(e) for e in ea.edges}, {show_edge(e) for e in eb.edges}
    la, lb = _ends(ea), _ends(eb)
    relabelled = sorted(f"{show_id(i)}: {la[i]!r} / {lb[i]!r}" for i in la.keys() & lb.keys() if la[i] != lb[i])
    if not capped:
        diff = None
        if sa != sb:
            diff = Difference("get_edges", entity.label, ra.key, f"{len(sa)} edges, only here: {_listed(sorted(sa - sb))}",
                              f"{len(sb)} edges, only here: {_listed(sorted(sb - sa))}", strict=True)
        elif relabelled:
            diff = Difference("get_edges", entity.label, ra.key, "labels (embedded / remote): " + _listed(relabelled), "", strict=True)
        report.record("get_edges", diff)
        return
    ta, tb = len(ea.edges) + ea.omitted, len(eb.edges) + eb.omitted
    diff = None
    if ta != tb or len(ea.edges) != len(eb.edges):
        diff = Difference("get_edges capped: total", entity.label, ra.key, f"{len(ea.edges)} + {ea.omitted} omitted",
                          f"{len(eb.edges)} + {eb.omitted} omitted", strict=False,
                          note="counts differ: the remote count stops at count_limit" if tb < ta else "")
    report.record("get_edges capped: total", diff)
    diff = None
    if sa != sb or relabelled:
        full = (await a.get_edges([entity], ra, limit=ta)).edges
        keep = len(ea.edges)
        note = "; ".join(explain_cut(full, kept, keep, side, ra.inverse) for side, kept in (("embedded", ea.edges), ("remote", eb.edges)))
        bound = int(getattr(b, "order_limit", 0) or 0)
        if bound and ta > bound:
            note += (f" — {ta:,} edges is more than the remote order_limit ({bound:,}): it shows the first by label "
                     f"of the first {bound:,} rows the server gives (documented)")
        diff = Difference("get_edges capped: shown", entity.label, ra.key,
                          f"only here: {_listed(sorted(sa - sb))}", f"only here: {_listed(sorted(sb - sa))}"
                          + (f"; labels: {_listed(relabelled)}" if relabelled else ""), strict=False, note=note)
    report.record("get_edges capped: shown", diff)
    report.notes.append(
        f"{entity.label} {ra.key}: {ta:,} edges, both show {len(ea.edges)}"
        + (" — the same ones" if diff is None else f" — {len(sa - sb)} differ: {diff.note}")
    )


async def compare_search(report: ParityReport, a: KnowledgeGraph, b: KnowledgeGraph, entity: Entity, limit: int = SEARCH_LIMIT) -> None:
    """The exact label: the same hits carrying that label and the same first hit (a strict
    check: the remote's exact stage finds every node so labelled, the embedded store's
    exact index too). The lower-cased label and, for a label with accents, the label
    without them: the same first hit (informative: the stages differ by design)."""
    text = entity.label
    fa, fb = await a.search(text, limit=limit), await b.search(text, limit=limit)
    xa, xb = sorted(show_id(e.id) for e in fa if e.label == text), sorted(show_id(e.id) for e in fb if e.label == text)
    diff = None
    if xa != xb or (fa[:1] and fb[:1] and fa[0].id != fb[0].id) or bool(fa) != bool(fb):
        # a node the KG gives no label is shown by its IRI's local name: the embedded store
        # indexes that name, an endpoint's search matches label values only (documented)
        unlabelled = not fb and text == fallback_label(entity.id)
        diff = Difference("search exact label", text, "",
                          f"first {show_id(fa[0].id) if fa else '–'}; labelled so: {_listed(xa)}",
                          f"first {show_id(fb[0].id) if fb else '–'}; labelled so: {_listed(xb)}",
                          strict=len(xa) < limit and len(xb) < limit and not unlabelled,
                          note="a node without a label: the embedded store finds it by its local name, an "
                               "endpoint searches label values only (docs/remote-kgs.md)" if unlabelled else "")
    report.record("search exact label", diff)
    variants = [("search lower-cased", text.lower())]
    from traversals.kg.store import fold_accents  # the embedded store's folding

    if fold_accents(text) != text and fold_accents(text).isascii():  # "Beyoncé" -> "Beyonce", not "8½" -> "81⁄2"
        variants.append(("search without accents", fold_accents(text)))
    for check, query in variants:
        fa, fb = await a.search(query, limit=limit), await b.search(query, limit=limit)
        top_a, top_b = (show_id(fa[0].id) if fa else "–"), (show_id(fb[0].id) if fb else "–")
        report.record(check, None if top_a == top_b else Difference(
            check, query, "", f"first {top_a} of {len(fa)}", f"first {top_b} of {len(fb)}", strict=False,
            note="informative: the search stages differ by design (remote: exact, case variants, icase, contains; "
                 "embedded: exact, normalised - case and accents folded -, every word, fuzzy)"))


async def parity(a: KnowledgeGraph, b: KnowledgeGraph, entities: Sequence[Entity], *, search: bool = True) -> ParityReport:
    """Compare two back ends holding the same KG (``a`` the embedded store, the reference
    order; ``b`` the remote one) on ``entities``: search, get_relations, and get_edges on
    every relation both offer (one that only one side offers is a get_relations difference)."""
    report = ParityReport()
    for entity in entities:
        if search and not entity.id.startswith('"'):
            await compare_search(report, a, b, entity)
        ra, rb = await compare_relations(report, a, b, entity)
        by_key_b = {r.key: r for r in rb.items}
        for rel in ra.items:
            if rel.key in by_key_b:
                await compare_edges(report, a, b, entity, rel, by_key_b[rel.key])
    return report


def parity_entities(path: Path, counts: Counter[tuple[str, str, bool]], n: int, seed: int) -> tuple[list[str], list[str]]:
    """The names to compare in a plain triple file: the biggest hub, every entity with
    more than ``DEFAULT_MAX_EDGES`` edges of one relation (their lists are cut), a label
    with quotes, one with non-ASCII letters, the entity with the most relations, and ``n``
    more drawn with ``seed``; and a line saying which special ones were found."""
    names = sorted({e for e, _, _ in counts})
    rng = random.Random(seed)
    order = rng.sample(names, len(names))
    picked: dict[str, str] = {}
    picked[biggest_hubs(counts, 1)[0][0]] = "hub"
    capped = sorted({e for (e, _, _), k in counts.items() if k > DEFAULT_MAX_EDGES})
    for e in capped:
        picked.setdefault(e, "capped")
    per_entity = Counter(e for e, _, _ in counts)
    picked.setdefault(min(per_entity, key=lambda e: (-per_entity[e], e)), "most relations")
    from traversals.kg.store import fold_accents

    for why, test in (
        ("quotes", lambda s: '"' in s or "'" in s),
        ("non-ASCII", lambda s: not s.isascii()),
        ("accents", lambda s: fold_accents(s) != s and fold_accents(s).isascii()),
    ):
        found = next((s for s in order if test(s)), None)
        if found is not None:
            picked.setdefault(found, why)
    for s in order[:n]:
        picked.setdefault(s, "drawn")
    notes = [f"{why}: {name!r}" for name, why in picked.items() if why not in ("drawn", "capped")]
    notes.append(f"{len(capped)} entities with more than {DEFAULT_MAX_EDGES} edges of a relation")
    notes.append("literal-valued relation: none (a plain s|r|o file mints an IRI for every object)")
    return list(picked), notes


def write_edge_cases(path: Path) -> list[str]:
    """A small N-Triples KG of what a plain file cannot hold: literal values (a date, an
    integer, a language-tagged and a quoted string), labels with quotes and accents, a
    node with labels in two languages, one with no label; the ids to compare on."""
    import pyoxigraph as ox

    ns = "http://edge.example/"
    xsd = "http://www.w3.org/2001/XMLSchema#"

    def n(x: str) -> ox.NamedNode:
        return ox.NamedNode(ns + x)

    label = ox.NamedNode(iris.RDFS_LABEL)
    integer = ox.NamedNode(xsd + "integer")
    triples = [
        (n("amelie"), label, ox.Literal("Amélie")),
        (n("quoted"), label, ox.Literal('The "Quoted" Film')),
        (n("jpj"), label, ox.Literal("Jean-Pierre Jeunet")),
        (n("munich"), label, ox.Literal("Munich", language="en")),
        (n("munich"), label, ox.Literal("München", language="de")),
        (n("directed_by"), label, ox.Literal("directed by")),
        (n("amelie"), n("directed_by"), n("jpj")),
        (n("quoted"), n("directed_by"), n("jpj")),
        (n("Un_labelled"), n("directed_by"), n("jpj")),
        (n("amelie"), n("release_date"), ox.Literal("2001-04-25", datatype=ox.NamedNode(xsd + "date"))),
        (n("amelie"), n("runtime"), ox.Literal("122", datatype=integer)),
        (n("quoted"), n("runtime"), ox.Literal("122", datatype=integer)),
        (n("amelie"), n("title"), ox.Literal("Le Fabuleux Destin d'Amélie Poulain", language="fr")),
        (n("quoted"), n("tagline"), ox.Literal('She said "hi"\nand left')),
        (n("jpj"), n("born_in"), n("munich")),
    ]
    # two hubs whose 51 members are cut to 50: "tie hub"'s last two share the label
    # "zed" (which one is shown is each side's own tie-break), and "eszett hub"'s last
    # two are "Straße" and "strasse b": both sides order by lower case, SPARQL's LCASE
    # ("straße" after "strasse b"; by casefold, "strasse", the store showed "Straße" once)
    for hub, last in (("tie_hub", ("zed", "zed")), ("eszett_hub", ("Straße", "strasse b"))):
        triples.append((n(hub), label, ox.Literal(hub.replace("_", " "))))
        members = [f"a {i:02d}" for i in range(DEFAULT_MAX_EDGES - 1)] + list(last)
        for i, name in enumerate(members):
            member = n(f"{hub}_m{i:02d}")
            triples.append((member, label, ox.Literal(name)))
            triples.append((member, n("member_of"), n(hub)))
    with path.open("wb") as fh:
        ox.serialize((ox.Triple(*t) for t in triples), fh, ox.RdfFormat.N_TRIPLES)
    from traversals.kg.store import literal_id

    ids = [ns + x for x in ("amelie", "quoted", "jpj", "munich", "Un_labelled", "tie_hub", "eszett_hub")]
    return ids + [literal_id(ox.Literal("122", datatype=integer))]


async def entities_of(kg: KnowledgeGraph, ids: Sequence[str]) -> list[Entity]:
    """The entities with these ids as the embedded store names them (label included)."""
    from traversals.kg.store import OxigraphKG

    assert isinstance(kg, OxigraphKG)
    return [e for i in ids if (e := kg.entity(i)) is not None]


async def parity_run(path: Path, work: Path, entities: Callable[[KnowledgeGraph], Awaitable[list[Entity]]], name: str) -> ParityReport:
    """Load ``path`` into the embedded store and into an Oxigraph server (``kg convert`` +
    ``oxigraph load`` for a plain file, as the timing does), and compare them."""
    from traversals.kg.sparql import SparqlKG
    from traversals.kg.store import OxigraphKG

    kg = OxigraphKG.from_file(path, name=name)
    try:
        chosen = await entities(kg)
        db = server_store(path, work)
        with oxigraph_server(db, work / f"{name}-parity-server.log") as server:
            remote = SparqlKG(server.url, name=name, timeout=120)
            try:
                return await parity(kg, remote, chosen)
            finally:
                await remote.close()
    finally:
        await kg.close()


def server_store(path: Path, work: Path) -> Path:
    """An Oxigraph store directory holding ``path`` (a plain file goes through ``kg
    convert``'s N-Triples first), for ``oxigraph serve-read-only``."""
    from traversals.kg.formats import detect_format, write_ntriples

    fmt = detect_format(path)
    nt = path
    if fmt is None or fmt.kind == "plain":
        nt = work / (path.stem + "-parity.nt")
        write_ntriples(path, nt)
    db = work / (path.stem + "-parity-db")
    run_measured([oxigraph_binary(), "load", "--location", str(db), "--file", str(nt)])
    if nt != path:
        nt.unlink()
    return db


async def parity_section(args: argparse.Namespace, work: Path) -> tuple[str, bool]:
    """The parity tables (markdown) and whether an uncapped answer differed."""
    started = time.perf_counter()
    parts: list[str] = []
    failed = False
    runs: list[tuple[str, Path, Callable[[KnowledgeGraph], Awaitable[list[Entity]]], list[str]]] = []
    if not args.quick:
        path = need(args.data / "metaqa" / "kb.txt")
        names, notes = parity_entities(path, degrees(path), args.parity_sample, args.seed)

        async def metaqa(kg: KnowledgeGraph) -> list[Entity]:
            return [Entity(iris.entity_iri(s), iris.name_label(s), kg=kg.name) for s in names]

        runs.append(("MetaQA", path, metaqa, [f"{len(names)} entities ({args.parity_sample} drawn with seed {args.seed})", *notes]))
    hubs = work / "parity-hubs.txt"
    write_synthetic(hubs)
    hub_names = ["item7", *(f"Hub {n}" for n in HUB_SIZES)]

    async def synthetic(kg: KnowledgeGraph) -> list[Entity]:
        return [Entity(iris.entity_iri(s), iris.name_label(s), kg=kg.name) for s in hub_names]

    runs.append(("synthetic", hubs, synthetic, [", ".join(hub_names) + " (more edges than order_limit, 10,000)"]))
    edge_file = work / "edge-cases.nt"
    ids = write_edge_cases(edge_file)

    async def edge_cases(kg: KnowledgeGraph) -> list[Entity]:
        return await entities_of(kg, ids)

    runs.append(("edge cases", edge_file, edge_cases, [f"{len(ids)} entities: every node, two hubs of 51 and the literal 122 (who has it)"]))
    for name, path, chooser, notes in runs:
        report = await parity_run(path, work, chooser, name)
        failed = failed or report.failed
        parts.append(f"Parity, {name} ({path.name}; {'; '.join(notes)}):")
        parts.append(report.table())
        if report.differences:
            parts.append("Differences:\n\n" + report.details())
        if report.notes:
            same = [n for n in report.notes if n.endswith("the same ones")]
            shown = [n for n in report.notes if n not in same] + same[:3]
            more = f"\n* … and {len(same) - 3} more capped answers with the same edges on both sides" if len(same) > 3 else ""
            parts.append("Capped answers:\n\n" + "\n".join(f"* {n}" for n in shown) + more)
    parts.append(f"Parity {'FAILED: an uncapped answer differs' if failed else 'passed: every uncapped answer is the same'} "
                 f"({time.perf_counter() - started:.0f} s).")
    return "\n\n".join(parts), failed


# ----------------------------------------------------------------------- main


@dataclass
class Bench:
    """The KGs measured: a plain file, its edge counts, the entities to call on."""

    name: str
    path: Path
    targets: list[Target]
    counts: Counter[tuple[str, str, bool]]


def metaqa_bench(data: Path) -> Bench:
    path = need(data / "metaqa" / "kb.txt")
    counts = degrees(path)
    hub = biggest_hubs(counts, 1)[0][0]  # Drama: 4,005 films have_genre it
    return Bench("MetaQA", path, [Target("MetaQA", "Charles Bail", "ordinary"), Target("MetaQA", hub, "hub")], counts)


def synthetic_bench(work: Path) -> Bench:
    path = work / "hubs.txt"
    write_synthetic(path)
    targets = [Target("synthetic", "item7", "ordinary")]
    targets += [Target("synthetic", f"Hub {n}", "hub") for n in HUB_SIZES]
    return Bench("synthetic", path, targets, degrees(path))


def need(path: Path) -> Path:
    if not path.is_file():
        raise BadInput(f"{path}: no such file (give the folder holding metaqa/ and pathquestion/ with --data)")
    return path


async def call_rows(bench: Bench, repeat: int, remote: bool, work: Path) -> tuple[list[list[object]], list[tuple[object, ...]]]:
    """One row per (entity, call): embedded and remote figures side by side; and the
    remote load rows (convert, ``oxigraph load``, the server's peak RSS)."""
    from traversals.kg.sparql import SparqlKG
    from traversals.kg.store import OxigraphKG

    kg = OxigraphKG.from_file(bench.path, name=bench.name)
    try:
        embedded = [await measure_calls(kg, t, bench.counts, repeat) for t in bench.targets]
    finally:
        await kg.close()
    served: list[dict[str, Measure]] = [{} for _ in bench.targets]
    load_rows: list[tuple[object, ...]] = []
    if remote:
        db, load_rows = build_server_store(bench.path, work)
        started = time.perf_counter()
        with oxigraph_server(db, work / f"{bench.name}-server.log") as server:
            start_s = time.perf_counter() - started
            sparql = SparqlKG(server.url, name=bench.name, timeout=120)
            try:
                served = [await measure_calls(sparql, t, bench.counts, repeat) for t in bench.targets]
            finally:
                await sparql.close()
            rss = vm_hwm_kb(server.proc.pid)
        load_rows.append((bench.path.name, "", "server start; peak RSS after all calls", f"{start_s:.2f}", _mb(rss) if rss else "?", ""))
    rows: list[list[object]] = []
    for target, emb, rem in zip(bench.targets, embedded, served):
        for call, m in emb.items():
            rows.append([bench.name, f"{iris.name_label(target.name)} ({target.note})", call, *_cells(m), *_cells(rem.get(call))])
    return rows, load_rows


async def main(args: argparse.Namespace) -> int:
    if args.load_child:
        return load_child(*args.load_child)
    remote = not args.skip_remote
    if args.parity_sample < 0:
        raise BadInput("--parity-sample must be at least 0")
    if args.parity_only and not remote:
        raise BadInput("--parity-only compares with the remote back end: drop --skip-remote")
    if remote:
        oxigraph_binary()  # refuse early, in one line
    if args.parity_only:
        with tempfile.TemporaryDirectory(prefix="kg-parity-") as tmp:
            text, failed = await parity_section(args, Path(tmp))
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
        return 1 if failed else 0
    repeat = args.repeat if args.repeat is not None else (5 if args.quick else 50)
    if repeat < 1:
        raise BadInput("--repeat must be at least 1")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kg-bench-") as tmp:
        work = Path(tmp)
        benches = [synthetic_bench(work)]
        files: list[Path] = [benches[0].path]
        if not args.quick:
            benches.insert(0, metaqa_bench(args.data))
            files = [benches[0].path, need(args.data / "pathquestion" / "PQL2-KB.txt"), benches[1].path]

        load: list[tuple[object, ...]] = []
        _, base_rss, _ = measure_load("none", Path(""))
        load.append(("(none: Python + imports)", "", "–", "–", _mb(base_rss), ""))
        for f in files:
            seconds, rss, n = measure_load("memory", f)
            load.append((f.name, n, "memory", f"{seconds:.2f}", _mb(rss), ""))
            if args.quick:
                continue
            store_dir = work / (f.stem + "-store")
            seconds, rss, n = measure_load("store", f, store_dir)
            load.append((f.name, n, "store directory (`from_file(store_dir=)`)", f"{seconds:.2f}", _mb(rss), _mb(_dir_kb(store_dir))))
            seconds, rss, n = measure_load("reopen", f, store_dir)
            load.append((f.name, n, "reopen the store read-only (`open_kg(DIR)`)", f"{seconds:.2f}", _mb(rss), ""))
            shutil.rmtree(store_dir)

        rows: list[list[object]] = []
        for bench in benches:
            got, server_rows = await call_rows(bench, repeat, remote, work)
            rows += got
            load += server_rows
        parity_text, failed = await parity_section(args, work) if remote else ("Parity: not checked (--skip-remote).", False)

    side = ["first ms", "median ms", "p95 ms", "returned (+omitted)"]
    text = "\n\n".join([
        f"Machine: {machine()}. Calls: first, then median and p95 of {repeat}; "
        f"limits {SEARCH_LIMIT} (search), {DEFAULT_MAX_RELATIONS} (relations), {DEFAULT_MAX_EDGES} (edges).",
        markdown_table(["file", "triples", "into", "seconds", "peak RSS MB", "disk MB"], load),
        markdown_table(
            ["KG", "entity", "call", *(f"embedded {h}" for h in side), *(f"remote {h}" for h in side)], rows
        ),
        parity_text,
        f"Total {time.perf_counter() - started:.0f} s.",
    ])
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=None, help="timed calls after the first (default 50; 5 with --quick)")
    ap.add_argument("--skip-remote", action="store_true", help="no Oxigraph server: the embedded store only")
    ap.add_argument("--quick", action="store_true", help="the synthetic hubs only, small N")
    ap.add_argument("--out", type=Path, default=None, help="also write the tables (markdown) to this file")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                    help="folder holding metaqa/kb.txt and pathquestion/PQL2-KB.txt")
    ap.add_argument("--parity-only", action="store_true",
                    help="only check that the embedded and remote back ends give the same answers (no timing); exit 1 if an uncapped one differs")
    ap.add_argument("--parity-sample", type=int, default=40, help="MetaQA entities drawn for the parity check (default 40)")
    ap.add_argument("--seed", type=int, default=0, help="seed of that draw (default 0)")
    ap.add_argument("--load-child", nargs=3, metavar=("KIND", "PATH", "STORE_DIR"), help=argparse.SUPPRESS)
    return ap


if __name__ == "__main__":
    from clean_exit import run_script

    raise SystemExit(run_script(main, parser().parse_args()))
