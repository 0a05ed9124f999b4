"""The built-in demo KG (kg/data/demo.ttl) and the ``--kg`` spec factory."""

from __future__ import annotations

import pyoxigraph as ox
import pytest

from traversals.errors import BadInput
from traversals.kg import iris
from traversals.kg.base import Entity
from traversals.kg.factory import SPEC_HELP, open_kg, open_kgs
from traversals.kg.store import OxigraphKG, demo_kg_path


@pytest.fixture(scope="module")
def demo() -> OxigraphKG:
    return OxigraphKG.demo()


async def one(kg, text: str) -> Entity:
    found = await kg.search(text)
    assert found, text
    return found[0]


def test_demo_file_is_valid_wikidata_shaped_turtle():
    path = demo_kg_path()
    assert path.is_file() and path.suffix == ".ttl"
    quads = list(ox.parse(path=str(path), format=ox.RdfFormat.TURTLE))
    assert 500 < len(quads) < 2000
    preds = {q.predicate.value for q in quads}
    assert "http://www.wikidata.org/prop/direct/P25" in preds
    assert "http://wikiba.se/ontology#directClaim" in preds and iris.INVERSE_LABEL in preds
    # Every direct claim predicate has a labelled property entity.
    claims = {q.object.value for q in quads if q.predicate.value == "http://wikiba.se/ontology#directClaim"}
    used = {p for p in preds if p.startswith("http://www.wikidata.org/prop/direct/")}
    assert used <= claims


async def test_figure3_maternal_grandmother(demo):
    dylan = await one(demo, "Bob Dylan")
    assert dylan == Entity(id="Q392", label="Bob Dylan", description="American singer-songwriter", kg="demo")
    rels = await demo.get_relations([dylan])
    mother = next(r for r in rels.items if r.key == "P25")
    assert (mother.label, mother.inverse_label, mother.inverse) == ("mother", "is mother of", False)
    assert mother.iri == "http://www.wikidata.org/prop/direct/P25"

    step1 = await demo.get_edges([dylan], mother)
    assert [(e.subject.id, e.relation.id, e.object.id) for e in step1.edges] == [("Q392", "P25", "Q62519478")]
    beatrice = step1.new_entities[0]
    assert (beatrice.id, beatrice.label, beatrice.description) == ("Q62519478", "Beatrice Stone", "")

    b_rels = {r.key: r for r in (await demo.get_relations([beatrice])).items}
    assert "P25" in b_rels and "~P25" in b_rels
    assert b_rels["~P25"].display == "is mother of"
    step2 = await demo.get_edges([beatrice], b_rels["P25"])
    assert [e.object.label for e in step2.edges] == ["Florence Stone"]
    assert step2.new_entities[0].description == "maternal grandmother of Bob Dylan"
    back = await demo.get_edges([beatrice], b_rels["~P25"])
    assert [(e.subject.label, e.relation.display, e.object.label) for e in back.edges] == [
        ("Bob Dylan", "mother", "Beatrice Stone")
    ]


async def test_figure1_actor_in_inception_and_interstellar(demo):
    inception = await one(demo, "Inception")
    interstellar = await one(demo, "Interstellar")
    assert (inception.id, interstellar.id) == ("Q25188", "Q13417189")
    cast = demo.relation("P161")
    assert cast is not None and cast.label == "cast member"
    a = {e.object.label for e in (await demo.get_edges([inception], cast)).edges}
    b = {e.object.label for e in (await demo.get_edges([interstellar], cast)).edges}
    assert a & b == {"Michael Caine"}
    director = (await demo.get_edges([inception], demo.relation("P57"))).edges[0].object
    assert (director.id, director.label, director.description) == (
        "Q25191", "Christopher Nolan", "British-American filmmaker"
    )
    # Nolan's films, walking director backwards.
    films = await demo.get_edges([director], demo.relation("~P57"))
    assert {"Inception", "Interstellar", "The Dark Knight"} <= {e.subject.label for e in films.edges}
    births = await demo.get_edges([director], demo.relation("P19"))
    assert [e.object.id for e in births.edges] == ["Q84"]


