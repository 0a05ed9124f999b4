"""Retrieve-then-read: the KAPING baseline (Baek et al., 2023, "Knowledge-Augmented
Language Model Prompting for Zero-Shot Knowledge Graph Question Answering").

No search: the question's entities are linked as every KG strategy links them
(:class:`~.linking.Linker`, ``topic_entities`` and MetaQA's ``[brackets]`` first), the
facts around them are gathered through the KG interface (``get_relations``, then
``get_edges`` along each relation, both directions as the KG offers them, within its
``max_relations`` / ``max_edges`` caps), each fact is written as one line of labels
(``The Gumball Rally | directed_by | Charles Bail``, as the KG states it), the lines are
ranked by the cosine of their sentence embedding with the question's, and the ``top_facts``
best are put in one prompt (``prompts/retrieve.txt``) that the LLM answers in one greedy
generation (``ANSWER: ...``, read by :func:`~.cot.extract_answer`, as cot's).

Bounds, so that a hub entity costs neither the prompt nor the time: at most
``max_kg_calls`` KG requests a question (``get_relations`` and ``get_edges``, at most
``concurrency`` in flight), and at most ``max_facts`` distinct facts collected (and
embedded). Both are cut fairly: each entity's first relation before any entity's second,
each call's first edge before any call's second. With ``hops`` 2 or 3 the entities the
best-ranked facts of one hop reach (at most ``top_facts`` of them) are expanded at the next,
and a fact of a later hop is ranked as its walk's relation path from the question's entity
(:attr:`Fact.sentence`) and listed after the facts of that walk (:func:`with_walks`): the
``top_facts`` best facts may then bring up to ``hops`` lines each. A line is ranked and
listed once however many facts show as it (:func:`distinct`: the same fact stated by two
KGs), and each of them supports an answer that names its end.

The answer's ``supporting_edges`` are the facts given to the LLM whose end other than the
question's own entities is named in the answer (and, for a fact of a later hop, the facts
that reached it, back to the question's entity), the edge of every KG that states a
line listed once. An answer that lists the question's own
entity among others is given without it (:func:`leave_out_own`, the tree's rule). ``value``
is None (nothing is rated) and ``stopped`` None (nothing stops early). See docs/decisions.md, "A retrieval baseline (KAPING-style)".
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Awaitable, Sequence, TypeVar

from ..embed.base import Embedder, Vector, cosine, embed_counted
from ..kg.base import Edge, Entity, Relation
from ..llm.base import LLM, Usage
from . import events
from .cot import extract_answer
from .events import EventSink
from .kgset import KGSet
from .linking import Linker, without_brackets
from .machine import find_label, names, names_entity, normalise_label
from .result import NO_ANSWER, Answer
from .subgraph import shown
from .templates import PromptSet, default_prompts
from ..aio import gather

T = TypeVar("T")

DEFAULT_HOPS = 1  # KAPING retrieves the one-hop facts of the question's entities
MAX_HOPS = 3  # the furthest a MetaQA/PathQuestion question walks; each hop expands at most top_facts entities
DEFAULT_TOP_FACTS = 10  # KAPING's best setting was around 10 facts
#: KG requests (``get_relations`` and ``get_edges``) one question may make
MAX_KG_CALLS = 100
#: distinct facts one question collects, and embeds, at most
MAX_FACTS = 500
#: KG requests in flight at once
CONCURRENCY = 8
MAX_TOKENS = 256
#: what the prompt lists when no fact was found
NO_FACTS = "(none: nothing in the question was found in the knowledge graph)"
NO_FACTS_LINKED = "(none: the knowledge graph has no fact about the question's entities)"


def _label(text: str) -> str:
    """A label as a fact line shows it: on one line (:func:`~.subgraph.shown`), and without
    the ``|`` that separates a fact's parts."""
    return shown(text).replace("|", "/").strip() or "?"


def _words(label: str) -> str:
    """A label as a fact's sentence embeds it: a fact line's, with ``_`` read as a space."""
    return _label(label).replace("_", " ")


