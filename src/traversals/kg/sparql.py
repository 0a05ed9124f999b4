"""Any SPARQL 1.1 endpoint as a :class:`~traversals.kg.base.KnowledgeGraph`.

Portable SPARQL 1.1 only (no ``SERVICE wikibase:label`` or other vendor clauses), sent
over the SPARQL 1.1 protocol: GET for short queries, a form-encoded POST for long ones,
``Accept: application/sparql-results+json``. Works with Oxigraph, QLever, Virtuoso,
Blazegraph/WDQS, Fuseki, GraphDB, Neptune.

What each interface call costs (queries, each bounded with ``LIMIT``):

``search(text)``
    1. exact label match: the text and a few case variants, each without a language
       tag and with each configured one, in a ``VALUES`` block joined with each label
       predicate -- index lookups, cheap everywhere;
    2. only if nothing matched: a case-insensitive match
       ``FILTER(LCASE(STR(?l)) = LCASE(?q))`` -- a *scan of all labels*, bounded in
       results (``LIMIT``) but not in work;
    3. only if still nothing: ``CONTAINS`` on the lower-cased label -- the same scan,
       candidates ranked client-side by string similarity.
    Then one batched query for labels and descriptions. On a very large endpoint set
    ``search_stages=("exact",)`` (or use :class:`~traversals.kg.wikidata.WikidataKG`,
    which searches through the MediaWiki API); the query timeout bounds the rest.
``get_relations(entities)``
    One ``GROUP BY ?p ?dir`` / ``COUNT`` query over the entities' outgoing and incoming
    triples, ranked ``ORDER BY DESC(?n)``. Each direction's scan is capped by a subquery
    ``LIMIT scan_limit`` (counts are exact below the cap, a sample above it), and at most
    ``max(limit + 1, relation_rows)`` groups come back, so ``omitted`` is exact without
    a second scan unless an entity has more than ``relation_rows`` distinct relations
    (then a ``COUNT`` query over the same capped scan). Then one batched query for the
    predicates' labels.
``get_edges(entities, relation)``
    One ``LIMIT limit+1`` query; if it is full, two more, sent together: a ``COUNT``
    over a subquery with ``LIMIT count_limit`` gives ``omitted`` (a lower bound when
    the cap is reached; for several entities grouped by entity, which gives
    ``omitted_by_source`` too unless the cap is reached), and a label-ordered ``LIMIT
    limit`` query picks the edges shown, the first by label as in the embedded store (it
    labels and sorts up to ``order_limit`` edges, 10,000 by default: a *scan of the hub*,
    tens of microseconds an edge on Oxigraph; if it fails or times out, the first rows
    are shown). Then one batched label query for the entities reached.

Identifiers follow the embedded store: an entity's ``id`` is its QID when its IRI is a
Wikidata entity IRI (``http://www.wikidata.org/entity/Q392`` -> ``Q392``), else the full
IRI; a relation's ``id`` is the local name of its predicate (``P25``, ``directed_by``).
Literal values (dates, numbers, strings) reached by an edge become entities whose id is
the literal written in N-Triples style (``"1941-05-24T00:00:00Z"^^xsd:dateTime``); they
have no relations of their own here.
"""

from __future__ import annotations

import json
import logging
import random
import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence
from urllib.parse import urlencode, urlsplit

import httpx
import pyoxigraph

from ..errors import BadInput, KGAuthError, KGError, KGQueryError, KGTimeout, TraversalsError
from ..headers import has_authorization
from ..tokens import CommandToken
from ..validate import http_url, scrub_surrogates, shown_url
from .credentials import basic_auth, cache_identity, check_headers, split_userinfo
from . import iris
from . import sparql_text as st
from .base import (
    DEFAULT_MAX_EDGES,
    DEFAULT_MAX_RELATIONS,
    Edge,
    Edges,
    Entity,
    Relation,
    Relations,
    inverse_label_for,
)
from .cache import QueryCache
from .http import HttpClient, RateLimit, looks_like_timeout, server_message
from ..aio import gather
# the vocabulary shared with the embedded store (one definition: kg/iris.py)
from .iris import (  # noqa: F401 - also read from this module by its users
    DEFAULT_LABEL_PREDICATES, RDFS_LABEL, SCHEMA_DESCRIPTION, SCHEMA_NAME, SKOS, SKOS_PREF_LABEL, WIKIBASE,
    WIKIBASE_DIRECT_CLAIM, WIKIDATA_DIRECT, WIKIDATA_ENTITY, XSD, is_literal_id,
)

log = logging.getLogger(__name__)

SPARQL_JSON = "application/sparql-results+json"


WIKIDATA_PROP = "http://www.wikidata.org/prop/"
WIKIDATA_GENID = "http://www.wikidata.org/.well-known/genid/"
WIKIBASE_PROPERTY_TYPE = WIKIBASE + "propertyType"
WIKIBASE_EXTERNAL_ID = WIKIBASE + "ExternalId"
#: Predicates that describe nodes rather than relate them: never offered as relations
#: (as in the embedded store), besides the configured label and description predicates.
META_PREDICATES = iris.META_PREDICATES

WIKIDATA_ID_RE = re.compile(r"[QPL][1-9][0-9]*\Z")
#: Longest URL-encoded query sent with GET; longer ones are POSTed.
MAX_GET_QUERY = 1800
#: IRIs per VALUES block in batched label queries.
BATCH = 200


# -- identifiers ------------------------------------------------------------------------


def entity_id(iri: str) -> str:
    """``Q392`` for a Wikidata entity IRI, otherwise the IRI itself."""
    if iri.startswith(WIKIDATA_ENTITY):
        rest = iri[len(WIKIDATA_ENTITY) :]
        if WIKIDATA_ID_RE.match(rest):
            return rest
    return iri


def entity_iri(entity_or_id: Entity | str) -> str:
    """The IRI of an entity id (inverse of :func:`entity_id`); validated."""
    ident = entity_or_id.id if isinstance(entity_or_id, Entity) else entity_or_id
    ident = ident.strip()
    if WIKIDATA_ID_RE.match(ident):
        return WIKIDATA_ENTITY + ident
    st.iri(ident)  # raises BadInput
    return ident


def literal_id(value: str, language: str = "", datatype: str = "") -> str:
    """An entity id for a literal value: its N-Triples form (pyoxigraph's escaping) with
    an XSD datatype shortened -- ``"1929"^^xsd:integer``, ``"Bob"@en``, ``"x"``; the same
    ids the embedded store gives."""
    try:
        if language:
            return str(pyoxigraph.Literal(value, language=language))
        if datatype and datatype not in (st.XSD_STRING, st.RDF_LANG_STRING):
            text = str(pyoxigraph.Literal(value, datatype=pyoxigraph.NamedNode(datatype)))
            if datatype.startswith(XSD) and text.endswith(f"^^<{datatype}>"):
                text = text[: -len(datatype) - 4] + "^^xsd:" + datatype[len(XSD) :]
            return text
        return str(pyoxigraph.Literal(value))
    except (ValueError, TypeError):
        # a language tag or datatype pyoxigraph refuses: keep the value, drop the rest
        return str(pyoxigraph.Literal(value))


def parse_literal_id(ident: str) -> tuple[str, str, str] | None:
    """``(value, language, datatype)`` of a :func:`literal_id`, parsed by pyoxigraph's
    N-Triples parser (never pasted into a query); ``None`` if it is not one literal."""
    lit = st.parse_literal(ident)
    if lit is None:
        return None
    return lit.value, lit.language or "", lit.datatype.value if lit.datatype else ""


