"""The embedded knowledge graph: any triple file or on-disk store, served by pyoxigraph.

:class:`OxigraphKG` implements :class:`~traversals.kg.base.KnowledgeGraph` (paper §2.1,
Appendix B.3) on a :class:`pyoxigraph.Store`:

* ``OxigraphKG.from_file(path)`` loads a file into memory (RDF: ``.nt .ttl .nq .trig
  .rdf .owl .jsonld``, each also gzipped; plain: ``.txt`` ``s|r|o`` or TAB, ``.tsv``, ``.csv`` – see
  :mod:`traversals.kg.formats`); with ``store_dir=`` it builds a persistent store there.
* ``OxigraphKG.open(directory)`` reopens a persistent store.
* ``OxigraphKG(store)`` wraps an existing :class:`pyoxigraph.Store`.
* ``OxigraphKG.demo()`` is the small Wikidata-shaped demo KG shipped in
  ``kg/data/demo.ttl`` (:func:`demo_kg_path`).

Decisions
---------
Identifiers
    ``Entity.id`` is the QID (``Q392``) for Wikidata entity IRIs
    (``http://www.wikidata.org/entity/Q392``), ``_:x`` for blank nodes and the full IRI
    otherwise (MetaQA: ``http://traversals.local/entity/Charles%20Bail``).
    ``Relation.id`` is the predicate's local name (``P25``, ``directed_by``; the full IRI
    if two predicates share a local name, or if it begins with ``~``, an inverse's key)
    and ``Relation.iri`` the full predicate IRI.

Literal objects
    A literal object (``"1929"^^xsd:integer``, a date, a string) becomes an ``Entity``
    whose ``id`` is its N-Triples form with XSD datatypes shortened
    (``"1929"^^xsd:integer``, ``"Bob"@en``, ``"x"``; :func:`literal_id`, the same ids as
    the SPARQL back end) and whose ``label`` is the lexical form (``1929``; dates
    without a midnight time part, dates and years without a ``Z`` zone: ``1999-03-31Z``
    is ``1999-03-31``), so values can be shown and answered with. Such an
    entity can be passed back in: its inverse relations (who has this value) are found;
    it has no forward ones. Blank nodes are entities with id ``_:<id>``: the file's own id,
    or ``_:anon:N`` for the N-th it leaves unnamed (``[ ... ]``), the same at every load.

Triple terms
    RDF 1.2's ``<<( s p o )>>`` (and RDF-star's quoted ``<< s p o >>``) are no entities:
    never indexed, no edge's end, counted for no relation. The asserted triples are read as
    in any file; a reifier (``ex:r1`` of ``ex:a ex:knows ex:b ~ ex:r1 {| ex:since "2001" |}``)
    is an ordinary node whose annotations are its edges.

Labels
    ``rdfs:label``, ``skos:prefLabel`` and ``schema:name`` (in that order; ``label_predicates=``,
    the ``--label-predicate`` flag, replaces them, e.g. with ``foaf:name``), language
    ``en`` first, then ``en-*``, then no language, then any other; ``skos:altLabel`` only
    as a last resort for display, but every label and alias is searchable. Descriptions
    come from ``schema:description``. A node without a label is shown by its local name
    (``Bob_Dylan`` -> ``Bob Dylan``; a QID stays a QID). Relation labels come from the
    predicate itself or, for Wikidata-shaped data, from its property entity
    (``wdt:P25`` -> ``wd:P25 rdfs:label "mother"``, or whatever ``wikibase:directClaim``
    links to it); explicit inverse labels from ``iris.INVERSE_LABEL`` on either, else
    :func:`~traversals.kg.base.inverse_label_for` ("directed by" -> "directed"), as
    the SPARQL back end does.
    Metadata predicates (the label predicates read, the description, ``skos:*Label``,
    ``iris.INVERSE_LABEL``, ``wikibase:directClaim``: :func:`meta_predicates`) are never
    offered as relations;
    every other predicate is (``rdf:type``, ``owl:sameAs`` ... included).

Search
    A label index is built once, at load: exact label -> ids, normalised label -> ids
    (:func:`normalise`: accents dropped, casefold, ``_`` -> space, collapsed whitespace,
    punctuation stripped at both ends), the sorted list of normalised labels for fuzzy matching
    with rapidfuzz (``token_sort_ratio``, cutoff 80: typos and word order; ``WRatio``
    was too loose - "ai" scored 90 for "Charles Bail") and a word index. Results:
    exact, then normalised, then labels containing every query word (shortest first, the
    first few only: "Nolan" -> "Christopher Nolan", "Bail" -> "Charles Bail" before the near
    spelling "Brazil"), then fuzzy (best score first: "Charls Bail"). Nodes that are
    predicates or property entities (``wikibase:directClaim`` subjects, ``wd:P..``,
    typed ``rdf:Property``/``owl:*Property``, carriers of an inverse label) are not
    indexed. No SPARQL runs per search except one ``VALUES`` lookup of descriptions.

Bounded fan-out
    ``get_relations`` counts (predicate, direction) pairs with one ``GROUP BY`` query per
    selected entity and returns the most frequent first (ties by label).
    ``get_edges`` reads every edge of the relation once (``quads_for_pattern``, no
    query), keeps the first ``limit`` by labels while it reads (``heapq.nsmallest``: a
    hub's edges are never all in memory) and returns them; ``omitted`` is the exact number
    left out, ``omitted_by_source`` the exact number each entity asked about lost. A hub
    shows the same edges as a small entity would: the first by label.

Query safety
    Bound values always go in through ``Store.query(..., substitutions={Variable: term})``;
    the only terms ever written into query text are our own constant IRIs, the label
    predicates (checked by pyoxigraph's ``NamedNode`` and written by
    :func:`~traversals.kg.sparql_text.iri_list`, which refuses any character that could end
    an ``<...>``) and, for the multi-entity description lookup, ``VALUES`` rows made from
    ``str(NamedNode)``, which pyoxigraph serialises with proper escaping (and ``NamedNode``
    refuses invalid IRIs).

Threads
    Each async method runs its synchronous twin (``search_sync`` ...) with
    :func:`asyncio.to_thread`: pyoxigraph releases the GIL while it evaluates a query
    (measured: the event loop keeps running during a 0.4 s join), the store is
    thread-safe, and a big
    fan-out (MetaQA's ``Drama`` has 4,005 ``has_genre`` edges) or a fuzzy search over
    43k labels then never blocks the event loop. The in-memory index is read-only
    after load; the description cache is a plain dict (atomic under the GIL).
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import importlib.resources
import logging
import os
import random
import re
import shutil
import traceback
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence, Union

import pyoxigraph as ox
from rapidfuzz import fuzz, process

from ..errors import BadInput, KGUnavailable, TraversalsWarning
from . import formats, iris
# the vocabulary shared with the SPARQL back end (one definition: kg/iris.py)
from .iris import RDF, SCHEMA_NAME, SKOS, WIKIBASE, WIKIBASE_DIRECT_CLAIM, XSD  # noqa: F401
from .iris import WIKIDATA_DIRECT as WD_DIRECT, WIKIDATA_ENTITY as WD_ENTITY
from . import sparql_text as st
from .specs import file_kg_name
from .text import fold_accents, normalise  # noqa: F401 (part of this module's API: tests, the index)
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

log = logging.getLogger(__name__)

Term = Union[ox.NamedNode, ox.BlankNode, ox.Literal]

RDF_TYPE = RDF + "type"
RDF_PROPERTY = RDF + "Property"
OWL = "http://www.w3.org/2002/07/owl#"

#: Display-label predicates by default, most preferred first (``label_predicates=`` of
#: :class:`OxigraphKG`, ``--label-predicate``, replaces them for one KG).
LABEL_PREDICATES = iris.DEFAULT_LABEL_PREDICATES
#: Searchable aliases (used for display only when nothing else exists).
ALIAS_PREDICATES = iris.ALIAS_PREDICATES


def meta_predicates(label_predicates: Sequence[str] = LABEL_PREDICATES) -> frozenset[str]:
    """Predicates that describe nodes rather than relate them, never offered as relations
    by a KG that reads these label predicates: they, the aliases, the description and
    :data:`iris.META_PREDICATES <traversals.kg.iris.META_PREDICATES>`."""
    return frozenset((*label_predicates, *ALIAS_PREDICATES, iris.SCHEMA_DESCRIPTION, *iris.META_PREDICATES))


#: :func:`meta_predicates` of the default label predicates.
META_PREDICATES = meta_predicates()
#: Classes whose instances are properties (not searchable entities).
PROPERTY_CLASSES = (
    RDF_PROPERTY,
    OWL + "ObjectProperty",
    OWL + "DatatypeProperty",
    OWL + "AnnotationProperty",
    WIKIBASE + "Property",
)
#: Score cutoff (0-100) of fuzzy search.
FUZZY_CUTOFF = 80.0
_VALUES_CHUNK = 500
_QID = re.compile(r"[QPL][1-9][0-9]*")
_WORD = re.compile(r"\w+")

_V = ox.Variable

# Fixed query texts. Bound values only ever arrive through ``substitutions``.
_Q_PREDICATES = "SELECT DISTINCT ?p WHERE { ?s ?p ?o }"
_Q_SUBJECTS = "SELECT DISTINCT ?x WHERE { ?x ?p ?o }"
_Q_OBJECTS = "SELECT DISTINCT ?x WHERE { ?s ?p ?x FILTER(!isLiteral(?x)) }"
_Q_INVERSE_LABELS = f"SELECT ?s ?l WHERE {{ ?s <{iris.INVERSE_LABEL}> ?l }}"
_Q_DIRECT_CLAIMS = f"SELECT ?prop ?p WHERE {{ ?prop <{WIKIBASE_DIRECT_CLAIM}> ?p }}"
_Q_TYPED_PROPERTIES = "SELECT DISTINCT ?s WHERE { VALUES ?c { %s } ?s <%s> ?c }" % (
    " ".join(f"<{c}>" for c in PROPERTY_CLASSES),
    RDF_TYPE,
)
_Q_RELATION_COUNTS = (
    "SELECT ?e ?p ?dir (COUNT(*) AS ?n) WHERE { "
    '{ ?e ?p ?x . BIND("f" AS ?dir) } UNION { ?x ?p ?e . BIND("i" AS ?dir) } '
    "} GROUP BY ?e ?p ?dir"
)
# the same without the triple terms, which are no edges' ends; asked only of a store that holds
# some (the FILTER doubles the count's time on a hub)
_Q_RELATION_COUNTS_NO_TRIPLE_TERMS = (
    "SELECT ?e ?p ?dir (COUNT(*) AS ?n) WHERE { "
    '{ ?e ?p ?x . FILTER(!isTRIPLE(?x)) BIND("f" AS ?dir) } '
    'UNION { ?x ?p ?e . FILTER(!isTRIPLE(?x)) BIND("i" AS ?dir) } '
    "} GROUP BY ?e ?p ?dir"
)
_Q_DESCRIPTIONS = "SELECT ?s ?d WHERE { VALUES ?s { %s } ?s <" + iris.SCHEMA_DESCRIPTION + "> ?d }"


def _labels_query(label_predicates: Sequence[str]) -> str:
    """The query that reads every label and alias of a KG with these label predicates: their
    IRIs written by :func:`~traversals.kg.sparql_text.iri_list` (checked against SPARQL's
    ``IRIREF``, never pasted as given), then the aliases. With the default predicates, the
    same text as ever."""
    preds = tuple(dict.fromkeys((*label_predicates, *ALIAS_PREDICATES)))
    return "SELECT ?s ?p ?l WHERE { VALUES ?p { " + st.iri_list(preds) + " } ?s ?p ?l }"


def label_predicate_iris(label_predicates: str | Sequence[str] | None) -> tuple[str, ...]:
    """The label predicates an :class:`OxigraphKG` reads, most preferred first: the default
    (:data:`LABEL_PREDICATES`) for None, else the IRIs given (one string is one IRI), each
    one pyoxigraph takes (RFC 3987) and SPARQL's ``IRIREF`` too, without repeats.
    :class:`BadInput` for none or an IRI that is not one (prefixed names such as
    ``foaf:name`` are expanded by :func:`~traversals.kg.factory.check_label_predicates`,
    what ``--label-predicate`` and ``open_kg`` take)."""
    if label_predicates is None:
        return LABEL_PREDICATES
    given = (label_predicates,) if isinstance(label_predicates, str) else tuple(label_predicates)
    if not given:
        raise BadInput("at least one label predicate is needed")
    for p in given:
        if not isinstance(p, str):
            raise BadInput(f"a label predicate is an IRI string, not {type(p).__name__}")
        try:
            st.iri(p)  # BadInput naming the character SPARQL cannot take
            ox.NamedNode(p)
        except BadInput as e:
            raise BadInput(f"label predicate {p!r}: {e}") from None
        except ValueError:
            raise BadInput(f"label predicate {p!r}: not a valid IRI") from None
    return tuple(dict.fromkeys(given))


def demo_kg_path() -> Path:
    """Path of the built-in Wikidata-shaped demo KG (``kg/data/demo.ttl``)."""
    return Path(str(importlib.resources.files("traversals.kg").joinpath("data", "demo.ttl")))


def _lang_rank(lang: str | None) -> int:
    if not lang:
        return 2
    lang = lang.lower()
    if lang == "en":
        return 0
    if lang.startswith("en-"):
        return 1
    return 3


def _select(
    store: ox.Store, query: str, substitutions: dict[ox.Variable, Term | ox.Triple] | None = None
) -> ox.QuerySolutions:
    """The solutions of a ``SELECT`` query (the only kind this module runs)."""
    solutions = store.query(query, substitutions=substitutions)
    assert isinstance(solutions, ox.QuerySolutions), "not a SELECT query"
    return solutions


def _is_node(term: object) -> bool:
    """Is the term a node that can be an entity: an IRI or a blank node (not a literal, nor a
    triple term -- RDF 1.2's ``<<( s p o )>>``, RDF-star's quoted ``<< s p o >>``)?"""
    return isinstance(term, (ox.NamedNode, ox.BlankNode))


def _key(term: Term) -> str:
    """Internal key of a term: the IRI, ``_:id`` or the literal's :func:`literal_id`."""
    if isinstance(term, ox.NamedNode):
        return term.value
    if isinstance(term, ox.BlankNode):
        return "_:" + term.value
    return literal_id(term)


