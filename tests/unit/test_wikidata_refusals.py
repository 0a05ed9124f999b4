"""WikidataKG told by Wikimedia's public services, with no network (an httpx mock transport):
a block or ban (HTTP 403) is told as one, not as missing credentials (which Wikidata does
not take), and a token in a custom API URL stays out of messages and the cache."""

from __future__ import annotations

import httpx
import pytest

from traversals.errors import KGAuthError, KGQueryError
from traversals.kg.base import Entity
from traversals.kg.cache import QueryCache
from traversals.kg.http import HttpClient
from traversals.kg.wikidata import WikidataKG


def refusing(status: int, text: str) -> HttpClient:
    return HttpClient(transport=httpx.MockTransport(lambda request: httpx.Response(status, text=text)), max_retries=0)


async def test_a_ban_by_the_public_services_is_told_as_one() -> None:
    kg = WikidataKG(http=refusing(403, "You have been banned until 2026-12-02, please respect throttling"))
    for call in (kg.get_relations([Entity("Q392", "Bob Dylan", kg="wikidata")]), kg.search("Bob Dylan")):
        with pytest.raises(KGAuthError) as e:
            await call
        said = str(e.value)
        assert "You have been banned" in said and "Wikimedia blocked the request" in said and "--user-agent" in said
        assert "it wants credentials" not in said


async def test_a_mirror_behind_a_login_is_still_asked_for_credentials() -> None:
    kg = WikidataKG("https://wdqs.example.org/sparql", http=refusing(401, "login"))
    with pytest.raises(KGAuthError, match="it wants credentials"):
        await kg.get_relations([Entity("Q392", "Bob Dylan", kg="wikidata")])


async def test_a_token_in_the_api_url_stays_out_of_messages_and_the_cache(tmp_path) -> None:
    url = "https://api.example.org/w/api.php?access_token=SECRET123"
    bad = WikidataKG(api_url=url, http=HttpClient(transport=httpx.MockTransport(
        lambda request: httpx.Response(200, text="<html>not json</html>"))))
    with pytest.raises(KGQueryError) as e:
        await bad.search("Bob Dylan")
    assert "SECRET123" not in str(e.value) and "access_token=***" in str(e.value)
    answer = '{"search": [{"id": "Q392", "label": "Bob Dylan"}]}'
    cache = QueryCache(tmp_path / "c.sqlite3")
    good = WikidataKG(api_url=url, cache=cache, http=HttpClient(transport=httpx.MockTransport(
        lambda request: httpx.Response(200, text=answer))))
    assert [x.id for x in await good.search("Bob Dylan")] == ["Q392"]
    cache.close()
    assert b"SECRET123" not in (tmp_path / "c.sqlite3").read_bytes()