#: A literal worth reading as a label or description (a SPARQL filter on ``{v}``): not
#: empty or all blanks, which the embedded store skips too.
_USABLE_TEXT = 'isLITERAL({v}) && REGEX(STR({v}), "\\\\S")'


def fallback_label(iri: str) -> str:
    """Label for a node that has none: its local name, underscores as spaces."""
    return iris.name_label(iris.local_name(iri)) or iri


# -- SPARQL JSON results --------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    kind: str  # "uri" | "literal" | "bnode"
    value: str
    lang: str = ""
    datatype: str = ""


def parse_results(body: str, where: str) -> list[dict[str, Term]]:
    """Rows of a SPARQL 1.1 JSON results document. A triple term (RDF 1.2, RDF-star:
    ``"type": "triple"``, its value an object) is no node: its variable is left unbound."""
    try:
        doc = scrub_surrogates(json.loads(body))  # a "\ud800" escape: U+FFFD
        bindings = doc["results"]["bindings"]
        rows = []
        for b in bindings:
            row = {}
            for var, t in b.items():
                kind = t.get("type", "")
                if kind == "triple":  # read as an IRI, its value (a dict) failed as one
                    continue
                if kind == "typed-literal":  # old Virtuoso
                    kind = "literal"
                row[var] = Term(
                    kind, t["value"], t.get("xml:lang", ""), t.get("datatype", "")
                )
            rows.append(row)
        return rows
    except (ValueError, KeyError, TypeError, AttributeError):
        if looks_like_timeout(body[-20000:]):  # WDQS: a 200 answer cut off, then the Java TimeoutException
            raise KGTimeout(f"{where} ran out of time on the query (its answer was cut off: "
                            "java.util.concurrent.TimeoutException)") from None
        # an HTML page (a proxy's, a login form): its title and text, not "<!DOCTYPE html>"
        snippet = server_message(body, limit=120) or ("an HTML page without text" if body.strip() else "(empty)")
        raise KGQueryError(
            f"{where} did not return SPARQL JSON results: {snippet}"
        ) from None


@dataclass
class KGStats:
    queries: int = 0  # SELECT queries asked (cache hits included)
    cache_hits: int = 0
    searches: int = 0
    api_calls: int = 0  # non-SPARQL calls (the Wikidata search API)
    extra: dict = field(default_factory=dict)


