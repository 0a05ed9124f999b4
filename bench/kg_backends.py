"""What the KG back ends cost: loading a KG, and each interface call on ordinary entities
and on hubs, embedded (pyoxigraph in process) and remote (a real Oxigraph SPARQL server
on 127.0.0.1), side by side.

    python bench/kg_backends.py                    # MetaQA + PathQuestion + synthetic hubs, about a minute
    python bench/kg_backends.py --quick            # the synthetic hubs only, small N, about 10 s
    python bench/kg_backends.py --repeat 50 --skip-remote --out kg-backends.md

Loading: MetaQA's ``kb.txt`` and PathQuestion's ``PQL2-KB.txt`` (read from ``--data``,
default ``../shared/data``) and a synthetic KG (one entity with 10,000 incoming edges, one
with 50,000: more than the 20,000 rows the embedded store once read), each loaded in a fresh Python process
so its peak RSS (VmHWM) is its own; into memory and into a persistent
store directory, which is then reopened read-only. Calls: ``search`` (the exact label and a
typo), ``get_relations([e])`` and ``get_edges([e], r)`` with ``r`` the entity's most frequent
relation: the first call, then the median and p95 of ``--repeat`` more. Each result is
checked: at most ``limit`` items, and for ``get_edges`` returned + ``omitted`` = the edges
the file holds. Figures, not assertions; run it on an idle machine (wall-clock seconds).
"""

from __future__ import annotations

import argparse
import json
import os
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
from traversals.kg.base import DEFAULT_MAX_EDGES, DEFAULT_MAX_RELATIONS, Entity, KnowledgeGraph

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
    if remote:
        oxigraph_binary()  # refuse early, in one line
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

    side = ["first ms", "median ms", "p95 ms", "returned (+omitted)"]
    text = "\n\n".join([
        f"Machine: {machine()}. Calls: first, then median and p95 of {repeat}; "
        f"limits {SEARCH_LIMIT} (search), {DEFAULT_MAX_RELATIONS} (relations), {DEFAULT_MAX_EDGES} (edges).",
        markdown_table(["file", "triples", "into", "seconds", "peak RSS MB", "disk MB"], load),
        markdown_table(
            ["KG", "entity", "call", *(f"embedded {h}" for h in side), *(f"remote {h}" for h in side)], rows
        ),
        f"Total {time.perf_counter() - started:.0f} s.",
    ])
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=None, help="timed calls after the first (default 50; 5 with --quick)")
    ap.add_argument("--skip-remote", action="store_true", help="no Oxigraph server: the embedded store only")
    ap.add_argument("--quick", action="store_true", help="the synthetic hubs only, small N")
    ap.add_argument("--out", type=Path, default=None, help="also write the tables (markdown) to this file")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                    help="folder holding metaqa/kb.txt and pathquestion/PQL2-KB.txt")
    ap.add_argument("--load-child", nargs=3, metavar=("KIND", "PATH", "STORE_DIR"), help=argparse.SUPPRESS)
    return ap


if __name__ == "__main__":
    from clean_exit import run_script

    raise SystemExit(run_script(main, parser().parse_args()))