@dataclass
class Fact:
    """One retrieved edge, with the hop it was found at and its similarity to the question."""

    edge: Edge
    hop: int
    #: the entity this edge was gathered from (a question's entity at hop 1)
    source: Entity
    #: hop 2 or 3: the fact of the hop before whose far end this edge was gathered from
    via: Fact | None = None
    score: float = 0.0
    #: the facts ranked below this one that the prompt shows as the same line (the same fact
    #: stated by another KG): not lines of their own, but support as this one is (:func:`distinct`)
    twins: tuple[Fact, ...] = ()

    @property
    def line(self) -> str:
        """The fact as the prompt lists it: ``subject | relation | object``, labels only."""
        e = self.edge
        return f"{_label(e.subject.label)} | {_label(e.relation.label)} | {_label(e.object.label)}"

    @property
    def walk(self) -> list[Fact]:
        """The facts from the question's entity to this one: hop 1 first, this fact last."""
        return [*(self.via.walk if self.via is not None else ()), self]

    @property
    def reached(self) -> Entity:
        """The edge's end other than :attr:`source`."""
        e = self.edge
        return e.object if (e.subject.kg, e.subject.id) == (self.source.kg, self.source.id) else e.subject

    @property
    def sentence(self) -> str:
        """The fact as it is embedded. At hop 1 its labels in a row, as KAPING verbalises a
        triple (``The Gumball Rally directed by Charles Bail``); at a later hop its walk as a
        relation path from the question's entity to the end reached (``Charles Bail directed
        by release year 1976``), the shape of a multi-hop question, which names the relations
        one after another and neither the entities between them nor their direction."""
        walk = self.walk
        if len(walk) == 1:
            e = self.edge
            return " ".join(_words(x) for x in (e.subject.label, e.relation.label, e.object.label))
        return " ".join([_words(walk[0].source.label), *(_words(f.edge.relation.label) for f in walk),
                         _words(self.reached.label)])

    def to_trace(self, rank: int) -> dict:
        out = {"rank": rank, "fact": self.line, "score": round(self.score, 4), "hop": self.hop,
               "edge": self.edge.to_json()}
        if self.twins:  # the other KGs' edges of this line
            out["twins"] = [t.edge.to_json() for t in self.twins]
        return out


def distinct(facts: Sequence[Fact]) -> list[Fact]:
    """``facts`` in their order, one per line the prompt would show (:attr:`Fact.line`): a
    fact whose line an earlier one shows is among that one's :attr:`~Fact.twins`. Two KGs
    stating ``Inception | directed_by | Christopher Nolan`` gave the line twice, in two of
    ``top_facts``' places; the KG is not shown, so the lines read alike whatever their ids."""
    first: dict[str, Fact] = {}
    twins: dict[str, list[Fact]] = {}
    for f in facts:
        if f.line in first:
            twins[f.line].append(f)
        else:
            first[f.line], twins[f.line] = f, []
    return [replace(f, twins=(*f.twins, *twins[line])) if twins[line] else f for line, f in first.items()]


def _interleaved(lists: Sequence[Sequence[T]]) -> list[T]:
    """The lists' items taken in turns: every list's first, then every list's second …"""
    out: list[T] = []
    for rank in range(max((len(x) for x in lists), default=0)):
        out.extend(x[rank] for x in lists if rank < len(x))
    return out


def _names(entity: Entity, answer: str) -> bool:
    """Whether ``answer`` names ``entity``: its label as written, not inside a longer name
    (:func:`~.machine.names_entity`: "The Dark Knight Rises" does not name "The Dark Knight");
    written otherwise (accents, case, punctuation), its normalised words as a whole, a number
    only as the whole number (:func:`~.machine.find_label`: "-5" and "2.5" name no 5); a
    literal value in another writing of it (:func:`~.machine.names`: "1,000" names 1000)."""
    label = entity.label
    if find_label(answer, label) is not None:
        return names_entity(answer, label)
    norm = normalise_label(label)
    return bool(norm) and find_label(normalise_label(answer), norm) is not None or names(answer, entity)


def supporting_facts(facts: Sequence[Fact], answer: str, question_entities: Sequence[Entity]) -> list[Edge]:
    """The edges of ``facts`` and their :attr:`~Fact.twins` (each KG's edge of a line) whose far
    end (:attr:`Fact.reached`), not one of the question's own entities, is named in ``answer``
    (a fact of a later hop brings first the facts that reached it, from the question's entity
    on), each once. The end a later hop's fact was gathered from is no answer of it: the
    answer's other films were support of the director."""
    if answer == NO_ANSWER or not answer.strip():
        return []
    own = {(e.kg, e.id) for e in question_entities}
    out: dict[Edge, None] = {}
    for f in (g for listed in facts for g in (listed, *listed.twins)):
        end = f.reached
        if (end.kg, end.id) not in own and _names(end, answer):
            for step in f.walk:
                out.setdefault(step.edge)
    return list(out)


