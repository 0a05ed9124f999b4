"""``--label-predicate`` against a real SPARQL endpoint (Oxigraph on 127.0.0.1): the people
of ``tests/unit/test_label_predicates.py``, named only with ``foaf:name`` (one work with
``dcterms:title``), are linked and labelled by a SparqlKG given the predicates, as by the
embedded store, and the predicates are never offered as relations."""

from __future__ import annotations

from pathlib import Path

import pytest

from traversals.cli import main
from traversals.kg.base import Entity
from traversals.kg.factory import open_kg
from traversals.kg.sparql import SparqlKG
from traversals.kg.store import OxigraphKG

from ..unit.test_label_predicates import ADA, BABBAGE, DC_TITLE, FOAF_NAME, GRACE, HOSTILE, NOTES, PEOPLE, VOCAB_NAME
from .servers import OxigraphServer, load_store

pytestmark = [pytest.mark.server, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> tuple[str, Path]:
    """The endpoint's URL and the same data as a file."""
    d = tmp_path_factory.mktemp("label_predicates")
    data = d / "people.ttl"
    data.write_text(PEOPLE, "utf-8")
    load_store(d / "db", [data])
    server = OxigraphServer(d / "db", d / "oxigraph.log")
    try:
        yield server.url, data
    finally:
        server.stop()


async def test_without_the_flag_the_endpoint_finds_nobody_by_name_and_shows_local_names(served):
    url, _ = served
    kg = open_kg(url)
    assert isinstance(kg, SparqlKG)
    try:
        assert await kg.search("Ada Lovelace") == []
        assert await kg.search("p12345") == []  # an endpoint's search matches label values only
        ada = Entity(id=ADA, label=ADA)  # passed in by its id, as an MCP client's kg_edges does
        rels = await kg.get_relations([ada])
        assert FOAF_NAME in {r.iri for r in rels.items}  # a relation: it labels nothing here
        knows = next(r for r in rels.items if r.key == "knows")
        [edge] = (await kg.get_edges([ada], knows)).edges
        assert edge.object.label == "p67890"
    finally:
        await kg.close()


async def test_with_the_flag_the_endpoint_links_labels_and_hides_the_predicates_as_the_store_does(served):
    url, data = served
    kg = open_kg(url, label_predicates=["foaf:name", "dcterms:title"])
    local = open_kg(str(data), label_predicates=["foaf:name", "dcterms:title"])
    assert isinstance(kg, SparqlKG) and isinstance(local, OxigraphKG)
    assert kg.label_predicates == (FOAF_NAME, DC_TITLE)
    try:
        [ada] = await kg.search("Ada Lovelace")
        assert (ada.id, ada.label) == (ADA, "Ada Lovelace")
        [notes] = await kg.search("Notes on the Analytical Engine")
        assert (notes.id, notes.label) == (NOTES, "Notes on the Analytical Engine")
        [babbage] = await kg.search(HOSTILE)  # quotes and a backslash, sent as a literal
        assert (babbage.id, babbage.label) == (BABBAGE, HOSTILE)
        rels = await kg.get_relations([ada])
        assert {r.key for r in rels.items} == {"knows", "wrote", "~knows"}
        assert not {r.iri for r in rels.items} & {FOAF_NAME, DC_TITLE}
        # the same relations and edges as the embedded store with the same predicates
        [local_ada] = await local.search("Ada Lovelace", limit=1)
        local_rels = await local.get_relations([local_ada])
        assert [(r.key, r.label) for r in rels.items] == [(r.key, r.label) for r in local_rels.items]
        for rel, local_rel in zip(rels.items, local_rels.items):
            got = [(e.subject.label, e.relation.key, e.object.label) for e in (await kg.get_edges([ada], rel)).edges]
            want = [(e.subject.label, e.relation.key, e.object.label)
                    for e in (await local.get_edges([local_ada], local_rel)).edges]
            assert got == want
        known = {tuple((e.subject.label, e.object.label) for e in (await kg.get_edges([ada], r)).edges)
                 for r in rels.items}
        # Grace is named with the vocabulary's own v:name alone, not given here: her local name
        assert known == {(("Ada Lovelace", HOSTILE),), (("Ada Lovelace", "Notes on the Analytical Engine"),),
                         (("p99", "Ada Lovelace"),)}
    finally:
        await kg.close()
        await local.close()


async def test_the_endpoint_reads_the_predicates_in_the_order_given(served):
    url, _ = served
    for order, shown in (([FOAF_NAME, VOCAB_NAME], HOSTILE), ([VOCAB_NAME, FOAF_NAME], "Charles B.")):
        kg = open_kg(url, label_predicates=order)
        try:
            [ada] = await kg.search("Ada Lovelace")
            knows = next(r for r in (await kg.get_relations([ada])).items if r.key == "knows")
            [edge] = (await kg.get_edges([ada], knows)).edges
            assert edge.object.label == shown
            [grace] = await kg.search("Grace Hopper")  # labelled with the vocabulary of its own alone
            assert grace.id == GRACE
        finally:
            await kg.close()


def test_kg_search_with_the_flag_against_the_endpoint(served, capsys, tmp_path, monkeypatch):
    url, _ = served
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the query cache of this test alone
    assert main(["kg", "search", "Ada Lovelace", "--kg", url, "--no-cache"]) == 0
    assert capsys.readouterr().out.strip() == "no entity's label matches 'Ada Lovelace'"
    assert main(["kg", "search", "Ada Lovelace", "--kg", url, "--no-cache", "--label-predicate", FOAF_NAME]) == 0
    assert capsys.readouterr().out.splitlines() == [f"Ada Lovelace  {ADA}  ({url})"]


async def test_a_relation_keeps_its_id_within_a_question_and_no_question_changes_anothers(served):
    """foaf:name and v:name share the local name "name". Ada has only foaf:name, Grace
    only v:name, Babbage both. An endpoint decides ids per answer: foaf:name is "name" for
    Ada and its IRI for Babbage. Within one question (one KGSet.fresh()) a relation keeps
    the id it had first; a question's ids never depend on what an earlier question asked."""
    from traversals.llm.base import Usage
    from traversals.search.kgset import KGSet

    async def ids(kgs: KGSet, who: str) -> dict[str, str]:
        rels = await kgs.get_relations([Entity(id=who, label=who, kg=kgs.kgs[0].name)], Usage())
        return {r.iri: r.id for r in rels.items if r.iri in (FOAF_NAME, VOCAB_NAME)}

    url, _ = served
    async with SparqlKG(url) as kg:
        whole = KGSet([kg])
        question = whole.fresh()
        assert await ids(question, ADA) == {FOAF_NAME: "name"}
        assert await ids(question, BABBAGE) == {FOAF_NAME: "name", VOCAB_NAME: VOCAB_NAME}  # kept
        assert await ids(question, GRACE) == {VOCAB_NAME: VOCAB_NAME}  # kept
        grace = Entity(id=GRACE, label=GRACE, kg=kg.name)
        v_name = next(r for r in (await question.get_relations([grace], Usage())).items if r.iri == VOCAB_NAME)
        [edge] = (await question.get_edges([grace], v_name, Usage())).edges
        assert edge.object.label == "Grace Hopper"
        # the next question starts afresh: Grace asked first, v:name is "name"
        assert await ids(whole.fresh(), GRACE) == {VOCAB_NAME: "name"}
