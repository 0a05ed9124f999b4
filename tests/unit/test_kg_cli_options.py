"""What the CLI does with unusable --kg values, and --kg-timeout."""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import pytest

from traversals.cli import build_parser, main
from traversals.errors import BadInput
from traversals.kg.factory import open_kgs
from traversals.kg.sparql import SparqlKG
from traversals.kg.wikidata import WikidataKG
from traversals.options import remote_kg_options


def ask(*argv: str) -> list[str]:
    """argv of ``ask --strategy chain``: the KGs are opened (and refused) before the LLM,
    and no embedder is (RwT's). Not cot: it reads no KG, so its ``--kg`` is never opened
    (tests/unit/test_cli_input.py)."""
    return ["ask", "who does [Alice] know", "--strategy", "chain", *argv]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --------------------------------------------------------------- unusable --kg values


@pytest.mark.parametrize("name", ["x.txt.gz", "x.nt.gz", "x.ttl.gz", "x.csv.gz"])
def test_ask_with_a_file_that_is_not_gzip(tmp_path, capsys, name):
    bad = tmp_path / name
    bad.write_text("notgzip\n", "utf-8")
    assert main(ask("--kg", str(bad))) == 2
    line = one_error_line(capsys)
    assert line.startswith("traversals: error: cannot read ") and f"{name}: not a valid gzip file" in line


def test_ask_with_a_truncated_gzip(tmp_path, capsys):
    bad = tmp_path / "kb.txt.gz"
    bad.write_bytes(gzip.compress(b"a|r|b\n" * 1000)[:40])
    assert main(ask("--kg", str(bad))) == 2
    assert "kb.txt.gz: not a valid gzip file" in one_error_line(capsys)


def test_kg_convert_of_a_file_that_is_not_gzip(tmp_path, capsys):
    bad = tmp_path / "bad.txt.gz"
    bad.write_text("notgzip\n", "utf-8")
    assert main(["kg", "convert", str(bad), str(tmp_path / "out.nt")]) == 2
    assert "bad.txt.gz: not a valid gzip file" in one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt.gz"]


