"""WikidataKG against real servers on 127.0.0.1: Oxigraph serving the Wikidata-shaped
fixture (tests/fixtures/wikidata_fixture.ttl) as the query service, and a small local
HTTP app answering MediaWiki's ``wbsearchentities`` in its documented shape."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from traversals.errors import KGQueryError, KGUnavailable
from traversals.kg.base import Entity, KnowledgeGraph, Relation
from traversals.kg.cache import QueryCache
from traversals.kg.http import HttpClient, RateLimit
from traversals.kg.wikidata import WDQS_URL, WIKIDATA_API_URL, WikidataKG

from .servers import OxigraphServer, free_port, load_store

pytestmark = [pytest.mark.server, pytest.mark.timeout(180)]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "wikidata_fixture.ttl"


# -- servers ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def wdqs(tmp_path_factory):
    """The fixture served by ``oxigraph serve-read-only`` as a stand-in for WDQS."""
    root = tmp_path_factory.mktemp("wdqs")
    load_store(root / "db", [FIXTURE])
    server = OxigraphServer(root / "db", root / "server.log")
    try:
        yield server.url
    finally:
        server.stop()


#: What the search API knows: id -> (label, description, aliases)
ITEMS = {
    "Q392": ("Bob Dylan", "American singer-songwriter", ["Robert Allen Zimmerman", "Robert Zimmerman"]),
    "Q62519478": ("Beatrice Stone", "", []),
    "Q25188": ("Inception", "2010 film directed by Christopher Nolan", []),
    "Q13417189": ("Interstellar", "2014 film directed by Christopher Nolan", []),
    "Q25191": ("Christopher Nolan", "British-American filmmaker", ["Chris Nolan"]),
    "Q1048400": ("Bob Dylan", "1962 debut album by Bob Dylan", []),
}


class MediaWikiAPI:
    """``api.php?action=wbsearchentities`` with the documented response shape: prefix
    match on labels and aliases, language-specific, ``limit`` honoured."""

    def __init__(self) -> None:
        api = self
        self.requests: list[dict] = []
        self.throttle_next = 0  # answer this many requests with 429 first
        self.in_flight = 0
        self.peak = 0
        self.delay = 0.0
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
                with api.lock:
                    api.requests.append({"params": params, "headers": dict(self.headers)})
                    api.in_flight += 1
                    api.peak = max(api.peak, api.in_flight)
                    throttle = api.throttle_next > 0
                    if throttle:
                        api.throttle_next -= 1
                try:
                    if api.delay:
                        time.sleep(api.delay)
                    if throttle:
                        self._send(429, {"error": {"code": "ratelimited"}}, {"Retry-After": "1"})
                    else:
                        self._send(200, api.answer(params))
                finally:
                    with api.lock:
                        api.in_flight -= 1

            def _send(self, status: int, doc: dict, headers: dict | None = None) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/w/api.php"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @staticmethod
    def answer(params: dict) -> dict:
        if params.get("action") != "wbsearchentities":
            return {"error": {"code": "badvalue", "info": 'Unrecognized value for parameter "action".'}}
        if "search" not in params or not params.get("language"):
            return {"error": {"code": "missingparam", "info": 'The "search" parameter must be set.'}}
        if params.get("format") != "json" or params.get("type", "item") != "item":
            return {"error": {"code": "badvalue", "info": "unsupported"}}
        text = params["search"].casefold()
        limit = int(params.get("limit", "7"))
        hits = []
        for qid, (label, desc, aliases) in ITEMS.items():
            matched = None
            if label.casefold().startswith(text):
                matched = {"type": "label", "language": "en", "text": label}
            else:
                for a in aliases:
                    if a.casefold().startswith(text):
                        matched = {"type": "alias", "language": "en", "text": a}
                        break
            if matched is None:
                continue
            hit = {
                "id": qid,
                "title": qid,
                "pageid": 1000 + len(hits),
                "display": {"label": {"value": label, "language": "en"}},
                "repository": "wikidata",
                "url": f"//www.wikidata.org/wiki/{qid}",
                "concepturi": f"http://www.wikidata.org/entity/{qid}",
                "label": label,
                "match": matched,
            }
            if desc:
                hit["description"] = desc
                hit["display"]["description"] = {"value": desc, "language": "en"}
            if matched["type"] == "alias":
                hit["aliases"] = [matched["text"]]
            hits.append(hit)
        doc = {"searchinfo": {"search": params["search"]}, "search": hits[:limit], "success": 1}
        if len(hits) > limit:
            doc["search-continue"] = limit
        return doc

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api():
    app = MediaWikiAPI()
    yield app
    app.close()


@pytest.fixture
async def kg(wdqs, api):
    k = WikidataKG(wdqs, api.url, contact="tests@example.org")
    yield k
    await k.close()


def rel(pid: str, inverse: bool = False) -> Relation:
    return Relation(pid, pid, inverse=inverse, iri=f"http://www.wikidata.org/prop/direct/{pid}")


# -- defaults and etiquette -------------------------------------------------------------


def test_defaults_follow_wdqs_etiquette() -> None:
    from traversals.errors import TraversalsWarning

    with pytest.warns(TraversalsWarning, match="names no contact"):  # Wikimedia's User-Agent policy
        k = WikidataKG()
    assert k.endpoint_url == WDQS_URL == "https://query.wikidata.org/sparql"
    assert k.api_url == WIKIDATA_API_URL == "https://www.wikidata.org/w/api.php"
    assert k.http.timeout == 60.0  # WDQS's own query time limit
    assert k.http.rate_limit is not None and k.http.rate_limit.max_concurrency == 1
    assert k.http.user_agent.startswith("traversals/")
    assert k.name == "wikidata"
    assert isinstance(k, KnowledgeGraph)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WikidataKG(contact="ops@example.org")  # a contact: no warning


async def test_user_agent_with_contact_reaches_the_servers(kg, api) -> None:
    await kg.search("Bob Dylan")
    ua = api.requests[-1]["headers"]["User-Agent"]
    assert ua.startswith("traversals/") and "tests@example.org" in ua and "httpx/" in ua


# -- search through wbsearchentities ----------------------------------------------------


async def test_search_uses_wbsearchentities(kg, api) -> None:
    found = await kg.search("Bob Dylan", limit=5)
    assert [e.id for e in found] == ["Q392", "Q1048400"]
    assert found[0].label == "Bob Dylan" and found[0].description == "American singer-songwriter"
    assert found[0].kg == "wikidata"
    p = api.requests[-1]["params"]
    assert p == {
        "action": "wbsearchentities",
        "search": "Bob Dylan",
        "language": "en",
        "uselang": "en",
        "type": "item",
        "limit": "5",
        "format": "json",
    }
    # aliases are searched too (the API does it)
    assert [e.id for e in await kg.search("robert allen")] == ["Q392"]
    assert await kg.search("nothing like this") == []
    assert [e.id for e in await kg.search("Bob Dylan", limit=1)] == ["Q392"]


async def test_search_limit_is_capped_at_the_api_maximum(kg, api) -> None:
    await kg.search("Bob", limit=500)
    assert api.requests[-1]["params"]["limit"] == "50"


HOSTILE = ['"} ; DROP ALL ; #', "a&action=wbeditentity&b=", "x\ny\r\n", "\\\\", "{{}}", "😀 é", "%00%ff", "q=1#frag"]


async def test_hostile_search_text_arrives_intact(kg, api) -> None:
    for text in HOSTILE:
        assert await kg.search(text) == []
        assert api.requests[-1]["params"]["search"] == " ".join(text.split())
        assert api.requests[-1]["params"]["action"] == "wbsearchentities"


async def test_api_error_is_a_query_error(wdqs, api, monkeypatch) -> None:
    monkeypatch.setattr(api, "answer", lambda params: {"error": {"code": "badvalue", "info": "nope"}})
    async with WikidataKG(wdqs, api.url) as k:
        with pytest.raises(KGQueryError) as e:
            await k.search("Bob Dylan")
    assert "badvalue" in str(e.value) and "nope" in str(e.value)


async def test_search_429_retry_after(wdqs, api) -> None:
    api.throttle_next = 1
    async with WikidataKG(wdqs, api.url) as k:
        t0 = time.monotonic()
        found = await k.search("Interstellar")
        elapsed = time.monotonic() - t0
    assert [e.id for e in found] == ["Q13417189"]
    assert elapsed >= 1.0
    assert len(api.requests) == 2


async def test_one_request_at_a_time_by_default(wdqs, api) -> None:
    api.delay = 0.05
    async with WikidataKG(wdqs, api.url) as k:
        await asyncio.gather(*(k.search(t) for t in ["Bob", "Inception", "Interstellar", "Chris"]))
    assert api.peak == 1
    api.peak = 0
    async with WikidataKG(wdqs, api.url, rate_limit=RateLimit()) as k:
        await asyncio.gather(*(k.search(t) for t in ["Bob", "Inception", "Interstellar", "Chris"]))
    assert api.peak > 1


async def test_search_results_are_cached(wdqs, api, tmp_path) -> None:
    cache = QueryCache(tmp_path / "c.sqlite3")
    async with WikidataKG(wdqs, api.url, cache=cache) as k:
        a = await k.search("Inception")
        n = len(api.requests)
        assert await k.search("Inception") == a
        assert len(api.requests) == n
        await k.search("Interstellar")
        assert len(api.requests) == n + 1


async def test_search_without_api_uses_sparql_labels(wdqs) -> None:
    async with WikidataKG(wdqs, api_url=None) as k:
        [bob] = await k.search("Bob Dylan")
        assert (bob.id, bob.label, bob.description) == ("Q392", "Bob Dylan", "American singer-songwriter")
        [florence] = await k.search("Florence Stone")  # a "mul" label
        assert florence.id == "Q900000001"
        [weird] = await k.search('Robert "Bob" {Zimmerman} }; # \\ drop\nline')
        assert weird.id == "Q900000002"


async def test_a_mirror_by_its_spec_is_wikidata_at_another_endpoint(wdqs) -> None:
    """``--kg wikidata:URL``: Wikidata's vocabulary and labels at a mirror's SPARQL endpoint
    (QLever's Wikidata, a local WDQS), found by SPARQL label matching, no public rate limit."""
    from traversals.kg.factory import open_kg

    async with open_kg(f"wikidata:{wdqs}") as k:
        assert isinstance(k, WikidataKG) and k.name == "wikidata" and k.api_url is None
        assert k.endpoint_url == wdqs and k.http.rate_limit is None
        [bob] = await k.search("Bob Dylan")
        relations = {r.id for r in (await k.get_relations([bob])).items}
        assert "P25" in relations  # mother, a direct claim


def test_a_mirror_on_the_command_line(wdqs, monkeypatch, capsys, tmp_path) -> None:
    from traversals.cli import main

    monkeypatch.setenv("TRAVERSALS_CACHE", str(tmp_path))
    assert main(["kg", "relations", "Bob Dylan", "--kg", f"wd=wikidata:{wdqs}", "--no-cache"]) == 0
    assert "P25" in capsys.readouterr().out


def test_an_entity_by_its_full_iri_is_the_kgs_own_id(wdqs, monkeypatch, capsys, tmp_path) -> None:
    """Wikidata's full entity IRI names the entity its edges reach as "Q392", not a second node."""
    from traversals.cli import main

    monkeypatch.setenv("TRAVERSALS_CACHE", str(tmp_path))
    iri = "http://www.wikidata.org/entity/Q392"
    assert main(["kg", "relations", iri, "--kg", f"wd=wikidata:{wdqs}", "--no-cache"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("Bob Dylan  Q392  (wd): ")


@pytest.fixture
def mirror_proxy(wdqs):
    from .servers import AuthProxy

    proxy = AuthProxy(wdqs, {"Bearer wd-TOKEN-1"})
    yield proxy
    proxy.close()


async def test_a_mirror_behind_a_login_takes_credentials(mirror_proxy) -> None:
    from traversals.errors import KGAuthError
    from traversals.kg.factory import open_kg

    url = mirror_proxy.url
    async with open_kg(f"wikidata:{url}", headers={"Authorization": "Bearer wd-TOKEN-1"}) as k:
        [bob] = await k.search("Bob Dylan")
        assert bob.id == "Q392" and mirror_proxy.seen[-1] == "Bearer wd-TOKEN-1"
    async with open_kg(f"wikidata:{url}") as k:
        with pytest.raises(KGAuthError):
            await k.search("Bob Dylan")


def test_a_mirror_behind_a_login_on_the_command_line(mirror_proxy, monkeypatch, capsys, tmp_path) -> None:
    from traversals.cli import main

    monkeypatch.setenv("TRAVERSALS_CACHE", str(tmp_path))
    monkeypatch.setenv("WD_TOKEN", "wd-TOKEN-1")
    assert main(["kg", "relations", "Bob Dylan", "--kg", f"wikidata:{mirror_proxy.url}", "--no-cache",
                 "--kg-header", "Authorization: Bearer ${WD_TOKEN}"]) == 0
    assert "P25" in capsys.readouterr().out
    # the public services take no header: a token meant for a mirror never goes there
    assert main(["kg", "relations", "Bob Dylan", "--kg", "wikidata", "--kg-header", "X-Key: k"]) == 2
    assert "the public wikidata take none" in capsys.readouterr().err


async def test_search_api_unreachable(wdqs) -> None:
    url = f"http://127.0.0.1:{free_port()}/w/api.php"
    async with WikidataKG(wdqs, url, max_retries=0) as k:
        with pytest.raises(KGUnavailable) as e:
            await k.search("Bob Dylan")
    assert str(e.value).startswith(f"Wikidata search API {url} is unreachable")


# -- relations and edges (the paper's examples) -------------------------------------------


async def test_maternal_grandmother_of_bob_dylan(kg) -> None:
    """Fig. F.3: Q392 -P25-> Q62519478 -P25-> ?"""
    [bob] = [e for e in await kg.search("Bob Dylan") if e.id == "Q392"]
    rels = await kg.get_relations([bob])
    by_key = {r.key: r for r in rels.items}
    mother = by_key["P25"]
    assert (mother.label, mother.inverse_label, mother.display) == ("mother", "is mother of", "mother")
    assert mother.iri == "http://www.wikidata.org/prop/direct/P25" and mother.kg == "wikidata"
    got = await kg.get_edges([bob], mother)
    [edge] = got.edges
    assert (edge.subject.id, edge.relation.key, edge.object.id) == ("Q392", "P25", "Q62519478")
    assert edge.object.label == "Beatrice Stone"
    [beatrice] = got.new_entities
    got2 = await kg.get_edges([beatrice], mother)
    [edge2] = got2.edges  # the "unknown value" mother of Florence is not followed here
    assert edge2.object.id == "Q900000001" and edge2.object.label == "Florence Stone"  # "mul" label


async def test_only_direct_claims_and_no_external_ids(kg) -> None:
    rels = await kg.get_relations([Entity("Q392", "Bob Dylan")])
    keys = [r.key for r in rels.items]
    assert "P214" not in keys  # VIAF ID: wikibase:ExternalId
    assert all(r.iri.startswith("http://www.wikidata.org/prop/direct/") for r in rels.items)
    assert len(keys) == len(set(keys))  # p:P25 / ps:P25 do not duplicate P25
    assert {"P25", "P31", "P21", "P27", "P569"} <= set(keys)
    labels = {r.key: r.label for r in rels.items}
    assert labels["P27"] == "country of citizenship" and labels["P31"] == "instance of"


async def test_reverse_edges(kg) -> None:
    beatrice = Entity("Q62519478", "Beatrice Stone")
    rels = {r.key: r for r in (await kg.get_relations([beatrice])).items}
    child = rels["~P25"]
    assert child.inverse and child.display == "is mother of"
    got = await kg.get_edges([beatrice], child)
    [edge] = got.edges
    assert (edge.subject.id, edge.relation.key, edge.object.id) == ("Q392", "P25", "Q62519478")
    assert not edge.relation.inverse
    assert [e.id for e in got.new_entities] == ["Q392"]
    assert got.new_entities[0].description == "American singer-songwriter"


async def test_cast_members_of_two_films_labels_batched(kg) -> None:
    films = [Entity("Q25188", "Inception"), Entity("Q13417189", "Interstellar")]
    rels = await kg.get_relations(films)
    assert rels.items[0].key == "P161" and rels.items[0].label == "cast member"
    before = kg.stats.queries
    got = await kg.get_edges(films, rels.items[0])
    assert kg.stats.queries - before == 2  # the edges, then all labels in one query
    assert len(got.edges) == 7
    names = sorted(e.label for e in got.new_entities)
    assert names == sorted(
        ["Leonardo DiCaprio", "Joseph Gordon-Levitt", "Tom Hardy", "Michael Caine", "Matthew McConaughey", "Anne Hathaway"]
    )
    caine = next(e for e in got.new_entities if e.id == "Q102124")
    assert caine.description == "English actor"
    bounded = await kg.get_edges(films, rels.items[0], limit=3)
    assert len(bounded.edges) == 3 and bounded.omitted == 4


async def test_relations_bounded_with_omitted(kg) -> None:
    films = [Entity("Q25188", "Inception"), Entity("Q13417189", "Interstellar")]
    rels = await kg.get_relations(films, limit=1)
    assert [r.key for r in rels.items] == ["P161"] and rels.omitted == 2  # P31, P57


async def test_language_fallbacks_and_literals(kg) -> None:
    bob = Entity("Q392", "Bob Dylan")
    sex = await kg.get_edges([Entity("Q62519478", "Beatrice Stone")], rel("P21"))
    assert sex.edges[0].object.label == "weiblich"  # no English label: any language
    born = await kg.get_edges([bob], rel("P569"))
    [edge] = born.edges
    assert edge.object.label == "1941-05-24"
    assert edge.object.id.startswith('"1941-05-24T00:00:00Z"')
    # a value can be followed back: who was born then?
    rels = await kg.get_relations([edge.object])
    assert [r.key for r in rels.items] == ["~P569"]
    back = await kg.get_edges([edge.object], rels.items[0])
    assert [(e.subject.id, e.object.id) for e in back.edges] == [("Q392", edge.object.id)]
    assert [e.id for e in back.new_entities] == ["Q392"]
    usa = await kg.get_edges([bob], rel("P27"))
    assert usa.edges[0].object.label == "United States of America"


async def test_relation_given_by_pid_only(kg) -> None:
    got = await kg.get_edges([Entity("Q392", "Bob Dylan")], Relation("P25", "mother"))
    assert got.edges[0].object.id == "Q62519478"


async def test_sparql_unreachable_is_one_line(api) -> None:
    url = f"http://127.0.0.1:{free_port()}/sparql"
    http = HttpClient(max_retries=1, backoff_base=0.05)
    async with WikidataKG(url, api.url, http=http) as k:
        with pytest.raises(KGUnavailable) as e:
            await k.get_relations([Entity("Q392", "Bob Dylan")])
    await http.aclose()
    assert "\n" not in str(e.value) and url in str(e.value)
