"""``--label-predicate`` / ``label_predicates=``: an RDF file whose entities are named with
``foaf:name``, ``dcterms:title`` or a vocabulary of its own is linked and labelled once the
predicates are given (they replace the defaults, in the order given, and are never offered
as relations), while nothing changes without them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from traversals.cli import build_parser, main
from traversals.errors import BadInput
from traversals.kg import iris
from traversals.kg import sparql, store
from traversals.kg.factory import check_label_predicates, open_kg, open_kgs
from traversals.kg.sparql import SparqlKG
from traversals.kg.store import OxigraphKG
from traversals.kg.wikidata import WikidataKG
from traversals.llm.base import Usage
from traversals.options import remote_kg_options
from traversals.search.kgset import KGSet

FOAF_NAME = "http://xmlns.com/foaf/0.1/name"
DC_TITLE = "http://purl.org/dc/terms/title"
VOCAB_NAME = "http://example.org/vocab#name"
ADA = "http://example.org/people/p12345"
BABBAGE = "http://example.org/people/p67890"
NOTES = "http://example.org/people/w1"
GRACE = "http://example.org/people/p99"
#: a label a query would break on if it were pasted into one
HOSTILE = 'Charles "The Engine" Babbage \\ FRS'

PEOPLE = r"""@prefix foaf: <http://xmlns.com/foaf/0.1/> .
@prefix dcterms: <http://purl.org/dc/terms/> .
@prefix ex: <http://example.org/people/> .
@prefix v: <http://example.org/vocab#> .