def literal_id(lit: ox.Literal) -> str:
    """Entity id of a literal: its N-Triples form (pyoxigraph's escaping) with an XSD
    datatype shortened to ``xsd:`` - ``"1929"^^xsd:integer``, ``"Bob"@en``, ``"x"`` -
    the same ids the SPARQL back end gives."""
    text = str(lit)
    dt = lit.datatype.value
    if dt.startswith(XSD) and text.endswith(f"^^<{dt}>"):
        text = text[: -len(dt) - 4] + "^^xsd:" + dt[len(XSD):]
    return text


def literal_label(lit: ox.Literal) -> str:
    """Readable form of a literal (:func:`~traversals.kg.iris.literal_label`)."""
    return iris.literal_label(lit.value, lit.datatype.value)


def _local_label(iri: str) -> str:
    if iri.startswith(WD_ENTITY):
        return iri[len(WD_ENTITY):]
    return iris.name_label(iris.local_name(iri)) or iri


@dataclass(frozen=True)
class _RelInfo:
    id: str
    label: str
    inverse_label: str


class OxigraphKG:
    """A :class:`~traversals.kg.base.KnowledgeGraph` on an embedded pyoxigraph store."""

    #: lookups are in-process and take microseconds (see the KnowledgeGraph protocol)
    embedded = True

    def __init__(
        self,
        store: ox.Store,
        *,
        name: str = "kg",
        label_predicates: Sequence[str] | None = None,
        _all_labelled: bool = False,
        _location: str | None = None,
    ) -> None:
        self.name = name
        #: an entity's label predicates, most preferred first (:func:`label_predicate_iris`)
        self.label_predicates = label_predicate_iris(label_predicates)
        self._meta_predicates = meta_predicates(self.label_predicates)
        self._store: ox.Store | None = store
        self._location = _location
        self._read_only = False
        self._descriptions: dict[str, str] = {}
        self._build_index(all_labelled=_all_labelled)

    # ----------------------------------------------------------------- constructors

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        store_dir: str | os.PathLike[str] | None = None,
        delimiter: str | None = None,
        label_predicates: Sequence[str] | None = None,
    ) -> "OxigraphKG":
        """Load a triple file (RDF or plain, see :mod:`~traversals.kg.formats`).

        In memory by default; with ``store_dir`` the store is built on disk there (the
        directory must not exist or be empty) and can be reopened with :meth:`open`.
        ``name`` defaults to the file's stem. ``label_predicates`` (IRIs, most preferred
        first) replace the default :data:`LABEL_PREDICATES`. Raises :class:`BadInput` for a
        missing, unknown or unparseable file (with the line of the error) or a label
        predicate that is no IRI (before the file is read).
        """
        preds = label_predicate_iris(label_predicates)
        p = formats.check_readable(path)
        fmt = formats.detect_format(p)
        if fmt is None and delimiter is None:
            raise BadInput(
                f"{p}: unknown triple file type; accepted extensions: "
                + " ".join(formats.ACCEPTED_EXTENSIONS)
                + " (optionally .gz)"
            )
        kg_name = name or file_kg_name(p)
        created_dir = False
        if store_dir is not None:
            sd = Path(store_dir)
            if sd.exists() and (not sd.is_dir() or any(sd.iterdir())):
                raise BadInput(
                    f"{sd}: store directory exists and is not empty "
                    f"(open it with OxigraphKG.open, or choose a new directory)"
                )
            created_dir = not sd.exists()
            store = _new_store(sd)
        else:
            store = ox.Store()
        plain = delimiter is not None or (fmt is not None and fmt.kind == "plain")
        try:
            if plain:
                stats = formats.ReadStats()
                store.bulk_extend(
                    formats.iter_plain_rdf(p, delimiter=delimiter, stats=stats, quads=True)
                )
                if not stats.triples:
                    skipped = f" ({stats.skipped} blank or malformed lines)" if stats.skipped else ""
                    raise BadInput(f"{p} holds no triples{skipped}")
                log.info(
                    "%s: loaded %d triples (%d entities, %d relations, %d lines skipped)",
                    p, stats.triples, stats.entities, stats.relations, stats.skipped,
                )
            else:
                assert fmt is not None and fmt.rdf_format is not None
                _load_rdf(store, p, fmt)
                if _is_empty(store):
                    raise BadInput(f"{p} holds no triples")
            if store_dir is not None:
                store.flush()
        except BaseException as exc:
            # the store closes when its last reference goes, and the error's frames hold one:
            # closed after its files were removed, it wrote some back (an empty store that
            # then opened without error)
            traceback.clear_frames(exc.__traceback__)
            del store
            gc.collect()
            if created_dir:
                shutil.rmtree(store_dir, ignore_errors=True)  # type: ignore[arg-type]
            elif store_dir is not None:  # it was an empty directory: empty again
                for child in Path(store_dir).iterdir():
                    if child.is_dir():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
            raise
        location = str(Path(store_dir)) if store_dir is not None else None
        # a plain file labels every node with rdfs:label: no node is left to its local name, unless
        # other label predicates replace it
        all_labelled = plain and iris.RDFS_LABEL in preds
        return cls(store, name=kg_name, label_predicates=preds, _all_labelled=all_labelled, _location=location)

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        name: str | None = None,
        *,
        read_only: bool = False,
        label_predicates: Sequence[str] | None = None,
    ) -> "OxigraphKG":
        """Open a persistent store made by ``from_file(..., store_dir=directory)`` (or by
        ``oxigraph load --location``). ``name`` defaults to the directory name;
        ``label_predicates`` as in :meth:`from_file`.

        A directory that does not look like an Oxigraph (RocksDB) store - no ``CURRENT``
        and ``MANIFEST-*`` files - is refused with :class:`BadInput` before anything is
        written into it. ``read_only=True`` (what :func:`~traversals.kg.factory.open_kg`
        uses) never writes to the directory, takes no lock and may share the store with
        other readers; a store being written by another process must not be opened so.
        The KG reads the store's default graph: a store whose triples are all in named
        graphs (``oxigraph load`` of an N-Quads or TriG file) is refused with
        :class:`BadInput` saying so (``from_file`` merges a file's graphs instead).
        """
        preds = label_predicate_iris(label_predicates)
        d = Path(directory)
        if not d.is_dir():
            raise BadInput(f"no such store directory: {d}")
        if not any(d.iterdir()):
            raise BadInput(f"{d}: empty directory, not an Oxigraph store")
        if not is_store_dir(d):
            raise BadInput(
                f"{d}: not an Oxigraph store (a store directory holds the RocksDB files CURRENT, "
                f"MANIFEST-*, *.sst ... written by OxigraphKG.from_file(..., store_dir=) or "
                f"`oxigraph load --location`); give a triple file instead"
            )
        try:
            store = ox.Store.read_only(str(d)) if read_only else ox.Store(str(d))
        except OSError as exc:
            raise KGUnavailable(f"cannot open the Oxigraph store in {d}: {exc}") from exc
        _check_default_graph(store, d)
        kg = cls(store, name=name or d.resolve().name, label_predicates=preds, _location=str(d))
        kg._read_only = read_only
        return kg

    @classmethod
    def demo(cls, name: str = "demo", *, label_predicates: Sequence[str] | None = None) -> "OxigraphKG":
        """The built-in demo KG (Bob Dylan's family, Christopher Nolan's films ...), labelled
        with ``rdfs:label`` (``label_predicates`` as in :meth:`from_file`)."""
        return cls.from_file(demo_kg_path(), name=name, label_predicates=label_predicates)

    def __repr__(self) -> str:
        where = self._location or "memory"
        return f"<OxigraphKG {self.name!r} ({where}), {len(self._index_keys)} entities>"

    # ------------------------------------------------------------------- protocol

    async def search(self, text: str, limit: int = 10) -> list[Entity]:
        """Entities whose label matches ``text``: exact, then normalised, then containing
        every word, then near spellings."""
        return await asyncio.to_thread(self.search_sync, text, limit)

    async def get_relations(
        self, entities: Sequence[Entity], limit: int = DEFAULT_MAX_RELATIONS
    ) -> Relations:
        """Relations of the entities in both directions, most frequent first."""
        return await asyncio.to_thread(self.get_relations_sync, entities, limit)

    async def get_edges(
        self, entities: Sequence[Entity], relation: Relation, limit: int = DEFAULT_MAX_EDGES
    ) -> Edges:
        """Edges along ``relation`` (entering the entities if it is inverse)."""
        return await asyncio.to_thread(self.get_edges_sync, entities, relation, limit)

    async def same_as(self, ids: Sequence[str]) -> dict[str, list[Entity]]:
        """This KG's entities that are each id: itself if described, and what owl:sameAs,
        skos:exactMatch or schema:sameAs connect to it (see
        :class:`~traversals.kg.base.IdentityLinks`)."""
        return await asyncio.to_thread(self.same_as_sync, ids)

    async def sample_entities(self, n: int, seed: int = 0) -> list[Entity]:
        """Entities drawn uniformly from the searchable ones (see
        :class:`~traversals.kg.base.EntitySampler`)."""
        return await asyncio.to_thread(self.sample_entities_sync, n, seed)

    async def close(self) -> None:
        self.close_sync()

    # -------------------------------------------------------------- sync versions

    def sample_entities_sync(self, n: int, seed: int = 0) -> list[Entity]:
        """Synchronous :meth:`sample_entities`."""
        self._check_open()
        keys = random.Random(seed).sample(self._index_keys, min(max(n, 0), len(self._index_keys)))
        return self._entities([self._term_of_key(k) for k in keys])

    def search_sync(self, text: str, limit: int = 10) -> list[Entity]:
        """Synchronous :meth:`search`."""
        self._check_open()
        query = text.strip()
        if limit <= 0 or not query:
            return []
        found: list[str] = []
        seen: set[str] = set()

        def add(keys: Iterable[str]) -> None:
            for k in keys:
                if k not in seen:
                    seen.add(k)
                    found.append(k)

        add(self._exact.get(query, ()))
        norm = normalise(query)
        if norm:
            add(self._normed.get(norm, ()))
        if norm and len(found) < limit:
            # Every query word in the label, in any order: "Bail" -> "Charles Bail" (before
            # a near spelling such as "Brazil"), "Nolan, Christopher" -> "Christopher Nolan";
            # a SPARQL endpoint's search has the same three stages in this order.
            for choice in self._containing(norm, limit - len(found) + 10):
                add(self._normed[choice])
        if norm and len(found) < limit and self._choices:
            # Typos: "Charls Bail".
            # token_sort_ratio is ratio over the words sorted: the labels' were sorted once, at
            # indexing (token_sort_ratio sorted every label again at every search)
            matches = process.extract(
                _sorted_words(norm),
                self._sorted_choices,
                scorer=fuzz.ratio,
                score_cutoff=FUZZY_CUTOFF,
                limit=limit + 10,
            )
            for _sorted, _score, idx in matches:
                add(self._normed[self._choices[idx]])
        return self._entities([self._term_of_key(k) for k in found[:limit]])

    def _containing(self, norm: str, limit: int) -> list[str]:
        """Normalised labels that contain every word of ``norm``, shortest first (ties in
        label order)."""
        words = set(_WORD.findall(norm))
        if not words:
            return []
        postings = sorted((self._words.get(w, ()) for w in words), key=len)
        hits: Iterable[str] = postings[0]  # distinct labels already: one word needs no set
        if len(postings) > 1:
            common = set(postings[0])
            for post in postings[1:]:
                common.intersection_update(post)
                if not common:
                    return []
            hits = common
        # the first ``limit`` only: a common word ("the") has 150,000 labels of 300,000, and
        # sorting them all took 270 ms a search, nsmallest 20 ms
        return heapq.nsmallest(max(limit, 0), hits, key=lambda c: (len(c), c))

    def get_relations_sync(
        self, entities: Sequence[Entity], limit: int = DEFAULT_MAX_RELATIONS
    ) -> Relations:
        """Synchronous :meth:`get_relations`."""
        store = self._check_open()
        counts: Counter[tuple[str, bool]] = Counter()
        for term in self._terms(entities):
            for sol in _select(store, self._q_relation_counts, substitutions={_V("e"): term}):
                pred = sol["p"].value
                if pred in self._meta_predicates:
                    continue
                counts[(pred, sol["dir"].value == "i")] += int(sol["n"].value)
        rels = [(n, self._relation(p, inv)) for (p, inv), n in counts.items()]
        rels.sort(key=lambda item: (-item[0], item[1].display.casefold(), item[1].key))
        limit = max(limit, 0)
        return Relations(
            items=tuple(r for _, r in rels[:limit]), omitted=max(len(rels) - limit, 0)
        )

    def get_edges_sync(
        self, entities: Sequence[Entity], relation: Relation, limit: int = DEFAULT_MAX_EDGES
    ) -> Edges:
        """Synchronous :meth:`get_edges`."""
        store = self._check_open()
        pred = self._predicate(relation)
        if pred is None:
            return Edges(edges=())
        inverse = relation.inverse
        keep = max(limit, 0)

        def order(t: Term) -> tuple[str, str]:  # lower(), not casefold(): SPARQL's LCASE, as a server cuts
            return (self._label(t).lower(), _key(t))

        rows: list[tuple[tuple[str, str, str, str], Term, Term]] = []  # (order, anchor, other)
        total = 0
        per_source: Counter[str] = Counter()  # anchor key -> its edges, shown or not
        for term in self._terms(entities):
            if inverse:
                quads = store.quads_for_pattern(None, pred, term, ox.DefaultGraph())
            elif isinstance(term, ox.Literal):
                continue  # a literal is no subject
            else:
                quads = store.quads_for_pattern(term, pred, None, ox.DefaultGraph())

            def others(quads: Iterable[ox.Quad] = quads, anchor: str = _key(term)) -> Iterator[Term]:
                nonlocal total
                for q in quads:
                    x = q.subject if inverse else q.object
                    if not isinstance(x, ox.Triple):  # a quoted triple is no entity
                        total += 1
                        per_source[anchor] += 1
                        yield x

            head = order(term)
            # the first ``keep`` by label in one pass over all of them, however many; only
            # ``keep`` are held at a time
            every = others()
            rows.extend((head + order(o), term, o) for o in heapq.nsmallest(keep, every, key=order))
            for _ in every:  # counted to the end (a limit of 0 reads none of them)
                pass
        rows.sort(key=lambda row: row[0])
        shown = [(a, o) for _, a, o in rows[:keep]]
        ents = self._entities([t for row in shown for t in row])
        by_key = {_key(t): e for t, e in zip((t for row in shown for t in row), ents)}
        fwd = self._relation(pred.value, False)
        input_ids = {e.id for e in entities}
        edges: list[Edge] = []
        new: dict[str, Entity] = {}
        for a, o in shown:
            ea, eo = by_key[_key(a)], by_key[_key(o)]
            subj, obj = (eo, ea) if inverse else (ea, eo)
            edges.append(Edge(subject=subj, relation=fwd, object=obj))
            if eo.id not in input_ids:
                new.setdefault(eo.id, eo)
        # what each entity asked about lost: its edges counted, less those shown
        for a, _ in shown:
            per_source[_key(a)] -= 1
        asked: dict[str, str] = {}  # anchor key -> the id of the (first) entity asked about
        for ent in entities:
            named = self._term_of_id(ent.id)
            if named is not None:
                asked.setdefault(_key(named), ent.id)
        return Edges(
            edges=tuple(edges),
            new_entities=tuple(new.values()),
            omitted=max(total - len(shown), 0),
            omitted_by_source={asked[k]: n for k, n in per_source.items() if n > 0},
        )

    def close_sync(self) -> None:
        """Release the store (a persistent store is flushed and unlocked)."""
        store, self._store = self._store, None
        if store is not None and self._location is not None and not self._read_only:
            try:
                store.flush()
            except OSError:  # pragma: no cover - disk trouble at close
                pass
        del store

    # ------------------------------------------------------------------ extras

    def summary(self) -> dict[str, int | str]:
        """Counts for ``kg info``-style displays."""
        store = self._check_open()
        return {
            "name": self.name,
            "triples": len(store),
            "entities": len(self._index_keys),
            "relations": len(self._relinfo),
        }

    def relation_ids(self) -> frozenset[str]:
        """The ids of every relation the KG holds (``directed_by``, ``P25``)."""
        return frozenset(self._rel_by_id)

    def relation(self, rel_id: str) -> Relation | None:
        """The relation with this id (``P25``, ``directed_by``; ``~P25`` for inverse)."""
        inverse = rel_id.startswith("~")
        iri = self._rel_by_id.get(rel_id[1:] if inverse else rel_id)
        return self._relation(iri, inverse) if iri else None

    def entity(self, entity_id: str) -> Entity | None:
        """The entity with this id if the KG has a node for it (any triple mentions it)."""
        term = self._term_of_id(entity_id)
        if term is None:
            return None
        return self._entities([term])[0] if self._mentions(term) else None

    def same_as_sync(self, ids: Sequence[str]) -> dict[str, list[Entity]]:
        """Synchronous :meth:`same_as`."""
        store = self._check_open()
        preds = {ox.NamedNode(p) for p in iris.IDENTITY_PREDICATES}
        out: dict[str, list[Entity]] = {}
        for ident in ids:
            term = self._term_of_id(ident)
            if not isinstance(term, ox.NamedNode):
                out[ident] = []
                continue
            found: dict[str, Term] = {_key(term): term} if self._mentions(term, ignoring=preds) else {}
            for p in preds:
                for q in store.quads_for_pattern(term, p, None):
                    if isinstance(q.object, ox.NamedNode):
                        found.setdefault(_key(q.object), q.object)
                for q in store.quads_for_pattern(None, p, term):
                    if isinstance(q.subject, ox.NamedNode):
                        found.setdefault(_key(q.subject), q.subject)
            out[ident] = self._entities(list(found.values()))
        return out

    # ----------------------------------------------------------------- internals

    def _mentions(self, term: Term, *, ignoring: frozenset | set = frozenset()) -> bool:
        """Does a triple (whose predicate is not in ``ignoring``) mention the term?"""
        store = self._check_open()
        if any(q.predicate not in ignoring for q in store.quads_for_pattern(None, None, term)):
            return True
        return not isinstance(term, ox.Literal) and any(
            q.predicate not in ignoring for q in store.quads_for_pattern(term, None, None)
        )

    def _check_open(self) -> ox.Store:
        if self._store is None:
            raise KGUnavailable(f"knowledge graph {self.name!r} is closed")
        return self._store

    def _build_index(self, *, all_labelled: bool) -> None:
        """Read labels, predicates and property metadata once and build the search index."""
        store = self._check_open()

        best: dict[str, tuple[tuple, str]] = {}
        names: dict[str, set[str]] = defaultdict(set)
        labels = frozenset(self.label_predicates)
        order = (*self.label_predicates, *(a for a in ALIAS_PREDICATES if a not in labels))
        pred_rank = {p: i for i, p in enumerate(order)}
        for sol in _select(store, _labels_query(self.label_predicates)):
            s, p, lit = sol["s"], sol["p"], sol["l"]
            if not isinstance(lit, ox.Literal) or not _is_node(s):
                continue
            value = iris.display_text(lit.value)
            if not value:
                continue
            key = _key(s)
            is_alias = p.value not in labels
            rank = (is_alias, _lang_rank(lit.language), pred_rank[p.value], value)
            if key not in best or rank < best[key][0]:
                best[key] = (rank, value)
            names[key].add(value)
        self._labels: dict[str, str] = {k: v for k, (_, v) in best.items()}
        if self.label_predicates != LABEL_PREDICATES and not any(not rank[0] for rank, _ in best.values()):
            warnings.warn(  # a typo in --label-predicate would otherwise only show as nothing linked
                f"KG {self.name!r}: no node has a label by {', '.join(self.label_predicates)}, the label predicates "
                "given: its entities are shown by the local names of their IRIs", TraversalsWarning, stacklevel=2)

        predicates = {sol["p"].value for sol in _select(store, _Q_PREDICATES)}
        direct_claims: dict[str, str] = {}
        for sol in _select(store, _Q_DIRECT_CLAIMS):
            if isinstance(sol["p"], ox.NamedNode) and _is_node(sol["prop"]):
                direct_claims[sol["p"].value] = _key(sol["prop"])
        inverse_best: dict[str, tuple[int, str]] = {}
        for sol in _select(store, _Q_INVERSE_LABELS):
            lit = sol["l"]
            if isinstance(lit, ox.Literal) and lit.value.strip() and _is_node(sol["s"]):
                key, lang_rank = _key(sol["s"]), _lang_rank(lit.language)
                if key not in inverse_best or (lang_rank, lit.value) < inverse_best[key]:
                    inverse_best[key] = (lang_rank, lit.value.strip())
        inverse_labels = {k: v for k, (_, v) in inverse_best.items()}

        not_entities = set(predicates) | set(direct_claims.values()) | set(inverse_labels)
        not_entities |= {_key(sol["s"]) for sol in _select(store, _Q_TYPED_PROPERTIES) if _is_node(sol["s"])}

        def is_entity(key: str) -> bool:
            if key in not_entities:
                return False
            if key.startswith(WD_ENTITY) and key[len(WD_ENTITY):].startswith("P"):
                return not _QID.fullmatch(key[len(WD_ENTITY):])
            return True

        # Nodes without any label are searchable by their local name. A triple term (RDF 1.2,
        # RDF-star) is no node: what is said of it is not read (its triple, asserted, is).
        # (A plain file, every node labelled, holds none.)
        triple_terms = False
        if not all_labelled:
            for q in (_Q_SUBJECTS, _Q_OBJECTS):
                for sol in _select(store, q):
                    x = sol["x"]
                    if isinstance(x, ox.Triple):
                        triple_terms = True
                    elif _is_node(x) and _key(x) not in names:
                        names[_key(x)].add(self._label_of_key(_key(x)))
        self._q_relation_counts = _Q_RELATION_COUNTS_NO_TRIPLE_TERMS if triple_terms else _Q_RELATION_COUNTS

        exact: dict[str, list[str]] = defaultdict(list)
        normed: dict[str, list[str]] = defaultdict(list)
        index_keys: list[str] = []
        for key in sorted(names):
            if not is_entity(key):
                continue
            index_keys.append(key)
            norms = set()
            for label in names[key]:
                exact[label].append(key)
                n = normalise(label)
                if n and n not in norms:
                    norms.add(n)
                    normed[n].append(key)
        self._exact = dict(exact)
        self._normed = dict(normed)
        self._choices = sorted(self._normed)
        self._sorted_choices = [_sorted_words(c) for c in self._choices]  # the fuzzy stage's
        words: dict[str, list[str]] = defaultdict(list)
        for choice in self._choices:
            for w in set(_WORD.findall(choice)):
                words[w].append(choice)
        self._words = dict(words)
        self._index_keys = index_keys

        # Relations.
        relinfo: dict[str, _RelInfo] = {}
        by_local: dict[str, list[str]] = defaultdict(list)
        for p in predicates:
            if p not in self._meta_predicates:
                by_local[iris.local_name(p)].append(p)
        for local, preds in by_local.items():
            for p in preds:
                rel_id = local if (iris.usable_relation_id(local) and len(preds) == 1) else p
                sources = [p]
                if p in direct_claims:
                    sources.append(direct_claims[p])
                if p.startswith(WD_DIRECT):
                    sources.append(WD_ENTITY + p[len(WD_DIRECT):])
                label = next((self._labels[s] for s in sources if s in self._labels), "")
                label = label or iris.relation_fallback_label(p)
                inv = next((inverse_labels[s] for s in sources if s in inverse_labels), "")
                relinfo[p] = _RelInfo(rel_id, label, inv or inverse_label_for(label))
        self._relinfo = relinfo
        self._rel_by_id = {info.id: p for p, info in relinfo.items()}
        log.debug(
            "%s: indexed %d entities, %d labels, %d relations",
            self.name, len(index_keys), len(self._choices), len(relinfo),
        )

    def _relation(self, pred: str, inverse: bool) -> Relation:
        info = self._relinfo.get(pred)
        if info is None:
            local = iris.local_name(pred)
            label = iris.relation_fallback_label(pred)
            info = _RelInfo(local if iris.usable_relation_id(local) else pred, label, inverse_label_for(label))
        return Relation(
            id=info.id,
            label=info.label,
            inverse_label=info.inverse_label,
            inverse=inverse,
            iri=pred,
            kg=self.name,
        )

    def _predicate(self, relation: Relation) -> ox.NamedNode | None:
        iri = relation.iri or self._rel_by_id.get(relation.id, "")
        if not iri or iri in self._meta_predicates:
            return None
        try:
            return ox.NamedNode(iri)
        except ValueError:
            return None

    def _terms(self, entities: Sequence[Entity]) -> list[Term]:
        """Distinct store terms of the entities (ids that cannot be terms are dropped)."""
        out: list[Term] = []
        seen: set[str] = set()
        for ent in entities:
            term = self._term_of_id(ent.id)
            if term is not None and _key(term) not in seen:
                seen.add(_key(term))
                out.append(term)
        return out

    @staticmethod
    def _term_of_id(entity_id: str) -> Term | None:
        """Parse an ``Entity.id`` back into a term (``None`` if it is not one)."""
        eid = entity_id.strip()
        if not eid:
            return None
        if _QID.fullmatch(eid):
            return ox.NamedNode(WD_ENTITY + eid)
        if eid.startswith("_:"):
            try:
                return ox.BlankNode(eid[2:])
            except ValueError:
                return None
        if eid.startswith('"'):
            # The N-Triples form of a literal: parsed by the real parser, never pasted
            # into a query; exactly one statement with a literal object is accepted.
            return st.parse_literal(eid)
        try:
            return ox.NamedNode(eid)
        except ValueError:
            return None

    @staticmethod
    def _term_of_key(key: str) -> Term:
        return ox.BlankNode(key[2:]) if key.startswith("_:") else ox.NamedNode(key)

    @staticmethod
    def _entity_id(term: Term) -> str:
        if isinstance(term, ox.NamedNode):
            iri = term.value
            if iri.startswith(WD_ENTITY) and _QID.fullmatch(iri[len(WD_ENTITY):]):
                return iri[len(WD_ENTITY):]
            return iri
        return _key(term)

    def _label_of_key(self, key: str) -> str:
        label = self._labels.get(key)
        if label:
            return label
        if key.startswith("_:"):
            return key
        return _local_label(key)

    def _label(self, term: Term) -> str:
        if isinstance(term, ox.Literal):
            return literal_label(term)
        return self._label_of_key(_key(term))

    def _entities(self, terms: Sequence[Term]) -> list[Entity]:
        """Entities for terms, with descriptions fetched in one ``VALUES`` query."""
        missing = [
            t for t in {_key(t): t for t in terms if isinstance(t, ox.NamedNode)}.values()
            if t.value not in self._descriptions
        ]
        if missing:
            self._fetch_descriptions(missing)
        return [
            Entity(
                id=self._entity_id(t),
                label=self._label(t),
                description=self._descriptions.get(t.value, "") if isinstance(t, ox.NamedNode) else "",
                kg=self.name,
            )
            for t in terms
        ]

    def _fetch_descriptions(self, nodes: list[ox.NamedNode]) -> None:
        store = self._check_open()
        found: dict[str, tuple[int, str]] = {}
        for i in range(0, len(nodes), _VALUES_CHUNK):
            chunk = nodes[i : i + _VALUES_CHUNK]
            # str(NamedNode) is pyoxigraph's own escaped serialisation (<...>).
            query = _Q_DESCRIPTIONS % " ".join(str(n) for n in chunk)
            for sol in _select(store, query):
                lit = sol["d"]
                if not isinstance(lit, ox.Literal):
                    continue
                text = iris.display_text(lit.value)
                rank = _lang_rank(lit.language)
                key = sol["s"].value
                if text and (key not in found or (rank, text) < found[key]):
                    found[key] = (rank, text)
        for n in nodes:
            self._descriptions[n.value] = found.get(n.value, (0, ""))[1]


