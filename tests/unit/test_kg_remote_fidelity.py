"""The SPARQL back end asks what the user's endpoint URL and data say, and names things
as the embedded store does (in-process transports, no sockets)."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

import httpx

from traversals.kg.http import HttpClient
from traversals.kg.sparql import SparqlKG

ENDPOINT = "http://sparql.test/query?default-graph-uri=urn%3Ag1&infer=false"


def _empty_results(request: httpx.Request) -> httpx.Response:
    body = {"head": {"vars": []}, "results": {"bindings": []}}
    return httpx.Response(200, json=body)


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
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _empty_results(request)

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


def test_a_query_parameter_in_the_url_is_replaced_not_doubled() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _empty_results(request)

    async def run() -> None:
        http = HttpClient(transport=httpx.MockTransport(handler))
        await http.get("http://sparql.test/query?query=stale", params={"query": "ASK {}"})
        await http.aclose()

    asyncio.run(run())
    assert parse_qs(seen[0].url.query.decode()) == {"query": ["ASK {}"]}
