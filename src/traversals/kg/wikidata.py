"""Wikidata as a :class:`~traversals.kg.base.KnowledgeGraph` (the paper's setting, §3.4).

* ``search`` (used by ``initialize``) goes through the MediaWiki ``wbsearchentities``
  API -- Wikidata's own label-and-alias search, the one behind its search box:
  ``action=wbsearchentities&search=…&language=en&type=item&limit=…&format=json``,
  answered with ``{"search": [{"id": "Q392", "label": "Bob Dylan",
  "description": "American singer-songwriter", …}, …]}``.
* Labels and descriptions of many entities come from one SPARQL query
  (``rdfs:label`` / ``schema:description``, English, then Wikidata's language-neutral
  ``mul`` labels, then any language) -- no ``SERVICE wikibase:label``, so any Wikidata
  mirror (QLever, a local Blazegraph, Oxigraph with a Wikidata-shaped dump) works.
* Relations are the direct claims ``wdt:P…`` in both directions, counted and ranked,
  with the property's label from the property entity (``wikibase:directClaim``) and an
  inverse label made from it ("mother" / "is mother of"; Wikidata has no inverse
  labels). Properties of type ``wikibase:ExternalId`` (thousands of identifier
  properties) are left out.
* Edges forward (``?s wdt:P ?o``) and reverse (``?s wdt:P ?o`` with ``?o`` given) --
  Appendix B.3's "one or two SPARQL queries" -- bounded with ``LIMIT``.

WDQS etiquette (https://www.mediawiki.org/wiki/Wikidata_Query_Service/User_Manual and
the Wikimedia User-Agent policy): a descriptive User-Agent with contact information
(pass ``contact=`` or ``user_agent=``), one request at a time by default, HTTP 429
answered by waiting ``Retry-After``, a 60 s time budget per query (the service's own
limit), and a client-side cache (pass a :class:`~traversals.kg.cache.QueryCache`).
"""

from __future__ import annotations

import json
import warnings
from typing import Mapping, Sequence
from urllib.parse import urlencode

from ..errors import BadInput, KGAuthError, KGQueryError, TraversalsWarning
from ..tokens import CommandToken
from ..validate import keyed_url, scrub_surrogates, shown_url
from . import sparql_text as st
from .base import Entity
from .cache import QueryCache
from .http import HttpClient, RateLimit, default_user_agent, server_message
from .sparql import (
    RDFS_LABEL,
    SCHEMA_DESCRIPTION,
    WIKIDATA_DIRECT,
    WIKIDATA_ID_RE,
    SparqlKG,
)

WDQS_URL = "https://query.wikidata.org/sparql"
WIKIDATA_API_URL = "https://www.wikidata.org/w/api.php"
#: WDQS asks clients not to run queries in parallel.
WDQS_RATE_LIMIT = RateLimit(min_interval=0.0, max_concurrency=1)
#: wbsearchentities accepts at most 50 results per call.
MAX_SEARCH_LIMIT = 50