async def test_values_and_property_entities(demo):
    dylan = await one(demo, "Bob Dylan")
    born = (await demo.get_edges([dylan], demo.relation("P569"))).edges[0].object
    assert born.label == "1941-05-24"
    assert await demo.search("mother") == []  # wd:P25 is a property, not a result
    assert all(e.id.startswith("Q") for e in await demo.search("Dylan"))


async def test_demo_is_rich_enough_to_explore(demo):
    summary = demo.summary()
    assert summary["entities"] >= 80 and summary["relations"] >= 25
    usa = await one(demo, "United States of America")
    rels = await demo.get_relations([usa], limit=3)
    assert len(rels.items) == 3 and rels.omitted > 0
    citizens = await demo.get_edges([usa], demo.relation("~P27"), limit=3)
    assert len(citizens.edges) == 3 and citizens.omitted > 0


# ------------------------------------------------------------------------ factory


async def test_open_kg_forms(tmp_path):
    kg = open_kg("demo")
    assert isinstance(kg, OxigraphKG) and kg.name == "demo"
    assert (await one(kg, "Bob Dylan")).kg == "demo"
    named = open_kg("films=demo")
    assert named.name == "films" and (await one(named, "Inception")).kg == "films"

    (tmp_path / "kb.txt").write_text("Kismet|directed_by|William Dieterle\n", "utf-8")
    kb = open_kg(str(tmp_path / "kb.txt"))
    assert kb.name == "kb"
    assert (await one(kb, "Kismet")).id == iris.entity_iri("Kismet")

    kgs = open_kgs([])
    assert len(kgs) == 1 and kgs[0].name == "demo"
    # two KGs of one name (two files kb.txt) are told apart
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "kb.txt").write_text("Kismet|written_by|Edward Knoblock\n", "utf-8")
    two = open_kgs([str(tmp_path / "kb.txt"), str(tmp_path / "b" / "kb.txt")])
    assert [k.name for k in two] == ["kb", "kb-2"]
    # a suffix skips a name the user gave another KG
    three = open_kgs([str(tmp_path / "kb.txt"), str(tmp_path / "b" / "kb.txt"), "kb-2=demo"])
    assert [k.name for k in three] == ["kb", "kb-3", "kb-2"]
    # a name the user gave stays; the default name gives way; one name given twice is refused
    mixed = open_kgs([str(tmp_path / "kb.txt"), f"kb={tmp_path / 'b' / 'kb.txt'}"])
    assert [k.name for k in mixed] == ["kb-2", "kb"]
    with pytest.raises(BadInput, match="two KGs are named 'x'"):
        open_kgs([f"x={tmp_path / 'kb.txt'}", f"x={tmp_path / 'b' / 'kb.txt'}"])
    # one KG given twice, by the same spec, by two paths or under two names, is refused
    for twice in (["demo", "demo"], ["demo", "films=demo"], [str(tmp_path / "kb.txt"), f"{tmp_path}/b/../kb.txt"],
                  ["sparql:http://127.0.0.1:9/query", "http://127.0.0.1:9/query/"]):
        with pytest.raises(BadInput, match="the same KG given twice"):
            open_kgs(twice)


def test_open_kg_remote_forms_are_lazy():
    from traversals.kg.sparql import SparqlKG
    from traversals.kg.wikidata import WikidataKG

    kg = open_kg("sparql:http://127.0.0.1:9/sparql")
    assert isinstance(kg, SparqlKG) and kg.endpoint_url == "http://127.0.0.1:9/sparql"
    assert isinstance(open_kg("https://example.org/sparql"), SparqlKG)
    assert isinstance(open_kg("wikidata"), WikidataKG)


@pytest.mark.parametrize("spec", ["nonsense", "missing.nt", "sparql:ftp://x", ""])
def test_open_kg_rejects_unknown_specs(spec):
    with pytest.raises(BadInput) as err:
        open_kg(spec)
    if spec in ("nonsense", ""):
        assert SPEC_HELP in str(err.value)
    assert "demo" in SPEC_HELP and "sparql:URL" in SPEC_HELP and ".csv" in SPEC_HELP
