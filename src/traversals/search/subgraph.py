"""The local KG subgraph a search node carries, and its compact YAML rendering (Fig. 3).

A :class:`Subgraph` is immutable: a child node extends its parent's subgraph with
:meth:`Subgraph.extend`, so siblings share structure and never see each other's edges.

Facts are kept *as walked*: expanding Charles Bail along "~directed_by" stores
``(Charles Bail, ~directed_by, The Gumball Rally)`` and renders it under Charles Bail as
``directed:`` — the grouping the LLM asked for. :meth:`Subgraph.edges` gives them back
in the KG's own forward orientation for provenance.

Entities are shown to the LLM by a short *handle*: the QID when the entity is a
Wikidata item, otherwise ``E1``, ``E2`` … in order of arrival (stable along a path).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence, Union

from ..kg.base import Edge, Edges, Entity, Relation

_QID = re.compile(r"^[QPL]\d+$")
# Plain YAML scalars: no leading indicator, no ": " or " #", no control chars.
_PLAIN = re.compile(r"^[^\s\-?:,\[\]{}#&*!|>'\"%@`\\][^\n\r\t\\\"]*$")
#: control characters and the line/paragraph separators: tokenizers, YAML and
#: ``str.splitlines`` read several of them (\r, \v, \f, \x85, U+2028, U+2029) as line breaks
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: how :meth:`Subgraph.names` marks an entity whose label another shares: "Paris [Q90]"
_MARKED = re.compile(r"(?:^|\s)\[[A-Za-z]\d+\]$")
#: how :meth:`Subgraph.relation_names` marks a relation whose label another shares: "directed [~P57]"
_MARKED_KEY = re.compile(r"\s\[~?[^\s\[\]]+\]$")
#: the markers of the edges a KG did not return (one source's, several sources' together),
#: which no entity may look like
_MORE = re.compile(r"^\(\d+ more not shown(?: among .*)?\)$", re.S)
#: the most source names a marker of several sources' omitted edges lists
MAX_NAMED = 5
#: the most characters of one label, description or relation label a prompt shows
MAX_SHOWN = 300


#: the zero-width joiner, kept between two emoji (:func:`visible`)
_ZWJ = "\u200d"
#: what may stand before a ZWJ that joins emoji: the emoji (So), a skin tone (Sk), or the
#: emoji presentation selector U+FE0F
_BEFORE_JOIN = {"So", "Sk"}


def _joins_emoji(text: str, i: int) -> bool:
    """Is ``text[i]`` a ZWJ between two emoji ("👨\\u200d👩\\u200d👧" is one family glyph)?"""
    if text[i] != _ZWJ or not 0 < i < len(text) - 1:
        return False
    before, after = text[i - 1], text[i + 1]
    return (before == "\ufe0f" or unicodedata.category(before) in _BEFORE_JOIN) and unicodedata.category(after) == "So"


def visible(text: str) -> str:
    """``text`` without its invisible *format* characters (Unicode category Cf): the
    bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E/U+200F, U+061C), the
    zero-width space, non-joiner and joiner (U+200B–U+200D), the word joiner U+2060, the
    byte-order mark U+FEFF, the soft hyphen U+00AD, the tag characters U+E0000–U+E007F
    (which spell hidden ASCII) and every other Cf character. A prompt shows what a reader
    sees: "\\u202esiraP" shows as "siraP", not as "Paris" reordered, and a tag-spelt
    instruction is not there at all. Labels that only invisible characters told apart
    ("Paris", "Par\\u200bis") then show the same; the handles (and the ``[handle]`` marker
    of :meth:`Subgraph.names`) keep them apart, and a reply naming such a label names
    none of them (:meth:`~.machine.Machine.parse`).

    Kept: a ZWJ between two emoji (an emoji sequence, one glyph: the family
    "👨\\u200d👩\\u200d👧" is no trick, and without it shows as three people). Dropped with the
    rest: the ZWNJ/ZWJ of Persian or Indic spelling (the word stays readable, its letters
    join differently) and the tags of subdivision flags (🏴 stays). Only what prompts show
    changes: an entity's label and id stay as the KG gave them, in the subgraph and the
    answer."""
    if text.isascii():  # no format character is ASCII
        return text
    return "".join(
        ch for i, ch in enumerate(text)
        if ch < "\xad" or unicodedata.category(ch) != "Cf" or _joins_emoji(text, i)
    )


def clip(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how many were left out,
    so one long label cannot fill the LLM's context."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def shown(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` as a prompt shows it inside a line: every control character and line
    separator becomes a space (no label can start a line of its own), invisible format
    characters are dropped (:func:`visible`), then :func:`clip`."""
    return clip(_CONTROL.sub(" ", visible(text)), limit)


