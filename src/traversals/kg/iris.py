"""How names from plain triple files become IRIs and labels, and the RDF vocabulary both
KG back ends read.

One scheme shared by the embedded store and ``traversals kg convert`` so that the same
data loaded here or served by any SPARQL server has the same identifiers; one set of
vocabulary constants (labels, descriptions, the Wikidata and Wikibase namespaces) that the
embedded store (:mod:`.store`) and the SPARQL back end (:mod:`.sparql`) both import, so the
two read the same predicates.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

ENTITY_NS = "http://traversals.local/entity/"
RELATION_NS = "http://traversals.local/relation/"

# -- namespaces -------------------------------------------------------------------------
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
SKOS = "http://www.w3.org/2004/02/skos/core#"
SCHEMA = "http://schema.org/"
FOAF = "http://xmlns.com/foaf/0.1/"
DCTERMS = "http://purl.org/dc/terms/"
DC = "http://purl.org/dc/elements/1.1/"
XSD = "http://www.w3.org/2001/XMLSchema#"
WIKIDATA_ENTITY = "http://www.wikidata.org/entity/"
WIKIDATA_DIRECT = "http://www.wikidata.org/prop/direct/"
WIKIBASE = "http://wikiba.se/ontology#"

# -- labels, descriptions, metadata -----------------------------------------------------
RDFS_LABEL = RDFS + "label"
SKOS_PREF_LABEL = SKOS + "prefLabel"
SKOS_ALT_LABEL = SKOS + "altLabel"
SKOS_HIDDEN_LABEL = SKOS + "hiddenLabel"
SCHEMA_NAME = SCHEMA + "name"
SCHEMA_DESCRIPTION = SCHEMA + "description"
#: Optional explicit inverse label of a property (used by the demo KG and converters).
INVERSE_LABEL = "http://traversals.local/vocab/inverseLabel"
WIKIBASE_DIRECT_CLAIM = WIKIBASE + "directClaim"
#: An entity's display label, most preferred first, when none are given
#: (``--label-predicate``, ``label_predicates=``): what both back ends read by default.
DEFAULT_LABEL_PREDICATES = (RDFS_LABEL, SKOS_PREF_LABEL, SCHEMA_NAME)
#: Searchable aliases (the embedded store shows one only when a node has no label).
ALIAS_PREDICATES = (SKOS_ALT_LABEL,)
#: Predicates that describe nodes rather than relate them, never offered as relations by
#: either back end, besides the label and description predicates a KG reads.
META_PREDICATES = (SKOS_ALT_LABEL, SKOS_HIDDEN_LABEL, INVERSE_LABEL, WIKIBASE_DIRECT_CLAIM)
#: The prefixes a label predicate may be written with (``--label-predicate foaf:name``);
#: anything else is a full http(s) or urn IRI (:func:`~.factory.check_label_predicates`).
LABEL_PREFIXES = {
    "rdfs": RDFS,
    "skos": SKOS,
    "schema": SCHEMA,
    "foaf": FOAF,
    "dcterms": DCTERMS,
    "dc": DC,
}
#: Predicates that state two IRIs name the same thing: explicit links between KGs (§2.4).
IDENTITY_PREDICATES = (
    "http://www.w3.org/2002/07/owl#sameAs",
    "http://www.w3.org/2004/02/skos/core#exactMatch",
    "http://schema.org/sameAs",
    "https://schema.org/sameAs",
)


def entity_iri(name: str) -> str:
    return ENTITY_NS + quote(name.strip(), safe="")


def relation_iri(name: str) -> str:
    return RELATION_NS + quote(name.strip(), safe="")


def display_text(value: str) -> str:
    """A label or description as both back ends show it: runs of whitespace (a newline,
    tabs) as one space, so no label breaks a prompt's line."""
    return " ".join(value.split())


def is_literal_id(ident: str) -> bool:
    """Is ``ident`` a literal value's entity id (its N-Triples form, ``"1929"^^xsd:integer``,
    ``"Bob"@en``, ``"x"``: both back ends' ids of values), not a node's IRI or blank node?"""
    return ident.startswith('"')


#: XSD's numeric datatypes, whose lexical form may start with a ``+`` (Wikidata writes its
#: quantities so: ``"+709000"^^xsd:decimal``)
NUMERIC_TYPES = frozenset(XSD + t for t in (
    "decimal", "integer", "float", "double", "long", "int", "short", "byte", "nonNegativeInteger",
    "positiveInteger", "nonPositiveInteger", "negativeInteger", "unsignedLong", "unsignedInt",
    "unsignedShort", "unsignedByte",
))  # fmt: skip


def literal_label(value: str, datatype: str = "") -> str:
    """A literal value as both back ends show it: its lexical form, whitespace runs (a
    newline, tabs) as one space (:func:`display_text`), dates without a midnight time part
    or a leading ``+`` (``1929-01-01``), a day's or a year's time zone ``Z`` (``1999-03-31``),
    numbers without a leading ``+`` (``709000``: shown ``+709000``, the prompt's value was
    not the number an answer writes). Its id keeps the exact value."""
    # a day's or a year's time zone Z (UTC) is noise to the reader: 1999-03-31Z, 1999Z
    if datatype in (XSD + "date", XSD + "gYear") and value.endswith("Z"):
        value = value[:-1]
    if datatype in (XSD + "dateTime", XSD + "date"):
        for suffix in ("T00:00:00Z", "T00:00:00"):
            if value.endswith(suffix):
                value = value[: -len(suffix)]
                break
        value = value[1:] if value.startswith("+") else value
    elif datatype in NUMERIC_TYPES and value.startswith("+"):
        value = value[1:]
    return display_text(value) or value  # a value of blanks alone is shown as it is


def name_label(name: str) -> str:
    """Label for a minted name: underscores become spaces (``directed_by`` -> ``directed by``)."""
    return " ".join(name.replace("_", " ").split())


#: where a camelCase name starts a word: "headquarteredIn", "birthPlace", "hasURL", "XMLSchema"
_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def relation_name_label(name: str) -> str:
    """Label for a relation known only by its name: :func:`name_label`, and a camelCase
    name in words (``headquarteredIn`` -> ``headquartered in``, ``hasPart`` -> ``has
    part``, ``hasURL`` -> ``has URL``). Prompts then read "headquartered in", and the
    inverse is made from words (:func:`~traversals.kg.base.inverse_label_for`: "inverse of
    headquartered in", "is part of"), not "is headquarteredIn of". Entity names are left
    as they are (``iPhone``, ``McDonald``)."""
    words = []
    for chunk in name_label(name).split(" "):
        parts = _WORD_START.split(chunk)
        words.append(" ".join([parts[0], *(p.lower() if p[1:].islower() else p for p in parts[1:])]))
    return " ".join(words)


def relation_fallback_label(iri: str) -> str:
    """Label for a predicate that has none: its local name in words
    (:func:`relation_name_label`), else the IRI. Both back ends use it."""
    return relation_name_label(local_name(iri)) or iri


def local_name(iri: str) -> str:
    """Short id of an IRI: the part after the last ``/`` or ``#``, percent-decoded."""
    cut = max(iri.rfind("/"), iri.rfind("#"))
    return unquote(iri[cut + 1 :]) if cut >= 0 else iri


def usable_relation_id(local: str) -> bool:
    """Can a predicate's local name be its relation id? Not if empty, nor if it begins
    with ``~``: ``~foo`` is how the inverse of ``foo`` is keyed (``Relation.key``), so a
    predicate named ``~foo`` would be shown under the same key as another relation."""
    return bool(local) and not local.startswith("~")
