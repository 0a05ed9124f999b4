"""One or several KGs behind one door, with call counting and cross-KG linking (§2.4).

* ``get_relations`` asks every KG about the selected entities (each KG sees its own
  copy of an entity, found by linking) and merges the answers in turns, so one KG's hub
  does not crowd the others out of ``max_relations``; relation keys are made unique by
  prefixing the KG name when two KGs use the same id. Identity links (owl:sameAs …) are
  not offered: they are how the KGs are joined, not relations to walk.
  An entity not linked yet is linked first, whichever strategy asks.
* ``get_edges`` goes to the KG the relation came from; an edge's end that is the KG's
  copy of an entity asked about is that entity, and an end linked to an earlier KG is
  named as that KG names it (:meth:`KGSet.canonical`): one thing, one node.
* ``link`` finds, for entities newly added from one KG, the same entity in the others.
  Explicit links first (§2.4: "the use of explicit links between common KGs if
  available"): the same IRI, or owl:sameAs / skos:exactMatch / schema:sameAs stated by
  either KG (backends with :class:`~traversals.kg.base.IdentityLinks`). Only for a KG
  where that finds nothing, an exact (normalised) label match from ``search`` -- the
  paper's fallback of re-running ``initialize`` on the label, without an LLM call.

Every call to a KG goes through :meth:`KGSet._call`, which is where a user's own backend
meets the search: an exception it raises becomes a :class:`~traversals.errors.KGError`
(``KGTimeout`` / ``KGUnavailable`` for timeouts and refused connections) naming the KG and
the method; a method that is not ``async`` or returns the wrong type is refused the same
way; and what it returns is bounded (at most ``limit`` items, duplicates dropped, the rest
counted in ``omitted``).
"""

from __future__ import annotations

import copy
import inspect
from collections import Counter
from dataclasses import replace
from typing import Any, Sequence, TypeVar

from ..kg.base import (
    DEFAULT_MAX_EDGES,
    DEFAULT_MAX_RELATIONS,
    Edge,
    Edges,
    Entity,
    EntitySampler,
    IdentityLinks,
    KnowledgeGraph,
    Relation,
    Relations,
)
from ..errors import BadInput, KGError, KGTimeout, KGUnavailable, TraversalsError
from ..kg.iris import IDENTITY_PREDICATES
from ..kg.text import normalise
from ..llm.base import Usage
from ..plugin_call import DeadlineExceeded, call_plugin
from ..aio import InFlight, gather


def _norm(text: str) -> str:
    """Labels the same up to this are one entity's: the embedded store's search normal form
    (case, accents, underscores, spacing, punctuation at either end)."""
    return normalise(text)


def _kind(value: object) -> str:
    """``None``, ``a list``, ``an int``: what a method returned, for a message."""
    name = type(value).__name__
    return "None" if value is None else f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def _failure(where: str, exc: Exception) -> KGError:
    """The named error for an exception a KG method raised: a timeout (``TimeoutError``,
    httpx's or requests' ``*Timeout``) is a ``KGTimeout``, a refused connection
    (``ConnectionError``, httpx's ``ConnectError``) a ``KGUnavailable``, the rest a ``KGError``."""
    names = [c.__name__ for c in type(exc).__mro__]
    why = f"{where} raised {type(exc).__name__}: {exc}" if str(exc) else f"{where} raised {type(exc).__name__}"
    if isinstance(exc, TimeoutError) or any("Timeout" in n for n in names):
        return KGTimeout(why)
    if isinstance(exc, ConnectionError) or any(n.startswith("Connect") for n in names):
        return KGUnavailable(why)
    return KGError(why)


def _entity(where: str, value: object) -> Entity:
    if not isinstance(value, Entity):
        raise KGError(f"{where} returned {_kind(value)} where an Entity belongs (traversals.Entity(id, label))")
    if not isinstance(value.id, str) or not value.id or not isinstance(value.label, str):
        raise KGError(f"{where} returned an Entity whose id or label is not a string (or whose id is empty): {value!r}")
    return value


_Owned = TypeVar("_Owned", Entity, Relation)