def yaml_scalar(text: str) -> str:
    """Render ``text`` as a YAML scalar: plain when safe, else double-quoted (JSON
    escaping is valid YAML). Keeps labels with quotes, braces, colons or newlines from
    breaking the structure of the rendered subgraph: every control character and line
    separator is escaped (``\\u2028``), none is written raw."""
    if (
        text and _PLAIN.match(text) and not _CONTROL.search(text)
        and ": " not in text and " #" not in text and not text.endswith(":") and text == text.strip()
    ):
        return text
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False))


@dataclass(frozen=True)
class Fact:
    """One walked edge: ``source --relation--> target`` (relation may be inverse)."""

    source: Entity
    relation: Relation
    target: Entity

    def edge(self) -> Edge:
        if self.relation.inverse:
            return Edge(self.target, self.relation.reversed(), self.source)
        return Edge(self.source, self.relation, self.target)


class OmittedMark(NamedTuple):
    """``n`` edges of ``source`` (an entity id) along ``relation`` (a key) of KG ``kg`` the
    KG had and did not return: that source's own count (:func:`omitted_marks`). ``kg`` ""
    (and a plain ``(source id, relation key, n)`` tuple) marks the relation of that key in
    any KG. A plain tuple is read the same, with one difference kept from before counts
    were per source: it is shown only beside edges of the source, never alone, since ``n``
    may be the total of several sources and the source may have lost none."""

    source: str
    relation: str
    n: int
    kg: str = ""


#: (source id, relation key, n) or (source id, relation key, n, kg): :class:`OmittedMark`
#: or a plain tuple
Mark = Union[tuple[str, str, int], tuple[str, str, int, str]]
#: (source ids, relation key, n) or (source ids, relation key, n, kg): n edges of these
#: sources together along the relation (of KG ``kg``; "" or none: of that key in any KG)
OmittedGroup = Union[tuple[tuple[str, ...], str, int], tuple[tuple[str, ...], str, int, str]]


def _kg_of_mark(mark: tuple) -> str:
    return mark[3] if len(mark) > 3 else ""


def _marks(mark_kg: str, relation_kg: str) -> bool:
    """Does a mark of KG ``mark_kg`` ("" any) concern a relation of KG ``relation_kg``?"""
    return not mark_kg or mark_kg == relation_kg


def omitted_marks(
    got: Edges, sources: Sequence[Entity], relation_key: str, kg: str = ""
) -> tuple[list[OmittedMark], list[OmittedGroup]]:
    """What :meth:`Subgraph.extend` is told the KG left out when ``relation_key`` (of KG
    ``kg``; "": whichever) was walked from ``sources`` and ``got`` came back: ``(source id,
    relation key, n, kg)`` for each source that lost ``n`` edges, when the KG says how many
    each lost (``Edges.omitted_by_source``; one source lost all of ``got.omitted``); else
    one group, ``(source ids, relation key, total, kg)``: that many are missing among them,
    which source's is not known. With several KGs two relations may share a key: the KG
    keeps one's marker from showing beside the other's edges."""
    if not got.omitted:
        return [], []
    ids = list(dict.fromkeys(e.id for e in sources))
    if len(ids) == 1:
        return [OmittedMark(ids[0], relation_key, got.omitted, kg)], []
    counts = [got.omitted_of(i) for i in ids]
    if None not in counts and sum(n or 0 for n in counts) == got.omitted:
        return [OmittedMark(i, relation_key, n, kg) for i, n in zip(ids, counts) if n], []
    return [], [(tuple(ids), relation_key, got.omitted, kg)]


