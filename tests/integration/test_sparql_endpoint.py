"""SparqlKG against a real Oxigraph server on 127.0.0.1 (and small local HTTP apps for the
faults a real server will not produce on demand: slowness, 429, non-JSON answers).

The served store holds
* a MetaQA-style plain triple file (``s|r|o``) converted to N-Triples here with the IRI
  scheme of ``traversals.kg.iris`` (the same IRIs the embedded store mints),
* a hub node with 100,000 outgoing and 50,000 incoming edges and 150 further relations,
  generated here,
* the Wikidata-shaped fixture ``tests/fixtures/wikidata_fixture.ttl``.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pyoxigraph
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from traversals.errors import BadInput, KGQueryError, KGTimeout, KGUnavailable
from traversals.kg import iris
from traversals.kg.base import Entity, EntitySampler, KnowledgeGraph, Relation
from traversals.kg.cache import QueryCache
from traversals.kg.http import HttpClient
from traversals.kg.sparql import SparqlKG

from .servers import LocalApp, OxigraphServer, free_port, load_store

pytestmark = [pytest.mark.server, pytest.mark.timeout(300)]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HUB = "Hub Node"
HUB_OUT = 100_000
HUB_IN = 50_000
HUB_EXTRA_RELATIONS = 150
HOSTILE_NAME = 'Weird "Name" {x} }; # \\ end'

TRIPLES = f"""\
The Gumball Rally|directed_by|Charles Bail
The Gumball Rally|written_by|Charles Bail
The Gumball Rally|starred_actors|Michael Sarrazin
The Gumball Rally|starred_actors|Tim McIntire
The Gumball Rally|release_year|1976
The Gumball Rally|has_genre|Comedy
Cleopatra Jones and the Casino of Gold|directed_by|Charles Bail
Cleopatra Jones and the Casino of Gold|release_year|1975
Bullitt|starred_actors|Steve McQueen
The Getaway|starred_actors|Steve McQueen
The Towering Inferno|starred_actors|Steve McQueen
The Towering Inferno|starred_actors|Paul Newman
{HOSTILE_NAME}|has_genre|Comedy
"""
#: relations with an explicit inverse label in the data (iris.INVERSE_LABEL)
INVERSE_LABELS = {"starred_actors": "starred in"}


# -- servers --------------------------------------------------------------------------


EMPTY_RESULTS = json.dumps({"head": {"vars": ["x"]}, "results": {"bindings": []}}).encode()
ONE_ROW = json.dumps(
    {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "uri", "value": "http://e/x"}}]}}
).encode()


# -- data -------------------------------------------------------------------------------


def nt(s: str, p: str, o) -> str:
    return f"{pyoxigraph.NamedNode(s)} {pyoxigraph.NamedNode(p)} {o} .\n"


def convert_triples(text: str, out: Path) -> None:
    """``s|r|o`` lines -> N-Triples with the embedded store's IRIs and labels."""
    names: set[str] = set()
    rels: set[str] = set()
    with open(out, "w", encoding="utf-8") as f:
        for line in text.splitlines():
            if not line.strip():
                continue
            s, r, o = line.split("|")
            f.write(nt(iris.entity_iri(s), iris.relation_iri(r), pyoxigraph.NamedNode(iris.entity_iri(o))))
            names.update((s, o))
            rels.add(r)
        for n in sorted(names):
            f.write(nt(iris.entity_iri(n), iris.RDFS_LABEL, pyoxigraph.Literal(n.strip())))
        for r in sorted(rels):
            f.write(nt(iris.relation_iri(r), iris.RDFS_LABEL, pyoxigraph.Literal(iris.name_label(r), language="en")))
            if r in INVERSE_LABELS:
                f.write(nt(iris.relation_iri(r), iris.INVERSE_LABEL, pyoxigraph.Literal(INVERSE_LABELS[r], language="en")))


def write_hub(out: Path) -> None:
    hub = f"<{iris.entity_iri(HUB)}>"
    links = f"<{iris.relation_iri('links_to')}>"
    points = f"<{iris.relation_iri('points_to')}>"
    label = f"<{iris.RDFS_LABEL}>"
    lines = [f'{hub} {label} "{HUB}" .\n']
    for i in range(HUB_OUT):
        item = f"<{iris.entity_iri(f'hub item {i}')}>"
        lines.append(f"{hub} {links} {item} .\n")
        lines.append(f'{item} {label} "hub item {i}" .\n')
    for i in range(HUB_IN):
        lines.append(f"<{iris.entity_iri(f'hub item {i}')}> {points} {hub} .\n")
    for i in range(HUB_EXTRA_RELATIONS):
        lines.append(f"{hub} <{iris.relation_iri(f'rel_{i:03d}')}> <{iris.entity_iri('hub extra')}> .\n")
    out.write_text("".join(lines), encoding="utf-8")


