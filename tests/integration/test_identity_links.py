"""Explicit links between KGs (§2.4): owl:sameAs / skos:exactMatch / schema:sameAs and
shared IRIs, on real stores — two embedded Oxigraph stores, and the same data behind a
real Oxigraph SPARQL server — then a chain that can only reach its answer through a link
whose two ends have different labels, and namesakes that a label match would confuse."""

from __future__ import annotations

import pytest

from traversals.api import SearchConfig, build_solver
from traversals.kg.base import Entity, IdentityLinks
from traversals.kg.sparql import SparqlKG
from traversals.kg.store import OxigraphKG
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet

from .servers import OxigraphServer, load_store

FILMS = """\
@prefix f: <http://films.example/> .
@prefix m: <http://music.example/> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
f:inception rdfs:label "Inception" ; f:composer f:zimmer .
f:zimmer rdfs:label "Hans Zimmer" ; owl:sameAs m:artist-hz .
f:heat rdfs:label "Heat" ; f:composer f:goldenthal .
f:goldenthal rdfs:label "Elliot Goldenthal" .
f:composer rdfs:label "composer" .
"""

MUSIC = """\
@prefix m: <http://music.example/> .
@prefix f: <http://films.example/> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
m:artist-hz rdfs:label "Zimmer, Hans" ; m:born m:frankfurt .
m:frankfurt rdfs:label "Frankfurt am Main" .
m:born rdfs:label "born in" .
m:heat-band rdfs:label "Heat" ; m:genre m:rock .
m:heat-film-score rdfs:label "Heat" ; skos:exactMatch f:heat ; m:released m:y1995 .
m:y1995 rdfs:label "1995" .
m:rock rdfs:label "rock" .
"""


@pytest.fixture()
def stores(tmp_path) -> tuple[OxigraphKG, OxigraphKG]:
    (tmp_path / "films.ttl").write_text(FILMS)
    (tmp_path / "music.ttl").write_text(MUSIC)
    return OxigraphKG.from_file(tmp_path / "films.ttl"), OxigraphKG.from_file(tmp_path / "music.ttl")


def labels(found: dict[str, list[Entity]]) -> dict[str, list[str]]:
    return {k: sorted(e.label for e in v) for k, v in found.items()}


async def test_an_embedded_store_reports_identity_links_in_both_directions(stores):
    films, music = stores
    assert isinstance(films, IdentityLinks)
    got = await films.same_as(["http://films.example/zimmer", "http://films.example/heat",
                               "http://nowhere.example/x", '"1995"', "not an iri", "Q42"])
    assert [e.id for e in got["http://films.example/zimmer"]] == [
        "http://films.example/zimmer", "http://music.example/artist-hz"]  # itself, then what it is stated to be
    assert [e.id for e in got["http://films.example/heat"]] == ["http://films.example/heat"]
    assert got["http://nowhere.example/x"] == [] and got['"1995"'] == [] and got["not an iri"] == [] and got["Q42"] == []
    # stated on the other side (skos:exactMatch from music to films): found from the films id;
    # the films IRI itself is not a music entity (music only names it in the link)
    back = await music.same_as(["http://films.example/heat"])
    assert [(e.id, e.kg) for e in back["http://films.example/heat"]] == [("http://music.example/heat-film-score", "music")]


@pytest.mark.server
async def test_a_sparql_endpoint_answers_the_same_as_the_embedded_store(stores, tmp_path):
    (tmp_path / "films.ttl").write_text(FILMS)
    (tmp_path / "music.ttl").write_text(MUSIC)
    load_store(tmp_path / "db", [tmp_path / "films.ttl", tmp_path / "music.ttl"])
    server = OxigraphServer(tmp_path / "db", tmp_path / "server.log")
    try:
        remote = SparqlKG(server.url, name="both")
        ids = ["http://films.example/zimmer", "http://films.example/heat", "http://music.example/artist-hz",
               "http://nowhere.example/x", '"1995"', "_:b0"]
        got = labels(await remote.same_as(ids))
        await remote.close()
    finally:
        server.stop()
    assert got == {
        "http://films.example/zimmer": ["Hans Zimmer", "Zimmer, Hans"],
        "http://films.example/heat": ["Heat", "Heat"],  # the film, and the score stated to match it
        "http://music.example/artist-hz": ["Hans Zimmer", "Zimmer, Hans"],
        "http://nowhere.example/x": [], '"1995"': [], "_:b0": [],
    }


async def test_linking_follows_explicit_links_before_labels(stores):
    films, music = stores
    kgs = KGSet([films, music])
    zimmer = films.entity("http://films.example/zimmer")
    heat = films.entity("http://films.example/heat")
    usage = Usage()
    await kgs.link([zimmer, heat], usage)
    # "Hans Zimmer" vs "Zimmer, Hans": no label match, the owl:sameAs link finds it
    assert [e.id for e in kgs.copies(zimmer, music)] == ["http://music.example/artist-hz"]
    # two "Heat"s in music: the one stated to match the film, not the band
    assert [e.id for e in kgs.copies(heat, music)] == ["http://music.example/heat-film-score"]
    assert usage.kg_calls == 2  # one batched same_as per KG, no label search needed

    # an entity with no explicit link falls back to the label (the paper's initialize(label))
    frankfurt = music.entity("http://music.example/frankfurt")
    await kgs.link([frankfurt], usage)
    assert kgs.copies(frankfurt, films) == []  # no "Frankfurt am Main" in films either way


async def test_a_chain_reaches_an_answer_through_an_explicit_link(stores):
    films, music = stores

    def default(prompt, prefix, n, t):
        done = prompt.split("Previous Actions:\n", 1)[1].split("\n\n", 1)[0].count("SELECT RELATION")
        return "ANSWER: Frankfurt am Main" if done == 2 else "EXPAND_KG: next"

    def entity(prompt, *_):
        return "E2" if "SELECT RELATION" in prompt else "E1"

    def relation(prompt, *_):
        return "born" if "SELECT ENTITIES: E2" in prompt else "composer"

    llm = ScriptedLLM(rules=[("Provided answer:", "should be 1.0"), ("RATING [0.0-1.0]: ", "0.6"),
                             ("I suggest selecting property:", relation), ("entities to expand:", entity),
                             ("So the next action should be:", default)])
    solver = build_solver("chain", llm, [films, music], SearchConfig(decoding="sampled"))
    answer = await solver.ask("where was the composer of [Inception] born", topic_entities=["Inception"])
    edges = [(e.subject.label, e.relation.label, e.object.label, e.relation.kg) for e in answer.supporting_edges]
    assert answer.text == "Frankfurt am Main", answer.trace
    # music's "Zimmer, Hans" is the subgraph's Hans Zimmer: one node, relations from both KGs
    assert ("Hans Zimmer", "born in", "Frankfurt am Main", "music") in edges
    assert ("Inception", "composer", "Hans Zimmer", "films") in edges