@dataclass(frozen=True)
class Subgraph:
    entities: tuple[Entity, ...] = ()
    facts: tuple[Fact, ...] = ()
    #: (source id, relation key, n): the KG had n more edges of this source along this
    #: relation than it returned
    omitted: tuple[Mark, ...] = ()
    _handles: dict = field(default_factory=dict, compare=False, repr=False)
    #: (source ids, relation key, n): the KG had n more edges of these sources together
    #: along this relation than it returned, and did not say whose
    omitted_together: tuple[OmittedGroup, ...] = ()

    def __post_init__(self) -> None:
        n = 0
        for e in self.entities:
            if _QID.fullmatch(e.id) and e.id not in self._handles.values():
                h = e.id
            else:
                n += 1
                h = f"E{n}"
                while h in self._handles.values():
                    n += 1
                    h = f"E{n}"
            self._handles[(e.kg, e.id)] = h

    # -- lookups ---------------------------------------------------------------
    def handle(self, entity: Entity) -> str:
        return self._handles[(entity.kg, entity.id)]

    def by_handle(self, handle: str) -> Entity | None:
        for e in self.entities:
            if self._handles[(e.kg, e.id)] == handle:
                return e
        return None

    def handles(self) -> list[str]:
        return [self.handle(e) for e in self.entities]

    def __contains__(self, entity: Entity) -> bool:
        return (entity.kg, entity.id) in self._handles

    def cut_short(self, source_id: str, relation_key: str, kg: str = "") -> bool:
        """Did the KG leave out edges of this source along this relation (of KG ``kg``; ""
        whichever), or may it have: it left out some among several sources together, this
        one with them?"""
        return any(
            (source_id, relation_key) == tuple(m[:2]) and _marks(_kg_of_mark(m), kg) for m in self.omitted
        ) or any(
            relation_key == g[1] and source_id in g[0] and _marks(_kg_of_mark(g), kg) for g in self.omitted_together
        )

    def edges(self) -> list[Edge]:
        return [f.edge() for f in self.facts]

    # -- growth ----------------------------------------------------------------
    def extend(
        self, facts: list[Fact], omitted: Sequence[Mark] = (), together: Sequence[OmittedGroup] = ()
    ) -> "Subgraph":
        """The subgraph with ``facts`` added, and what the KG left out: ``omitted`` by source,
        ``together`` by group of sources (:func:`omitted_marks` makes both)."""
        known = {(e.kg, e.id) for e in self.entities}
        have = set(self.facts)
        new_entities: list[Entity] = []
        new_facts: list[Fact] = []
        for f in facts:
            if f in have:
                continue
            have.add(f)
            new_facts.append(f)
            for e in (f.source, f.target):
                if (e.kg, e.id) not in known:
                    known.add((e.kg, e.id))
                    new_entities.append(e)
        return Subgraph(
            self.entities + tuple(new_entities),
            self.facts + tuple(new_facts),
            self.omitted + tuple(omitted),
            omitted_together=self.omitted_together + tuple(together),
        )

    def with_entities(self, entities: list[Entity]) -> "Subgraph":
        known = {(e.kg, e.id) for e in self.entities}
        fresh = tuple(e for e in entities if (e.kg, e.id) not in known)
        return Subgraph(self.entities + fresh, self.facts, self.omitted, omitted_together=self.omitted_together)

    # -- rendering -------------------------------------------------------------
    def render(self, indent: str = "  ") -> str:
        """The two blocks of Figure 3: entities with handles, then edges as YAML."""
        lines = ["Knowledge Graph Entities:"]
        for e in self.entities:
            desc = f" - {shown(e.description)}" if e.description else ""
            lines.append(f"{indent}{self.handle(e)}: {shown(e.label)}{desc}")
        lines.append("Knowledge Graph Edges:")
        lines.extend(self.render_edges(indent))
        return "\n".join(lines)

    def names(self) -> dict[tuple[str, str], str]:
        """(kg, id) -> the entity's name in the edges block: its label as seen (:func:`visible`,
        clipped: :func:`clip`), followed by `` [handle]`` when another entity of its KG shows
        the same name (the same label, or one only invisible characters told apart), when
        the label is another entity's handle or ends like a name so marked ("Paris [Q3]")
        — so two entities never share a name there. (Same-label entities of different KGs
        are the linked copies of one thing and keep sharing it.)"""
        handles = set(self._handles.values())
        seen = Counter((e.kg, clip(visible(e.label))) for e in self.entities)
        out = {}
        for e in self.entities:
            name, h = clip(visible(e.label)), self.handle(e)
            if seen[(e.kg, name)] > 1 or (name in handles and name != h) or _MARKED.search(name) or _MORE.match(name):
                name = f"{name} [{h}]".lstrip()
            out[(e.kg, e.id)] = name
        return out

    def relation_names(self) -> dict[tuple[str, str], str]:
        """(kg, key) -> the walked relation's name in the edges block: its label as seen
        (:func:`visible`, clipped: :func:`clip`), followed by `` [key]`` when another
        relation of its KG walked in the subgraph shows the same label ("directed" forward, and "directed by" walked
        back), so their edges are not merged under one name."""
        shown_as = {(f.relation.kg, f.relation.key): clip(visible(f.relation.display)) for f in self.facts}
        seen = Counter((kg, name) for (kg, _), name in shown_as.items())
        return {
            (kg, key): f"{name} [{key}]" if seen[(kg, name)] > 1 or _MARKED_KEY.search(name) else name
            for (kg, key), name in shown_as.items()
        }

    def render_edges(self, indent: str = "  ") -> list[str]:
        names = self.names()
        rel_names = self.relation_names()
        groups: dict[str, dict[str, list[str]]] = {}
        for f in self.facts:
            rels = groups.setdefault(names[(f.source.kg, f.source.id)], {})
            rels.setdefault(rel_names[(f.relation.kg, f.relation.key)], []).append(names[(f.target.kg, f.target.id)])
        # (source id, relation key, kg) -> n; kg "": the relation of that key in any KG
        more: dict[tuple[str, str, str], int] = {}
        alone: set[tuple[str, str, str]] = set()  # the marks that are the source's own count (OmittedMark)
        for mark in self.omitted:
            key = (mark[0], mark[1], _kg_of_mark(mark))
            more[key] = mark[2]
            if isinstance(mark, OmittedMark):
                alone.add(key)
            else:
                alone.discard(key)

        def hidden_of(f: Fact) -> int | None:
            return more.get((f.source.id, f.relation.key, f.relation.kg)) or more.get((f.source.id, f.relation.key, ""))

        omitted_by_label: dict[tuple[str, str], str] = {}
        for f in self.facts:
            hidden = hidden_of(f)
            if hidden:
                omitted_by_label[(names[(f.source.kg, f.source.id)], rel_names[(f.relation.kg, f.relation.key)])] = (
                    f"({hidden} more not shown)"
                )
        # a source whose every edge along the relation was left out: only its marker (when the
        # count is its own, an OmittedMark)
        rel_of: dict[tuple[str, str], str] = {}  # (relation key, kg or "") -> its name
        for f in reversed(self.facts):
            rel_of[(f.relation.key, f.relation.kg)] = rel_of[(f.relation.key, "")] = rel_names[
                (f.relation.kg, f.relation.key)]
        first = {}
        for e in reversed(self.entities):
            first[e.id] = names[(e.kg, e.id)]
        for (src_id, rel_key, kg), hidden in more.items():
            if (src_id, rel_key, kg) not in alone:
                continue
            src_name, rel_name = first.get(src_id), rel_of.get((rel_key, kg))
            if hidden and src_name is not None and rel_name is not None and rel_name not in groups.get(src_name, {}):
                groups.setdefault(src_name, {})[rel_name] = []
                omitted_by_label[(src_name, rel_name)] = f"({hidden} more not shown)"
        # edges left out among several sources together: said once, under the first of them shown
        for group in self.omitted_together:
            ids, rel_key, hidden = group[:3]
            rel_name = rel_of.get((rel_key, _kg_of_mark(group)))
            shown_as = [first[i] for i in dict.fromkeys(ids) if i in first]
            at = next((n for n in groups if n in shown_as and rel_name in groups[n]), None)
            if not hidden or at is None or rel_name is None:
                continue
            among = ", ".join(shown_as[:MAX_NAMED])
            if len(shown_as) > MAX_NAMED:
                among += f" and {len(shown_as) - MAX_NAMED} other sources"
            omitted_by_label[(at, rel_name)] = f"({hidden} more not shown among {among})"
        lines = []
        for src, rels in groups.items():
            lines.append(f"{indent}{yaml_scalar(src)}:")
            for rel, targets in rels.items():
                lines.append(f"{indent * 2}{yaml_scalar(rel)}:")
                items = list(dict.fromkeys(targets))
                marker = omitted_by_label.get((src, rel))
                if marker:
                    items.append(marker)
                # One target reads as in Figure 3; several become a YAML list.
                dash = "- " if len(items) > 1 else ""
                for t in items:
                    lines.append(f"{indent * 3}{dash}{yaml_scalar(t)}")
        return lines