ex:p12345 foaf:name "Ada Lovelace" ; v:knows ex:p67890 ; v:wrote ex:w1 .
ex:p67890 foaf:name "Charles \"The Engine\" Babbage \\ FRS" ; v:name "Charles B." .
ex:w1 dcterms:title "Notes on the Analytical Engine" .
ex:p99 v:name "Grace Hopper" ; v:knows ex:p12345 .
"""


@pytest.fixture
def people(tmp_path: Path) -> Path:
    path = tmp_path / "people.ttl"
    path.write_text(PEOPLE, "utf-8")
    return path


def labels_of(kg: OxigraphKG, ids: list[str]) -> dict[str, str]:
    return {i: e.label for i in ids if (e := kg.entity(i)) is not None}


# ------------------------------------------------------------------ the defaults stay


def test_the_default_label_predicates_and_what_is_never_a_relation_are_unchanged():
    rdfs_label, pref, name = (
        "http://www.w3.org/2000/01/rdf-schema#label", "http://www.w3.org/2004/02/skos/core#prefLabel",
        "http://schema.org/name",
    )
    assert iris.DEFAULT_LABEL_PREDICATES == (rdfs_label, pref, name)
    assert store.LABEL_PREDICATES == sparql.DEFAULT_LABEL_PREDICATES == iris.DEFAULT_LABEL_PREDICATES
    assert store.ALIAS_PREDICATES == ("http://www.w3.org/2004/02/skos/core#altLabel",)
    assert store.META_PREDICATES == frozenset({
        rdfs_label, pref, name, "http://www.w3.org/2004/02/skos/core#altLabel",
        "http://www.w3.org/2004/02/skos/core#hiddenLabel", "http://schema.org/description",
        "http://traversals.local/vocab/inverseLabel", "http://wikiba.se/ontology#directClaim",
    })
    assert sparql.META_PREDICATES == (
        "http://www.w3.org/2004/02/skos/core#altLabel", "http://www.w3.org/2004/02/skos/core#hiddenLabel",
        "http://traversals.local/vocab/inverseLabel", "http://wikiba.se/ontology#directClaim",
    )
    # the query reading labels, byte for byte the text of the module constant it replaced
    assert store._labels_query(store.LABEL_PREDICATES) == (
        "SELECT ?s ?p ?l WHERE { VALUES ?p { <http://www.w3.org/2000/01/rdf-schema#label> "
        "<http://www.w3.org/2004/02/skos/core#prefLabel> <http://schema.org/name> "
        "<http://www.w3.org/2004/02/skos/core#altLabel> } ?s ?p ?l }"
    )
    # one definition of the shared vocabulary serves both back ends
    for module in (store, sparql):
        assert module.SKOS == iris.SKOS and module.SCHEMA_NAME == iris.SCHEMA_NAME and module.XSD == iris.XSD
        assert module.WIKIBASE_DIRECT_CLAIM == iris.WIKIBASE_DIRECT_CLAIM
    assert store.WD_ENTITY == sparql.WIKIDATA_ENTITY == iris.WIKIDATA_ENTITY
    assert SparqlKG("http://127.0.0.1:9/sparql").label_predicates == iris.DEFAULT_LABEL_PREDICATES
    assert OxigraphKG.demo().label_predicates == iris.DEFAULT_LABEL_PREDICATES


def test_the_demo_kg_reads_the_same_with_its_default_predicates_given():
    plain, given = open_kg("demo"), open_kg("demo", label_predicates=["rdfs:label", "skos:prefLabel", "schema:name"])
    assert isinstance(plain, OxigraphKG) and isinstance(given, OxigraphKG)
    assert plain.label_predicates == given.label_predicates
    for text in ("Bob Dylan", "Inception", "Christopher Nolan"):
        assert plain.search_sync(text) == given.search_sync(text)
    [dylan] = plain.search_sync("Bob Dylan", limit=1)
    assert plain.get_relations_sync([dylan]) == given.get_relations_sync([dylan])


# ------------------------------------------------------------- the embedded store


async def test_without_the_flag_nobody_is_found_by_name_and_labels_are_local_names(people: Path):
    kg = open_kg(str(people))
    assert isinstance(kg, OxigraphKG)
    kgset = KGSet([kg])
    assert await kgset.search("Ada Lovelace", Usage()) == []
    assert labels_of(kg, [ADA, BABBAGE]) == {ADA: "p12345", BABBAGE: "p67890"}
    [ada] = kg.search_sync("p12345")  # by its IRI's local name only
    assert FOAF_NAME in {r.iri for r in kg.get_relations_sync([ada]).items}  # a relation, labelling nothing


async def test_with_foaf_name_the_mention_is_linked_and_labelled_and_foaf_name_is_no_relation(people: Path):
    kg = open_kg(str(people), label_predicates=["foaf:name", "dcterms:title"])
    assert isinstance(kg, OxigraphKG) and kg.label_predicates == (FOAF_NAME, DC_TITLE)
    kgset = KGSet([kg])
    found = await kgset.search("Ada Lovelace", Usage())
    assert [(e.id, e.label) for e in found[:1]] == [(ADA, "Ada Lovelace")]
    assert [e.id for e in kg.search_sync("Notes on the Analytical Engine")][:1] == [NOTES]
    rels = kg.get_relations_sync([found[0]])
    assert {r.key for r in rels.items} == {"knows", "wrote", "~knows"}
    assert not {r.iri for r in rels.items} & {FOAF_NAME, DC_TITLE}
    wrote = next(r for r in rels.items if r.key == "wrote")
    [edge] = kg.get_edges_sync([found[0]], wrote).edges
    assert (edge.subject.label, edge.object.label) == ("Ada Lovelace", "Notes on the Analytical Engine")
    # a relation made of a label predicate is not walked either
    assert kg.get_edges_sync([found[0]], kg._relation(FOAF_NAME, False)).edges == ()


def test_a_label_with_quotes_and_a_backslash_is_found_and_shown_as_written(people: Path):
    kg = open_kg(str(people), label_predicates=["foaf:name"])
    assert isinstance(kg, OxigraphKG)
    [babbage] = kg.search_sync(HOSTILE, limit=1)
    assert (babbage.id, babbage.label) == (BABBAGE, HOSTILE)


def test_the_predicates_are_read_in_the_order_given_and_replace_the_default_ones(people: Path, tmp_path: Path):
    foaf_first = open_kg(str(people), label_predicates=["foaf:name", VOCAB_NAME])
    own_first = open_kg(str(people), label_predicates=[VOCAB_NAME, "foaf:name"])
    assert isinstance(foaf_first, OxigraphKG) and isinstance(own_first, OxigraphKG)
    assert labels_of(foaf_first, [BABBAGE, GRACE]) == {BABBAGE: HOSTILE, GRACE: "Grace Hopper"}
    assert labels_of(own_first, [BABBAGE, GRACE]) == {BABBAGE: "Charles B.", GRACE: "Grace Hopper"}
    # the default rdfs:label is replaced: a node labelled with it alone is shown by its local name
    mixed = tmp_path / "mixed.ttl"
    mixed.write_text(PEOPLE + 'ex:p1 <http://www.w3.org/2000/01/rdf-schema#label> "Only Rdfs" ; v:knows ex:p99 .\n')
    kg = open_kg(str(mixed), label_predicates=["foaf:name"])
    assert isinstance(kg, OxigraphKG)
    assert labels_of(kg, ["http://example.org/people/p1"]) == {"http://example.org/people/p1": "p1"}


def test_a_store_directory_is_opened_with_the_label_predicates(people: Path, tmp_path: Path):
    built = OxigraphKG.from_file(people, store_dir=tmp_path / "db")
    built.close_sync()
    kg = open_kg(str(tmp_path / "db"), label_predicates=["foaf:name"])
    assert isinstance(kg, OxigraphKG)
    assert [(e.id, e.label) for e in kg.search_sync("Ada Lovelace")][:1] == [(ADA, "Ada Lovelace")]
    kg.close_sync()


# ------------------------------------------------------------------ what is accepted


@pytest.mark.parametrize("given, iri", [
    ("foaf:name", FOAF_NAME), ("dcterms:title", DC_TITLE), ("dc:title", "http://purl.org/dc/elements/1.1/title"),
    ("rdfs:label", "http://www.w3.org/2000/01/rdf-schema#label"),
    ("skos:prefLabel", "http://www.w3.org/2004/02/skos/core#prefLabel"), ("schema:name", "http://schema.org/name"),
    (VOCAB_NAME, VOCAB_NAME), ("https://schema.org/name", "https://schema.org/name"),
    ("urn:example:label", "urn:example:label"), ("  foaf:name ", FOAF_NAME),
])
def test_full_iris_and_the_known_prefixes_are_accepted(given: str, iri: str):
    assert check_label_predicates([given]) == (iri,)


def test_repeats_are_dropped_and_the_order_kept():
    assert check_label_predicates(["dcterms:title", "foaf:name", FOAF_NAME]) == (DC_TITLE, FOAF_NAME)


@pytest.mark.parametrize("bad", [
    "ex:name", "name", "foaf:", "FOAF:name", "ftp://example.org/name", "http://", "urn:", "http://example.org/a name",
    'http://example.org/"name"', "http://example.org/<name>", "foaf:na\\me", "",
])
def test_anything_else_is_refused_naming_the_flag_and_the_accepted_forms(bad: str):
    with pytest.raises(BadInput) as exc:
        check_label_predicates([bad], what="--label-predicate")
    said = str(exc.value)
    assert said.startswith(f"--label-predicate {bad!r}: not a label predicate; give a full IRI")
    assert "http://..., https://... or urn:..." in said and "foaf:NAME" in said and "dc:NAME" in said
    assert "\n" not in said
    with pytest.raises(BadInput, match="label_predicates"):
        open_kg("demo", label_predicates=[bad])


@pytest.mark.parametrize("bad", ["name", "http://example.org/a name", 'http://example.org/"name"', "x:a\b", ""])
def test_the_store_refuses_a_label_predicate_that_is_no_iri_before_reading_anything(bad: str, tmp_path: Path):
    with pytest.raises(BadInput, match="^" + re.escape(f"label predicate {bad!r}: ")):
        OxigraphKG.from_file(tmp_path / "not-read.ttl", label_predicates=[bad])


def test_none_given_is_refused():
    with pytest.raises(BadInput, match="no label predicate given"):
        open_kg("demo", label_predicates=[])


# ------------------------------------------------------------------------- wikidata


def test_wikidata_alone_is_refused_the_flag_and_among_other_kgs_keeps_its_own_labels(people: Path, tmp_path: Path):
    def args(*argv: str):
        return build_parser().parse_args(["kg", "search", "x", *argv])

    env = {"XDG_CACHE_HOME": str(tmp_path)}
    for kgs in (["--kg", "wikidata"], ["--kg", "wd=wikidata"], ["--kg", "wikidata:http://127.0.0.1:9/sparql"]):
        a = args(*kgs, "--label-predicate", "foaf:name")
        with pytest.raises(BadInput, match="not Wikidata's, which keeps its own .* every KG here is Wikidata: drop it"):
            open_kgs(a.kg, **remote_kg_options(a, environ=env))
    with pytest.raises(BadInput, match="every KG here is Wikidata"):
        open_kg("wikidata", label_predicates=["foaf:name"])
    a = args("--kg", "wikidata", "--kg", str(people), "--kg", "http://127.0.0.1:9/sparql", "--label-predicate",
             "foaf:name")
    wd, file, endpoint = open_kgs(a.kg, **remote_kg_options(a, environ=env))
    assert isinstance(wd, WikidataKG) and wd.label_predicates == (iris.RDFS_LABEL,)
    assert isinstance(file, OxigraphKG) and file.label_predicates == (FOAF_NAME,)
    assert isinstance(endpoint, SparqlKG) and endpoint.label_predicates == (FOAF_NAME,)
    assert FOAF_NAME in endpoint.exclude_predicates  # never offered as a relation there either


# ------------------------------------------------------------------------ the CLI


@pytest.mark.parametrize("head", [
    ["ask", "q"], ["serve"], ["mcp"], ["kg", "search", "x"], ["kg", "relations", "x"], ["kg", "edges", "x", "r"],
    ["eval", "questions", "--data", "d", "--strategy", "chain", "--out", "o"], ["train-value", "--out", "m.json"],
])
def test_every_command_that_takes_kg_takes_the_flag(head: list[str], tmp_path: Path):
    args = build_parser().parse_args([*head, "--label-predicate", "foaf:name", "--label-predicate", VOCAB_NAME])
    options = remote_kg_options(args, environ={"XDG_CACHE_HOME": str(tmp_path)})
    assert options["label_predicates"] == (FOAF_NAME, VOCAB_NAME)
    assert remote_kg_options(build_parser().parse_args(head), environ={"XDG_CACHE_HOME": str(tmp_path)})[
        "label_predicates"] is None


def test_kg_search_relations_and_edges_pass_the_flag_through(people: Path, capsys):
    assert main(["kg", "search", "Ada Lovelace", "--kg", str(people)]) == 0
    assert capsys.readouterr().out.strip() == "no entity's label matches 'Ada Lovelace'"
    flag = ["--kg", str(people), "--label-predicate", "foaf:name", "--label-predicate", "dcterms:title"]
    assert main(["kg", "search", "Ada Lovelace", *flag]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"Ada Lovelace  {ADA}  (people)"
    assert main(["kg", "relations", "Ada Lovelace", *flag]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Ada Lovelace  {ADA}  (people): 3 relation(s)"
    assert sorted(line.split()[0] for line in out[1:]) == ["knows", "wrote", "~knows"]  # not foaf:name
    assert main(["kg", "edges", "Ada Lovelace", "knows", *flag]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Ada Lovelace --knows--> 1 entity", f"  {HOSTILE}  {BABBAGE}  (people)"]


def one_error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("traversals: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("command", [
    ["kg", "search", "Ada"],
    ["ask", "who does [Ada Lovelace] know", "--strategy", "chain", "--llm", "local:/no/such/model.gguf"],
    ["ask", "who does [Ada Lovelace] know", "--strategy", "cot", "--llm", "local:/no/such/model.gguf"],
    ["eval", "questions", "--data", "/no/such/q.jsonl", "--strategy", "chain", "--out", "/no/such/run"],
    ["eval", "questions", "--data", "/no/such/q.jsonl", "--strategy", "cot", "--out", "/no/such/run"],
])
def test_a_bad_flag_is_refused_in_one_line_before_anything_is_opened(command: list[str], people: Path, capsys):
    err = one_error([*command, "--kg", str(people), "--label-predicate", "ex:name"], capsys)
    assert "--label-predicate 'ex:name': not a label predicate; give a full IRI" in err
    assert "rdfs:NAME, skos:NAME, schema:NAME, foaf:NAME, dcterms:NAME, dc:NAME" in err


def test_ask_refuses_the_flag_for_wikidata_alone_and_passes_it_on_with_cot(capsys):
    ask = ["ask", "who is [Ada Lovelace]", "--llm", "local:/no/such/model.gguf"]
    err = one_error([*ask, "--strategy", "chain", "--kg", "wikidata", "--label-predicate", "foaf:name"], capsys)
    assert "every KG here is Wikidata: drop it" in err
    # cot opens no KG: a well-formed flag goes with its --kg, and the missing model is the error
    assert "model file not found" in one_error([*ask, "--strategy", "cot", "--label-predicate", "foaf:name"], capsys)


# ------------------------------------------------------------------------- eval


def scripted_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    import traversals.llm.factory
    from traversals.llm.scripted import ScriptedLLM

    def fake(spec: str = "local", **kw):
        return ScriptedLLM(lambda prompt, prefix, n, temperature: "ANSWER: Charles Babbage")

    monkeypatch.setattr(traversals.llm.factory, "open_llm", fake)


def eval_args(tmp_path: Path, people: Path, *flags: str, strategy: str = "chain") -> list[str]:
    data = tmp_path / "q.jsonl"
    data.write_text('{"question": "who does [Ada Lovelace] know", "answers": ["Charles Babbage"]}\n'
                    '{"question": "what did [Ada Lovelace] write", "answers": ["Notes"]}\n')
    return ["eval", "questions", "--data", str(data), "--kg", str(people), "--strategy", strategy,
            "--llm", "openai:m", "--llm-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "run"),
            "--no-progress", *flags]


def linked(run: Path) -> list[list[str]]:
    return [[e["id"] for e in json.loads(t.read_text())["linked_entities"]] for t in sorted((run / "traces").iterdir())]


def test_eval_records_the_label_predicates_and_refuses_a_resume_with_others(tmp_path: Path, people: Path,
                                                                             monkeypatch, capsys):
    scripted_llm(monkeypatch)
    run = tmp_path / "run"
    assert main(eval_args(tmp_path, people, "--limit", "1", "--label-predicate", "foaf:name")) == 0
    assert json.loads((run / "run.json").read_text())["label_predicates"] == [FOAF_NAME]
    assert linked(run) == [[ADA]]  # the mention was linked through foaf:name
    capsys.readouterr()
    err = one_error(eval_args(tmp_path, people, "--resume", "--label-predicate", "foaf:name",
                              "--label-predicate", "dcterms:title"), capsys)
    assert f"label_predicates: ['{FOAF_NAME}'] (recorded) vs ['{FOAF_NAME}', '{DC_TITLE}'] (now)" in err
    err = one_error(eval_args(tmp_path, people, "--resume"), capsys)  # the default is another list too
    assert f"label_predicates: ['{FOAF_NAME}'] (recorded) vs {list(iris.DEFAULT_LABEL_PREDICATES)!r} (now)" in err
    assert main(eval_args(tmp_path, people, "--resume", "--label-predicate", FOAF_NAME)) == 0
    assert linked(run) == [[ADA], [ADA]]


def test_eval_without_the_flag_records_the_default_and_a_run_recorded_before_the_key_resumes(tmp_path: Path,
                                                                                             people: Path,
                                                                                             monkeypatch, capsys):
    scripted_llm(monkeypatch)
    run = tmp_path / "run"
    assert main(eval_args(tmp_path, people, "--limit", "1")) == 0
    recorded = json.loads((run / "run.json").read_text())
    assert recorded["label_predicates"] == list(iris.DEFAULT_LABEL_PREDICATES)
    assert linked(run) == [[]]  # nothing in the question was found
    # a run of an older version, which recorded no label predicates: it used the default ones
    del recorded["label_predicates"]
    (run / "run.json").write_text(json.dumps(recorded))
    capsys.readouterr()
    err = one_error(eval_args(tmp_path, people, "--resume", "--label-predicate", "foaf:name"), capsys)
    assert "label_predicates:" in err and "(recorded) vs ['http://xmlns.com/foaf/0.1/name'] (now)" in err
    assert main(eval_args(tmp_path, people, "--resume")) == 0
    # cot opens no KG: it records none
    cot = tmp_path / "cot"
    cot.mkdir()
    assert main(eval_args(cot, people, "--limit", "1", strategy="cot")) == 0
    assert "label_predicates" not in json.loads((cot / "run" / "run.json").read_text())


def test_eval_refuses_the_flag_for_wikidata_alone_before_the_run_directory_is_made(tmp_path: Path, people: Path,
                                                                                   capsys):
    argv = [a if a != str(people) else "wikidata" for a in eval_args(tmp_path, people, "--label-predicate", "foaf:name")]
    assert "every KG here is Wikidata" in one_error(argv, capsys)
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------- train-value


def test_train_value_compares_the_label_predicates_a_model_was_trained_with():
    from traversals.eval.training import _settings_differ

    default = {"label_predicates": list(iris.DEFAULT_LABEL_PREDICATES)}
    assert _settings_differ({}, default) is None  # a model of an older version: the default ones
    assert _settings_differ(default, default) is None
    why = _settings_differ({}, {"label_predicates": [FOAF_NAME]})
    assert why is not None and why.startswith("--label-predicate: the model was trained with http://www.w3.org/")
    assert why.endswith(f"this run has {FOAF_NAME}")


def test_train_value_records_the_label_predicates_in_the_model_and_refuses_a_resume_with_others(tmp_path: Path,
                                                                                                capsys):
    from traversals.search.rwt import ValueModel

    from .test_training_resume import _args

    assert main(_args(tmp_path, "m.json", "--label-predicate", "rdfs:label", rounds=1)) == 0
    assert ValueModel.load(tmp_path / "m.json").meta["label_predicates"] == [iris.RDFS_LABEL]
    capsys.readouterr()
    err = one_error(_args(tmp_path, "m.json", "--resume", rounds=2), capsys)
    assert (f"cannot resume {tmp_path / 'm.json'}: --label-predicate: the model was trained with {iris.RDFS_LABEL}, "
            f"this run has {' '.join(iris.DEFAULT_LABEL_PREDICATES)}") in err


def test_a_predicate_that_labels_nothing_is_warned_about_and_a_plain_file_stays_searchable(people: Path,
                                                                                           tmp_path: Path):
    from traversals.errors import TraversalsWarning

    with pytest.warns(TraversalsWarning, match=r"KG 'people': no node has a label by http://xmlns.com/foaf/0.1/nmae"):
        kg = open_kg(str(people), label_predicates=["foaf:nmae"])  # a typo
    assert isinstance(kg, OxigraphKG) and labels_of(kg, [ADA]) == {ADA: "p12345"}
    # a plain triple file is labelled with rdfs:label: replaced, its nodes are found by their names' IRIs
    kb = tmp_path / "kb.txt"
    kb.write_text("Ada Lovelace|knows|Charles Babbage\n")
    with pytest.warns(TraversalsWarning, match="no node has a label"):
        plain = open_kg(str(kb), label_predicates=["foaf:name"])
    assert isinstance(plain, OxigraphKG)
    assert [e.label for e in plain.search_sync("Charles Babbage")][:1] == ["Charles Babbage"]
    assert "label" in {r.id for r in plain.get_relations_sync(plain.search_sync("Ada Lovelace")[:1]).items}
