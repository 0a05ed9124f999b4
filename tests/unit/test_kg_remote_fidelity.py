"""The SPARQL back end asks what the user's endpoint URL and data say, and names things
as the embedded store does (in-process transports, no sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import parse_qs

import httpx

from traversals.kg.base import Entity
from traversals.kg.http import HttpClient
from traversals.kg.sparql import SparqlKG

ENDPOINT = "http://sparql.test/query?default-graph-uri=urn%3Ag1&infer=false"


def _empty_results(request: httpx.Request) -> httpx.Response:
    body = {"head": {"vars": []}, "results": {"bindings": []}}
    return httpx.Response(200, json=body)


def _recorder() -> tuple[list[httpx.Request], Callable[[httpx.Request], httpx.Response]]:
    """The requests an endpoint gets (filled as they come), and its handler: empty results."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _empty_results(request)

    return seen, handler


def _sent_params(request: httpx.Request) -> dict[str, list[str]]:
    """The protocol parameters of a request: the URL's, and a POST form's."""
    params = parse_qs(request.url.query.decode())
    if request.method == "POST":
        for key, value in parse_qs(request.content.decode()).items():
            params.setdefault(key, []).extend(value)
    return params


def test_an_endpoint_urls_own_parameters_go_with_every_query() -> None:
    """``?default-graph-uri=…`` names the graph every query reads: it was dropped from
    each GET (httpx replaces a URL's query string with ``params``) and kept on each POST,
    so short queries silently read another graph than long ones."""
    seen, handler = _recorder()

    async def run() -> None:
        http = HttpClient(transport=httpx.MockTransport(handler))
        kg = SparqlKG(ENDPOINT, http=http)
        await kg.select("SELECT * WHERE { ?s ?p ?o } LIMIT 1")  # short: GET
        await kg.select("SELECT * WHERE { ?s ?p ?o } LIMIT 1 # " + "x" * 3000)  # long: POST
        await http.aclose()

    asyncio.run(run())
    assert [r.method for r in seen] == ["GET", "POST"]
    for request in seen:
        params = _sent_params(request)
        assert params["default-graph-uri"] == ["urn:g1"], request.url
        assert params["infer"] == ["false"]
        assert len(params["query"]) == 1 and params["query"][0].startswith("SELECT")


def test_a_long_url_of_its_own_makes_a_query_go_by_post() -> None:
    """GET or POST is chosen by the whole query string: a query that fits alone but not
    beside a long ``default-graph-uri`` would overrun a server's URL limit as a GET."""
    from traversals.kg.sparql import MAX_GET_QUERY

    seen, handler = _recorder()

    query = "SELECT * WHERE { ?s ?p ?o } # " + "x" * (MAX_GET_QUERY - 200)

    async def run(endpoint: str) -> None:
        http = HttpClient(transport=httpx.MockTransport(handler))
        await SparqlKG(endpoint, http=http).select(query)
        await http.aclose()

    asyncio.run(run("http://sparql.test/query"))
    asyncio.run(run("http://sparql.test/query?default-graph-uri=urn%3A" + "g" * 400))
    assert [r.method for r in seen] == ["GET", "POST"]
    assert _sent_params(seen[1])["default-graph-uri"] == ["urn:" + "g" * 400]


def test_a_query_parameter_in_the_url_is_replaced_not_doubled() -> None:
    seen, handler = _recorder()

    async def run() -> None:
        http = HttpClient(transport=httpx.MockTransport(handler))
        await http.get("http://sparql.test/query?query=stale", params={"query": "ASK {}"})
        await http.aclose()

    asyncio.run(run())
    assert parse_qs(seen[0].url.query.decode()) == {"query": ["ASK {}"]}


# -- the same data embedded and behind an endpoint -------------------------------------

LABELS_TTL = r"""
@prefix ex: <http://ex.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix schema: <http://schema.org/> .
@prefix tv: <http://traversals.local/vocab/> .
ex:paris rdfs:label "Paris"@en ; ex:country ex:france ; ex:hauptstadt ex:france ;
    ex:twin ex:france ; ex:dritte ex:france .
ex:france rdfs:label "Frankreich"@de, "France"@fr, "Francia"@it .
ex:quote rdfs:label "He said \"hi\"\n\tback\\slash"@en ; schema:description "two\nlines"@en ;
    ex:country ex:france .
ex:blank rdfs:label "   "@en, "Blanc"@fr ; ex:country ex:france .
ex:hauptstadt rdfs:label "Hauptstadt"@de .
ex:twin rdfs:label "twin of"@en-GB ; tv:inverseLabel "Zwilling von"@de .
ex:dritte rdfs:label "troisième"@fr, "dritte"@de .
"""