def leave_out_own(answer: str, question_entities: Sequence[Entity]) -> str:
    """``answer`` without the items of its comma-separated list that are the question's own
    entities, as the tree leaves them out of its answer candidates
    (:func:`~.policy.answer_candidates`: "the co-writers of X" lists X among the others); an
    answer that names nothing else is kept whole."""
    items = answer.split(",")
    own = {normalise_label(e.label) for e in question_entities}
    kept = [x for x in items if normalise_label(x) not in own]
    if len(items) < 2 or not kept or len(kept) == len(items):
        return answer
    return ",".join(kept).strip()


def with_walks(facts: Sequence[Fact]) -> list[Fact]:
    """``facts`` in their order, each after the facts of its walk not listed yet: what the
    prompt lists, so that a later hop's fact is read with the facts that connect it to the
    question's entity. A line is listed once (a walk's step another KG states too)."""
    out: dict[str, Fact] = {}
    for f in facts:
        for step in f.walk:
            out.setdefault(step.line, step)
    return list(out.values())


@dataclass
class Gathered:
    """What :meth:`RetrieveThenRead.gather` collected for one question, and what its bounds cut."""

    facts: list[Fact]
    kg_requests: int = 0
    #: KG requests the ``max_kg_calls`` bound left out
    requests_cut: int = 0
    #: facts the ``max_facts`` bound left out
    facts_cut: int = 0
    #: relations and edges the KG's own caps (max_relations, max_edges) left out
    relations_omitted: int = 0
    edges_omitted: int = 0

    def best(self, n: int) -> list[Fact]:
        """The ``n`` distinct lines of the highest score, best first (ties keep the KG's
        order), each with the facts of other KGs that read alike as its twins (:func:`distinct`)."""
        return distinct(sorted(self.facts, key=lambda f: -f.score))[:n]