def is_store_dir(directory: str | os.PathLike[str]) -> bool:
    """Does ``directory`` look like an on-disk Oxigraph store? RocksDB keeps the name
    of its live ``MANIFEST-*`` file in ``CURRENT``; a store always has both."""
    d = Path(directory)
    return (d / "CURRENT").is_file() and any(d.glob("MANIFEST-*"))


def _check_default_graph(store: ox.Store, directory: Path) -> None:
    """:class:`BadInput` for a store whose triples are all in named graphs (``oxigraph
    load`` of an N-Quads or TriG file keeps their graphs): the KG reads the default graph,
    so it would open as a KG without a single entity; a warning when only some are."""
    graphs = sum(1 for _ in store.named_graphs())
    if not graphs:
        if _is_empty(store):  # what a failed from_file(..., store_dir=) left, or a store emptied
            raise BadInput(f"{directory}: the store holds no triples; build it again from the triple file "
                           "(or give the file itself as --kg)")
        return
    if _is_empty(store, ox.DefaultGraph()):
        raise BadInput(
            f"{directory}: the store keeps its triples in {graphs} named graph(s) and its default "
            f"graph is empty, which is the graph a KG reads; give the N-Quads/TriG file itself as "
            f"--kg (its named graphs are merged), or serve the store with `oxigraph serve "
            f"--union-default-graph` and give its URL"
        )
    log.warning("%s: the triples in %d named graph(s) are not read, only the default graph's", directory, graphs)