def test_ask_with_a_directory_that_is_not_a_store_writes_nothing(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    (d / "notes.txt").write_text("hi\n", "utf-8")
    assert main(ask("--kg", str(d))) == 2
    assert "not an Oxigraph store" in one_error_line(capsys)
    assert [p.name for p in d.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("name, text", [("e.txt", ""), ("c.txt", "\n\n"), ("e.ttl", "# only a comment\n"), ("e.nt", "")])
def test_ask_with_a_kg_file_without_triples(tmp_path, capsys, name, text):
    p = tmp_path / name
    p.write_text(text, "utf-8")
    assert main(["ask", "who does [Alice] know", "--kg", str(p), "--k", "1"]) == 2
    assert one_error_line(capsys) == f"traversals: error: {p} holds no triples"


# ---------------------------------------------------------------------- --kg-timeout


def remote_kgs(tmp_path: Path, *argv: str, command: str = "ask"):
    args = build_parser().parse_args([command, *(["q"] if command == "ask" else []), *argv])
    options = remote_kg_options(args, environ={"XDG_CACHE_HOME": str(tmp_path)})
    return open_kgs(args.kg, **options)


@pytest.mark.parametrize("command", ["ask", "serve", "mcp"])
def test_kg_timeout_reaches_sparql_and_wikidata(tmp_path, command):
    kgs = remote_kgs(
        tmp_path, "--kg", "sparql:http://127.0.0.1:9/sparql", "--kg", "wikidata", "--kg-timeout", "7.5",
        command=command,
    )
    assert [type(kg) for kg in kgs] == [SparqlKG, WikidataKG]
    assert [kg.http.timeout for kg in kgs] == [7.5, 7.5]


def test_kg_timeout_defaults_are_the_back_ends(tmp_path):
    kgs = remote_kgs(tmp_path, "--kg", "http://127.0.0.1:9/sparql", "--kg", "wikidata")
    assert [kg.http.timeout for kg in kgs] == [30.0, 60.0]


def test_eval_passes_kg_timeout(tmp_path):
    args = build_parser().parse_args(
        ["eval", "metaqa-1hop", "--data", str(tmp_path), "--strategy", "tree", "--out", str(tmp_path / "run"),
         "--kg", "wikidata", "--kg-timeout", "12"]
    )
    kgs = open_kgs(args.kg, **remote_kg_options(args, environ={"XDG_CACHE_HOME": str(tmp_path)}))
    assert [kg.http.timeout for kg in kgs] == [12.0]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_kg_timeout_must_be_a_positive_number(value, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["ask", "q", "--kg-timeout", value])
    assert exc.value.code == 2
    assert "argument --kg-timeout:" in capsys.readouterr().err


def test_remote_kg_options_refuses_a_bad_timeout(tmp_path):
    args = argparse.Namespace(no_cache=True, user_agent=None, kg_timeout=0)
    with pytest.raises(BadInput, match="--kg-timeout must be more than 0 seconds, got 0"):
        remote_kg_options(args, environ={"XDG_CACHE_HOME": str(tmp_path)})
    # Namespaces made before the flag existed keep the back ends' defaults.
    old = argparse.Namespace(no_cache=True, user_agent=None)
    assert remote_kg_options(old, environ={"XDG_CACHE_HOME": str(tmp_path)})["timeout"] is None


def test_endpoints_differing_in_path_or_graph_case_are_two_kgs() -> None:
    """A URL's path and query are case-sensitive (GraphDB's /repositories/Movies and
    /repositories/movies, ?default-graph-uri=urn:A and urn:a): they were lower-cased before
    being compared, and the second KG was refused as "the same KG given twice"."""
    two = open_kgs(["http://h:7200/repositories/Movies", "http://h:7200/repositories/movies"])
    assert [k.endpoint_url for k in two] == ["http://h:7200/repositories/Movies", "http://h:7200/repositories/movies"]
    graphs = open_kgs(["http://h/sparql?default-graph-uri=urn:A", "http://h/sparql?default-graph-uri=urn:a"])
    assert len({k.name for k in graphs}) == 2
    for twice in (["HTTP://H:7200/repositories/Movies/", "sparql:http://h:7200/repositories/Movies"],
                  ["http://h/sparql?default-graph-uri=urn:A", "http://H/sparql?default-graph-uri=urn:A"]):
        with pytest.raises(BadInput, match="the same KG given twice"):
            open_kgs(twice)


@pytest.mark.parametrize("specs", [["wikidata", "wikidata:https://qlever.example/api/wikidata"],
                                   ["wd=wikidata:http://a/sparql", "wikidata:https://b/sparql"]])
def test_wikidata_twice_public_and_mirror_or_two_mirrors_is_refused(specs) -> None:
    """One KG's QIDs at two endpoints: searched as two KGs, every entity would be linked to itself."""
    with pytest.raises(BadInput, match="are each Wikidata, with the same QIDs; give one") as e:
        open_kgs(specs)
    assert all(repr(s) in str(e.value) for s in specs)
    assert [k.name for k in open_kgs(specs[1:])]  # either alone opens


@pytest.mark.parametrize("flags, says", [
    (["--no-cache"], "--no-cache is for a SPARQL endpoint or Wikidata, and no --kg is one"),
    (["--kg", "demo", "--kg-timeout", "4", "--user-agent", "me"], "--kg-timeout and --user-agent are for a SPARQL"),
])
def test_flags_of_remote_kgs_without_one_are_refused_not_ignored(tmp_path, flags, says):
    args = build_parser().parse_args(["ask", "q", *flags])
    with pytest.raises(BadInput, match=says):
        remote_kg_options(args, environ={"XDG_CACHE_HOME": str(tmp_path)})
    args = build_parser().parse_args(["ask", "q", *flags, "--kg", "http://127.0.0.1:9/sparql"])  # one is remote
    assert remote_kg_options(args, environ={"XDG_CACHE_HOME": str(tmp_path)})["cache"] is not None


def test_an_llm_timeout_with_a_model_in_this_process_is_refused(capsys):
    from traversals.cli import main

    assert main(["ask", "q", "--llm-timeout", "5"]) == 2
    assert "--llm-timeout bounds a request to an OpenAI-compatible server" in capsys.readouterr().err