class RetrieveThenRead:
    """``--strategy retrieve``: KAPING-style retrieval-augmented prompting (module doc)."""

    name = "retrieve"

    def __init__(
        self,
        llm: LLM,
        kgs: KGSet,
        embedder: Embedder,
        *,
        hops: int = DEFAULT_HOPS,
        top_facts: int = DEFAULT_TOP_FACTS,
        max_kg_calls: int = MAX_KG_CALLS,
        max_facts: int = MAX_FACTS,
        concurrency: int = CONCURRENCY,
        max_tokens: int = MAX_TOKENS,
        on_event: EventSink | None = None,
        prompts: PromptSet | None = None,
    ) -> None:
        if not 1 <= hops <= MAX_HOPS:
            raise ValueError(f"hops is 1 to {MAX_HOPS}, got {hops}")
        for what, n in (("top_facts", top_facts), ("max_kg_calls", max_kg_calls), ("max_facts", max_facts),
                        ("concurrency", concurrency), ("max_tokens", max_tokens)):
            if n < 1:
                raise ValueError(f"{what} must be at least 1, got {n}")
        self.llm = llm
        self.kgs = kgs
        self.embedder = embedder
        self.prompts = prompts or default_prompts()
        self.hops = hops
        self.top_facts = top_facts
        self.max_kg_calls = max_kg_calls
        self.max_facts = max_facts
        self.concurrency = concurrency
        self.max_tokens = max_tokens
        self.on_event = on_event

    @property
    def constrained(self) -> bool:
        """Linking picks among an ambiguous mention's candidates by their probability when
        the LLM can score them (what every KG strategy does by default), else by generation."""
        return bool(getattr(self.llm, "can_score", False))

    async def ask(self, question: str, *, topic_entities: Sequence[str] | None = None) -> Answer:
        started = time.perf_counter()
        usage = Usage()
        kgs = self.kgs.fresh()  # this question's links only
        entities = await Linker(self.llm, kgs, constrained=self.constrained, prompts=self.prompts).initialize(question, usage, topic_entities)
        if self.on_event is not None:
            self.on_event(events.linked(question, entities))
        query = without_brackets(question)
        gathered = await self.gather(kgs, entities, query, usage) if entities else Gathered([])
        given = gathered.best(self.top_facts)
        listed = with_walks(given)
        lines = "\n".join(f"- {f.line}" for f in listed) or (NO_FACTS_LINKED if entities else NO_FACTS)
        gen = await self.llm.generate(self.prompts.render("retrieve", facts=lines, query=query), n=1, temperature=0.0,
                                      max_tokens=self.max_tokens)
        usage.add_generation(gen)
        raw = gen.texts[0] if gen.texts else ""
        said = extract_answer(raw) or NO_ANSWER
        text = leave_out_own(said, entities)
        answer = Answer(
            question, text, usage=usage, seconds=time.perf_counter() - started, strategy=self.name,
            supporting_edges=supporting_facts(given, text, entities), linked_entities=list(entities),
        )
        notes = []
        if text != said:
            notes.append(f"the question's own entity left out of the answer's list (the LLM said: {said})")
        if not entities:
            notes.append("nothing in the question was found in the knowledge graph: the LLM answered alone")
        elif not gathered.facts:
            notes.append("the knowledge graph has no fact about the question's entities: the LLM answered alone")
        if gathered.requests_cut or gathered.facts_cut:
            notes.append(f"bounded: {gathered.requests_cut} KG requests (over {self.max_kg_calls}) and "
                         f"{gathered.facts_cut} facts (over {self.max_facts}) left out")
        answer.trace = {
            "question": question,
            "answer": text,
            "value": None,
            "strategy": self.name,
            "decoding": answer.decoding,
            "prompts": self.prompts.identity(),
            "linking": "constrained" if self.constrained else "sampled",
            "embedder": getattr(self.embedder, "name", type(self.embedder).__name__),
            "config": {"hops": self.hops, "top_facts": self.top_facts, "max_kg_calls": self.max_kg_calls,
                       "max_facts": self.max_facts, "max_relations": kgs.max_relations, "max_edges": kgs.max_edges},
            "linked_entities": [e.ref() for e in entities],
            "retrieved": len(gathered.facts),
            "kg_requests": gathered.kg_requests,
            "cut": {"kg_requests": gathered.requests_cut, "facts": gathered.facts_cut,
                    "relations_omitted_by_kg": gathered.relations_omitted,
                    "edges_omitted_by_kg": gathered.edges_omitted},
            "facts": [f.to_trace(i) for i, f in enumerate(given, 1)],
            "listed": [f.line for f in listed],
            "raw": raw,
            "notes": notes,
            "stopped": None,
            "usage": usage.to_json(),
            "nodes": [],
        }
        return answer

    async def gather(self, kgs: KGSet, entities: Sequence[Entity], query: str, usage: Usage) -> Gathered:
        """The facts ``self.hops`` hops around ``entities``, each scored against ``query``
        (no LLM call: ``bench/retrieve_recall.py`` measures what it finds)."""
        out = Gathered([])
        known: dict[Edge, Fact] = {}
        seen = {(e.kg, e.id) for e in entities}
        frontier: list[tuple[Entity, Fact | None]] = [(e, None) for e in entities]
        limit = asyncio.Semaphore(self.concurrency)

        async def bounded(call: Awaitable[T]) -> T:
            async with limit:
                return await call

        def budget(n: int) -> int:
            """How many of ``n`` wanted requests the bound leaves; the rest counted as cut."""
            left = max(0, self.max_kg_calls - out.kg_requests)
            out.requests_cut += max(0, n - left)
            out.kg_requests += min(n, left)
            return min(n, left)

        [question_vector] = await embed_counted(self.embedder, [query], usage)
        for hop in range(1, self.hops + 1):
            asked = frontier[: budget(len(frontier))]
            relations = await gather(*(bounded(kgs.get_relations([e], usage)) for e, _ in asked))
            out.relations_omitted += sum(r.omitted for r in relations)
            walks: list[tuple[Entity, Fact | None, Relation]] = _interleaved(
                [[(e, via, r) for r in got.items] for (e, via), got in zip(asked, relations)])
            walks = walks[: budget(len(walks))]
            found = await gather(*(bounded(kgs.get_edges([e], r, usage)) for e, _, r in walks))
            out.edges_omitted += sum(g.omitted for g in found)
            new: list[Fact] = []
            for (e, via, _), edge in _interleaved([[(w, edge) for edge in g.edges] for w, g in zip(walks, found)]):
                if edge in known:
                    continue
                if len(known) >= self.max_facts:
                    out.facts_cut += 1
                    continue
                known[edge] = Fact(edge, hop, e, via)
                new.append(known[edge])
            await self._score(new, question_vector, usage)
            out.facts.extend(new)
            if hop == self.hops:
                break
            # the next hop starts from the entities the best-ranked facts of this one reached
            frontier = []
            for fact in sorted(new, key=lambda f: -f.score):
                far = fact.reached
                if (far.kg, far.id) not in seen and len(frontier) < self.top_facts:
                    seen.add((far.kg, far.id))
                    frontier.append((far, fact))
        return out

    async def _score(self, facts: Sequence[Fact], question: Vector, usage: Usage) -> None:
        if not facts:
            return
        vectors = await embed_counted(self.embedder, [f.sentence for f in facts], usage)
        for f, v in zip(facts, vectors):
            f.score = cosine(question, v)
