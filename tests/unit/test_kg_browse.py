"""``traversals kg search | relations | edges``: a KG browsed as the search sees it, on the
embedded store (a Turtle file with hostile labels) and the built-in demo KG."""

from __future__ import annotations

import json

import pytest

from traversals.cli import main

TTL = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:inception rdfs:label "Inception" ; ex:directedBy ex:nolan .
ex:nolan rdfs:label "Christopher \\"Chris\\" Nolan" .
ex:heat rdfs:label "Heat" ; ex:directedBy ex:mann .
ex:heat2 rdfs:label "heat" .
ex:mann rdfs:label "Michael Mann" .
ex:directedBy rdfs:label "directed by" .
"""


@pytest.fixture
def kg(tmp_path):
    path = tmp_path / "films.ttl"
    path.write_text(TTL)
    return str(path)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_search_relations_and_edges_by_label_then_by_id(kg, capsys):
    code, out, _ = run(capsys, "kg", "search", 'Christopher "Chris" Nolan', "--kg", kg)
    assert code == 0 and out.splitlines()[0] == 'Christopher "Chris" Nolan  http://example.org/nolan  (films)'
    code, out, _ = run(capsys, "kg", "relations", "Inception", "--kg", kg)
    assert code == 0 and out.splitlines() == [
        "Inception  http://example.org/inception  (films): 1 relation(s)",
        "  directedBy  directed by",  # the key the search offers the LLM: the IRI's local name
    ]
    key = json.loads(run(capsys, "kg", "relations", "Inception", "--kg", kg, "--json")[1])["relations"][0]["key"]
    assert key == "directedBy"
    code, out, _ = run(capsys, "kg", "edges", "http://example.org/inception", key, "--kg", kg)
    assert code == 0 and out.splitlines()[1].startswith('  Christopher "Chris" Nolan  http://example.org/nolan')
    # backwards, by the inverse key, from the director to his film
    back = json.loads(run(capsys, "kg", "relations", "http://example.org/nolan", "--kg", kg, "--json")[1])
    assert [r["key"] for r in back["relations"]] == [f"~{key}"]
    got = json.loads(run(capsys, "kg", "edges", "http://example.org/nolan", f"~{key}", "--kg", kg, "--json")[1])
    assert [e["label"] for e in got["entities"]] == ["Inception"] and got["omitted"] == 0


def test_an_ambiguous_or_unknown_entity_and_an_unknown_relation_are_one_line(kg, capsys):
    code, _, err = run(capsys, "kg", "relations", "HEAT", "--kg", kg)
    assert code == 2 and "2 entities are labelled 'HEAT': give one's id" in err and "http://example.org/heat2" in err
    code, _, err = run(capsys, "kg", "relations", "Incepton", "--kg", kg)
    assert code == 2 and "no entity has the id or the label 'Incepton'" in err
    code, _, err = run(capsys, "kg", "edges", "Inception", "P25", "--kg", kg)
    assert code == 2 and "has no relation 'P25'; list its relations for their keys" in err
    assert err.count("\n") == 1


def test_the_demo_kg_by_default_and_the_json_of_the_mcp_tools(capsys):
    code, out, _ = run(capsys, "kg", "edges", "Bob Dylan", "P25", "--json")
    got = json.loads(out)
    assert code == 0 and [e["label"] for e in got["entities"]] == ["Beatrice Stone"]
    assert got["edges"][0]["relation"] == {"id": "P25", "label": "mother", "iri": "http://www.wikidata.org/prop/direct/P25"}
    code, out, _ = run(capsys, "kg", "search", "nobody at all", "--kg", "demo")
    assert code == 0 and out.strip() == "no entity's label matches 'nobody at all'"


def test_with_several_kgs_a_label_is_not_taken_for_an_id_of_the_kg_named(kg, tmp_path, capsys):
    """"Bob Dylan" is no id of the first KG: its relations came from the demo KG's Bob Dylan
    (linked by label), and the command printed an entity "Bob Dylan" of the wrong KG."""
    films = f"films={kg}"
    code, out, _ = run(capsys, "kg", "relations", "Bob Dylan", "--kg", films, "--kg", "demo")
    assert code == 0 and out.splitlines()[0].startswith("Bob Dylan  Q392  (demo): ")
    code, _, err = run(capsys, "kg", "edges", "Heat", "directedBy", "--kg", films, "--kg", "demo", "--in-kg", "demo")
    assert code == 2 and "no entity has the id or the label 'Heat'" in err  # not in the KG named


@pytest.mark.parametrize("limit", ["0", "51", "-3", "five"])
def test_a_search_limit_outside_1_to_50_is_refused_not_cut(limit, capsys):
    with pytest.raises(SystemExit) as e:
        main(["kg", "search", "Bob", "--limit", limit])
    assert e.value.code == 2 and "--limit" in capsys.readouterr().err


def test_a_label_the_terminal_cannot_show_is_printed_with_a_question_mark(tmp_path):
    import os
    import subprocess
    import sys

    kg = tmp_path / "z.txt"
    kg.write_text("Zürich|in|Schweiz\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "traversals.cli", "kg", "search", "Zürich", "--kg", str(kg)],
                          capture_output=True, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0 and done.stdout.startswith(b"Z?rich  http://traversals.local/entity/Z%C3%BCrich")
    assert b"Traceback" not in done.stderr
    # an ASCII locale, output to a pipe or a file: UTF-8, the name intact
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANG", "LC_ALL", "LC_CTYPE")}
    done = subprocess.run([sys.executable, "-m", "traversals.cli", "kg", "search", "rich", "--kg", str(kg)],
                          capture_output=True, env={**env, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"})
    assert done.returncode == 0 and done.stdout.startswith("Zürich  http".encode())


def test_an_entity_given_by_its_id_is_shown_and_linked_by_its_label(kg, tmp_path, capsys):
    """By id, the header and the edges' JSON named it by its id (label = id), and with two
    KGs its copy in the other (linked by label) was never found: only one KG's relations."""
    code, out, _ = run(capsys, "kg", "relations", "http://example.org/inception", "--kg", kg)
    assert code == 0 and out.splitlines()[0] == "Inception  http://example.org/inception  (films): 1 relation(s)"
    music = tmp_path / "music.ttl"
    music.write_text('@prefix m: <http://music.example/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n'
                     'm:inc rdfs:label "Inception" ; m:scoredBy m:hz .\nm:hz rdfs:label "Hans Zimmer" .\n')
    two = ["--kg", kg, "--kg", str(music)]
    got = json.loads(run(capsys, "kg", "relations", "http://example.org/inception", *two, "--json")[1])
    assert {(r["key"], r["kg"]) for r in got["relations"]} == {("directedBy", "films"), ("scoredBy", "music")}
    got = json.loads(run(capsys, "kg", "edges", "http://example.org/inception", "scoredBy", *two, "--json")[1])
    assert [e["label"] for e in got["entities"]] == ["Hans Zimmer"]
    assert got["edges"][0]["subject"]["label"] == "Inception"


