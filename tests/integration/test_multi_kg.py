"""Several KGs searched together on real stores (paper §2.4): two embedded files, an
embedded file and a real Oxigraph SPARQL server, plain triple files that share names, a
KG with nothing on the question, and an endpoint that is down."""

from __future__ import annotations

import pytest

from traversals.api import SearchConfig, build_solver
from traversals.errors import KGUnavailable
from traversals.kg.factory import open_kg
from traversals.kg.sparql import SparqlKG
from traversals.kg.store import OxigraphKG
from traversals.llm.scripted import ScriptedLLM

from .servers import OxigraphServer, free_port, load_store
from .test_identity_links import FILMS, MUSIC


def chain_llm(*relations: str, answer: str) -> ScriptedLLM:
    """Expand the newest entity along ``relations`` in turn, then answer."""

    def walked(prompt: str) -> int:
        return prompt.split("Previous Actions:\n", 1)[1].split("\n\n", 1)[0].count("SELECT RELATION")

    def newest(prompt: str, *_) -> str:
        return entity_lines(prompt)[-1].split(":")[0]

    return ScriptedLLM(rules=[("Provided answer:", "should be 1.0"), ("RATING [0.0-1.0]: ", "0.6"),
                              ("I suggest selecting property:", lambda p, *_: relations[walked(p)]),
                              ("entities to expand:", newest),
                              ("So the next action should be:",
                               lambda p, *_: f"ANSWER: {answer}" if walked(p) == len(relations) else "EXPAND_KG: next")])


def entity_lines(prompt: str) -> list[str]:
    block = prompt.split("Knowledge Graph Entities:\n", 1)[1].split("Knowledge Graph Edges:", 1)[0]
    return [ln.strip() for ln in block.splitlines() if ln.strip()]


def edges(answer) -> list[tuple[str, str, str, str]]:
    return sorted((e.subject.label, e.relation.label, e.object.label, e.relation.kg) for e in answer.supporting_edges)


@pytest.fixture()
def ttl(tmp_path):
    (tmp_path / "films.ttl").write_text(FILMS)
    (tmp_path / "music.ttl").write_text(MUSIC)
    return tmp_path / "films.ttl", tmp_path / "music.ttl"


async def test_a_topic_entity_linked_by_owl_same_as_offers_the_other_kgs_relations(ttl):
    """films' "Hans Zimmer" is music's "Zimmer, Hans" (owl:sameAs): one topic entity, and
    music's "born in" is offered from it (before, two topic entities, and from films' one
    only films' relations)."""
    films, music = OxigraphKG.from_file(ttl[0]), OxigraphKG.from_file(ttl[1])
    solver = build_solver("chain", chain_llm("born", answer="Frankfurt am Main"), [films, music],
                          SearchConfig(decoding="sampled"))
    answer = await solver.ask("where was [Hans Zimmer] born")
    assert answer.text == "Frankfurt am Main", answer.trace
    assert [e.ref() for e in answer.linked_entities] == [
        {"id": "http://films.example/zimmer", "label": "Hans Zimmer", "kg": "films"}]
    assert edges(answer) == [("Hans Zimmer", "born in", "Frankfurt am Main", "music")]
    # named as in the later KG only, the entity is still films' Hans Zimmer: one node
    again = await solver.ask("where was [Zimmer, Hans] born")
    assert [e.ref()["id"] for e in again.linked_entities] == ["http://films.example/zimmer"]


@pytest.mark.server
async def test_an_embedded_file_and_a_sparql_server_are_searched_together(ttl, tmp_path):
    load_store(tmp_path / "db", [ttl[1]])
    server = OxigraphServer(tmp_path / "db", tmp_path / "server.log")
    try:
        films, music = OxigraphKG.from_file(ttl[0]), SparqlKG(server.url, name="music")
        solver = build_solver("chain", chain_llm("composer", "born", answer="Frankfurt am Main"), [films, music],
                              SearchConfig(decoding="sampled"))
        answer = await solver.ask("where was the composer of [Inception] born")
        await music.close()
    finally:
        server.stop()
    assert answer.text == "Frankfurt am Main", answer.trace
    assert edges(answer) == [("Hans Zimmer", "born in", "Frankfurt am Main", "music"),
                             ("Inception", "composer", "Hans Zimmer", "films")]


async def test_two_plain_triple_files_sharing_names_make_one_subgraph(tmp_path):
    """Names are minted into the same IRIs: Inception in scores is movies' Inception, and
    reaching it again through scores adds no second "Inception" node."""
    (tmp_path / "movies.txt").write_text("Inception|music_by|Hans Zimmer\nInception|directed_by|Christopher Nolan\n")
    (tmp_path / "scores.txt").write_text("Hans Zimmer|composed_for|Inception\nHans Zimmer|composed_for|Dune\n"
                                         "Hans Zimmer|born_in|Frankfurt\n")
    kgs = [open_kg(str(tmp_path / "movies.txt")), open_kg(str(tmp_path / "scores.txt"))]
    llm = chain_llm("music_by", "composed_for", answer="Dune, Inception")
    answer = await build_solver("chain", llm, kgs, SearchConfig(decoding="sampled")).ask(
        "which films did the composer of [Inception] score")
    last = [c.prompt for c in llm.calls if "So the next action should be:" in c.prompt][-1]
    assert entity_lines(last) == ["E1: Inception", "E2: Hans Zimmer", "E3: Dune"]
    assert edges(answer) == [("Hans Zimmer", "composed for", "Dune", "scores"),
                             ("Hans Zimmer", "composed for", "Inception", "scores"),
                             ("Inception", "music by", "Hans Zimmer", "movies")]


async def test_a_kg_with_nothing_on_the_question_is_searched_and_left_out(ttl, tmp_path):
    (tmp_path / "zoo.txt").write_text("Zebra|eats|Grass\n")
    films, zoo = OxigraphKG.from_file(ttl[0]), open_kg(str(tmp_path / "zoo.txt"))
    answer = await build_solver("chain", chain_llm("composer", answer="Hans Zimmer"), [films, zoo],
                                SearchConfig(decoding="sampled")).ask("who composed [Inception]")
    assert answer.text == "Hans Zimmer"
    assert [e.ref()["kg"] for e in answer.linked_entities] == ["films"]
    assert edges(answer) == [("Inception", "composer", "Hans Zimmer", "films")]


async def test_an_endpoint_that_is_down_stops_the_question_naming_it(ttl):
    """A closed port next to a working KG: the question fails with KGUnavailable naming the
    endpoint (an eval run stops and can be resumed), not with an answer from half the KGs
    that looks like a whole one."""
    url = f"http://127.0.0.1:{free_port()}/sparql"
    down = SparqlKG(url, name="down", max_retries=0, timeout=5)
    solver = build_solver("chain", chain_llm("composer", answer="x"), [OxigraphKG.from_file(ttl[0]), down],
                          SearchConfig(decoding="sampled"))
    with pytest.raises(KGUnavailable, match=url.replace(".", r"\.")):
        await solver.ask("who composed [Inception]")
    await down.close()