@pytest.fixture(scope="session")
def oxigraph(tmp_path_factory):
    root = tmp_path_factory.mktemp("oxigraph")
    kb = root / "kb.nt"
    convert_triples(TRIPLES, kb)
    hub = root / "hub.nt"
    write_hub(hub)
    location = root / "db"
    load_store(location, [kb, hub, FIXTURES / "wikidata_fixture.ttl"])
    odd = root / "odd.nt"
    odd.write_text(ODD_IRIS, encoding="utf-8")
    load_store(location, [odd], lenient=True)
    server = OxigraphServer(location, root / "server.log")
    server.root = root
    yield server
    server.stop()


# Nodes some servers hold and return but a query cannot name as they are: a stray "%"
# (Oxigraph refuses it in a query), a space (no SPARQL IRI may hold one)
ODD = "http://odd.example/"
ODD_IRIS = f"""\
<{ODD}a> <{ODD}knows> <{ODD}weird%zz> .
<{ODD}a> <{ODD}knows> <{ODD}has space> .
<{ODD}a> <{ODD}knows> <{ODD}b> .
<{ODD}a> <{iris.RDFS_LABEL}> "Odd Alice" .
<{ODD}b> <{iris.RDFS_LABEL}> "Odd Bob" .
<{ODD}weird%zz> <{iris.RDFS_LABEL}> "Odd Percent" .
<{ODD}has space> <{iris.RDFS_LABEL}> "Odd Space" .
"""


def ent(name: str) -> Entity:
    return Entity(iris.entity_iri(name), name)


def rel(name: str, inverse: bool = False) -> Relation:
    return Relation(name, iris.name_label(name), inverse=inverse, iri=iris.relation_iri(name))


# -- the interface ----------------------------------------------------------------------


async def test_is_a_knowledge_graph(oxigraph) -> None:
    async with SparqlKG(oxigraph.url, name="movies") as kg:
        assert isinstance(kg, KnowledgeGraph)
        assert kg.name == "movies"


async def test_labelled_entities_are_drawn_the_same_for_a_seed(oxigraph) -> None:
    """What `train-value --synthetic` walks from: labelled nodes of the endpoint, each an
    entity `search` finds by its label."""
    async with SparqlKG(oxigraph.url) as kg:
        assert isinstance(kg, EntitySampler)
        drawn = await kg.sample_entities(8, seed=1)
        assert len({e.id for e in drawn}) == 8 and all(e.label and e.kg == kg.name for e in drawn)
        assert [e.id for e in await kg.sample_entities(8, seed=1)] == [e.id for e in drawn]
        for e in drawn[:3]:
            assert e.id in [x.id for x in await kg.search(e.label, limit=50)]


async def test_a_draw_from_a_large_endpoint_reaches_past_its_first_nodes(oxigraph) -> None:
    """More labelled nodes than the pool: the pool is read as slices at seeded offsets over
    all of them, not as the endpoint's first ones; an endpoint that will not count them
    gives its first pool's worth."""
    scan = "SELECT DISTINCT ?x WHERE"

    async with SparqlKG(oxigraph.url) as kg:
        everyone = await kg._labelled_count()
        kg.SAMPLE_POOL = 40  # an instance's own limit: the fixture's nodes are then "many"
        assert everyone is not None and everyone > 4 * kg.SAMPLE_POOL
        first = {r["x"].value for r in await kg.select(f"{scan} {{ {kg._labelled()} }} LIMIT 40")}
        drawn = await kg.sample_entities(20, seed=2)
        assert len({e.id for e in drawn}) == 20 and all(e.label for e in drawn)
        assert len({e.id for e in drawn} - first) >= 10  # nearly all of them lie past the first 40
        assert [e.id for e in await kg.sample_entities(20, seed=2)] == [e.id for e in drawn]
        assert [e.id for e in await kg.sample_entities(20, seed=3)] != [e.id for e in drawn]

    class NoCount(SparqlKG):
        async def select(self, query: str):
            if "COUNT(DISTINCT ?x)" in query:
                raise KGTimeout("the endpoint gave up counting")
            return await super().select(query)

    async with NoCount(oxigraph.url) as kg:
        kg.SAMPLE_POOL = 40
        assert {e.id for e in await kg.sample_entities(20, seed=2)} <= first