def _own(where: str, name: str, item: _Owned) -> _Owned:
    """``item``, an entity or relation a KG returned, stamped with the KG's ``name``; a
    :class:`KGError` when it names another KG (the search would never ask that KG about it:
    an entity stamped "Movies DB" by the KG "movies" was never expanded, in silence)."""
    if not item.kg:
        return replace(item, kg=name)
    if item.kg != name:
        what = "an entity" if isinstance(item, Entity) else "a relation"
        raise KGError(f"{where} returned {what} of knowledge graph {item.kg!r} ({item.id!r}), not of {name!r}: leave "
                      "its kg empty or set it to the KG's name")
    return item


def _items(where: str, value: object, what: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, (list, tuple)):
        raise KGError(f"{where} returned {_kind(value)} where a list of {what} belongs")
    return tuple(value)


def _omitted(where: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise KGError(f"{where} returned omitted={value!r}: the count of the items left out, an int of 0 or more")
    return value


def _split(where: str, got: Edges, omitted: int) -> dict[str, int] | None:
    """``got.omitted_by_source`` checked: ids to counts of 0 or more that add up to
    ``omitted``; ``None`` when the KG does not say (a mapping left empty, or missing:
    an ``Edges`` made before it had the field)."""
    value = getattr(got, "omitted_by_source", None)
    if not value:
        return None if omitted else {}
    if not hasattr(value, "items"):
        raise KGError(f"{where} returned omitted_by_source={value!r}: a mapping of entity id to the count "
                      "of its edges left out")
    out: dict[str, int] = {}
    for k, n in value.items():
        if not isinstance(k, str) or not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise KGError(f"{where} returned omitted_by_source={dict(value)!r}: a mapping of entity id to "
                          "the count of its edges left out, an int of 0 or more")
        out[k] = n
    if sum(out.values()) != omitted:
        raise KGError(f"{where} returned omitted_by_source={out!r}, which adds up to {sum(out.values())}, "
                      f"with omitted={omitted}: the counts of each entity's edges left out add up to omitted")
    return out


class KGSet:
    def __init__(
        self,
        kgs: Sequence[KnowledgeGraph],
        *,
        max_relations: int = DEFAULT_MAX_RELATIONS,
        max_edges: int = DEFAULT_MAX_EDGES,
        max_links_per_step: int | None = None,
        timeout: float | None = None,
    ) -> None:
        """``timeout``: seconds one call to a KG may take before it fails with ``KGTimeout``
        (None: no bound of its own; a remote backend has its own request timeout).
        ``max_links_per_step``: at most this many entities an expansion reaches are linked
        into the other KGs (None, the default: all of them, at most ``max_edges``). A cut
        saves label searches, but an entity past it keeps its own KG's name, and when the
        same thing is reached again through the other KG it is a second node."""
        if not kgs:
            raise ValueError("KGSet needs at least one knowledge graph")
        self.kgs = list(kgs)
        names = [getattr(kg, "name", None) for kg in self.kgs]
        if not all(isinstance(n, str) and n for n in names):
            raise BadInput("every knowledge graph needs a non-empty `name` (entities name their KG by it)")
        twice = sorted({str(n) for n in names if names.count(n) > 1})
        if twice:  # entities and relations name their KG: one name for two KGs mixes them up
            raise BadInput(f"two knowledge graphs are named {', '.join(map(repr, twice))}: give each its own "
                           "name (open_kg(spec, name=...), or NAME=SPEC on the command line)")
        self.by_name = {kg.name: kg for kg in self.kgs}
        self.max_relations = max_relations
        self.max_edges = max_edges
        self.max_links_per_step = max_links_per_step
        self.timeout = timeout
        # entity (kg, id) -> same entity in other KGs
        self._links: dict[tuple[str, str], list[Entity]] = {}
        # relation (kg, iri) -> the id it had first in this question (an endpoint decides ids
        # per answer: a predicate sharing its local name with another gets its IRI only when
        # both are in one answer, so its key could change between the steps of a search)
        self._relation_ids: dict[tuple[str, str], str] = {}
        #: the entities (kg, id) concurrent calls are linking now: a call awaits another's (:meth:`link`)
        self._linking: InFlight[tuple[str, str], None] = InFlight()

    def fresh(self) -> KGSet:
        """The same KGs and settings with no link recorded: one question's. A solver asks
        each question on its own, so what an earlier question linked (at most
        ``max_links_per_step`` entities a step) never changes a later one's subgraph: an
        evaluation run answers as its questions asked one by one do, resumed or not."""
        clone = copy.copy(self)
        clone._links = {}
        clone._relation_ids = {}
        clone._linking = InFlight()
        return clone

    async def _call(self, kg: KnowledgeGraph, method: str, *args: Any, **kwargs: Any) -> Any:
        """``kg.method(*args, **kwargs)`` awaited within ``self.timeout``, its failures
        turned into named errors (:func:`~traversals.plugin_call.call_plugin`). Unlike an
        LLM's: a missing method is ``BadInput``, each call has a time budget, and an
        exception is sorted into ``KGTimeout`` / ``KGUnavailable`` / ``KGError``."""
        where = f"knowledge graph {kg.name!r}: {method}()"

        def failed(e: Exception) -> KGError:
            if isinstance(e, DeadlineExceeded):  # self.timeout ran out; a backend's own TimeoutError is its own
                return KGTimeout(f"{where} took longer than {e.seconds:g} s")
            return _failure(where, e)

        return await call_plugin(
            kg, method, args, kwargs, timeout=self.timeout, failed=failed,
            missing=lambda: BadInput(f"{where} is missing: a KnowledgeGraph has async search, get_relations, "
                                     "get_edges and close"),
            not_async=lambda got: KGError(f"{where} is not async: it returned {_kind(got)} instead of a "
                                          "coroutine (define it with `async def`)"))

    async def _search(self, kg: KnowledgeGraph, text: str, limit: int, method: str = "search") -> list[Entity]:
        """``kg.search`` (or ``method``), checked, at most ``limit`` distinct entities stamped
        with the KG's name."""
        where = f"knowledge graph {kg.name!r}: {method}()"
        got = _items(where, await self._call(kg, method, text, limit=limit), "Entity")
        unique: dict[tuple[str, str], Entity] = {}
        for e in (_entity(where, x) for x in got):
            e = _own(where, kg.name, e)
            unique.setdefault((e.kg, e.id), e)
        return list(unique.values())[: max(0, limit)]

    @property
    def multi(self) -> bool:
        return len(self.kgs) > 1

    def _kg_of(self, name: str) -> KnowledgeGraph:
        return self.by_name.get(name) or self.kgs[0]

    def copies(self, entity: Entity, kg: KnowledgeGraph) -> list[Entity]:
        """The entity as ``kg`` knows it: itself, or its linked copies there."""
        if entity.kg in ("", kg.name):
            return [entity]
        return [e for e in self._links.get((entity.kg, entity.id), []) if e.kg == kg.name]

    async def search(self, text: str, usage: Usage, limit: int = 5) -> list[Entity]:
        async def one(kg: KnowledgeGraph) -> list[Entity]:
            usage.add_kg_call()
            return await self._search(kg, text, limit)

        results = await gather(*(one(kg) for kg in self.kgs))
        return [e for r in results for e in r]

    async def get_relations(self, entities: Sequence[Entity], usage: Usage, *, limit: int | None = None) -> Relations:
        """The entities' relations in every KG, at most ``limit`` a KG (default
        ``max_relations``, what a prompt shows)."""
        cap = self.max_relations if limit is None else limit
        # An entity no expansion linked (the question's own, one a strategy reached without
        # linking it, one past max_links_per_step) is linked now: its relations in the
        # other KGs are asked for through its copies there.
        await self.link([e for e in entities if e.kg and (e.kg, e.id) not in self._links], usage, limit=None)

        async def one(kg: KnowledgeGraph) -> Relations:
            mine = [c for e in entities for c in self.copies(e, kg)]
            if not mine:
                return Relations(())
            usage.add_kg_call()
            if not self.multi:
                return self._relations(kg, await self._call(kg, "get_relations", mine, limit=cap), cap)
            # identity links join the KGs (the copies' relations are offered); walked, they
            # reach the other KG's IRI as a bare node. Asked for as many more, then left out.
            extra = 2 * len(IDENTITY_PREDICATES)
            got = self._relations(kg, await self._call(kg, "get_relations", mine, limit=cap + extra), cap + extra)
            walkable = [r for r in got.items if r.iri not in IDENTITY_PREDICATES]
            return Relations(tuple(walkable[: max(0, cap)]), got.omitted + max(0, len(walkable) - cap))

        answers = await gather(*(one(kg) for kg in self.kgs))
        return self._kept_ids(self._shared(answers, cap))

    def _kept_ids(self, rels: Relations) -> Relations:
        """``rels`` with each relation under the id it had first in this question."""
        items = []
        for r in rels.items:
            first = self._relation_ids.setdefault((r.kg, r.iri), r.id) if r.iri else r.id
            items.append(r if first == r.id else replace(r, id=first))
        return Relations(tuple(items), rels.omitted)

    @staticmethod
    def _shared(answers: Sequence[Relations], cap: int) -> Relations:
        """The KGs' answers as one list of at most ``cap``, taken in turns (each KG's
        first, then each one's second …): a hub with hundreds of relations in one KG
        does not crowd out the few another KG knows, a KG with fewer than its share
        leaves the rest to the others, and any first part of the list (a caller may cut
        it shorter) shares the KGs out as well. One KG: its own order."""
        lists = [list(a.items) for a in answers]
        items: list[Relation] = []
        for rank in range(max((len(x) for x in lists), default=0)):
            items.extend(x[rank] for x in lists if rank < len(x))
        omitted = sum(a.omitted for a in answers) + max(0, len(items) - max(0, cap))
        return Relations(tuple(items[: max(0, cap)]), omitted)

    @staticmethod
    def _relations(kg: KnowledgeGraph, got: object, cap: int) -> Relations:
        """``get_relations``' answer checked: distinct relations stamped with the KG's name,
        at most ``cap``, the ones cut counted in ``omitted``."""
        where = f"knowledge graph {kg.name!r}: get_relations()"
        if not isinstance(got, Relations):
            raise KGError(f"{where} returned {_kind(got)}: return traversals.Relations(items=(...), omitted=N)")
        omitted = _omitted(where, got.omitted)
        unique: dict[tuple[str, str], Relation] = {}
        for r in _items(where, got.items, "Relation"):
            if not isinstance(r, Relation):
                raise KGError(f"{where} returned {_kind(r)} among its items where a Relation belongs "
                              "(traversals.Relation(id, label))")
            if not isinstance(r.id, str) or not r.id or not isinstance(r.label, str):
                raise KGError(f"{where} returned a Relation whose id or label is not a string "
                              f"(or whose id is empty): {r!r}")
            r = _own(where, kg.name, r)
            unique.setdefault((r.kg, r.key), r)
        items = list(unique.values())
        return Relations(tuple(items[: max(0, cap)]), omitted + max(0, len(items) - cap))

    async def get_edges(self, entities: Sequence[Entity], relation: Relation, usage: Usage) -> Edges:
        """The edges along ``relation`` in the KG it came from: at most ``max_edges``
        distinct ones (the rest counted in ``omitted``, and in ``omitted_by_source`` by the
        id of the entity asked about that lost them, when the KG says whose or one entity
        was asked about), and the entities they reach.

        Several KGs: each end is the entity as the search knows it. An end that is one of
        ``entities`` or the KG's copy of one is that entity, as the caller has it (the
        fact is about it; walking from it reaches the far end, not its copy as something
        new). The far ends are linked (at most ``max_links_per_step`` new ones), and one
        with a copy in an earlier KG (the order the KGs were given in) is that copy: an
        entity the subgraph has from KG A and reaches again through KG B is one node,
        named as A names it. The fact's KG is its relation's ``kg``."""
        kg = self._kg_of(relation.kg)
        mine = [c for e in entities for c in self.copies(e, kg)]
        if not mine:
            return Edges(())
        usage.add_kg_call()
        got = await self._call(kg, "get_edges", mine, relation, limit=self.max_edges)
        where = f"knowledge graph {kg.name!r}: get_edges()"
        if not isinstance(got, Edges):
            raise KGError(f"{where} returned {_kind(got)}: return traversals.Edges(edges=(...), "
                          "new_entities=(...), omitted=N)")
        omitted = _omitted(where, got.omitted)
        split = _split(where, got, omitted)
        name = kg.name

        def stamp(x: object) -> Entity:
            e = _entity(where, x)
            return _own(where, name, e)

        edges: dict[Edge, None] = {}
        for e in _items(where, got.edges, "Edge"):
            if not isinstance(e, Edge) or not isinstance(e.relation, Relation):
                raise KGError(f"{where} returned {_kind(e)} among its edges where an Edge belongs "
                              "(traversals.Edge(subject, relation, object), all three traversals types)")
            r = _own(where, name, e.relation)
            edges.setdefault(Edge(stamp(e.subject), r, stamp(e.object)))
        given = [stamp(x) for x in _items(where, got.new_entities, "Entity")]
        asked = {(x.kg or name, x.id) for x in mine} | {(x.kg, x.id) for x in entities}
        if self.multi:
            as_asked: dict[tuple[str, str], Entity] = {}
            for e in entities:
                as_asked.setdefault((e.kg, e.id), e)
                for c in self.copies(e, kg):
                    as_asked.setdefault((c.kg or name, c.id), e)
            far = [e.subject if relation.inverse else e.object for e in list(edges)[: self.max_edges]]
            await self.link([x for x in far if (x.kg, x.id) not in as_asked], usage)

            def known(x: Entity) -> Entity:
                return as_asked.get((x.kg, x.id)) or self.canonical(x)

            edges = dict.fromkeys(Edge(known(e.subject), e.relation, known(e.object)) for e in edges)
            given = [known(x) for x in given]
        kept = list(edges)[: self.max_edges]
        omitted += len(edges) - len(kept)
        # the entities the kept edges reach: the KG's list, or the far ends not asked about
        ends = [e.subject if relation.inverse else e.object for e in kept]
        reached = [x for x in given if x in ends] if given else [x for x in ends if (x.kg, x.id) not in asked]
        return Edges(tuple(kept), tuple(dict.fromkeys(reached)), omitted,
                     self._omitted_by_source(entities, kg, relation, split, list(edges)[len(kept):], omitted))

    def _omitted_by_source(self, entities: Sequence[Entity], kg: KnowledgeGraph, relation: Relation,
                           split: dict[str, int] | None, cut: list[Edge], omitted: int) -> dict[str, int]:
        """What each of ``entities`` lost, by its id: its copies' losses in the KG's answer
        (``split``: the KG's ``omitted_by_source``, by the ids it was asked with) and its
        edges cut here. Empty when nothing was lost or the split is not known: several
        entities and a KG that gave only the total (one entity lost all of it)."""
        if not omitted:
            return {}
        ids = list(dict.fromkeys(e.id for e in entities if self.copies(e, kg)))  # those the KG was asked about
        single = {ids[0]: omitted} if len(ids) == 1 else {}  # one entity asked about lost it all
        if split is None:
            return single
        lost: dict[str, int] = {}
        whose: dict[str, str] = {}  # the KG's id of a copy -> the id of the entity asked about
        for e in entities:
            whose.setdefault(e.id, e.id)
            for c in self.copies(e, kg):
                whose.setdefault(c.id, e.id)
        for cid, n in split.items():
            if n and cid in whose:
                lost[whose[cid]] = lost.get(whose[cid], 0) + n
        for edge in cut:
            src = edge.object if relation.inverse else edge.subject
            if src.id in whose:
                lost[whose[src.id]] = lost.get(whose[src.id], 0) + 1
        return lost if sum(lost.values()) == omitted else single  # not all accounted for: only the total

    def canonical(self, entity: Entity) -> Entity:
        """The entity as the search names it: among it and its linked copies, the one in
        the earliest KG (the order the KGs were given in); itself when not linked."""
        rank = {kg.name: i for i, kg in enumerate(self.kgs)}
        best = entity
        for c in self._links.get((entity.kg, entity.id), []):
            if rank.get(c.kg, len(rank)) < rank.get(best.kg, len(rank)):
                best = c
        return best

    async def sample_entities(self, n: int, usage: Usage, seed: int = 0) -> list[Entity]:
        """Up to ``n`` entities drawn at random, shared among the KGs that can draw them
        (:class:`~traversals.kg.base.EntitySampler`)."""
        samplers = [kg for kg in self.kgs if isinstance(kg, EntitySampler)]
        if not samplers:
            raise BadInput(
                f"cannot draw entities at random from {', '.join(kg.name for kg in self.kgs)}: "
                "embedded KGs (RDF or triple files) and SPARQL endpoints can, this one cannot"
            )
        out: list[Entity] = []
        for i, kg in enumerate(samplers):
            share = n // len(samplers) + (i < n % len(samplers))
            usage.add_kg_call()
            where = f"knowledge graph {kg.name!r}: sample_entities()"
            got = _items(where, await self._call(kg, "sample_entities", share, seed + i), "Entity")
            out.extend(_own(where, kg.name, _entity(where, x)) for x in got[:share])
        return out

    async def merge(self, entities: Sequence[Entity], usage: Usage, *,
                    together: Sequence[Sequence[Entity]] = ()) -> list[Entity]:
        """``initialize``'s entities, linked, without those that are a linked copy of an
        earlier one: one entity the question names is one node, whose relations come from
        every KG that has it (its copies), not one look-alike node per KG. Each is named
        as the earliest KG that has it names it (:meth:`canonical`).

        ``together``: the entities chosen for one mention, one per KG. Where no explicit
        link decides, an entity's copy in another KG is the one chosen there for the same
        mention with the same label -- the LLM's pick among namesakes -- not the first
        exact match a label search returns."""
        if not self.multi:
            return list(entities)
        hints: dict[tuple[str, str], dict[str, Entity]] = {}
        for group in together:
            for e in group:
                for other in group:
                    if other.kg != e.kg and _norm(other.label) == _norm(e.label):
                        hints.setdefault((e.kg, e.id), {}).setdefault(other.kg, other)
        await self.link(entities, usage, limit=None, hints=hints)
        kept: list[Entity] = []
        for e in entities:
            if not any((c.kg, c.id) == (e.kg, e.id) for k in kept for c in self._links.get((k.kg, k.id), [])):
                e = self.canonical(e)  # named as the first KG that has it names it, as get_edges does
                if e not in kept:
                    kept.append(e)
        return kept

    async def link(self, entities: Sequence[Entity], usage: Usage, *, limit: int | None = -1,
                   hints: dict[tuple[str, str], dict[str, Entity]] | None = None) -> None:
        """Record same-entity links into the other KGs (no-op with one KG): explicit
        links in one batched call per KG, the label fallback per entity left unlinked.
        At most ``limit`` entities not linked yet (default ``max_links_per_step``; None:
        all); the others are linked when their relations are asked for. ``hints``: (kg,
        id) -> KG name -> the entity's copy there if no explicit link says otherwise
        (in place of the label search)."""
        if not self.multi:
            return
        # the cut is taken before what is linked already is left out, so which entities a
        # call links does not depend on what a sibling's concurrent call linked first
        # a literal value ('"1984"^^xsd:gYear', the built-in back ends' ids of values) and a
        # blank node are their own KG's: a label search took the year for the film "1984"
        todo = list({(e.kg, e.id): e for e in entities if not e.id.startswith(('"', "_:"))}.values())
        cut = self.max_links_per_step if limit == -1 else limit
        todo = todo if cut is None else todo[: max(0, cut)]
        # A sibling's concurrent call may be linking some of them now: those are awaited,
        # not searched for again (the same label search twice, counted twice, or once,
        # as the calls happened to interleave: kg_calls changed between identical runs).
        # The work and its count are the call's that does it; a call that ended without
        # linking (failed, cancelled) links nothing, and its waiters link the rest then.
        while todo := [e for e in todo if (e.kg, e.id) not in self._links]:
            by_key = {(e.kg, e.id): e for e in todo}

            async def link_mine(keys: list[tuple[str, str]]) -> dict[tuple[str, str], None]:
                await self._link_now([by_key[k] for k in keys], usage, hints)
                return {}  # what is linked is in _links

            await self._linking.run(list(by_key), link_mine)

    async def _link_now(self, todo: list[Entity], usage: Usage,
                        hints: dict[tuple[str, str], dict[str, Entity]] | None) -> None:
        """:meth:`link`'s work for ``todo``, entities not linked yet that no other call is
        linking: each one's copies in the other KGs recorded in ``_links``."""
        # the ids each entity goes by: its own, and those its own KG states are the same
        ids: dict[tuple[str, str], list[str]] = {(e.kg, e.id): [e.id] for e in todo}
        # the label searched for in the others: the entity's own, or -- given by its id alone
        # (`kg relations ID`, an MCP client) -- the label its KG gives it
        label = {(e.kg, e.id): e.label for e in todo}
        for kg in self.kgs:
            mine = [e for e in todo if e.kg == kg.name]
            if mine and isinstance(kg, IdentityLinks):
                usage.add_kg_call()
                stated = await self._same_as(kg, [e.id for e in mine])
                for e in mine:
                    ids[(e.kg, e.id)] += [s.id for s in stated.get(e.id, []) if s.id != e.id]
                    if e.label == e.id:
                        label[(e.kg, e.id)] = next((s.label for s in stated.get(e.id, []) if s.id == e.id), e.label)

        async def in_kg(kg: KnowledgeGraph) -> dict[tuple[str, str], list[Entity]]:
            others = [e for e in todo if e.kg != kg.name]
            same: dict[tuple[str, str], list[Entity]] = {}
            if others and isinstance(kg, IdentityLinks):
                usage.add_kg_call()
                got = await self._same_as(kg, list(dict.fromkeys(i for e in others for i in ids[(e.kg, e.id)])))
                for e in others:
                    found = {s.id: s for i in ids[(e.kg, e.id)] for s in got.get(i, [])}
                    same[(e.kg, e.id)] = list(found.values())

            guessed: dict[tuple[str, str], Entity] = {}  # no explicit link: a hint, or the same label

            async def by_label(e: Entity) -> None:
                hint = (hints or {}).get((e.kg, e.id), {}).get(kg.name)
                if hint is not None:
                    guessed[(e.kg, e.id)] = hint
                    return
                usage.add_kg_call()
                said = label[(e.kg, e.id)]
                # a remote KG's exact lookup (search_label), not its scans: only a label equal
                # to the entity's links it, and this runs for every entity a step reaches
                exact = "search_label" if callable(getattr(kg, "search_label", None)) else "search"
                hits = [c for c in await self._search(kg, said, 3, method=exact) if _norm(c.label) == _norm(said)]
                if hits:
                    guessed[(e.kg, e.id)] = hits[0]

            await gather(*(by_label(e) for e in others if not same.get((e.kg, e.id))))
            taken = await self._taken(guessed, ids, usage)
            for key, x in guessed.items():
                same[key] = [] if key in taken else [x]
            return {k: [_own(f"knowledge graph {kg.name!r}: same_as()", kg.name, x) for x in v] for k, v in same.items()}

        per_kg = await gather(*(in_kg(kg) for kg in self.kgs))
        for e in todo:
            self._links.setdefault((e.kg, e.id), [])
            for other in (x for got in per_kg for x in got.get((e.kg, e.id), [])):
                self._join(e, other)

    def _join(self, a: Entity, b: Entity) -> None:
        """Record that ``a`` and ``b`` are one thing, with every copy either has: a link is
        transitive (a's copy in KG b is b's copy in KG c's copy too), so each of them lists
        all the others and names the thing as the earliest KG does (:meth:`canonical`)."""
        group = {(a.kg, a.id): a, (b.kg, b.id): b}
        for x in (a, b):
            for c in self._links.get((x.kg, x.id), []):
                group.setdefault((c.kg, c.id), c)
        for key in group:
            copies = self._links.setdefault(key, [])
            have = {(c.kg, c.id) for c in copies}
            copies.extend(c for k, c in group.items() if k != key and k not in have)

    async def described(self, entity: Entity, usage: Usage) -> Entity:
        """``entity`` as its KG has it (label, description), when it came with its id alone
        for a label (``kg relations ID``, an MCP client's id) and the KG can say
        (:class:`~traversals.kg.base.IdentityLinks`: itself among what ``same_as`` returns);
        else ``entity`` itself."""
        kg = self.by_name.get(entity.kg)
        if entity.label != entity.id or kg is None or not isinstance(kg, IdentityLinks):
            return entity
        usage.add_kg_call()
        got = await self._same_as(kg, [entity.id])
        return next((replace(e, kg=entity.kg) for e in got.get(entity.id, []) if e.id == entity.id), entity)

    async def _taken(self, guessed: dict[tuple[str, str], Entity], ids: dict[tuple[str, str], list[str]],
                     usage: Usage) -> set[tuple[str, str]]:
        """The entities (kg, id) of ``guessed`` whose guess, a same-labelled entity of another
        KG, is stated by their own KG to be another of its entities (``s:city owl:sameAs
        geo:paris`` in ``songs``: geo's Paris is not the song "Paris"). ``ids``: the ids each
        entity goes by. One batched call per KG that states links."""
        taken: set[tuple[str, str]] = set()
        for kg in self.kgs:
            mine = {key: x for key, x in guessed.items() if key[0] == kg.name}
            if not mine or not isinstance(kg, IdentityLinks):
                continue
            usage.add_kg_call()
            stated = await self._same_as(kg, list(dict.fromkeys(x.id for x in mine.values())))
            for key, x in mine.items():
                if any(s.id not in ids[key] for s in stated.get(x.id, [])):
                    taken.add(key)
        return taken

    async def _same_as(self, kg: KnowledgeGraph, ids: list[str]) -> dict[str, list[Entity]]:
        where = f"knowledge graph {kg.name!r}: same_as()"
        got = await self._call(kg, "same_as", ids)
        if not isinstance(got, dict):
            raise KGError(f"{where} returned {_kind(got)} where a dict id -> list of Entity belongs")
        return {i: [_entity(where, x) for x in _items(where, v, "Entity")] for i, v in got.items()}

    def option_keys(self, relations: Sequence[Relation]) -> list[str]:
        """Keys shown to the LLM, unique across KGs (``mb:~artist`` on a clash, and
        ``x:~mb:artist`` for a relation of KG ``x`` whose own id is ``mb:artist``)."""
        keys = [r.key for r in relations]
        for _ in range(2):  # a prefixed key may meet a relation whose id looks like one
            counts = Counter(keys)
            keys = [f"{r.kg}:{r.key}" if counts[k] > 1 and k == r.key else k for k, r in zip(keys, relations)]
        counts, seen = Counter(keys), Counter[str]()
        for i, k in enumerate(keys):  # the same relation listed twice: numbered
            seen[k] += 1
            if counts[k] > 1 and seen[k] > 1:
                keys[i] = f"{k}#{seen[k]}"
        return keys

    async def close(self) -> None:
        """Close every KG (a plain, non-async ``close`` is called as well); the first
        failure is raised once all were tried, as a ``KGError`` unless it is one of ours."""
        failed: list[tuple[KnowledgeGraph, Exception]] = []
        for kg in self.kgs:
            try:
                pending = kg.close()
                if inspect.isawaitable(pending):
                    await pending
            except Exception as exc:
                failed.append((kg, exc))
        if failed:
            which, first = failed[0]
            if isinstance(first, TraversalsError):
                raise first
            raise _failure(f"knowledge graph {which.name!r}: close()", first) from first