def _sorted_words(text: str) -> str:
    """The words of ``text`` sorted, one space apart (what ``fuzz.token_sort_ratio`` compares)."""
    return " ".join(sorted(text.split()))


def _is_empty(store: ox.Store, graph: ox.DefaultGraph | None = None) -> bool:
    return next(iter(store.quads_for_pattern(None, None, None, graph)), None) is None


def _new_store(directory: Path) -> ox.Store:
    try:
        return ox.Store(str(directory))
    except OSError as exc:
        raise KGUnavailable(f"cannot create an Oxigraph store in {directory}: {exc}") from exc


#: a blank node's id the parser made up (for ``[ ... ]``): 128 random bits in hex, another
#: at every load -- and every id of the file was one with ``Store.bulk_load``
_MADE_UP_BLANK = re.compile(r"[0-9a-f]{16,32}")


def _stable_blank_nodes(quads: Iterable[ox.Quad]) -> Iterator[ox.Quad]:
    """The quads in the default graph, each blank node the parser named at random renamed
    ``anon:1``, ``anon:2`` … in the order the file first mentions it, the others keeping
    the file's own ids (``_:x`` is ``_:x``): ids ``kg search`` prints stay valid at the next
    load. (An id of the file that looks made up, 16 hex digits or more, is renamed too.)"""
    names: dict[str, ox.BlankNode] = {}

    def stable(t):
        if isinstance(t, ox.BlankNode) and _MADE_UP_BLANK.fullmatch(t.value):
            if t.value not in names:
                # "anon:N": no file can name a blank node so (":" is no label character), so
                # none of the file's own is merged with it
                names[t.value] = ox.BlankNode(f"anon:{len(names) + 1}")
            return names[t.value]
        return t

    for q in quads:
        s, o = q.subject, q.object
        if isinstance(s, ox.BlankNode) or isinstance(o, ox.BlankNode):
            yield ox.Quad(stable(s), q.predicate, stable(o))
        else:
            yield ox.Quad(s, q.predicate, o)


def _load_rdf(store: ox.Store, p: Path, fmt: formats.FileFormat) -> None:
    """Load an RDF file; quads of named graphs go to the default graph; blank nodes keep
    the file's ids, and those it leaves unnamed get ids in order (:func:`_stable_blank_nodes`)."""
    base = p.resolve().as_uri()
    try:
        with formats.open_binary(p) as fh:
            store.bulk_extend(_stable_blank_nodes(ox.parse(fh, fmt.rdf_format, base_iri=base)))
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""  # RDF/XML and JSON-LD errors carry no position
        msg = exc.msg
        if "LoadDocumentCallback" in msg or "remote context" in msg:
            msg = "its @context is a URL, and remote contexts are not fetched: put the context inline in the file"
        raise BadInput(f"cannot parse {p}{where}: {msg}") from exc
    except ValueError as exc:
        raise BadInput(f"cannot load {p}: {exc}") from exc