def _store_endpoint(store: object) -> httpx.MockTransport:
    """A SPARQL endpoint answered in process by pyoxigraph (the engine of Oxigraph's
    server): GET ``?query=`` or a form POST, SPARQL JSON results."""
    import pyoxigraph as ox

    def handler(request: httpx.Request) -> httpx.Response:
        query = _sent_params(request)["query"][0]
        result = store.query(query)  # type: ignore[attr-defined]
        body = result.serialize(format=ox.QueryResultsFormat.JSON)
        return httpx.Response(200, content=body, headers={"content-type": "application/sparql-results+json"})

    return httpx.MockTransport(handler)


def _both(tmp_path, ttl: str):
    """The same Turtle as an embedded KG and behind a (pyoxigraph-answered) endpoint."""
    import pyoxigraph as ox

    from traversals.kg.store import OxigraphKG

    path = tmp_path / "kg.ttl"
    path.write_text(ttl, encoding="utf-8")
    embedded = OxigraphKG.from_file(path)
    store = ox.Store()
    store.load(path=str(path), format=ox.RdfFormat.TURTLE)
    remote = SparqlKG("http://sparql.test/query", http=HttpClient(transport=_store_endpoint(store)))
    return embedded, remote


def _names(entities) -> list[tuple[str, str, str]]:
    return [(e.id, e.label, e.description) for e in entities]


def test_labels_only_in_other_languages_are_the_embedded_stores_on_an_endpoint(tmp_path) -> None:
    """France has labels in de, fr and it only: the endpoint took whichever the server
    met first (SAMPLE: "Frankreich" on Oxigraph), the embedded store the smallest
    ("France"); a relation labelled only in German got its local name on the endpoint, and
    an inverse label only in German was not read at all."""
    embedded, remote = _both(tmp_path, LABELS_TTL)

    async def run(kg):
        [paris] = await kg.search("Paris")
        rels = await kg.get_relations([paris])
        edges = await kg.get_edges([paris], next(r for r in rels.items if r.id == "country"))
        return [(r.key, r.label, r.inverse_label) for r in rels.items], _names(e.object for e in edges.edges)

    got = {kind: asyncio.run(run(kg)) for kind, kg in (("embedded", embedded), ("remote", remote))}
    rels, objects = got["remote"]
    assert objects == [("http://ex.org/france", "France", "")]
    assert dict((key, (label, inv)) for key, label, inv in rels) == {
        "country": ("country", "is country of"),
        "hauptstadt": ("Hauptstadt", "is Hauptstadt of"),
        "twin": ("twin of", "Zwilling von"),
        "dritte": ("dritte", "is dritte of"),
    }
    assert got["remote"] == got["embedded"]


def test_labels_and_descriptions_are_one_line_on_an_endpoint_as_embedded(tmp_path) -> None:
    """A label's newline and tab reached the prompt from an endpoint (collapsed to one
    space by the embedded store), and a blank label hid the node's real one."""
    embedded, remote = _both(tmp_path, LABELS_TTL)
    france = Entity("http://ex.org/france", "France")

    async def run(kg):
        rels = await kg.get_relations([france])
        edges = await kg.get_edges([france], rels.items[0])
        return sorted(_names(e.subject for e in edges.edges))

    remote_subjects = asyncio.run(run(remote))
    assert remote_subjects == [
        ("http://ex.org/blank", "Blanc", ""),
        ("http://ex.org/paris", "Paris", ""),
        ("http://ex.org/quote", 'He said "hi" back\\slash', "two lines"),
    ]
    assert remote_subjects == asyncio.run(run(embedded))


