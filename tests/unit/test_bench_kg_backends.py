"""The pure helpers of bench/kg_backends.py (the benchmark itself prints figures and is
run by hand), and its one-line refusal of a missing data folder."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def kb():
    spec = importlib.util.spec_from_file_location("kg_backends", BENCH / "kg_backends.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["kg_backends"] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("kg_backends", None)


def test_percentile_interpolates_between_ranks(kb):
    assert kb.percentile([3.0], 95) == 3.0
    assert kb.percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert kb.percentile(list(map(float, range(101))), 95) == pytest.approx(95.0)
    with pytest.raises(ValueError):
        kb.percentile([], 50)


def test_degrees_count_distinct_edges_both_ways_in_either_delimiter(kb, tmp_path):
    f = tmp_path / "kb.txt"
    f.write_text("a|r|Hub\nb|r|Hub\nb|r|Hub\na|s|b\nbad line\n", encoding="utf-8")
    counts = kb.degrees(f)
    assert counts[("Hub", "r", True)] == 2  # the duplicate line counts once, as in a store
    assert counts[("a", "r", False)] == 1 and counts[("b", "s", True)] == 1
    assert kb.biggest_hubs(counts, 1) == [("Hub", "r", True, 2)]
    assert kb.split_line("x\ty\tz\n") == ("x", "y", "z")


def test_the_synthetic_kg_has_one_hub_per_size(kb, tmp_path):
    f = tmp_path / "hubs.txt"
    kb.write_synthetic(f, (3, 5))
    counts = kb.degrees(f)
    assert counts[("Hub 3", "tagged", True)] == 3 and counts[("Hub 5", "tagged", True)] == 5
    assert counts[("item2", "tagged", False)] == 2 and counts[("item4", "tagged", False)] == 1


def test_markdown_table_and_typo(kb):
    assert kb.markdown_table(["a", "b"], [[1, "x"]]) == "| a | b |\n|---|---|\n| 1 | x |"
    assert kb.typo("Charles Bail") == "Cahrles Bail" and kb.typo("abc") == "abc"


def test_missing_data_is_refused_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, str(BENCH / "kg_backends.py"), "--skip-remote", "--data", str(tmp_path / "nowhere")],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("kg_backends.py: error: ") and "nowhere/metaqa/kb.txt: no such file" in line


# -- parity: the same KG embedded and served gives the same answers --------------------------

SMALL_KG = "".join(
    ["Charles Bail|directed_by|The Gumball Rally\n", "The Gumball Rally|starred_actors|Michael Sarrazin\n",
     "The Gumball Rally|has_genre|Comedy\n", "Zoë's Film|has_genre|Comedy\n", "Zoë's Film|release_year|1976\n"]
    + [f"Film {i:02d}|has_genre|Drama\n" for i in range(53)]  # a hub: its list is cut to 50
    # a hub whose cut falls between "Straße" and "strasse b": casefold ("strasse") and
    # SPARQL's LCASE ("straße", after "strasse b") put a different one 50th
    + [f"{name}|has_genre|Eszett\n" for name in [f"a {i:02d}" for i in range(49)] + ["Straße", "strasse b"]]
)


@pytest.fixture
def served(kb, tmp_path):
    """An Oxigraph server on 127.0.0.1 holding SMALL_KG (converted as the bench does)."""
    if not (Path(sys.executable).parent / "oxigraph").exists() and not shutil.which("oxigraph"):
        pytest.skip("the oxigraph server (PyPI package 'oxigraph') is not installed")
    src = tmp_path / "small.txt"
    src.write_text(SMALL_KG, encoding="utf-8")
    db = kb.server_store(src, tmp_path)
    with kb.oxigraph_server(db, tmp_path / "server.log") as server:
        yield src, server.url


def entities(names):
    from traversals.kg import iris
    from traversals.kg.base import Entity

    return [Entity(iris.entity_iri(n), iris.name_label(n)) for n in names]


NAMES = ["Charles Bail", "The Gumball Rally", "Comedy", "Zoë's Film", "Drama", "1976"]


async def test_parity_reports_equality_on_one_kg_loaded_both_ways(kb, served):
    from traversals.kg.sparql import SparqlKG
    from traversals.kg.store import OxigraphKG

    src, url = served
    embedded = OxigraphKG.from_file(src, name="small")
    async with SparqlKG(url, name="small") as remote:
        report = await kb.parity(embedded, remote, entities(NAMES))
    await embedded.close()
    assert not report.failed
    # the one difference is by design and told as such: the embedded search folds accents
    [accents] = report.differences
    assert (accents.check, accents.entity, accents.strict) == ("search without accents", "Zoe's Film", False)
    assert accents.first == "first Zoë's Film of 1" and accents.second == "first – of 0"
    assert report.checked["get_relations"] == len(NAMES) == report.equal["get_relations"]
    # every relation of every entity, both directions: 8 uncapped lists and Drama's hub
    assert report.checked["get_edges"] == report.equal["get_edges"] == 8
    assert report.equal["get_edges capped: total"] == report.equal["get_edges capped: shown"] == 1
    assert report.notes == ["Drama ~has_genre: 53 edges, both show 50 — the same ones"]
    assert "| get_edges | 8 | 8 | 0 | 0 |" in report.table()


async def test_parity_reports_what_each_side_returned_when_the_kgs_differ(kb, served, tmp_path):
    from traversals.kg.sparql import SparqlKG
    from traversals.kg.store import OxigraphKG

    src, url = served
    other = tmp_path / "other.txt"  # Comedy lost one film, the hub one edge, and a relation appeared
    other.write_text(SMALL_KG.replace("Zoë's Film|has_genre|Comedy\n", "").replace("Film 07|has_genre|Drama\n", "")
                     + "Charles Bail|written_by|The Gumball Rally\n", encoding="utf-8")
    embedded = OxigraphKG.from_file(other, name="small")
    async with SparqlKG(url, name="small") as remote:
        report = await kb.parity(embedded, remote, entities(NAMES))
    await embedded.close()
    assert report.failed
    by = {(d.check, d.entity, d.what): d for d in report.differences}
    comedy = by[("get_edges", "Comedy", "~has_genre")]
    assert comedy.strict and "only here: –" in comedy.first and "(Zoë's Film, has_genre, Comedy)" in comedy.second
    bail = by[("get_relations", "Charles Bail", "")]
    assert bail.strict and "written_by" in bail.first and "written_by" not in bail.second
    hub = by[("get_edges capped: total", "Drama", "~has_genre")]
    assert not hub.strict and (hub.first, hub.second) == ("50 + 2 omitted", "50 + 3 omitted")
    assert "Comedy" in report.details() and "embedded:" in report.details()


async def test_a_hub_cut_at_an_eszett_shows_the_same_edges_on_both_sides(kb, served):
    """The embedded store ordered a hub's edges by casefold and showed "Straße" 50th; the
    server, ordering by LCASE, showed "strasse b". Both order by lower case now."""
    from traversals.kg.sparql import SparqlKG
    from traversals.kg.store import OxigraphKG

    src, url = served
    embedded = OxigraphKG.from_file(src, name="small")
    async with SparqlKG(url, name="small") as remote:
        report = await kb.parity(embedded, remote, entities(["Eszett"]), search=False)
    await embedded.close()
    assert not report.failed and report.differences == []
    assert report.notes == ["Eszett ~has_genre: 51 edges, both show 50 — the same ones"]