class WikidataKG(SparqlKG):
    """Wikidata through WDQS (or a mirror) and the MediaWiki search API.

    ``api_url=None`` searches with SPARQL label matching instead (for a mirror without
    a MediaWiki API; only the cheap exact stage by default -- see :class:`SparqlKG`).
    A mirror behind a login takes its user and password in ``sparql_url`` and ``headers``
    (``Authorization: Bearer TOKEN``), as :class:`SparqlKG` does.
    """

    def __init__(
        self,
        sparql_url: str = WDQS_URL,
        api_url: str | None = WIKIDATA_API_URL,
        *,
        headers: Mapping[str, str] | None = None,
        token: CommandToken | None = None,
        name: str = "wikidata",
        language: str = "en",
        timeout: float = 60.0,
        max_retries: int = 4,
        cache: QueryCache | None = None,
        user_agent: str | None = None,
        contact: str | None = None,
        rate_limit: RateLimit | None = WDQS_RATE_LIMIT,
        http: HttpClient | None = None,
        scan_limit: int = 100_000,
        count_limit: int = 100_000,
        order_limit: int = 10_000,
        search_stages: Sequence[str] = ("exact",),
    ) -> None:
        lang = st.language_tag(language)
        languages = (lang,) if lang == "mul" else (lang, "mul")
        super().__init__(
            sparql_url,
            headers=headers,
            token=token,
            name=name,
            label_predicates=(RDFS_LABEL,),
            description_predicates=(SCHEMA_DESCRIPTION,),
            language=languages,
            timeout=timeout,
            max_retries=max_retries,
            cache=cache,
            user_agent=user_agent or default_user_agent(contact),
            rate_limit=rate_limit,
            http=http,
            scan_limit=scan_limit,
            count_limit=count_limit,
            order_limit=order_limit,
            search_stages=search_stages,
            include_predicate_prefixes=(WIKIDATA_DIRECT,),
            exclude_external_ids=True,
        )
        if sparql_url == WDQS_URL and user_agent is None and contact is None and http is None:
            warnings.warn("the public Wikidata is asked with a User-Agent that names no contact; Wikimedia's policy "
                          "asks for one and may block generic clients: give --user-agent 'tool/1.0 (you@example.org)' "
                          "(contact= in the library)", TraversalsWarning, stacklevel=2)
        if api_url is not None and not api_url.startswith(("http://", "https://")):
            raise BadInput(f"the Wikidata API URL must be an http(s) URL, got {api_url!r}")
        self.api_url = api_url
        self.language = lang

    def _refusal_hint(self) -> str:
        if self.endpoint_url == WDQS_URL:  # the public service takes no credentials (a mirror may)
            return BLOCKED_HINT
        return super()._refusal_hint()

    async def search(self, text: str, limit: int = 10) -> list[Entity]:
        """Items whose label or alias matches ``text``, Wikidata's ranking."""
        if self.api_url is None:
            return await super().search(text, limit)
        text = " ".join(str(text).split())
        limit = max(0, min(int(limit), MAX_SEARCH_LIMIT))
        if not text or limit == 0:
            return []
        st.literal(text)  # BadInput on text that is not valid Unicode
        self.stats.searches += 1
        params = {
            "action": "wbsearchentities",
            "search": text,
            "language": self.language,
            "uselang": self.language,
            "type": "item",
            "limit": str(limit),
            "format": "json",
        }
        doc = await self._api(params)
        where = f"Wikidata search API {shown_url(self.api_url)}"
        if isinstance(doc, dict) and "error" in doc:
            err = doc["error"] if isinstance(doc["error"], dict) else {}
            raise KGQueryError(
                f"{where} refused the search: {err.get('code', '?')}: {err.get('info', '')}".rstrip(": ")
            )
        hits = doc.get("search") if isinstance(doc, dict) else None
        if not isinstance(hits, list):
            raise KGQueryError(f"{where} returned an unexpected answer (no 'search' list)")
        out: list[Entity] = []
        seen = set()
        for h in hits:
            if not isinstance(h, dict):
                continue
            qid = str(h.get("id", ""))
            if qid in seen or not WIKIDATA_ID_RE.match(qid):
                continue
            seen.add(qid)
            display = h.get("display")
            if not isinstance(display, dict):
                display = {}
            label = h.get("label") or _display(display, "label") or qid
            desc = h.get("description") or _display(display, "description") or ""
            out.append(Entity(id=qid, label=str(label), description=str(desc), kg=self.name))
        return out[:limit]

    async def _api(self, params: dict[str, str]) -> object:
        """A GET to the MediaWiki API, through the cache."""
        assert self.api_url is not None
        key = urlencode(sorted(params.items()))
        accept = "application/json"
        self.stats.api_calls += 1
        cache_key = keyed_url(self.api_url)  # a token in the URL's query: by digest only
        if self.cache is not None:
            body = await self.cache.aget(cache_key, key, accept)
            if body is not None:
                self.stats.cache_hits += 1
                return scrub_surrogates(json.loads(body))
        try:
            response = await self.http.get(
                self.api_url, params=params, headers={"Accept": accept}, what="Wikidata search API"
            )
        except KGAuthError as e:
            if self.api_url != WIKIDATA_API_URL:
                raise
            raise KGAuthError(f"{e}; {BLOCKED_HINT}") from None
        body = response.text
        try:
            doc = scrub_surrogates(json.loads(body))
        except ValueError:
            snippet = server_message(body, response.headers.get("content-type"), limit=120) or "(empty)"
            raise KGQueryError(
                f"Wikidata search API {shown_url(self.api_url)} did not return JSON: {snippet}"
            ) from None
        if self.cache is not None and isinstance(doc, dict) and "error" not in doc:
            await self.cache.aset(cache_key, key, accept, body)
        return doc


#: what a refusal by Wikimedia's public services means: no credentials are taken there
BLOCKED_HINT = ("Wikimedia blocked the request (its message above): a missing or generic User-Agent, or going on "
                "after HTTP 429, gets a client blocked or banned; give --user-agent 'tool/1.0 (https://your.site; "
                "you@example.org)' (contact= in the library), keep to the query limits, and wait out a ban")


def _display(display: dict, key: str) -> str:
    part = display.get(key)
    if isinstance(part, dict):
        value = part.get("value")
        return value if isinstance(value, str) else ""
    return ""
