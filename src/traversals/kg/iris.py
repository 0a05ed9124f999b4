"""How names from plain triple files become IRIs and labels.

One scheme shared by the embedded store and ``traversals kg convert`` so that the same
data loaded here or served by any SPARQL server has the same identifiers.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

ENTITY_NS = "http://traversals.local/entity/"
RELATION_NS = "http://traversals.local/relation/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SCHEMA_DESCRIPTION = "http://schema.org/description"
#: Optional explicit inverse label of a property (used by the demo KG and converters).
INVERSE_LABEL = "http://traversals.local/vocab/inverseLabel"
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


def name_label(name: str) -> str:
    """Label for a minted name: underscores become spaces (``directed_by`` -> ``directed by``)."""
    return " ".join(name.replace("_", " ").split())


def local_name(iri: str) -> str:
    """Short id of an IRI: the part after the last ``/`` or ``#``, percent-decoded."""
    cut = max(iri.rfind("/"), iri.rfind("#"))
    return unquote(iri[cut + 1 :]) if cut >= 0 else iri


def usable_relation_id(local: str) -> bool:
    """Can a predicate's local name be its relation id? Not if empty, nor if it begins
    with ``~``: ``~foo`` is how the inverse of ``foo`` is keyed (``Relation.key``), so a
    predicate named ``~foo`` would be shown under the same key as another relation."""
    return bool(local) and not local.startswith("~")