class SparqlKG:
    """A KG behind a SPARQL 1.1 endpoint.

    Parameters
    ----------
    endpoint_url:
        The query endpoint, e.g. ``http://127.0.0.1:7878/query``. User info in it
        (``https://USER:PASSWORD@host/sparql``, percent-encoded) is sent as HTTP Basic
        credentials and taken out of the URL kept in :attr:`endpoint_url`; messages name
        :attr:`shown_endpoint`, that URL with a token in its query (``?access_token=``,
        ``?key=``) shown as ``***``.
    name:
        The KG's name in traces and multi-KG setups (default: the URL as shown, without user
        info or a token).
    headers:
        Headers sent with every request to this endpoint, e.g. ``{"Authorization": "Bearer
        TOKEN"}`` (:func:`~traversals.kg.credentials.check_headers`); their values are never
        shown.
    token:
        A bearer token a command prints (:class:`~traversals.tokens.CommandToken`), sent as
        ``Authorization: Bearer``; fetched anew when the endpoint refuses it (401/403), and
        the query sent once more. Not with a user in the URL or an ``Authorization`` header.
    label_predicates, description_predicates:
        Predicates giving an entity's label / description, in order of preference (full
        IRIs; labels by default :data:`DEFAULT_LABEL_PREDICATES`: ``rdfs:label``,
        ``skos:prefLabel``, ``schema:name``; ``--label-predicate`` and
        :func:`~traversals.kg.factory.open_kg` take prefixed names too).
    language:
        A language tag or a sequence of them, most preferred first; labels are chosen
        preferred language(s) -> no language tag -> any language.
    timeout, max_retries, user_agent, rate_limit:
        HTTP behaviour (see :class:`~traversals.kg.http.HttpClient`); ignored when an
        ``http`` client is passed.
    cache:
        A :class:`~traversals.kg.cache.QueryCache`; ``None`` sends every query.
    scan_limit:
        Triples scanned per direction when counting relations.
    count_limit:
        Edges counted at most when reporting ``omitted``.
    order_limit:
        Edges of a hub labelled and sorted at most to choose the ``limit`` shown (the
        first by label among the first ``order_limit`` the server gives; 0: no ordering
        query, the server's first rows). It bounds what one ``get_edges`` on a hub costs:
        sorting is a scan, tens of microseconds an edge.
    relation_rows:
        Relation groups fetched at most by :meth:`get_relations` (see above).
    search_stages:
        Which of ``"exact"``, ``"icase"``, ``"contains"`` :meth:`search` may use.
    exclude_predicates:
        More predicate IRIs never offered as relations (label and description
        predicates and :data:`META_PREDICATES` -- ``skos:altLabel``,
        ``skos:hiddenLabel``, ``iris.INVERSE_LABEL``, ``wikibase:directClaim`` -- are
        always excluded).
    include_predicate_prefixes:
        If given, only predicates starting with one of these are relations.
    hide_wikidata_statements:
        Hide the statement-node predicates of the Wikidata RDF model (``p:``, ``ps:``,
        ``pq:`` ... everything under ``http://www.wikidata.org/prop/`` except the direct
        claims ``wdt:``), so a Wikidata-shaped graph offers each property once.
    exclude_external_ids:
        Hide properties typed ``wikibase:ExternalId`` (Wikidata's thousands of
        identifier properties).
    """

    def __init__(
        self,
        endpoint_url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        token: CommandToken | None = None,
        label_predicates: Sequence[str] = DEFAULT_LABEL_PREDICATES,
        description_predicates: Sequence[str] = (SCHEMA_DESCRIPTION,),
        language: str | Sequence[str] = "en",
        timeout: float = 30.0,
        max_retries: int = 4,
        cache: QueryCache | None = None,
        user_agent: str | None = None,
        rate_limit: RateLimit | None = None,
        http: HttpClient | None = None,
        scan_limit: int = 250_000,
        count_limit: int = 100_000,
        order_limit: int = 10_000,
        relation_rows: int = 1000,
        search_stages: Sequence[str] = ("exact", "icase", "contains"),
        exclude_predicates: Iterable[str] = (),
        include_predicate_prefixes: Sequence[str] | None = None,
        hide_wikidata_statements: bool = True,
        exclude_external_ids: bool = True,
    ) -> None:
        self.endpoint_url, self._user, password = split_userinfo(http_url(endpoint_url, "a SPARQL endpoint"))
        self._auth = basic_auth(self._user, password)
        #: the URL as messages, names and records show it (a token in its query hidden)
        self.shown_endpoint = shown_url(self.endpoint_url)
        self.name = name or self.shown_endpoint
        self._headers = check_headers(headers, f"SPARQL endpoint {self.shown_endpoint}")
        #: the query cache's key for this endpoint: another user, or other headers, may be shown
        #: other data, so they key their own entries (no password; the headers by digest only)
        if token is not None and (self._user is not None or has_authorization(self._headers)):
            raise BadInput(f"SPARQL endpoint {self.shown_endpoint}: a token command ({token.what}) and a user in the "
                           "URL or an Authorization header are given; give one")
        self._token = token
        # a token command: its tokens change, the command says who asks
        identity = {**self._headers, "Authorization": f"command {token.command}"} if token else self._headers
        self._cache_key = cache_identity(self.endpoint_url, self._user, identity)
        self.label_predicates = tuple(label_predicates)
        self.description_predicates = tuple(description_predicates)
        if not self.label_predicates:
            raise BadInput("at least one label predicate is needed")
        for p in (*self.label_predicates, *self.description_predicates):
            st.iri(p)
        langs = (language,) if isinstance(language, str) else tuple(language)
        self.languages = tuple(st.language_tag(lang) for lang in langs)
        if not self.languages:
            raise BadInput("at least one language is needed")
        for stage in search_stages:
            if stage not in ("exact", "icase", "contains"):
                raise BadInput(f"unknown search stage {stage!r}")
        self.search_stages = tuple(search_stages)
        self.scan_limit = int(scan_limit)
        self.count_limit = int(count_limit)
        self.order_limit = max(0, int(order_limit))
        self.relation_rows = int(relation_rows)
        self.exclude_predicates = tuple(
            dict.fromkeys(
                [
                    *self.label_predicates,
                    *self.description_predicates,
                    *META_PREDICATES,
                    *exclude_predicates,
                ]
            )
        )
        for p in self.exclude_predicates:
            st.iri(p)
        self.include_predicate_prefixes = (
            tuple(include_predicate_prefixes) if include_predicate_prefixes else None
        )
        self.hide_wikidata_statements = hide_wikidata_statements
        self.exclude_external_ids = exclude_external_ids
        self.cache = cache
        #: the endpoint answered once in this session (checked before the first cache hit)
        self._reachable = False
        self.stats = KGStats()
        self._owns_http = http is None
        self.http = http or HttpClient(
            timeout=timeout, max_retries=max_retries, user_agent=user_agent, rate_limit=rate_limit
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.shown_endpoint!r}, name={self.name!r})"

    # -- transport ---------------------------------------------------------------------

    async def select(self, query: str) -> list[dict[str, Term]]:
        """Run a SELECT query (through the cache) and return its rows."""
        self.stats.queries += 1
        where = f"SPARQL endpoint {self.shown_endpoint}"
        if self.cache is not None:
            body = await self.cache.aget(self._cache_key, query, SPARQL_JSON)
            if body is not None:
                if not self._reachable:  # cached answers must not hide a dead endpoint (or refused credentials)
                    await self._send({"query": "ASK {}"}, post=False)
                    self._reachable = True
                self.stats.cache_hits += 1
                return parse_results(body, where)
        # the whole query string counts: the endpoint URL's own parameters (a default-graph-uri) go with it
        post = len(urlencode({"query": query})) + len(urlsplit(self.endpoint_url).query) > MAX_GET_QUERY
        response = await self._send({"query": query}, post=post)
        self._reachable = True
        body = response.text
        rows = parse_results(body, where)  # validate before caching
        if self.cache is not None:
            await self.cache.aset(self._cache_key, query, SPARQL_JSON, body)
        return rows

    async def _send(self, form: dict[str, str], *, post: bool) -> httpx.Response:
        """One request to the endpoint with its credentials: a GET with ``form`` as the query
        string, or a form-encoded POST. A refusal of access says how to give credentials, or
        that those given were refused."""
        bearer = await self._bearer()
        renewed = False  # a refused token is fetched anew once per query
        while True:
            headers = {**self._headers, "Accept": SPARQL_JSON}
            if bearer is not None:
                headers["Authorization"] = f"Bearer {bearer}"
            try:
                if post:
                    return await self.http.post(
                        self.endpoint_url, data=form, headers=headers, what="SPARQL endpoint", auth=self._auth
                    )
                return await self.http.get(
                    self.endpoint_url, params=form, headers=headers, what="SPARQL endpoint", auth=self._auth
                )
            except KGAuthError as e:
                if bearer is not None and not renewed:
                    renewed = True
                    fresh = await self._bearer(refused=bearer)
                    if fresh is not None:  # the token expired: the query once more with a new one
                        bearer = fresh
                        continue
                raise self._refused(e) from None

    async def _bearer(self, refused: str | None = None) -> str | None:
        """The token command's token, or a new one after ``refused`` was refused (None when
        there is no command, or it prints the refused token again); the command's failure is a
        :class:`~traversals.errors.KGAuthError`: no query can succeed without credentials."""
        if self._token is None:
            return None
        try:
            return await (self._token.get() if refused is None else self._token.refresh(refused))
        except TraversalsError as e:
            raise KGAuthError(f"SPARQL endpoint {self.shown_endpoint}: {e}") from None

    def _refused(self, e: KGAuthError) -> KGAuthError:
        """A refusal of access that says how to give credentials, or which were refused, with
        no token or header value in it (a server may quote what it refused)."""
        given = [f"user {self._user!r}"] if self._user is not None else []
        given += [f"header {name}" for name in self._headers]
        if self._token is not None:
            given.append(f"the token {self._token.what} printed")
        if given:
            hint = f"the credentials given ({', '.join(given)}) were refused"
        else:
            hint = self._refusal_hint()
        text = str(e)
        secrets = [*self._headers.values(), *(self._token.issued if self._token is not None else [])]
        for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
            text = text.replace(secret, "***")
        return KGAuthError(f"{text}; {hint}")

    def _refusal_hint(self) -> str:
        """What a refusal of access without credentials asks for (a KG of a public service
        says otherwise: it takes none)."""
        return ("it wants credentials: a user and password in the URL (https://USER:PASSWORD@host/...) "
                "or a header (--kg-header 'Authorization: Bearer TOKEN'; headers= in the library)")

    async def close(self) -> None:
        if self._owns_http:
            await self.http.aclose()

    async def __aenter__(self) -> "SparqlKG":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- query pieces ------------------------------------------------------------------

    def _lang_filter(self, var: str) -> str:
        """``LANG(?v) = "" || LANGMATCHES(LANG(?v), "en") || ...``"""
        v = st.variable(var)
        parts = [f'LANG({v}) = ""'] + [
            f"LANGMATCHES(LANG({v}), {st.literal(lang)})" for lang in self.languages
        ]
        return " || ".join(parts)

    def _predicate_filter(self, var: str = "p") -> str:
        v = st.variable(var)
        conds = [f"{v} NOT IN ({', '.join(st.iri(p) for p in self.exclude_predicates)})"]
        if self.include_predicate_prefixes:
            conds.append(
                "("
                + " || ".join(
                    f"STRSTARTS(STR({v}), {st.literal(p)})" for p in self.include_predicate_prefixes
                )
                + ")"
            )
        elif self.hide_wikidata_statements:
            conds.append(
                f"(!STRSTARTS(STR({v}), {st.literal(WIKIDATA_PROP)})"
                f" || STRSTARTS(STR({v}), {st.literal(WIKIDATA_DIRECT)}))"
            )
        return " && ".join(conds)

    def _object_filter(self, var: str) -> str:
        """Which reached nodes count as edges' ends: no blank nodes, and (Wikidata shape)
        no skolemised "unknown value" nodes."""
        v = st.variable(var)
        if self.hide_wikidata_statements:
            return f"!isBLANK({v}) && !STRSTARTS(STR({v}), {st.literal(WIKIDATA_GENID)})"
        return f"!isBLANK({v})"

    def _external_id_filter(self, var: str = "p") -> str:
        if not self.exclude_external_ids:
            return ""
        return (
            f"FILTER NOT EXISTS {{ ?_prop {st.iri(WIKIBASE_DIRECT_CLAIM)} {st.variable(var)} . "
            f"?_prop {st.iri(WIKIBASE_PROPERTY_TYPE)} {st.iri(WIKIBASE_EXTERNAL_ID)} }}"
        )

    # -- labels ------------------------------------------------------------------------

    async def describe(self, node_iris: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``iri -> (label, description)`` for many nodes, in batched queries.

        Preference: the configured languages in order, then no tag, then any language;
        among equally good values the first label predicate wins.

        A node whose IRI cannot be written into a query (a space in it) gets no label; one
        a strict server may refuse (a stray ``%``) is asked about alone, and gets no label
        if it is refused: one odd node never costs the others theirs.
        """
        todo = list(dict.fromkeys(node_iris))
        if not todo:
            return {}
        preds = [("l", i, p) for i, p in enumerate(self.label_predicates)] + [
            ("d", i, p) for i, p in enumerate(self.description_predicates)
        ]
        found: dict[str, dict[str, tuple[tuple[int, int, str], str]]] = {}
        await self._select_labels(todo, preds, found, preferred=True)
        # any-language fallback for nodes with no label at all
        missing = [x for x in todo if "l" not in found.get(x, {})]
        if missing:
            lpreds = [t for t in preds if t[0] == "l"]
            await self._select_labels(missing, lpreds, found, preferred=False)
        out = {}
        for x in todo:
            got = found.get(x, {})
            label = got["l"][1] if "l" in got else ""
            desc = got["d"][1] if "d" in got else ""
            out[x] = (label, desc)
        return out

    async def _select_labels(
        self,
        nodes: Sequence[str],
        preds: Sequence[tuple[str, int, str]],
        found: dict[str, dict[str, tuple[tuple[int, int, str], str]]],
        *,
        preferred: bool,
    ) -> None:
        strict = {x: st.is_strict_iri(x) for x in nodes}
        plain = [x for x in nodes if strict[x]]
        odd = [x for x in nodes if not strict[x] and st.is_iri(x)]
        for chunk in _chunks(plain, BATCH):
            self._collect(await self.select(self._literal_query(chunk, preds, preferred=preferred)), found)
        for x in odd:
            try:
                rows = await self.select(self._literal_query([x], preds, preferred=preferred))
            except KGQueryError as e:
                log.info("%s: no label for %s, the endpoint refused its IRI: %s", self.name, x, e)
                continue
            self._collect(rows, found)

    def _literal_query(
        self, subjects: Sequence[str], preds: Sequence[tuple[str, int, str]], *, preferred: bool
    ) -> str:
        branches = " UNION ".join(
            f"{{ ?x {st.iri(p)} ?v . BIND({st.literal(f'{kind}{i}')} AS ?k) }}"
            for kind, i, p in preds
        )
        if preferred:
            return (
                f"SELECT ?x ?k ?v WHERE {{ VALUES ?x {{ {st.iri_list(subjects)} }} {branches} "
                f"FILTER(isLITERAL(?v) && ({self._lang_filter('v')})) }}"
            )
        # any language: the smallest value, as the embedded store picks among labels of
        # equal rank (SAMPLE gave whichever the server met first)
        return (
            f"SELECT ?x ?k (MIN(STR(?v)) AS ?v1) WHERE {{ VALUES ?x {{ {st.iri_list(subjects)} }} "
            f"{branches} FILTER({_USABLE_TEXT.format(v='?v')}) }} GROUP BY ?x ?k"
        )

    def _lang_rank(self, lang: str) -> int:
        low = lang.lower()
        for i, pref in enumerate(self.languages):
            if low == pref.lower():
                return 2 * i
            if low.startswith(pref.lower() + "-"):
                return 2 * i + 1
        if not low:
            return 2 * len(self.languages)
        return 2 * len(self.languages) + 1

    def _collect(
        self, rows: list[dict[str, Term]], found: dict[str, dict[str, tuple[tuple[int, int, str], str]]]
    ) -> None:
        for r in rows:
            x, k = r.get("x"), r.get("k")
            v = r.get("v") or r.get("v1")
            if x is None or k is None or v is None or v.kind != "literal":
                continue
            text = iris.display_text(v.value)
            if not text:
                continue
            kind, idx = k.value[0], int(k.value[1:] or 0)
            rank = (self._lang_rank(v.lang), idx, text)
            slot = found.setdefault(x.value, {})
            if kind not in slot or rank < slot[kind][0]:
                slot[kind] = (rank, text)

    async def _entities(self, node_iris: Sequence[str], hints: dict[str, str] | None = None) -> dict[str, Entity]:
        described = await self.describe(node_iris)
        out = {}
        for x in node_iris:
            label, desc = described.get(x, ("", ""))
            if not label:
                label = (hints or {}).get(x) or fallback_label(x)
            out[x] = Entity(id=entity_id(x), label=label, description=desc, kg=self.name)
        return out

    def _term_id(self, t: Term) -> str:
        if t.kind == "literal":
            return literal_id(t.value, t.lang, t.datatype)
        if t.kind == "bnode":
            return "_:" + t.value
        return entity_id(t.value)

    def _literal_entity(self, t: Term) -> Entity:
        return Entity(
            id=literal_id(t.value, t.lang, t.datatype),
            label=iris.literal_label(t.value, t.datatype),
            description="",
            kg=self.name,
        )

    # -- random entities ---------------------------------------------------------------

    #: how many labelled nodes :meth:`sample_entities` asks the endpoint for, at most
    SAMPLE_POOL = 20_000
    #: … read as this many slices at seeded offsets when the endpoint has more labelled nodes
    SAMPLE_WINDOWS = 10

    def canonical_id(self, ident: str) -> str:
        """The id this KG gives the entity ``ident`` names: ``Q42`` for Wikidata's full
        entity IRI, anything else as given (an id it cannot take stays, to be refused later)."""
        try:
            return entity_id(entity_iri(ident))
        except BadInput:
            return ident

    async def sample_entities(self, n: int, seed: int = 0) -> list[Entity]:
        """Up to ``n`` labelled nodes drawn with ``seed`` (see
        :class:`~traversals.kg.base.EntitySampler`). An endpoint has no cheap uniform draw:
        this counts the labelled nodes, and when there are more than a pool of
        ``max(20 n, 1000)`` (at most :data:`SAMPLE_POOL`) reads the pool as
        :data:`SAMPLE_WINDOWS` slices at seeded offsets over the whole list (``OFFSET``, in
        the endpoint's own order), then draws ``n`` from it. An endpoint that cannot count
        them (a timeout, an error) gives its first pool's worth, as before — uniform over
        the whole KG only when it has no more than that."""
        n = max(0, int(n))
        if n == 0:
            return []
        pool = min(self.SAMPLE_POOL, max(20 * n, 1000))
        scan = f"SELECT DISTINCT ?x WHERE {{ {self._labelled()} }}"
        total = await self._labelled_count()
        if total is None or total <= pool:
            rows = await self.select(f"{scan} LIMIT {pool}")
        else:
            size = max(1, pool // self.SAMPLE_WINDOWS)
            offsets = random.Random(f"{seed}:offsets").sample(range(total - size + 1), self.SAMPLE_WINDOWS)
            rows = []
            for offset in sorted(offsets):  # overlapping slices are fine: the pool is deduplicated
                rows += await self.select(f"{scan} LIMIT {size} OFFSET {offset}")
        found = sorted({r["x"].value for r in rows if "x" in r and r["x"].kind == "uri"})
        picked = random.Random(seed).sample(found, min(n, len(found)))
        ents = await self._entities(picked)
        return [ents[x] for x in picked]

    def _labelled(self) -> str:
        """The pattern of the nodes that can be drawn: IRIs with a label."""
        return f"{self._label_union()} FILTER(isIRI(?x))"

    async def _labelled_count(self) -> int | None:
        """How many labelled nodes the endpoint has, or None when it will not say."""
        try:
            rows = await self.select(f"SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE {{ {self._labelled()} }}")
            return int(rows[0]["n"].value) if rows and "n" in rows[0] else None
        except (KGTimeout, KGQueryError, ValueError):
            return None

    # -- identity links ----------------------------------------------------------------

    async def same_as(self, ids: Sequence[str]) -> dict[str, list[Entity]]:
        """This KG's entities that are each id: itself if a triple other than an identity
        link mentions it, and what owl:sameAs, skos:exactMatch or schema:sameAs connect to
        it, either direction (:class:`~traversals.kg.base.IdentityLinks`). Literal,
        blank-node and invalid ids map to ``[]``; one query per batch of ids (an IRI a
        server may refuse to parse, alone: refused, it maps to ``[]``)."""
        iri_of: dict[str, str] = {}
        for ident in ids:
            if is_literal_id(ident) or ident.strip().startswith("_:"):
                continue
            try:
                iri_of[ident] = entity_iri(ident)
            except BadInput:
                continue
        linked: dict[str, list[str]] = {}
        identity = [st.iri(p) for p in iris.IDENTITY_PREDICATES]
        preds = st.values("same", identity)
        other = f"FILTER(?p NOT IN ({', '.join(identity)}))"

        def query(chunk: Sequence[str]) -> str:
            xs = st.values("x", (st.iri(x) for x in chunk))
            return (
                "SELECT DISTINCT ?x ?e WHERE {\n"
                f"  {{ {xs} FILTER EXISTS {{ ?x ?p ?o {other} }} BIND(?x AS ?e) }}\n"
                f"  UNION {{ {xs} FILTER EXISTS {{ ?s ?p ?x {other} }} BIND(?x AS ?e) }}\n"
                f"  UNION {{ {xs} {preds} ?x ?same ?e FILTER(isIRI(?e)) }}\n"
                f"  UNION {{ {xs} {preds} ?e ?same ?x FILTER(isIRI(?e)) }}\n"
                "}"
            )

        # an IRI some servers refuse to parse (a stray "%") is asked about alone, as its
        # label is: refused, it has no link, and the batch it was in is still answered
        todo = sorted(set(iri_of.values()))
        strict = [x for x in todo if st.is_strict_iri(x)]
        asked = [(chunk, False) for chunk in _chunks(strict, BATCH)]
        asked += [([x], True) for x in todo if not st.is_strict_iri(x)]
        for chunk, alone in asked:
            try:
                rows = await self.select(query(chunk))
            except KGQueryError as e:
                if not alone:
                    raise
                log.info("%s: no identity link for %s, the endpoint refused its IRI: %s", self.name, chunk[0], e)
                continue
            for row in rows:
                if "x" in row and "e" in row:
                    linked.setdefault(row["x"].value, []).append(row["e"].value)
        entities = await self._entities(sorted({e for es in linked.values() for e in es}))
        return {
            ident: [entities[e] for e in dict.fromkeys(linked.get(iri_of[ident], []))] if ident in iri_of else []
            for ident in ids
        }

    # -- search ------------------------------------------------------------------------

    async def search(self, text: str, limit: int = 10) -> list[Entity]:
        """Entities whose label is ``text``: exact, then case-insensitive, then contained."""
        asked = self._searched(text, limit)
        if asked is None:
            return []
        raw, texts, limit = asked
        hits: list[tuple[str, str]] = []  # (iri, matched label)
        if "exact" in self.search_stages:
            hits = await self._search_exact(raw, texts, limit)
        for contains in (False, True):
            if not hits and ("contains" if contains else "icase") in self.search_stages:
                for t in texts:
                    hits = await self._search_scan(t, limit, contains=contains)
                    if hits:
                        break
        hits = hits[:limit]
        ents = await self._entities([h[0] for h in hits], hints=dict(hits))
        return [ents[h[0]] for h in hits]

    async def search_label(self, text: str, limit: int = 10) -> list[Entity]:
        """Entities labelled ``text`` (its case variants and language tags aside): the
        exact stage of :meth:`search` alone, index lookups, no scan of the labels. What
        linking an entity into this KG by its label needs (a KG set asks it for every
        entity a step reaches: the contained stage's scans cost a full pass each)."""
        asked = self._searched(text, limit)
        if asked is None:
            return []
        raw, texts, limit = asked
        hits = (await self._search_exact(raw, texts, limit))[:limit]
        ents = await self._entities([h[0] for h in hits], hints=dict(hits))
        return [ents[h[0]] for h in hits]

    def _searched(self, text: str, limit: int) -> tuple[str, list[str], int] | None:
        """What a search looks for: the text as given (stripped), the texts matched -- it
        whitespace-normalised, and with underscores as spaces ("lord_robert_manners" finds
        "lord robert manners", what `kg convert` writes, as the embedded store's search
        does) -- and the limit; None when there is nothing to look for. Counted as a search;
        :class:`BadInput` for text that is not valid Unicode."""
        raw = str(text).strip()
        text = " ".join(raw.split())
        limit = max(0, int(limit))
        if not text or limit == 0:
            return None
        st.literal(raw)
        self.stats.searches += 1
        return raw, list(dict.fromkeys([text, " ".join(text.replace("_", " ").split())])), limit

    def _label_union(self, inner: str = "") -> str:
        """``{ ?x <label1> ?l <inner> } UNION { ?x <label2> ?l <inner> } ...``

        One branch per label predicate with a constant predicate: engines use their
        predicate indexes (a ``VALUES ?lp`` join makes e.g. Oxigraph scan every triple).
        """
        return " UNION ".join(
            f"{{ ?x {st.iri(p)} ?l . {inner} }}" for p in self.label_predicates
        )

    async def _search_exact(self, raw: str, texts: Sequence[str], limit: int) -> list[tuple[str, str]]:
        # the text as given, whitespace-normalised, and a few case variants, each without
        # a language tag and with each configured one: all index lookups, cheap anywhere
        variants = list(
            dict.fromkeys(
                [raw]
                + [v for t in texts for v in (t, t.lower(), t.title(), t.capitalize(), t.upper())]
            )
        )
        terms = []
        for v in variants:
            terms.append(st.literal(v))
            terms.extend(st.literal(v, language=lang) for lang in self.languages)
        q = (
            f"SELECT DISTINCT ?x ?l WHERE {{ "
            f"{self._label_union(f'VALUES ?l {{ {chr(32).join(terms)} }}')} }} "
            f"LIMIT {4 * limit + 10}"
        )
        rows = await self.select(q)
        order = {v: i for i, v in enumerate(variants)}
        ranked = sorted(
            (order.get(r["l"].value, len(order)), r["x"].value, r["l"].value)
            for r in rows
            if "x" in r and "l" in r and r["x"].kind == "uri"
        )
        return _dedupe_hits((x, label) for _, x, label in ranked)

    async def _search_scan(self, text: str, limit: int, *, contains: bool) -> list[tuple[str, str]]:
        # A scan of every label: kept to one cheap test per row (language and node kind
        # are checked on the few candidates, client-side).
        q_lit = st.literal(text)
        test = (
            f"CONTAINS(LCASE(STR(?l)), LCASE({q_lit}))"
            if contains
            else f"LCASE(STR(?l)) = LCASE({q_lit})"
        )
        pool = min(200, 5 * limit + 10)
        q = f"SELECT DISTINCT ?x ?l WHERE {{ {self._label_union()} FILTER({test}) }} LIMIT {pool}"
        rows = await self.select(q)
        cands = [
            (r["x"].value, r["l"].value, self._lang_rank(r["l"].lang))
            for r in rows
            if "x" in r and "l" in r and r["x"].kind == "uri" and r["l"].kind == "literal"
        ]
        if contains:
            cands.sort(key=lambda c: (-_similarity(text, c[1]), c[2], len(c[1]), c[1], c[0]))
        else:
            cands.sort(key=lambda c: (c[1] != text, c[2], c[1], c[0]))
        return _dedupe_hits((x, label) for x, label, _ in cands)

    # -- relations ---------------------------------------------------------------------

    def _sources(self, entities: Sequence[Entity]) -> dict[str, str]:
        """``entity id -> SPARQL term`` for the entities (IRIs, and literal values, whose
        inverse relations -- who has this value -- can be followed). Ids that are
        neither are :class:`BadInput`; blank nodes (``_:x``) cannot be named in a
        query and are skipped."""
        out: dict[str, str] = {}
        for e in entities:
            ident = e.id.strip()
            if ident.startswith("_:"):
                continue
            if is_literal_id(ident):
                parsed = parse_literal_id(ident)
                if parsed is None:
                    raise BadInput(f"not a literal value id: {ident[:60]!r}")
                value, lang, dt = parsed
                out.setdefault(
                    literal_id(value, lang, dt),
                    st.literal(value, language=lang or None, datatype=None if lang else (dt or None)),
                )
                continue
            iri = entity_iri(ident)
            out.setdefault(entity_id(iri), st.iri(iri))
        return out

    def _relation_scan(self, terms: Sequence[str]) -> str:
        """Predicates of the nodes' triples, both directions, at most ``scan_limit``
        triples per direction. No per-triple filters: on some engines (Oxigraph) a
        FILTER here costs more than the scan; predicates are filtered after grouping."""
        vals = " ".join(terms)
        cap = self.scan_limit
        return (
            f'{{ SELECT ?p ("f" AS ?dir) WHERE {{ VALUES ?s {{ {vals} }} ?s ?p ?o }} LIMIT {cap} }} UNION '
            f'{{ SELECT ?p ("i" AS ?dir) WHERE {{ VALUES ?o {{ {vals} }} ?s ?p ?o }} LIMIT {cap} }}'
        )

    def _grouped_relations(self, terms: Sequence[str]) -> str:
        return (
            f"{{ SELECT ?p ?dir (COUNT(*) AS ?n) WHERE {{ {self._relation_scan(terms)} }} "
            f"GROUP BY ?p ?dir }} FILTER({self._predicate_filter('p')}) "
            f"{self._external_id_filter('p')}"
        )

    @staticmethod
    def _unnameable(entity: Entity) -> bool:
        """Is the entity an IRI the server holds but no query can name (a space in it)?"""
        ident = entity.id.strip()
        return not (ident.startswith("_:") or is_literal_id(ident)) and st.is_unnameable_iri(ident)

    def _refusable(self, entity: Entity) -> bool:
        """Is the entity an IRI some servers refuse to parse (a stray "%"), as the server
        itself returned it? (:func:`~.sparql_text.is_strict_iri`)"""
        ident = entity.id.strip()
        if ident.startswith("_:") or is_literal_id(ident):
            return False
        try:
            return not st.is_strict_iri(entity_iri(ident))
        except BadInput:
            return False

    async def _without_refused(self, entities: Sequence[Entity], ask, empty):
        """``ask(entities)``; if the endpoint refuses the query and an entity's IRI is one it
        may not parse, asked again without those: they have nothing here (a dead end the
        search passes over, as their labels and links are), and the others are answered.
        A question failed on such an IRI, the LLM having selected it. An endpoint that
        refuses the query without them too (down for maintenance, a proxy's page) raises
        the first error, as any other query's would. An IRI no query can name at all (a
        space in it: :func:`~.sparql_text.is_unnameable_iri`) is such a dead end without
        asking (it was a :class:`BadInput` that failed the question)."""
        named = [e for e in entities if not self._unnameable(e)]
        if len(named) < len(entities):
            log.info("%s: no query can name %s: no relations or edges", self.name,
                     ", ".join(repr(e.id) for e in entities if e not in named))
            if not named:
                return empty
            entities = named
        odd = [e for e in entities if self._refusable(e)]
        if not odd:
            return await ask(entities)
        try:
            return await ask(entities)
        except KGQueryError as e:
            refused = e
        # the odd IRIs were the cause only if the endpoint answers without them: the rest
        # asked alone, or (all odd) a query naming nothing; else the error was another's
        rest = [e for e in entities if e not in odd]
        try:
            got = await ask(rest) if rest else await self.select("SELECT ?x WHERE { BIND(1 AS ?x) }")
        except KGQueryError:
            raise refused from None
        log.info("%s: the endpoint refused %s: %s", self.name, ", ".join(x.id for x in odd), refused)
        return got if rest else empty

    async def get_relations(
        self, entities: Sequence[Entity], limit: int = DEFAULT_MAX_RELATIONS
    ) -> Relations:
        """Relations of the entities (:meth:`_relations`); an entity whose IRI the endpoint
        refuses to parse has none (:meth:`_without_refused`)."""
        return await self._without_refused(entities, lambda es: self._relations(es, limit), Relations(()))

    async def _relations(self, entities: Sequence[Entity], limit: int) -> Relations:
        """Relations of the entities, both directions, at most ``limit``.

        Ranked like the embedded store: most frequent first, ties by displayed label,
        then key. One query returns the counted groups (up to
        ``max(limit + 1, relation_rows)`` of them, so ``omitted`` is usually exact
        without a second scan); only when even that many come back does a second query
        count the rest. Labels are fetched for the groups that can make the cut.
        """
        terms = list(self._sources(entities).values())
        limit = max(0, int(limit))
        if not terms:
            return Relations(())
        grouped = self._grouped_relations(terms)
        cap = max(limit + 1, self.relation_rows)
        q = f"SELECT ?p ?dir ?n WHERE {{ {grouped} }} ORDER BY DESC(?n) ?dir ?p LIMIT {cap}"
        rows = []
        for r in await self.select(q):
            if "p" in r and "dir" in r and "n" in r and r["p"].kind == "uri":
                try:
                    rows.append((r["p"].value, r["dir"].value == "i", int(r["n"].value)))
                except ValueError:
                    continue
        total = len(rows)
        if len(rows) >= cap:
            try:
                crows = await self.select(f"SELECT (COUNT(*) AS ?c) WHERE {{ {grouped} }}")
                total = max(total, int(crows[0]["c"].value))
            except (KGTimeout, KeyError, IndexError, ValueError):
                pass
        if limit == 0:
            return Relations((), total)
        # everything that ties with the last place can make the cut: label those
        if len(rows) > limit:
            threshold = rows[limit - 1][2]
            rows = [r for r in rows if r[2] >= threshold]
        labels = await self.relation_labels(list(dict.fromkeys(p for p, _, _ in rows)))
        ids = _relation_ids({p for p, _, _ in rows})
        ranked = []
        for p, inverse, n in rows:
            label, inv = labels.get(p, (iris.relation_fallback_label(p), ""))
            rel = Relation(
                id=ids[p],
                label=label,
                inverse_label=inv or inverse_label_for(label),
                inverse=inverse,
                iri=p,
                kg=self.name,
            )
            ranked.append((-n, rel.display.casefold(), rel.key, rel))
        ranked.sort(key=lambda t: t[:3])
        items = tuple(t[3] for t in ranked[:limit])
        return Relations(items, max(total - len(items), 0))

    async def relation_labels(self, preds: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``predicate iri -> (label, inverse label)`` in one batched query per 200.

        The label is the predicate's own label (label predicates in order), else -- the
        Wikidata shape -- the label of the property entity that points to it with
        ``wikibase:directClaim``, else its local name. The inverse label comes from
        ``iris.INVERSE_LABEL`` on the predicate or the property entity, or is "".
        Values in the configured languages or untagged come first, then (inverse labels
        are rare: all are fetched) any language; a predicate without a label in those
        languages gets one in any language from a second query, for those predicates
        only -- as the embedded store labels it.
        """
        best: dict[str, dict[str, tuple[tuple, str]]] = {}
        todo = list(dict.fromkeys(preds))
        for chunk in _chunks(todo, BATCH):
            self._collect_relation_labels(await self.select(self._relation_label_query(chunk)), best)
        missing = [p for p in todo if "label" not in best.get(p, {})]
        for chunk in _chunks(missing, BATCH):
            self._collect_relation_labels(await self.select(self._relation_label_query(chunk, any_language=True)), best)
        out: dict[str, tuple[str, str]] = {}
        for p in todo:
            slot = best.get(p, {})
            label = slot["label"][1] if "label" in slot else iris.relation_fallback_label(p)
            inv = slot["inv"][1] if "inv" in slot else ""
            out[p] = (label, inv)
        return out

    def _relation_label_query(self, chunk: Sequence[str], *, any_language: bool = False) -> str:
        """The labels in the configured languages or untagged and the inverse labels of
        predicates; ``any_language``: only the smallest label of each kind in any language."""
        branches = []
        for i, lp in enumerate(self.label_predicates):
            branches.append(f'{{ ?p {st.iri(lp)} ?v . BIND("l{i}" AS ?k) }}')
            branches.append(
                f"{{ ?_prop {st.iri(WIKIBASE_DIRECT_CLAIM)} ?p . ?_prop {st.iri(lp)} ?v . "
                f'BIND("w{i}" AS ?k) }}'
            )
        if any_language:
            return (
                f"SELECT ?p ?k (MIN(STR(?v)) AS ?v1) WHERE {{ VALUES ?p {{ {st.iri_list(chunk)} }} "
                f"{' UNION '.join(branches)} FILTER({_USABLE_TEXT.format(v='?v')}) }} GROUP BY ?p ?k"
            )
        branches.append(f'{{ ?p {st.iri(iris.INVERSE_LABEL)} ?v . BIND("i0" AS ?k) }}')
        branches.append(
            f"{{ ?_prop {st.iri(WIKIBASE_DIRECT_CLAIM)} ?p . ?_prop {st.iri(iris.INVERSE_LABEL)} ?v . "
            f'BIND("j0" AS ?k) }}'
        )
        return (
            f"SELECT ?p ?k ?v WHERE {{ VALUES ?p {{ {st.iri_list(chunk)} }} {' UNION '.join(branches)} "
            f'FILTER(isLITERAL(?v) && (?k IN ("i0", "j0") || {self._lang_filter("v")})) }}'
        )

    def _collect_relation_labels(
        self, rows: list[dict[str, Term]], best: dict[str, dict[str, tuple[tuple, str]]]
    ) -> None:
        for r in rows:
            v = r.get("v") or r.get("v1")
            if "p" not in r or "k" not in r or v is None:
                continue
            k, text = r["k"].value, iris.display_text(v.value)
            if not text:
                continue
            group = "inv" if k[0] in "ij" else "label"
            # own label before the property entity's; then language; then predicate order
            rank = (0 if k[0] in "li" else 1, self._lang_rank(v.lang), int(k[1:]), text)
            slot = best.setdefault(r["p"].value, {})
            if group not in slot or rank < slot[group][0]:
                slot[group] = (rank, text)

    # -- edges -------------------------------------------------------------------------

    def _relation_iri(self, relation: Relation) -> str:
        if relation.iri:
            st.iri(relation.iri)
            return relation.iri
        if re.fullmatch(r"P[1-9][0-9]*", relation.id):
            return WIKIDATA_DIRECT + relation.id
        if st.is_iri(relation.id):
            return relation.id
        raise BadInput(f"relation {relation.key!r} has no IRI")

    async def get_edges(
        self, entities: Sequence[Entity], relation: Relation, limit: int = DEFAULT_MAX_EDGES
    ) -> Edges:
        """Edges of the entities (:meth:`_edges`); an entity whose IRI the endpoint refuses
        to parse has none (:meth:`_without_refused`)."""
        return await self._without_refused(entities, lambda es: self._edges(es, relation, limit), Edges(()))

    async def _edges(self, entities: Sequence[Entity], relation: Relation, limit: int) -> Edges:
        """Edges with ``relation`` leaving the entities (entering them if inverse).

        Sorted like the embedded store: by the selected entity's label, then the other
        end's label. When there are more than ``limit``, the ones shown are the first
        ``limit`` in that order too, as the embedded store shows: the server labels and
        sorts them (:meth:`_label_ordered`, one more query, asked only then and
        alongside the count for ``omitted``; bounded by ``order_limit`` edges and the
        KG's ``timeout``). If that query times out or fails, the shown edges are the
        first ``limit`` rows the server returned instead (still sorted, but which ones
        is then up to the server); ``omitted`` is the same either way.
        """
        limit = max(0, int(limit))
        p = self._relation_iri(relation)
        forward = replace(relation, inverse=False, iri=p, kg=relation.kg or self.name)
        sources = self._sources(entities)
        if not sources:
            return Edges(())
        vals = " ".join(sources.values())
        if relation.inverse:
            pattern = (
                f"VALUES ?o {{ {vals} }} ?s {st.iri(p)} ?o . "
                f"FILTER(isIRI(?s) && {self._object_filter('s')})"
            )
        else:
            pattern = f"VALUES ?s {{ {vals} }} ?s {st.iri(p)} ?o . FILTER({self._object_filter('o')})"

        given: dict[str, Entity] = {}
        for e in entities:
            key = e.id.strip()
            if is_literal_id(key):
                parsed = parse_literal_id(key)
                key = literal_id(*parsed) if parsed else key
            elif not key.startswith("_:"):
                key = entity_id(entity_iri(key))
            given.setdefault(key, e)
        # a source named by its id alone (an MCP client, a topic entity typed as an IRI)
        # is described too, so its edges carry its label as the embedded store's do
        unnamed = {
            entity_iri(k): k
            for k, e in given.items()
            if e.label in ("", e.id) and not is_literal_id(k) and not k.startswith("_:")
        }
        for x, (label, desc) in (await self.describe(list(unnamed)) if unnamed else {}).items():
            if label:
                given[unnamed[x]] = replace(given[unnamed[x]], label=label, description=desc)

        rows = await self.select(f"SELECT ?s ?o WHERE {{ {pattern} }} LIMIT {limit + 1}")
        rows = [r for r in rows if "s" in r and "o" in r]
        omitted = 0
        omitted_by: dict[str, int] = {}
        if len(rows) > limit:
            # Counted without the node-kind filters above: per-row FILTERs cost some
            # engines more than the count itself (Oxigraph: 0.1 s -> 0.4 s for 100,000
            # edges); blank and "unknown value" ends are rare, so the count stays honest.
            if relation.inverse:
                bare = f"VALUES ?o {{ {vals} }} ?s {st.iri(p)} ?o ."
            else:
                bare = f"VALUES ?s {{ {vals} }} ?s {st.iri(p)} ?o ."
            # several entities: counted per entity (``GROUP BY``, the same scan), so each one's
            # loss is known; one entity: the plain count
            by = "?o" if relation.inverse else "?s"
            several = len(sources) > 1
            cq = (
                f"SELECT {by + ' ' if several else ''}(COUNT(*) AS ?c) WHERE {{ {{ SELECT ?s ?o WHERE "
                f"{{ {bare} }} LIMIT {self.count_limit} }} }}{' GROUP BY ' + by if several else ''}"
            )
            counted: dict[str, int] = {}  # source key -> its edges, when they were counted per entity

            async def count() -> int:
                try:
                    crows = await self.select(cq)
                    if not several:
                        return int(crows[0]["c"].value) if crows and "c" in crows[0] else len(rows)
                    for r in crows:
                        if "c" in r and by[1:] in r:
                            k = self._term_id(r[by[1:]])
                            counted[k] = counted.get(k, 0) + int(r["c"].value)
                    return sum(counted.values()) if counted else len(rows)
                except (KGTimeout, ValueError):
                    counted.clear()
                    return len(rows)

            # anchors in the order the edges are sorted by: their label, then id
            anchors = sorted(sources, key=lambda k: (given[k].label.lower(), k))
            total, ordered = await gather(
                count(),
                self._label_ordered(
                    [sources[k] for k in anchors], st.iri(p), inverse=relation.inverse, limit=limit
                ),
            )
            omitted = max(total - limit, len(rows) - limit)
            rows = ordered if ordered is not None and len(ordered) == limit else rows[:limit]
            if several and counted and total < self.count_limit:
                # each entity's count less its edges shown; the split is only known when the
                # count was not cut short (then it would be a sample) and adds up
                anchor_of = "o" if relation.inverse else "s"
                lost = dict(counted)
                for r in rows:
                    k = self._term_id(r[anchor_of])
                    lost[k] = lost.get(k, 0) - 1
                if all(n >= 0 for n in lost.values()) and sum(lost.values()) == omitted:
                    omitted_by = {given[k].id: n for k, n in lost.items() if n > 0 and k in given}
                    if sum(omitted_by.values()) != omitted:
                        omitted_by = {}
            elif not several and omitted:
                (only,) = sources
                omitted_by = {given[only].id: omitted} if only in given else {}

        anchor_var, other_var = ("o", "s") if relation.inverse else ("s", "o")
        to_describe = [
            r[other_var].value
            for r in rows
            if r[other_var].kind == "uri" and self._term_id(r[other_var]) not in given
        ]
        described = await self._entities(list(dict.fromkeys(to_describe)))

        def node(t: Term) -> Entity:
            ident = self._term_id(t)
            if ident in given:
                return given[ident]
            if t.kind == "literal":
                return self._literal_entity(t)
            return described.get(t.value) or Entity(ident, fallback_label(t.value), kg=self.name)

        pairs = [(node(r[anchor_var]), node(r[other_var])) for r in rows]
        # lower(), not casefold(): the order the server's LCASE cut by ("Straße" after "strasse b")
        pairs.sort(key=lambda ao: (ao[0].label.lower(), ao[0].id, ao[1].label.lower(), ao[1].id))
        edges = []
        new: dict[str, Entity] = {}
        for anchor, other in pairs:
            s_, o_ = (other, anchor) if relation.inverse else (anchor, other)
            edges.append(Edge(s_, forward, o_))
            if other.id not in given:
                new.setdefault(other.id, other)
        return Edges(tuple(edges), tuple(new.values()), omitted, omitted_by)

    async def _label_ordered(
        self, anchors: Sequence[str], p: str, *, inverse: bool, limit: int
    ) -> list[dict[str, Term]] | None:
        """The first ``limit`` edges in the embedded store's order, chosen by the server,
        or ``None`` if it timed out (the KG's ``timeout``) or failed.

        ``anchors`` are SPARQL terms in the order their edges come (their labels' order);
        within one anchor the other end is ordered by its smallest lower-cased label in
        the configured languages or untagged, over all label predicates (the label
        :meth:`describe` picks, unless a node has several different ones), a node with
        none by its IRI's local name (``_`` read as a space), a literal by its value.
        Equal labels are not ordered further (an ``ORDER BY`` on the nodes themselves
        costs Oxigraph more than everything else together), so which of them makes the
        cut is the server's. At most ``order_limit`` edges are labelled and sorted: above
        it, the first ``limit`` by label of the first ``order_limit`` the server gives.
        ``None`` at once when ``order_limit`` is 0.
        """
        if limit == 0:
            return []
        if self.order_limit == 0:
            return None
        anchor, other = ("o", "s") if inverse else ("s", "o")
        x = st.variable(other)
        kind = f"isIRI(?s) && {self._object_filter('s')}" if inverse else self._object_filter("o")
        if len(anchors) == 1:
            values, rank = f"VALUES ?{anchor} {{ {anchors[0]} }}", ""
        else:
            ranked = " ".join(f"({t} {st.literal(f'{i:05d}')})" for i, t in enumerate(anchors))
            values, rank = f"VALUES (?{anchor} ?_r) {{ {ranked} }}", "?_r"
        labels = " UNION ".join(f"{{ {x} {st.iri(lp)} ?_v }}" for lp in self.label_predicates)
        local = f'LCASE(REPLACE(REPLACE(STR({x}), "^.*[/#]", ""), "_", " "))'
        q = (
            f"SELECT ?s ?o WHERE {{ "
            f"{{ SELECT ?s ?o {rank} (MIN(LCASE(STR(?_v))) AS ?_m) WHERE {{ "
            f"{{ SELECT ?s ?o {rank} WHERE {{ {values} ?s {p} ?o . FILTER({kind}) }} LIMIT {self.order_limit} }} "
            f"OPTIONAL {{ {labels} FILTER(isLITERAL(?_v) && ({self._lang_filter('_v')})) }} "
            f"}} GROUP BY ?s ?o {rank} }} "
            f"BIND(COALESCE(?_m, IF(isLITERAL({x}), LCASE(STR({x})), {local})) AS ?_l) "
            f"}} ORDER BY {rank} ?_l LIMIT {limit}"
        )
        try:
            rows = await self.select(q)
        except KGError as e:
            log.info("%s: the label-ordered choice of a hub's edges failed, showing the server's: %s", self.name, e)
            return None
        return [r for r in rows if "s" in r and "o" in r]


# -- helpers ------------------------------------------------------------------------------


def _chunks(items: Sequence[str], n: int) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _relation_ids(preds: set[str]) -> dict[str, str]:
    """Relation ids: the local name, or the full IRI where two predicates of one answer
    share one or the local name cannot be an id (:func:`~traversals.kg.iris.usable_relation_id`).
    (A search keeps the id a relation had first in its question: ``KGSet``.)"""
    by_name: dict[str, list[str]] = {}
    for p in preds:
        by_name.setdefault(iris.local_name(p), []).append(p)
    out = {}
    for name, ps in by_name.items():
        for p in ps:
            out[p] = name if len(ps) == 1 and iris.usable_relation_id(name) else p
    return out


def _dedupe_hits(hits: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for x, label in hits:
        seen.setdefault(x, label)
    return list(seen.items())


def _similarity(a: str, b: str) -> float:
    try:
        from rapidfuzz import fuzz

        return float(fuzz.ratio(a.lower(), b.lower()))
    except ImportError:  # pragma: no cover - rapidfuzz is a dependency
        import difflib

        return 100.0 * difflib.SequenceMatcher(None, a.lower(), b.lower()).ratio()