def test_relations_labelled_in_the_configured_language_cost_no_extra_query(tmp_path) -> None:
    """The any-language fallback is asked only for predicates with no label in the
    configured languages: no inverse labels (MetaQA, Wikidata) costs nothing more."""
    ttl = """
    @prefix ex: <http://ex.org/> .
    @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
    ex:a rdfs:label "A" ; ex:directed_by ex:b ; ex:written_by ex:b .
    ex:directed_by rdfs:label "directed by"@en .
    ex:written_by rdfs:label "written by" .
    """
    _, remote = _both(tmp_path, ttl)

    async def run():
        before = remote.stats.queries
        rels = await remote.get_relations([Entity("http://ex.org/a", "A")])
        return remote.stats.queries - before, [(r.label, r.inverse_label) for r in rels.items]

    queries, labels = asyncio.run(run())
    assert labels == [("directed by", "directed"), ("written by", "written")]
    assert queries == 2  # the grouped count and the labels


def test_a_predicate_named_like_an_inverse_gets_a_key_of_its_own(tmp_path) -> None:
    """A predicate whose local name begins with ``~`` (a plain file's relation ``~foo``)
    had the id ``~foo``: its key was the inverse ``foo``'s, so one prompt offered two
    relations both keyed ``~foo`` and a choice could follow the wrong one."""
    ttl = """
    @prefix r: <http://traversals.local/relation/> .
    @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
    <http://ex.org/a> r:foo <http://ex.org/b> .
    <http://ex.org/b> r:foo <http://ex.org/d> ; <http://traversals.local/relation/~foo> <http://ex.org/c> ;
        rdfs:label "b" .
    """
    embedded, remote = _both(tmp_path, ttl)
    b = Entity("http://ex.org/b", "b")

    async def run(kg):
        rels = (await kg.get_relations([b])).items
        ends = {}
        for rel in rels:
            edges = await kg.get_edges([b], rel)
            ends[rel.key] = sorted((e.subject.id[-1], e.object.id[-1]) for e in edges.edges)
        return [r.key for r in rels], ends

    for kg in (embedded, remote):
        keys, ends = asyncio.run(run(kg))
        assert len(set(keys)) == len(keys) == 3, keys
        assert ends["foo"] == [("b", "d")] and ends["~foo"] == [("a", "b")]
        assert ends["http://traversals.local/relation/~foo"] == [("b", "c")]
    assert embedded.relation("~foo").inverse and embedded.relation("~foo").id == "foo"


def test_a_camelcase_predicate_without_a_label_is_shown_in_words_by_both_back_ends(tmp_path) -> None:
    """``ex:headquarteredIn`` with no label was shown as "headquarteredIn", and backwards
    as "is headquarteredIn of"; ``ex:partOf`` backwards as "is partOf of". Both back ends
    now put the local name in words, so the inverse is made from words too."""
    ttl = """
    @prefix ex: <http://ex.org/> .
    @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
    ex:acme ex:headquarteredIn ex:tucson ; rdfs:label "ACME" .
    ex:tucson ex:partOf ex:arizona ; ex:hasURL ex:site ; rdfs:label "Tucson" .
    """
    embedded, remote = _both(tmp_path, ttl)
    tucson = Entity("http://ex.org/tucson", "Tucson")

    async def run(kg):
        rels = (await kg.get_relations([tucson])).items
        return sorted((r.key, r.display) for r in rels)

    for kg in (embedded, remote):
        assert asyncio.run(run(kg)) == [
            ("hasURL", "has URL"),
            ("partOf", "part of"),
            ("~headquarteredIn", "inverse of headquartered in"),
        ]


def test_a_triple_term_from_an_endpoint_is_no_edges_end(tmp_path) -> None:
    """An endpoint with RDF 1.2 data binds a triple term (``"type": "triple"``, its value an
    object): read as an IRI, following ``rdf:reifies`` failed with an AttributeError when
    the query had no filter that dropped it (``hide_wikidata_statements=False``)."""
    import pyoxigraph as ox

    path = tmp_path / "star.ttl"
    path.write_text(
        '@prefix ex: <http://ex.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n'
        'ex:a rdfs:label "Ann" ; ex:knows ex:b ~ ex:r1 {| ex:since "2001" |} .\nex:b rdfs:label "Ben" .\n',
        encoding="utf-8",
    )
    store = ox.Store()
    store.load(path=str(path), format=ox.RdfFormat.TURTLE)
    transport = _store_endpoint(store)
    r1 = Entity("http://ex.org/r1", "r1")

    async def run(hide: bool):
        kg = SparqlKG("http://sparql.test/query", http=HttpClient(transport=transport), hide_wikidata_statements=hide)
        rels = {r.key: r for r in (await kg.get_relations([r1])).items}
        return {key: _names(e.object for e in (await kg.get_edges([r1], rel)).edges) for key, rel in rels.items()}

    for hide in (True, False):
        ends = asyncio.run(run(hide))
        assert ends["since"] == [('"2001"', "2001", "")]
        assert ends.get("reifies", []) == []