async def test_search_exact_then_case_insensitive_then_contains(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        [bail] = await kg.search("Charles Bail")
        assert bail.id == iris.entity_iri("Charles Bail") and bail.label == "Charles Bail"
        assert [e.id for e in await kg.search("  charles   bail ")] == [bail.id]
        # no case variant matches "McQueen": the case-insensitive stage finds it
        before = kg.stats.queries
        [mcq] = await kg.search("steve mcqueen")
        assert mcq.label == "Steve McQueen"
        assert kg.stats.queries - before == 3  # exact, icase, labels
        # contains, ranked by similarity
        found = await kg.search("Gumball")
        assert found and found[0].label == "The Gumball Rally"
        assert await kg.search("no such thing anywhere") == []
        assert await kg.search("") == []
        assert len(await kg.search("hub item 1", limit=3)) <= 3


async def test_relations_both_directions_most_frequent_first(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        rels = await kg.get_relations([ent("The Gumball Rally")])
        keys = [r.key for r in rels.items]
        assert keys[0] == "starred_actors"  # 2 edges, then the 1-edge ones
        assert set(keys) == {"starred_actors", "directed_by", "written_by", "release_year", "has_genre"}
        assert rels.omitted == 0
        back = await kg.get_relations([ent("Charles Bail")])
        by_key = {r.key: r for r in back.items}
        assert by_key["~directed_by"].inverse and by_key["~directed_by"].display == "directed"
        assert by_key["~directed_by"].iri == iris.relation_iri("directed_by")
        assert [r.key for r in back.items][0] == "~directed_by"  # 2 films
        # explicit inverse label from the data
        actor = {r.key: r for r in (await kg.get_relations([ent("Steve McQueen")])).items}
        assert actor["~starred_actors"].display == "starred in"
        assert actor["~starred_actors"].label == "starred actors"
        # label and inverse-label predicates are never relations
        assert not any(r.iri in (iris.RDFS_LABEL, iris.INVERSE_LABEL) for r in back.items)


async def test_edges_forward_and_inverse(oxigraph) -> None:
    async with SparqlKG(oxigraph.url, name="movies") as kg:
        bail = (await kg.search("Charles Bail"))[0]
        got = await kg.get_edges([bail], rel("directed_by", inverse=True))
        films = sorted(e.subject.label for e in got.edges)
        assert films == ["Cleopatra Jones and the Casino of Gold", "The Gumball Rally"]
        for e in got.edges:  # stored as the KG states it: (film, directed_by, person)
            assert e.relation.key == "directed_by" and not e.relation.inverse
            assert e.object == bail
        assert sorted(e.label for e in got.new_entities) == films
        assert all(e.kg == "movies" for e in got.new_entities)
        fwd = await kg.get_edges([ent("The Gumball Rally")], rel("starred_actors"))
        assert sorted(e.object.label for e in fwd.edges) == ["Michael Sarrazin", "Tim McIntire"]
        assert fwd.omitted == 0
        none = await kg.get_edges([ent("The Gumball Rally")], rel("no_such_relation"))
        assert none.edges == () and none.new_entities == ()


async def test_several_entities_at_once(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        films = [ent("Bullitt"), ent("The Getaway"), ent("The Towering Inferno")]
        got = await kg.get_edges(films, rel("starred_actors"))
        assert len(got.edges) == 4
        assert sorted(e.label for e in got.new_entities) == ["Paul Newman", "Steve McQueen"]


async def test_wikidata_shaped_data_through_plain_sparql(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        [bob] = await kg.search("Bob Dylan")
        assert bob.id == "Q392" and bob.description == "American singer-songwriter"
        rels = {r.key: r for r in (await kg.get_relations([bob])).items}
        assert rels["P25"].label == "mother"  # from wd:P25 via wikibase:directClaim
        assert rels["P25"].display == "mother" and rels["P25"].inverse_label == "is mother of"
        assert "P214" not in rels  # wikibase:ExternalId
        # P22 has only an "unknown value" (a skolem IRI): it may be offered (relations are
        # counted without per-triple filters), but it yields no edges
        if "P22" in rels:
            assert (await kg.get_edges([bob], rels["P22"])).edges == ()
        assert all(not r.iri.startswith("http://www.wikidata.org/prop/P") for r in rels.values())
        [edge] = (await kg.get_edges([bob], rels["P25"])).edges
        assert edge.object.id == "Q62519478" and edge.object.label == "Beatrice Stone"


async def test_hostile_label_is_found_exactly(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        [weird] = await kg.search(HOSTILE_NAME)
        assert weird.label == HOSTILE_NAME
        rels = await kg.get_relations([weird])
        assert [r.key for r in rels.items] == ["has_genre"]
        [wd] = await kg.search('Robert "Bob" {Zimmerman} }; # \\ drop\nline')
        assert wd.id == "Q900000002"


async def test_an_odd_iri_among_the_edges_costs_only_its_own_label(oxigraph) -> None:
    """One reached node a query cannot name does not fail the step: its edge is kept,
    labelled by its IRI's local name, and the other nodes keep their labels."""
    async with SparqlKG(oxigraph.url) as kg:
        [alice] = await kg.search("Odd Alice")
        [knows] = (await kg.get_relations([alice])).items
        edges = await kg.get_edges([alice], knows)
        by_id = {e.object.id: e.object.label for e in edges.edges}
        assert by_id[f"{ODD}b"] == "Odd Bob"
        assert by_id[f"{ODD}weird%zz"] and by_id[f"{ODD}has space"]  # local names
        assert len(by_id) == 3


async def test_an_odd_iri_among_those_linked_costs_only_its_own_link(oxigraph) -> None:
    """same_as batched every IRI in one query: a stray "%" had the server refuse the batch,
    and the whole linking step (and question) failed with KGQueryError."""
    async with SparqlKG(oxigraph.url) as kg:
        got = await kg.same_as([f"{ODD}weird%zz", f"{ODD}b"])
        assert got[f"{ODD}weird%zz"] == [] and [e.label for e in got[f"{ODD}b"]] == ["Odd Bob"]


async def test_an_odd_iri_selected_is_a_dead_end_not_a_failed_question(oxigraph) -> None:
    """The LLM selecting the stray-"%" node made get_relations send a query the server refuses:
    KGQueryError, and the whole question failed. Now it has no relations or edges, and the
    entities selected with it keep theirs."""
    async with SparqlKG(oxigraph.url) as kg:
        [alice] = await kg.search("Odd Alice")
        [knows] = (await kg.get_relations([alice])).items
        odd = next(e.object for e in (await kg.get_edges([alice], knows)).edges if e.object.id == f"{ODD}weird%zz")
        assert (await kg.get_relations([odd])).items == ()
        assert [r.key for r in (await kg.get_relations([odd, alice])).items] == [r.key for r in
                                                                                 (await kg.get_relations([alice])).items]
        assert (await kg.get_edges([odd], knows)).edges == ()
        assert len((await kg.get_edges([odd, alice], knows)).edges) == 3
    # an endpoint that refuses every query (maintenance, a proxy's page) is an error still, not a dead end
    async with SparqlKG(oxigraph.url) as kg:
        async def refuse(query: str):
            raise KGQueryError("SPARQL endpoint rejected the request (HTTP 400): maintenance mode")

        kg.select = refuse  # type: ignore[method-assign]
        for selected in ([odd], [odd, alice]):
            with pytest.raises(KGQueryError, match="maintenance"):
                await kg.get_relations(selected)


async def test_an_iri_with_a_space_selected_is_a_dead_end_not_a_failed_question(oxigraph) -> None:
    """A node whose IRI has a space (a lenient load, Virtuoso) reached and then selected (by
    the LLM, --screen-dead-ends, retrieve's second hop): no query can name it, and
    get_relations raised BadInput "not a valid IRI", which failed the whole question. It is
    a dead end now, asked about in no query, and the entities selected with it keep theirs;
    an id that was never one IRI is BadInput still (test_bad_ids_are_bad_input_not_queries)."""
    async with SparqlKG(oxigraph.url) as kg:
        [alice] = await kg.search("Odd Alice")
        [knows] = (await kg.get_relations([alice])).items
        spaced = next(e.object for e in (await kg.get_edges([alice], knows)).edges if e.object.id == f"{ODD}has space")
        asked = kg.http.stats.requests
        assert (await kg.get_relations([spaced])).items == ()
        assert (await kg.get_edges([spaced], knows)).edges == ()
        assert (await kg.get_edges([spaced], knows.reversed())).edges == ()
        assert kg.http.stats.requests == asked
        assert [r.key for r in (await kg.get_relations([spaced, alice])).items] == ["knows"]
        assert len((await kg.get_edges([spaced, alice], knows)).edges) == 3


async def test_an_entity_named_by_its_id_alone_gets_its_label_in_the_edges(oxigraph) -> None:
    """An MCP client's kg_edges passes an id; the edges name it by its label, as the
    embedded store's do."""
    async with SparqlKG(oxigraph.url) as kg:
        bail = iris.entity_iri("Charles Bail")
        got = await kg.get_edges([Entity(bail, bail)], rel("directed_by", inverse=True))
        assert got.edges and {e.object.label for e in got.edges} == {"Charles Bail"}


HOSTILE = [
    '"', '\\', '\\"', "}", "} }", "};", "#", "# comment\n}", "\n", "\r\n", "\t", "'", "'''", '"""',
    '" } ; DROP ALL ; #', "') } UNION { ?s ?p ?o } #", "\\u0022 }", "<http://evil/>", "?x", "$x",
    "{{}}", "😀", "é\u0301", "\u2028", "\x00", "\x7f", "日本", "LIMIT 1", "FILTER(true)",
]


async def test_hostile_questions_never_break_a_query(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        for text in HOSTILE:
            assert await kg.search(text, limit=3) is not None
            assert await kg.search(f"film {text} title", limit=3) is not None
        assert kg.http.stats.statuses.keys() == {200}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hs.text(alphabet=hs.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40))
def test_hostile_search_property(oxigraph, text: str) -> None:
    async def run() -> None:
        async with SparqlKG(oxigraph.url, max_retries=0) as kg:
            result = await kg.search(text, limit=2)
            assert isinstance(result, list) and len(result) <= 2
            assert set(kg.http.stats.statuses) <= {200}

    asyncio.run(run())


async def test_bad_ids_are_bad_input_not_queries(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        with pytest.raises(BadInput):
            await kg.get_relations([Entity("http://x/a> } ; DROP ALL ; <http://x/b", "evil")])
        with pytest.raises(BadInput):
            await kg.get_edges([ent("Bullitt")], Relation("r", "r", iri="http://x/} #"))
        assert kg.http.stats.requests == 0


# -- bounded fan-out ------------------------------------------------------------------------


async def test_hub_edges_are_bounded_and_fast(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        t0 = time.monotonic()
        got = await kg.get_edges([ent(HUB)], rel("links_to"), limit=50)
        elapsed = time.monotonic() - t0
        assert len(got.edges) == 50 and len(got.new_entities) == 50
        assert got.omitted == HUB_OUT - 50
        # the first 50 by label of the first order_limit (10,000) the server gives
        labels = [e.object.label for e in got.edges]
        assert labels == sorted(labels) and len(set(labels)) == 50
        assert all(x.startswith("hub item ") for x in labels)
        assert elapsed < 10, elapsed
        assert kg.stats.queries == 4  # edges, count, the label-ordered choice, labels
        back = await kg.get_edges([ent(HUB)], rel("points_to", inverse=True), limit=10)
        assert len(back.edges) == 10 and back.omitted == HUB_IN - 10
        assert all(e.object.id == iris.entity_iri(HUB) for e in back.edges)


async def test_hub_omitted_count_is_itself_bounded(oxigraph) -> None:
    async with SparqlKG(oxigraph.url, count_limit=1000) as kg:
        got = await kg.get_edges([ent(HUB)], rel("links_to"), limit=20)
        assert len(got.edges) == 20 and got.omitted == 1000 - 20  # a lower bound


async def test_hub_relations_are_bounded_and_ranked(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        t0 = time.monotonic()
        rels = await kg.get_relations([ent(HUB)], limit=100)
        elapsed = time.monotonic() - t0
        assert len(rels.items) == 100
        assert [r.key for r in rels.items[:2]] == ["links_to", "~points_to"]
        assert rels.omitted == HUB_EXTRA_RELATIONS + 2 - 100
        assert elapsed < 10, elapsed
        small = await kg.get_relations([ent(HUB)], limit=5)
        assert len(small.items) == 5 and small.omitted == HUB_EXTRA_RELATIONS + 2 - 5
    # the grouped query's rows fill relation_rows exactly: there may be more, counted
    async with SparqlKG(oxigraph.url, relation_rows=HUB_EXTRA_RELATIONS + 1) as kg:
        full = await kg.get_relations([ent(HUB)], limit=5)
        assert len(full.items) == 5 and full.omitted == HUB_EXTRA_RELATIONS + 2 - 5


async def test_long_queries_are_posted(oxigraph) -> None:
    methods: list[str] = []

    async def hook(request: httpx.Request) -> None:
        methods.append(request.method)

    http = HttpClient(event_hooks={"request": [hook]})
    async with SparqlKG(oxigraph.url, http=http) as kg:
        nodes = [iris.entity_iri(f"hub item {i}") for i in range(150)]
        described = await kg.describe(nodes)
        assert described[nodes[7]] == ("hub item 7", "")
        assert "POST" in methods
        await kg.search("Bullitt")
        assert methods[-1] == "GET"
    await http.aclose()


# -- the cache -------------------------------------------------------------------------------


async def test_cache_serves_repeated_queries_without_http(oxigraph, tmp_path) -> None:
    sent: list[httpx.Request] = []

    async def hook(request: httpx.Request) -> None:
        sent.append(request)

    path = tmp_path / "cache.sqlite3"
    http = HttpClient(event_hooks={"request": [hook]})
    async with SparqlKG(oxigraph.url, cache=QueryCache(path), http=http) as kg:
        first = await kg.search("Charles Bail")
        rels = await kg.get_relations(first)
        n = len(sent)
        assert n >= 3
        assert await kg.search("Charles Bail") == first
        assert await kg.get_relations(first) == rels
        assert len(sent) == n
        assert kg.stats.cache_hits >= 3
    # a new process (new KG, same file) asks the endpoint only whether it is alive
    async with SparqlKG(oxigraph.url, cache=QueryCache(path), http=http) as kg2:
        assert await kg2.search("Charles Bail") == first
        assert await kg2.get_relations(first) == rels
        assert len(sent) == n + 1 and sent[-1].url.params["query"] == "ASK {}"
    # ... so a dead endpoint is an error even when every answer is cached
    dead = f"http://127.0.0.1:{free_port()}/query"
    async with SparqlKG(dead, cache=QueryCache(path), max_retries=0) as kg4:
        await kg4.cache.aset(dead, "SELECT * {}", "application/sparql-results+json", '{"head":{"vars":[]},"results":{"bindings":[]}}')
        with pytest.raises(KGUnavailable):
            await kg4.select("SELECT * {}")
    # --no-cache
    async with SparqlKG(oxigraph.url, cache=QueryCache(path, enabled=False), http=http) as kg3:
        await kg3.search("Charles Bail")
        assert len(sent) > n
    await http.aclose()


# -- faults ----------------------------------------------------------------------------------


async def test_server_stopped_mid_run_is_kg_unavailable(oxigraph) -> None:
    server = OxigraphServer(oxigraph.location, oxigraph.root / "second.log")
    try:
        http = HttpClient(max_retries=2, backoff_base=0.05)
        async with SparqlKG(server.url, http=http) as kg:
            [bail] = await kg.search("Charles Bail")
            server.stop()
            t0 = time.monotonic()
            with pytest.raises(KGUnavailable) as e:
                await kg.get_relations([bail])
            assert time.monotonic() - t0 < 10
        await http.aclose()
    finally:
        server.stop()
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"SPARQL endpoint {server.url} is unreachable: ")


async def test_unreachable_endpoint_default_settings() -> None:
    url = f"http://127.0.0.1:{free_port()}/query"
    async with SparqlKG(url, max_retries=1) as kg:
        with pytest.raises(KGUnavailable) as e:
            await kg.search("anything")
    assert url in str(e.value) and "unreachable" in str(e.value) and "\n" not in str(e.value)


async def test_slow_server_timeout_is_honoured() -> None:
    def slow(handler, app):
        app.release.wait(10)
        return 200, {"Content-Type": "application/sparql-results+json"}, EMPTY_RESULTS

    app = LocalApp(slow)
    try:
        async with SparqlKG(app.url, timeout=0.5) as kg:
            t0 = time.monotonic()
            with pytest.raises(KGTimeout) as e:
                await kg.search("Charles Bail")
            elapsed = time.monotonic() - t0
        assert elapsed < 3, elapsed
        assert app.url in str(e.value) and "0.5 s" in str(e.value)
        assert len(app.requests) == 1  # a timeout is not retried
    finally:
        app.close()


async def test_the_time_budget_starts_once_a_connection_is_free() -> None:
    """16 queries at once, each answered in 0.3 s, with a 1 s budget and 4 connections: those
    waiting for a connection spent their budget waiting and failed with KGTimeout, though the
    endpoint answered every one in time."""
    def slow(handler, app):
        time.sleep(0.3)
        return 200, {"Content-Type": "application/sparql-results+json"}, EMPTY_RESULTS

    app = LocalApp(slow)
    http = HttpClient(timeout=1.0, max_retries=0, max_connections=4)
    try:
        async with SparqlKG(app.url, http=http) as kg:
            got = await asyncio.gather(*(kg.select(f"SELECT * WHERE {{ ?s ?p {i} }}") for i in range(16)),
                                       return_exceptions=True)
        assert [g for g in got if isinstance(g, BaseException)] == []
        assert len(app.requests) == 16
    finally:
        await http.aclose()
        app.close()


async def test_429_with_retry_after_waits_and_succeeds() -> None:
    def limited(handler, app):
        if len(app.requests) == 1:
            return 429, {"Retry-After": "1", "Content-Type": "text/plain"}, b"Too Many Requests"
        return 200, {"Content-Type": "application/sparql-results+json"}, ONE_ROW

    app = LocalApp(limited)
    try:
        async with SparqlKG(app.url, user_agent="polite-test/1.0 (me@example.org)") as kg:
            t0 = time.monotonic()
            rows = await kg.select("SELECT ?x WHERE { ?x ?p ?o } LIMIT 1")
            elapsed = time.monotonic() - t0
        assert rows[0]["x"].value == "http://e/x"
        assert elapsed >= 1.0
        assert len(app.requests) == 2
        assert app.requests[0]["headers"]["User-Agent"] == "polite-test/1.0 (me@example.org)"
        assert app.requests[0]["headers"]["Accept"] == "application/sparql-results+json"
    finally:
        app.close()


async def test_server_errors_are_retried_then_reported() -> None:
    def broken(handler, app):
        return 503, {"Content-Type": "text/plain"}, b"Service Unavailable\nstack trace..."

    app = LocalApp(broken)
    try:
        async with SparqlKG(app.url, http=HttpClient(max_retries=2, backoff_base=0.05)) as kg:
            with pytest.raises(KGUnavailable) as e:
                await kg.select("SELECT * WHERE { ?s ?p ?o } LIMIT 1")
            await kg.http.aclose()
        assert len(app.requests) == 3
        assert "HTTP 503: Service Unavailable" in str(e.value) and "\n" not in str(e.value)
    finally:
        app.close()


async def test_non_json_answer_is_a_query_error() -> None:
    app = LocalApp(lambda h, a: (200, {"Content-Type": "text/html"}, b"<html>login page</html>"))
    try:
        async with SparqlKG(app.url) as kg:
            with pytest.raises(KGQueryError) as e:
                await kg.select("SELECT * WHERE { ?s ?p ?o }")
        assert "did not return SPARQL JSON results" in str(e.value)
    finally:
        app.close()


async def test_an_answer_cut_off_by_the_servers_time_limit_is_a_timeout() -> None:
    """WDQS streams part of the JSON, then its Java TimeoutException, with HTTP 200: it read
    as "did not return SPARQL JSON results: {", and a hub's best-effort count failed get_edges."""
    cut = ('{\n  "head" : { "vars" : [ "c" ] },\n  "results" : {\n    "bindings" : [ {\n      "c" : {\n'
           'SPARQL-QUERY: queryStr=SELECT (COUNT(*) ...\njava.util.concurrent.TimeoutException\n'
           '\tat java.util.concurrent.FutureTask.get(FutureTask.java:205)\n').encode()
    app = LocalApp(lambda h, a: (200, {"Content-Type": "application/sparql-results+json"}, cut))
    try:
        async with SparqlKG(app.url) as kg:
            with pytest.raises(KGTimeout, match="ran out of time on the query"):
                await kg.select("SELECT (COUNT(*) AS ?c) WHERE { ?s ?p ?o }")
    finally:
        app.close()


async def test_rejected_query_reports_the_server_message(oxigraph) -> None:
    async with SparqlKG(oxigraph.url) as kg:
        with pytest.raises(KGQueryError) as e:
            await kg.select("SELECT ?x WHERE { ?x ")
        assert "HTTP 400" in str(e.value) and "error at" in str(e.value)
        assert "\n" not in str(e.value)
        assert kg.http.stats.requests == 1
    wrong = oxigraph.url.replace("/query", "/nope")
    async with SparqlKG(wrong) as kg:
        with pytest.raises(KGQueryError) as e:
            await kg.search("x")
        assert "HTTP 404" in str(e.value)


def test_endpoint_must_be_http() -> None:
    with pytest.raises(BadInput):
        SparqlKG("ftp://example.org/sparql")
    with pytest.raises(BadInput):
        SparqlKG("http://127.0.0.1/query", language="not a tag")


# -- parity with the embedded store -----------------------------------------------------------


async def test_same_answers_as_the_embedded_store(oxigraph) -> None:
    """The same N-Triples served over SPARQL and loaded into the embedded store give the
    same search hits, relations (order, labels, omitted) and edges."""
    store = pytest.importorskip("traversals.kg.store")
    embedded = store.OxigraphKG.from_file(oxigraph.root / "kb.nt", name="kb")
    async with SparqlKG(oxigraph.url, name="kb") as remote:
        for text in ["Charles Bail", "The Gumball Rally", "Steve McQueen", "Comedy", "1976"]:
            a = await embedded.search(text, limit=3)
            b = await remote.search(text, limit=3)
            assert a == b, text
            # PathQuestion names entities with underscores ("lord_robert_manners"); `kg
            # convert` labels them with spaces, and both back ends find them either way
            for underscored in (text.replace(" ", "_"), text.lower().replace(" ", "_")):
                assert await remote.search(underscored, limit=3) == b, underscored
                assert await embedded.search(underscored, limit=3) == a, underscored
            for limit in (100, 2):
                ra = await embedded.get_relations(a[:1], limit=limit)
                rb = await remote.get_relations(b[:1], limit=limit)
                assert ra == rb, (text, limit)
            for r in ra.items:
                for limit in (50, 1):
                    ea = await embedded.get_edges(a[:1], r, limit=limit)
                    eb = await remote.get_edges(b[:1], r, limit=limit)
                    # a hub's too: both show the first `limit` by label
                    assert ea == eb, (text, r.key, limit)
    await embedded.close()


# -- a hub's shown edges: the first by label, as in the embedded store ------------------------

SHUFFLE = "http://shuffle.example/"
SHUFFLED_EDGES = 300


def write_shuffled_hub(out: Path) -> None:
    """A hub with 300 outgoing and 300 incoming ``linked`` edges whose labels sort in no
    relation to their IRIs or to the order the triples are written in: mixed case, some
    tagged ``@en``, one node with a German label that sorts first but is not the one
    shown, one node with no label at all (shown by its local name)."""
    import random

    rng = random.Random(7)
    names = [f"{'Item' if i % 2 else 'item'} {n:03d}" for i, n in enumerate(rng.sample(range(1000), SHUFFLED_EDGES))]
    nodes = [f"{SHUFFLE}n{i}" for i in range(SHUFFLED_EDGES)]
    label, linked = iris.RDFS_LABEL, f"{SHUFFLE}linked"
    lines = [nt(f"{SHUFFLE}hub", label, pyoxigraph.Literal("The Hub"))]
    for i, (node, name) in enumerate(zip(nodes, names)):
        lines.append(nt(f"{SHUFFLE}hub", linked, pyoxigraph.NamedNode(node)))
        lines.append(nt(node, linked, pyoxigraph.NamedNode(f"{SHUFFLE}hub")))
        if i == 0:
            continue  # no label: "n0" by its local name, which sorts after the "item"s
        tagged = pyoxigraph.Literal(name, language="en") if i % 3 == 0 else pyoxigraph.Literal(name)
        lines.append(nt(node, label, tagged))
        if i == 1:  # a label in another language that would sort first: not the one shown
            lines.append(nt(node, label, pyoxigraph.Literal("aaa first in German", language="de")))
    rng.shuffle(lines)
    out.write_text("".join(lines), encoding="utf-8")


@pytest.fixture(scope="module")
def shuffled(tmp_path_factory):
    root = tmp_path_factory.mktemp("shuffled")
    data = root / "hub.nt"
    write_shuffled_hub(data)
    load_store(root / "db", [data])
    server = OxigraphServer(root / "db", root / "server.log")
    server.data = data
    yield server
    server.stop()


async def test_a_hubs_shown_edges_are_the_first_by_label_as_in_the_embedded_store(shuffled) -> None:
    store = pytest.importorskip("traversals.kg.store")
    embedded = store.OxigraphKG.from_file(shuffled.data, name="hub")
    hub = Entity(f"{SHUFFLE}hub", "The Hub", kg="hub")
    try:
        async with SparqlKG(shuffled.url, name="hub") as remote:
            ra, rb = await embedded.get_relations([hub]), await remote.get_relations([hub])
            assert ra == rb and sorted(r.key for r in rb.items) == ["linked", "~linked"]
            for linked in rb.items:
                inverse = linked.inverse
                for limit in (50, 7):
                    ea = await embedded.get_edges([hub], linked, limit=limit)
                    remote.stats.queries = 0
                    eb = await remote.get_edges([hub], linked, limit=limit)
                    assert remote.stats.queries == 4  # edges, count, the ordered choice, labels
                    far = [(e.subject if inverse else e.object).label for e in eb.edges]
                    assert len(far) == limit and eb.omitted == SHUFFLED_EDGES - limit
                    # the first `limit` of all 300 by label (lower-cased), not the first rows
                    everyone = sorted(
                        (e.subject if inverse else e.object).label.lower()
                        for e in (await embedded.get_edges([hub], linked, limit=1000)).edges
                    )
                    assert [x.lower() for x in far] == everyone[:limit]
                    assert "aaa first in German" not in far and "n0" not in far
                    assert eb == ea, (inverse, limit)
            # several entities at once: their edges in the order of their labels ("item …"
            # before "The Hub"), the first 50 of all of them
            linked = next(r for r in rb.items if not r.inverse)
            item = (await embedded.get_edges([hub], linked, limit=50)).edges[20].object
            for both in ([hub, item], [item, hub]):
                ea = await embedded.get_edges(both, linked, limit=50)
                eb = await remote.get_edges(both, linked, limit=50)
                assert eb == ea and eb.omitted == SHUFFLED_EDGES + 1 - 50
                assert eb.edges[0].subject == item and eb.edges[1].subject == hub
            # order_limit bounds the sort: 0 asks for no ordered choice (the server's rows)
            async with SparqlKG(shuffled.url, name="hub", order_limit=0) as unordered:
                got = await unordered.get_edges([hub], linked, limit=50)
                assert unordered.stats.queries == 3  # edges, count, labels
                assert len(got.edges) == 50 and got.omitted == SHUFFLED_EDGES - 50
            # the common case is unchanged: a node with fewer edges than `limit` costs
            # one edge query and one label query
            one = Entity(f"{SHUFFLE}n5", "an item")
            remote.stats.queries = 0
            got = await remote.get_edges([one], Relation("linked", "linked", iri=f"{SHUFFLE}linked"))
            assert [e.object.label for e in got.edges] == ["The Hub"] and got.omitted == 0
            assert remote.stats.queries == 2
    finally:
        await embedded.close()


@pytest.mark.parametrize("fault", ["rejected", "too slow"])
async def test_a_hubs_edges_fall_back_to_the_servers_rows_when_the_ordered_choice_fails(shuffled, fault) -> None:
    """A proxy in front of the real server that refuses (HTTP 400) or sits on the
    label-ordered query past the KG's timeout: the call still answers, with the first
    rows the server gave and the same ``omitted``."""
    from urllib.parse import parse_qs, urlsplit

    def proxy(handler, app):
        if handler.command == "POST":
            query = parse_qs(app.requests[-1]["body"].decode())["query"][0]
        else:
            query = parse_qs(urlsplit(handler.path).query)["query"][0]
        if "ORDER BY" in query and "?_l" in query:  # the label-ordered choice
            app.ordered += 1
            if fault == "rejected":
                return 400, {"Content-Type": "text/plain"}, b"Parser error: not supported here"
            app.release.wait(10)  # past the client's timeout: it has gone by now
            return 200, {"Content-Type": "application/sparql-results+json"}, EMPTY_RESULTS
        r = httpx.post(shuffled.url, data={"query": query}, headers={"Accept": "application/sparql-results+json"})
        return r.status_code, {"Content-Type": r.headers["Content-Type"]}, r.content

    app = LocalApp(proxy)
    app.ordered = 0
    hub = Entity(f"{SHUFFLE}hub", "The Hub", kg="hub")
    linked = Relation("linked", "linked", iri=f"{SHUFFLE}linked")
    try:
        async with SparqlKG(app.url, name="hub", timeout=1.0) as kg:
            t0 = time.monotonic()
            got = await kg.get_edges([hub], linked, limit=50)
            elapsed = time.monotonic() - t0
    finally:
        app.close()
    assert app.ordered == 1
    assert len(got.edges) == 50 and got.omitted == SHUFFLED_EDGES - 50
    assert len({e.object.id for e in got.edges}) == 50 and all(e.subject == hub for e in got.edges)
    # shown in label order all the same, just not necessarily the first 50 of the 300
    labels = [e.object.label.casefold() for e in got.edges]
    assert labels == sorted(labels)
    assert elapsed < 5, elapsed


def test_kg_browse_commands_against_the_real_server(oxigraph, capsys) -> None:
    """``traversals kg relations | edges`` by label (no IRI: a label then) on a real
    endpoint, a label full of SPARQL syntax included."""
    from traversals.cli import main

    assert main(["kg", "relations", "Charles Bail", "--kg", oxigraph.url, "--no-cache"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("2 relation(s)") and {line.split()[0] for line in out[1:]} == {"~directed_by", "~written_by"}
    assert main(["kg", "edges", "Charles Bail", "~directed_by", "--kg", oxigraph.url, "--no-cache", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert sorted(e["label"] for e in got["entities"]) == ["Cleopatra Jones and the Casino of Gold", "The Gumball Rally"]
    assert main(["kg", "relations", HOSTILE_NAME, "--kg", oxigraph.url, "--no-cache"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["has_genre", "has", "genre"]
