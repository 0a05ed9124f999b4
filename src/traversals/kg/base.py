"""The knowledge-graph interface of Tree-of-Traversals (paper §2.1, Appendix B.3).

A backend implements :class:`KnowledgeGraph` and nothing else; the search code never
knows which backend it talks to. Values are small frozen dataclasses so they can be
hashed, shared between search nodes and serialised into traces.

Direction: every :class:`Edge` is stored as the KG states it, ``(subject, relation,
object)`` with the *forward* relation. A :class:`Relation` with ``inverse=True`` is the
same predicate walked from object to subject ("is mother of" for "mother"), so
``get_edges([Beatrice], ~mother)`` returns ``(Bob Dylan, mother, Beatrice)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Protocol, Sequence, runtime_checkable

#: Default bounds on fan-out (issue 5, point 3). A backend never returns more than
#: this many relations / edges per call; it reports how many it left out instead.
DEFAULT_MAX_RELATIONS = 100
DEFAULT_MAX_EDGES = 50


@dataclass(frozen=True)
class Entity:
    """A KG node: a stable ``id`` (an IRI or a Wikidata QID), a label, a description."""

    id: str
    label: str
    description: str = ""
    kg: str = ""  # name of the KG it comes from (several KGs can be searched at once)

    def ref(self) -> dict[str, str]:
        """The entity as traces and answers name it in JSON: id, label and KG."""
        return {"id": self.id, "label": self.label, "kg": self.kg}

    def __str__(self) -> str:  # pragma: no cover - convenience
        return self.label


#: last words of a relation label that make "is {label} of" ungrammatical
_PREPOSITIONS = frozenset({"in", "to", "at", "on", "from", "with", "for", "into", "as", "about", "after", "before",
                           "under", "over", "near", "within", "via", "against", "between", "among", "through"})


def inverse_label_for(label: str) -> str:
    """A readable inverse for a relation label that has no explicit one.

    "mother" -> "is mother of"; "directed by" -> "directed"; "has genre" -> "is genre of";
    "instance of" -> "has instance"; "is part of" -> "has part"; a label that ends in
    another preposition has no such form: "born in" -> "inverse of born in" (not "is born
    in of").
    """
    text = label.strip()
    low = text.lower()
    if low.endswith(" by"):
        return text[:-3]
    if low.endswith(" of"):
        return "has " + (text[3:-3] if low.startswith("is ") else text[:-3])
    if low.rsplit(" ", 1)[-1] in _PREPOSITIONS:
        return f"inverse of {text}"
    if low.startswith("has "):
        text = text[4:]
    return f"is {text} of"


@dataclass(frozen=True)
class Relation:
    """A relation type, walked forward (``inverse=False``) or backward.

    ``id`` is the predicate's short id (``P25``, ``directed_by``) and ``iri`` its full IRI.
    ``label`` is the forward label ("mother"), ``inverse_label`` the backward one
    ("is mother of"); :attr:`display` gives the one that matches the direction.
    """

    id: str
    label: str
    inverse_label: str = ""
    inverse: bool = False
    iri: str = ""
    kg: str = ""

    @property
    def key(self) -> str:
        """The id shown to the LLM: ``P25`` forward, ``~P25`` backward."""
        return ("~" if self.inverse else "") + self.id

    @property
    def display(self) -> str:
        if self.inverse:
            return self.inverse_label or inverse_label_for(self.label)
        return self.label

    def reversed(self) -> "Relation":
        return replace(self, inverse=not self.inverse)

    def choice_json(self, key: str | None = None) -> dict:
        """The relation as a trace records a choice of it: the ``key`` the LLM was shown
        (default :attr:`key`), the label in the walked direction, the KG, and the
        predicate's full ``"iri"`` when it has one (a key such as ``livesIn`` or
        ``name#2`` cannot look the predicate up again)."""
        out = {"key": self.key if key is None else key, "label": self.display, "kg": self.kg}
        if self.iri:
            out["iri"] = self.iri
        return out


@dataclass(frozen=True)
class Edge:
    """A fact ``(subject, relation, object)`` with the forward relation."""

    subject: Entity
    relation: Relation
    object: Entity

    def to_json(self) -> dict:
        """The edge in JSON; each end names its KG too (with several KGs an end can be
        the node of the KG the search met it in, not of the edge's KG, ``"kg"``). The
        relation is its id and label, and its predicate's full ``"iri"`` when it has one:
        the id alone (``livesIn``, a local name) cannot look the fact up again."""
        relation = {"id": self.relation.id, "label": self.relation.label}
        if self.relation.iri:
            relation["iri"] = self.relation.iri
        return {
            "subject": self.subject.ref(),
            "relation": relation,
            "object": self.object.ref(),
            "kg": self.relation.kg,
        }


@dataclass(frozen=True)
class Relations:
    """Answer of :meth:`KnowledgeGraph.get_relations`: bounded, with a count of the rest."""

    items: tuple[Relation, ...]
    omitted: int = 0  # how many more relations exist than were returned


@dataclass(frozen=True)
class Edges:
    """Answer of :meth:`KnowledgeGraph.get_edges`: the edges and the entities they reach.

    ``omitted`` is the total left out, over all the entities asked about.
    ``omitted_by_source`` says how many of them each entity lost -- the id of an entity
    asked about (the edge's subject, its object for an inverse relation) -> the count;
    an entity that lost none may be missing. It is either empty, when the backend does
    not know the split (a search then says only that ``omitted`` edges are missing
    among the entities together), or complete: its counts add up to ``omitted``."""

    edges: tuple[Edge, ...]
    new_entities: tuple[Entity, ...] = field(default=())
    omitted: int = 0  # how many more edges exist than were returned
    omitted_by_source: Mapping[str, int] = field(default_factory=dict, hash=False)

    def omitted_of(self, entity_id: str) -> int | None:
        """How many edges of an entity asked about were left out; ``None`` when the answer
        does not say (some were left out and ``omitted_by_source`` is empty: with one entity
        asked about, all ``omitted`` are its own)."""
        if not self.omitted:
            return 0
        if self.omitted_by_source:
            return self.omitted_by_source.get(entity_id, 0)
        return None


@runtime_checkable
class IdentityLinks(Protocol):
    """Optional capability: explicit links between KGs (the paper's §2.4 "use of explicit
    links between common KGs if available"). Without it, entities are linked by label."""

    name: str

    async def same_as(self, ids: Sequence[str]) -> dict[str, list[Entity]]:
        """For each id (an IRI or QID, possibly minted by another KG): this KG's entities
        that are the same thing -- the id itself when this KG describes it (a triple other
        than an identity link mentions it), and every node
        an identity predicate (:data:`~traversals.kg.iris.IDENTITY_PREDICATES`: owl:sameAs,
        skos:exactMatch, schema:sameAs) connects to it, in either direction. An id it
        knows nothing about maps to ``[]``."""
        ...


@runtime_checkable
class EntitySampler(Protocol):
    """Optional capability: draw entities at random, for training without labelled questions
    (``traversals train-value --synthetic``: random relation walks start from them)."""

    name: str

    async def sample_entities(self, n: int, seed: int = 0) -> list[Entity]:
        """Up to ``n`` distinct entities, drawn uniformly from the KG's entities; the same
        ``seed`` on the same KG gives the same draw."""
        ...


@runtime_checkable
class KnowledgeGraph(Protocol):
    """What a KG backend must offer. All methods are async (backends may do I/O).

    A backend whose calls cost next to nothing (an embedded store) may also set
    ``embedded = True``: the search then spends extra lookups on it that it would not
    spend on a remote endpoint (see ``SearchConfig.screen_dead_ends``)."""

    name: str

    async def search(self, text: str, limit: int = 10) -> list[Entity]:
        """Candidate entities whose label matches ``text`` (exact, then case-insensitive,
        then fuzzy), best first."""
        ...

    async def get_relations(
        self, entities: Sequence[Entity], limit: int = DEFAULT_MAX_RELATIONS
    ) -> Relations:
        """Relations the entities take part in, forward (as subject) and inverse (as
        object), most frequent first, at most ``limit``."""
        ...

    async def get_edges(
        self, entities: Sequence[Entity], relation: Relation, limit: int = DEFAULT_MAX_EDGES
    ) -> Edges:
        """Edges with ``relation`` that leave the entities (enter them if the relation is
        inverse), at most ``limit``, and the entities they reach."""
        ...

    async def close(self) -> None:
        ...