def test_a_number_an_endpoint_writes_with_a_plus_is_labelled_without_it(tmp_path) -> None:
    """Wikidata writes its quantities with a '+' ("+709000"^^xsd:decimal): a date lost it in
    its label, a number kept it, so the prompt showed "+709000" for the number 709000 (the
    embedded store reads the value as "709000")."""
    import json

    import pyoxigraph as ox

    from traversals.kg import iris

    path = tmp_path / "kg.ttl"
    path.write_text('@prefix ex: <http://ex.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n'
                    'ex:oslo rdfs:label "Oslo" ; ex:population 709000.0 ; ex:motto "+1 more" .\n', encoding="utf-8")
    store = ox.Store()
    store.load(path=str(path), format=ox.RdfFormat.TURTLE)
    answer = _store_endpoint(store).handle_request

    def with_plus(request: httpx.Request) -> httpx.Response:  # as Wikidata's endpoint writes them
        data = json.loads(answer(request).read())
        for binding in data.get("results", {}).get("bindings", []):
            for v in binding.values():
                if v.get("datatype") == iris.XSD + "decimal" and not v["value"].startswith(("+", "-")):
                    v["value"] = "+" + v["value"]
        return httpx.Response(200, json=data, headers={"content-type": "application/sparql-results+json"})

    remote = SparqlKG("http://sparql.test/query", http=HttpClient(transport=httpx.MockTransport(with_plus)))

    async def run():
        [oslo] = await remote.search("Oslo")
        rels = {r.id: r for r in (await remote.get_relations([oslo])).items}
        population = (await remote.get_edges([oslo], rels["population"])).edges
        motto = (await remote.get_edges([oslo], rels["motto"])).edges
        return [(e.object.id, e.object.label) for e in population + motto]

    assert asyncio.run(run()) == [('"+709000"^^xsd:decimal', "709000"), ('"+1 more"', "+1 more")]
    for value, datatype, label in (("+1.5E3", "double", "1.5E3"), ("+42", "integer", "42"), ("-7", "decimal", "-7"),
                                   ("+5", "nonNegativeInteger", "5"), ("+5", "string", "+5")):
        assert iris.literal_label(value, iris.XSD + datatype) == label, (value, datatype)


# -- pinned by a mutation audit: where both back ends must choose alike ------------------

PREFERENCES_TTL = r"""
@prefix ex: <http://ex.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix schema: <http://schema.org/> .
@prefix tv: <http://traversals.local/vocab/> .
@prefix wd: <http://www.wikidata.org/entity/> .
@prefix wdt: <http://www.wikidata.org/prop/direct/> .
@prefix wikibase: <http://wikiba.se/ontology#> .
ex:hub rdfs:label "Hub" ; ex:has ex:gb, ex:us, ex:plain, ex:dog ; ex:parentOf ex:dog ; wdt:P99 ex:gb .
ex:gb rdfs:label "Zed colour"@en-GB, "Abc Farbe"@de .
ex:us rdfs:label "Zcolor"@en, "Colour"@en-GB .
ex:plain rdfs:label "Zeta"@en, "Alpha" .
ex:dog rdfs:label "Hund" ; skos:prefLabel "Dog"@en ; schema:description "Ein Hund"@de, "A dog"@en .
ex:parentOf tv:inverseLabel "child of"@en, "Kind von"@de, "enfant de"@fr, "hijo de"@es .
wdt:P99 rdfs:label "own label" .
wd:P99 wikibase:directClaim wdt:P99 ; rdfs:label "entity label"@en .
"""