def test_a_label_many_entities_share_says_at_least_and_one_id_in_two_kgs_asks_for_the_kg(tmp_path, capsys):
    lines = "".join(f'<http://e.org/u{i}> <http://www.w3.org/2000/01/rdf-schema#label> "Unknown" .\n'
                    f'<http://e.org/u{i}> <http://e.org/p> <http://e.org/z> .\n' for i in range(30))
    (tmp_path / "u.nt").write_text(lines)
    code, _, err = run(capsys, "kg", "relations", "Unknown", "--kg", str(tmp_path / "u.nt"))
    assert code == 2 and "at least 20 entities are labelled 'Unknown': give one's id" in err
    (tmp_path / "a.txt").write_text("Alice|knows|Bob\n")
    (tmp_path / "b.txt").write_text("Alice|likes|Carol\n")
    code, _, err = run(capsys, "kg", "relations", "Alice", "--kg", str(tmp_path / "a.txt"), "--kg", str(tmp_path / "b.txt"))
    assert code == 2 and "2 entities are labelled 'Alice', in several KGs: give --in-kg NAME" in err


def test_with_several_kgs_an_id_is_looked_up_in_each_and_an_id_of_two_asks_for_the_kg(kg, tmp_path, capsys):
    """An id of the second KG without --in-kg was looked up in the first KG only: "no entity
    has the id or the label"."""
    music = tmp_path / "music.ttl"
    music.write_text('@prefix m: <http://music.example/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n'
                     'm:hz rdfs:label "Hans Zimmer" ; m:born m:frankfurt .\nm:frankfurt rdfs:label "Frankfurt" .\n')
    two = ["--kg", kg, "--kg", str(music)]
    code, out, _ = run(capsys, "kg", "relations", "http://music.example/frankfurt", *two)
    assert code == 0 and out.splitlines() == ["Frankfurt  http://music.example/frankfurt  (music): 1 relation(s)",
                                              "  ~born  is born of"]
    code, out, _ = run(capsys, "kg", "edges", "http://music.example/frankfurt", "~born", *two)
    assert code == 0 and out.splitlines()[1] == "  Hans Zimmer  http://music.example/hz  (music)"
    code, out, _ = run(capsys, "kg", "relations", "http://example.org/heat", *two)  # the first KG's, as before
    assert code == 0 and out.splitlines()[0] == "Heat  http://example.org/heat  (films): 1 relation(s)"
    code, _, err = run(capsys, "kg", "relations", "http://music.example/nowhere", *two)
    assert code == 2 and ("no entity has the id or the label 'http://music.example/nowhere' in any of the KGs films, "
                          "music (--in-kg NAME looks in one)") in err
    # two triple files mint one IRI for "Alice": the id alone names neither
    (tmp_path / "a.txt").write_text("Alice|knows|Bob\n")
    (tmp_path / "b.txt").write_text("Alice|likes|Carol\n")
    ab = ["--kg", str(tmp_path / "a.txt"), "--kg", str(tmp_path / "b.txt")]
    alice = "http://traversals.local/entity/Alice"
    code, _, err = run(capsys, "kg", "relations", alice, *ab)
    assert code == 2 and f"'{alice}' is an entity of 2 KGs (a, b): give --in-kg NAME" in err
    code, out, _ = run(capsys, "kg", "relations", alice, *ab, "--in-kg", "b")
    assert code == 0 and out.splitlines()[0] == f"Alice  {alice}  (b): 2 relation(s)"