def test_both_back_ends_prefer_the_same_language_and_label(tmp_path) -> None:
    """English over a regional English (en-GB) over an untagged label over any other
    language; the language before the label predicate (an English skos:prefLabel over an
    untagged rdfs:label); the same for descriptions and inverse labels; and a predicate's
    own label, whatever its language, over its Wikidata property entity's."""
    embedded, remote = _both(tmp_path, PREFERENCES_TTL)
    hub = Entity("http://ex.org/hub", "Hub")

    async def run(kg):
        rels = {r.key: r for r in (await kg.get_relations([hub])).items}
        has = await kg.get_edges([hub], rels["has"])
        return (sorted(_names(e.object for e in has.edges)),
                sorted((key, r.label, r.inverse_label) for key, r in rels.items()))

    for kg in (embedded, remote):
        ends, rels = asyncio.run(run(kg))
        assert ends == [
            ("http://ex.org/dog", "Dog", "A dog"),
            ("http://ex.org/gb", "Zed colour", ""),
            ("http://ex.org/plain", "Zeta", ""),
            ("http://ex.org/us", "Zcolor", ""),
        ], kg
        assert rels == [
            ("P99", "own label", "is own label of"),
            ("has", "has", "is has of"),
            ("parentOf", "parent of", "child of"),
        ], kg


ORDER_TTL = r"""
@prefix ex: <http://ex.org/> .
@prefix ex2: <http://ex2.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:t rdfs:label "Tee" ; ex:zz ex:a ; ex:aa ex:a ; ex:likes ex:a ; ex2:likes ex:b .
ex:c rdfs:label "Carol" ; ex:street ex:s1, ex:s2 .
ex:zz rdfs:label "alpha" . ex:aa rdfs:label "zeta" .
ex:a rdfs:label "Ann" . ex:b rdfs:label "Ben" .
ex:s1 rdfs:label "Straße" . ex:s2 rdfs:label "strasse b" .
"""


def test_both_back_ends_cut_relations_and_edges_in_one_order(tmp_path) -> None:
    """Relations tied on their count come by the label shown, not by id ("alpha" is
    ex:zz's): under a cap both back ends keep the same ones. Edges come by their far
    end's label lower-cased as SPARQL's LCASE does ("straße" after "strasse b"; casefold
    would put "strasse" first). Two predicates with one local name (ex:likes, ex2:likes)
    keep their IRIs as ids, each reaching its own edges."""
    embedded, remote = _both(tmp_path, ORDER_TTL)
    t, c = Entity("http://ex.org/t", "Tee"), Entity("http://ex.org/c", "Carol")

    async def run(kg):
        first = [r.key for r in (await kg.get_relations([t], limit=1)).items]
        rels = {r.key: r for r in (await kg.get_relations([t])).items}
        street = await kg.get_edges([c], (await kg.get_relations([c])).items[0], limit=1)
        likes = {key: [e.object.label for e in (await kg.get_edges([t], r)).edges]
                 for key, r in rels.items() if key.endswith("likes")}
        return first, sorted(rels), [e.object.label for e in street.edges], street.omitted, likes

    for kg in (embedded, remote):
        first, keys, street, omitted, likes = asyncio.run(run(kg))
        assert first == ["zz"], kg
        assert keys == ["aa", "http://ex.org/likes", "http://ex2.org/likes", "zz"], kg
        assert (street, omitted) == (["strasse b"], 1), kg
        assert likes == {"http://ex.org/likes": ["Ann"], "http://ex2.org/likes": ["Ben"]}, kg


def test_both_back_ends_find_the_label_as_written_first_and_at_most_the_limit(tmp_path) -> None:
    """Five nodes labelled "paris", "PARIS" or "Paris": the one written as asked comes
    first, whichever rows the server happens to give first (the endpoint's exact query asks
    for more than ``limit`` rows, then ranks them: Oxigraph's first row for "PARIS" is
    the skos:prefLabel "Paris"), and no more than ``limit`` come back."""
    ttl = '@prefix ex: <http://ex.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n' + "".join(
        f'ex:p{i} rdfs:label "{label}" .\n' for i, label in enumerate(["paris", "paris", "paris", "PARIS"], 1))
    ttl += 'ex:p5 <http://www.w3.org/2004/02/skos/core#prefLabel> "Paris" .\n'
    embedded, remote = _both(tmp_path, ttl)

    async def run(kg):
        return ([e.id for e in await kg.search("Paris", limit=1)], [e.id for e in await kg.search("PARIS", limit=1)],
                len(await kg.search("paris", limit=2)))

    for kg in (embedded, remote):
        assert asyncio.run(run(kg)) == (["http://ex.org/p5"], ["http://ex.org/p4"], 2), kg
