"""The Action State Machine of Tree-of-Traversals (§2.2, Figure 2).

States: ``default`` → (THINK | EXPAND_KG | ANSWER); ``selecting-entities`` →
SELECT_ENTITIES; ``selecting-relation`` → SELECT_RELATION; ``done``. Each state has one
prompt template (``prompts/*.txt``, Appendix F.1–F.3). The machine builds prompts,
parses LLM output into :class:`Action` values, lists the valid options of a state (for
constrained decoding), and applies transitions — calling the KG interface when entering
``selecting-relation`` (``get_relations``) and when leaving it (``get_edges``).

An output that cannot be parsed, or names an entity/relation that is not an option,
becomes an ``INVALID`` action: its node keeps the parent's state, gets value 0 and the
search goes on (a later expansion of it samples again at temperature 1.0).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from itertools import count
from typing import Any, Sequence

from ..canonical import canonical_dates, canonical_numbers
from ..kg.base import Entity, Relation, Relations
from ..kg.iris import is_literal_id, relation_name_label
from ..kg.text import fold_accents
from ..llm.base import Usage
from .kgset import KGSet
from .subgraph import Fact, Subgraph, omitted_marks, shown
from .templates import PromptSet, default_prompts
from ..aio import gather


class State(str, enum.Enum):
    DEFAULT = "default"
    SELECTING_ENTITIES = "selecting-entities"
    SELECTING_RELATION = "selecting-relation"
    DONE = "done"


class ActionType(str, enum.Enum):
    THINK = "THINK"
    EXPAND_KG = "EXPAND_KG"
    SELECT_ENTITIES = "SELECT_ENTITIES"
    SELECT_RELATION = "SELECT_RELATION"
    ANSWER = "ANSWER"
    INVALID = "INVALID"


#: what stands for the query in a neutral prompt (calibration)
NEUTRAL = "N/A"
#: how many entities one expansion reached are checked for dead ends (= one relation's edge limit)
DEFAULT_SCREEN_LIMIT = 50

DEFAULT_ACTIONS: tuple[ActionType, ...] = (ActionType.THINK, ActionType.EXPAND_KG, ActionType.ANSWER)
#: the most entities the group option of a selection names (:func:`selection_group`)
MAX_GROUP = 20


def entity_key(e: Entity) -> tuple[str, str]:
    """An entity as the path's bookkeeping (``expanded``, ``exhausted``) names it: its KG
    and id, since two KGs may use one id for different things."""
    return (e.kg, e.id)


def allowed_default_actions(node: "Node") -> tuple[ActionType, ...]:
    """THINK, EXPAND_KG, ANSWER — but no THINK right after a THINK (small models
    otherwise repeat one thought until max depth instead of acting), and no EXPAND_KG
    when every entity of the subgraph is exhausted, or there is none (the question linked to
    nothing in the KG): it could only lead to a dead end, an invalid node."""
    out = DEFAULT_ACTIONS
    if node.action is not None and node.action.type is ActionType.THINK:
        out = tuple(a for a in out if a is not ActionType.THINK)
    if all(entity_key(e) in node.exhausted for e in node.subgraph.entities):
        out = tuple(a for a in out if a is not ActionType.EXPAND_KG)
    return out


def repeats_thought(node: "Node", action: "Action") -> bool:
    """A THINK whose thought is already in the node's history (an invalid action)."""
    return action.type is ActionType.THINK and action.history_line(node.subgraph) in node.history


def last_thought(node: "Node") -> str:
    """The thought of the node's last action when that action is a THINK, else ""."""
    last = node.history[-1] if node.history else ""
    return last.split(":", 1)[1].strip() if last.startswith("THINK:") else ""


def expansion_goal(history: Sequence[str]) -> str:
    """What the current expansion is for: the thought right before EXPAND_KG if there is
    one (the 1.5B model's EXPAND_KG text often copies the prompt's example, "the country
    of origin of ..."), else the EXPAND_KG text."""
    for i in range(len(history) - 1, -1, -1):
        if history[i].startswith("EXPAND_KG:"):
            before = history[i - 1] if i > 0 else ""
            source = before if before.startswith("THINK:") else history[i]
            return source.split(":", 1)[1].strip()
    return ""


def latest_targets(node: "Node") -> list[Entity]:
    """The entities the node's latest expansion (on its path from the root) reached, in
    the order it reached them; none before any expansion."""
    for n in reversed(node.path()):
        if n.new_facts:
            return list(dict.fromkeys(f.target for f in n.new_facts))
    return []


def selection_group(node: "Node", limit: int | None = MAX_GROUP) -> tuple[Entity, ...]:
    """All the entities the latest expansion reached that are still worth expanding (not
    exhausted, not the question's own), as one selection — the paper's "E2, E3, E4": the
    second hop of "the actors in the films directed by X" starts from every film. Empty
    when fewer than two, or more than ``limit``."""
    roots = node.path()[0].subgraph.entities
    group = tuple(e for e in latest_targets(node) if entity_key(e) not in node.exhausted and e not in roots)
    return group if len(group) > 1 and (limit is None or len(group) <= limit) else ()


def option_line(key: str, relation: Relation) -> str:
    """``P25 - has mother``; just ``directed_by`` (or ``headquarteredIn``) when the label
    only repeats the key in words. Key and label are :func:`~.subgraph.shown` (one line,
    clipped)."""
    if normalise_label(relation_name_label(key.lstrip("~").split(":")[-1])) == normalise_label(relation.display):
        return shown(key)
    return f"{shown(key)} - {shown(relation.display)}"


@dataclass(frozen=True)
class Action:
    type: ActionType
    text: str = ""  # the thought, the expansion intent, the answer, or the raw output
    entities: tuple[Entity, ...] = ()
    relation: Relation | None = None
    relation_key: str = ""
    #: the LLM's output it was read from was cut at ``max_tokens`` (its node notes it); not
    #: part of what the action is
    cut: bool = field(default=False, compare=False)

    def history_line(self, subgraph: Subgraph) -> str:
        if self.type is ActionType.SELECT_ENTITIES:
            return "SELECT ENTITIES: " + ", ".join(subgraph.handle(e) for e in self.entities)
        if self.type is ActionType.SELECT_RELATION and self.relation is not None:
            return f"SELECT RELATION: {shown(self.relation_key)} - {shown(self.relation.display)}"
        if self.type is ActionType.EXPAND_KG:
            return f"EXPAND_KG: {self.text}"
        return f"{self.type.value}: {self.text}"

    def to_json(self, subgraph: Subgraph | None = None) -> dict:
        out: dict = {"type": self.type.value, "text": self.text}
        if self.entities:
            out["entities"] = [
                {"id": e.id, "label": e.label, **({"handle": subgraph.handle(e)} if subgraph and e in subgraph else {})}
                for e in self.entities
            ]
        if self.relation is not None:
            out["relation"] = self.relation.choice_json(self.relation_key)
        return out


@dataclass(eq=False)
class Node:
    id: int
    state: State
    subgraph: Subgraph
    history: tuple[str, ...] = ()
    parent: "Node | None" = None
    action: Action | None = None
    depth: int = 0
    selected: tuple[Entity, ...] = ()
    relation_options: tuple[Relation, ...] = ()
    relation_keys: tuple[str, ...] = ()
    relations_omitted: int = 0
    answer: str | None = None
    value: float | None = None
    invalid: bool = False
    expansion: int | None = None
    new_facts: tuple[Fact, ...] = ()
    children: list["Node"] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    note: str = ""
    #: the tree search found an earlier node with the same KG state and did not queue this one
    duplicate: bool = False
    #: option text -> probability of the node's proposal, when options were scored
    priors: dict[str, float] | None = None
    #: the probability the parent's proposal gave the action that made this node
    #: (a scored entity or relation choice; None otherwise)
    prior: float | None = None
    #: an answer made of the subgraph's entities (one of ``policy.answer_candidates`` of its
    #: parent), not free text; None where the search did not look
    grounded: bool | None = None
    #: (entity_key(entity), relation kg, relation key, relation label) expanded on this path
    expanded: frozenset = frozenset()
    #: entity_key()s of entities whose every relation was expanded on this path (not offered again)
    exhausted: frozenset = frozenset()

    def add_note(self, text: str) -> None:
        """Append ``text`` to the node's trace note."""
        self.note = f"{self.note}; {text}" if self.note else text

    @property
    def is_answer(self) -> bool:
        return self.state is State.DONE and not self.invalid

    def path(self) -> list["Node"]:
        out: list[Node] = []
        node: Node | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        return out[::-1]

    def to_trace(self) -> dict:
        out: dict[str, Any] = {
            "id": self.id,
            "parent": self.parent.id if self.parent else None,
            "depth": self.depth,
            "state": self.state.value,
            "action": self.action.to_json(self.subgraph) if self.action else None,
            "value": self.value,
            "expansion": self.expansion,
            "invalid": self.invalid,
            "usage": self.usage.to_json(),
        }
        if self.answer is not None:
            out["answer"] = self.answer
        if self.grounded is not None:
            out["grounded"] = self.grounded
        if self.new_facts:
            out["new_edges"] = [f.edge().to_json() for f in self.new_facts]
        if self.selected:
            out["selected"] = [e.label for e in self.selected]
        if self.relation_options:
            out["relation_options"] = len(self.relation_options)
        if self.note:
            out["note"] = self.note
        if self.duplicate:
            out["duplicate"] = True
        if self.prior is not None:
            out["prior"] = round(self.prior, 4)
        if self.priors:
            out["priors"] = {k: round(v, 4) for k, v in self.priors.items()}
        return out


#: an action word at the start, in markdown emphasis too ("**ANSWER:** x", "__THINK__: y")
_ACTION_RE = re.compile(
    r"^[\W_]*(THINK|EXPAND[ _]KG|ANSWER|SELECT[ _]ENTITIES|SELECT[ _](?:RELATION|PROPERTY))(?![A-Za-z0-9])"
    r"[*_`]*\s*[:\-]?[*_`]*\s*(.*)$",
    re.I | re.S,
)
_ECHO_RE = re.compile(r"^(THINK|EXPAND[ _]KG|ANSWER)\s*:\s*(.*)$", re.I | re.S)


def left_open(before: str, between: str) -> str:
    """The emphasis marks a reply opens before its action word and does not close after
    it: "**" in "**ANSWER: x**" (closed at the text's end), "" in "**ANSWER:** x" or
    "**Answer**: x". ``before`` is the reply up to the action word, ``between`` what joins
    the word to its text (":** ")."""
    if re.search(r"[*`]", between):
        return ""
    before = before.rstrip()
    return before[len(before.rstrip("*`")):]


def without_emphasis(text: str, *, opened: str = "") -> str:
    """``text`` without the emphasis marks around it: marks at its end that close the
    ``opened`` ones (:func:`left_open`), then the same marks at both ends, nested as
    markdown nests them ("**x**", "`x`", "***x***", "**`x`**"), then two marks or a
    backtick left on one side ("**x"). One star on one side only is the text's own:
    MetaQA's film "61*", Wikidata's "*batteries not included" (both were cut, and the
    answer named no entity)."""
    text = text.strip()
    if opened and text.endswith(opened[::-1]):
        text = text[: -len(opened)].rstrip()
    if not text.strip("*`"):
        return ""  # marks alone: no text
    lead = text[: len(text) - len(text.lstrip("*`"))]
    trail = text[len(text.rstrip("*`")):][::-1]  # outermost first, as lead
    n = 0
    while n < min(len(lead), len(trail)) and lead[n] == trail[n]:
        n += 1
    lead, trail = lead[n:], trail[n:]
    # left on one side, two marks or a backtick are markdown too ("**Beatrice Stone" cut
    # before its closing marks); no title starts or ends so
    lead = lead if len(lead) > 1 or "`" in lead else ""
    trail = trail if len(trail) > 1 or "`" in trail else ""
    return text[len(lead) + n: len(text) - len(trail) - n].strip()


#: task lines a model may echo before its choice ("I suggest selecting property: P25")
_ECHOED_TASK = re.compile(
    r"^\s*(?:I suggest selecting property|You have selected the following entities to expand|"
    r"SELECT PROPERTY|So the next action should be)\s*:?", re.I,
)


#: a list item's mark ("- ", "* ", "1. ", "2) ")
_MARK = r"(?:[-*•]|\d+[.)])\s+"
#: a list item's mark at the start of a line (cot's answer lists too)
LIST_MARK = re.compile(rf"^\s*{_MARK}")
#: a line of ids alone, a list item's mark before them allowed ("- E3", "E3, E5"). The
#: separator is a "," ";" or "and" with any spaces around it, or spaces alone: one way to
#: read each gap (two optional space runs around an optional word let a failing line of
#: 25 space-separated ids try 2^25 splits)
_ID_LINE = re.compile(rf"\s*(?:{_MARK})?[\[(`*]*[A-Za-z]\d+(?:(?:\s*(?:[,;]|and)\s*|\s+)?[A-Za-z]\d+)*[\])`*.,]*\s*")


_FENCE = re.compile(r"```[\w-]*")


def _reply_lines(text: str) -> list[str]:
    """A reply's non-empty lines, fences left out ("```" lines; the marks around "```Q1```")."""
    lines = []
    for ln in text.strip().splitlines():
        ln = ln.strip()
        if _FENCE.fullmatch(ln):
            continue
        if ln.startswith("```"):  # "```Q1```", "```text Q1": the marks and a language's name (letters) go
            ln = re.sub(r"^```(?:[A-Za-z-]+\s+)?", "", ln)
        ln = ln[:-3].strip() if ln.endswith("```") else ln
        if ln:
            lines.append(ln)
    return lines


#: one option key alone on a line ("~P25", "- directed_by", "**P31**")
_KEY_LINE = re.compile(rf"\s*(?:{_MARK})?[*`'\"]*~?\s*[\w./:#-]+[*`'\".,]*\s*")


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


#: the ids a reply starts with: "E2", "[E2, E5]", "E2 and E5; E7", "E2 E5"
_LEADING_IDS = re.compile(r"[\s\[]*((?:[A-Za-z]\d+)(?:\s*(?:,|;|\band\b)?\s*[A-Za-z]\d+)*)\b")


def normalise_label(text: str) -> str:
    return " ".join(re.sub(r"[\"'`]", "", text).replace("_", " ").casefold().split())


#: typographic apostrophes, quotes and dashes, as the plain ones a KG label writes
#: ("Dan O’Brien, Jr." is the KG's "Dan O'Brien, Jr.")
_TYPOGRAPHIC = str.maketrans({"’": "'", "‘": "'", "‛": "'", "ʼ": "'", "“": '"', "”": '"', "„": '"', "‟": '"',
                              "‐": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-"})  # fmt: skip
_SPACE_RUN = re.compile(r"\s+")


def folded_text(text: str) -> str:
    """``text`` as an answer and a label are compared in (:func:`find_label`,
    :func:`names_entity`): compatibility forms and accents folded
    (:func:`~traversals.kg.text.fold_accents`, which keeps the marks of other scripts:
    "हिन्दी" is not "हिन्दू"), typographic quotes and dashes plain, every run of spaces one
    space, or one line break when it holds one (a line break still ends a sentence and a
    name). Case is kept: the longer-name rules read capitals."""
    plain = fold_accents(text).translate(_TYPOGRAPHIC)
    return _SPACE_RUN.sub(lambda m: "\n" if "\n" in m.group() or "\r" in m.group() else " ", plain)


def find_label(text: str, label: str) -> re.Match[str] | None:
    """Where ``text`` names ``label``, as whole words in any case (None: it does not). "Go"
    is not named by "Gone Girl", nor "M" by "movie". Both are compared folded
    (:func:`folded_text`: "Eve Angstrom" names "Éve Ångström", "O’Brien" "O'Brien"), so the
    match is one in the folded text: its positions are not the text's."""
    pattern = _whole_words(label)
    return pattern.search(folded_text(text)) if pattern else None


def find_labels(text: str, label: str) -> list[re.Match[str]]:
    """Every place ``text`` names ``label`` (:func:`find_label`), in the folded text."""
    pattern = _whole_words(label)
    return list(pattern.finditer(folded_text(text))) if pattern else []


#: before a label that starts with a digit, what makes its digits part of a longer number: a
#: sign or a hyphen after a word ("-5", "+5", "Catch-22"), a decimal point (".5", "2.5") or a
#: comma after a digit ("1,000" holds no "000"); a comma after a word still parts ("Oslo,5"),
#: and a dash between numbers is a range ("1993-2001" names 2001)
_NUMBER_BEFORE = r"(?<![\w.+])(?<!(?<!\d)-)(?<!\d,)"
#: after a label that ends with a digit: a decimal point, a comma or a colon followed by a
#: digit ("2.5", "1,000", "12:30" hold no "2", "1", "12"); "It was 5." and "2001: A Space
#: Odyssey" still end there
_NUMBER_AFTER = r"(?![.,:]?\d)(?!\w)"


def _whole_words(label: str) -> re.Pattern[str] | None:
    """``label`` folded (:func:`folded_text`) as whole words, in any case, to search a folded
    text with (:func:`find_label`, :func:`names_entity`); None for a label that folds to no
    word (one of combining marks alone matched between any two characters). A label's
    leading or trailing digits are whole only where the number they start or end is
    (:data:`_NUMBER_BEFORE`, :data:`_NUMBER_AFTER`): with ``\\w`` alone as the boundary, a
    literal 5 was named by "-5", "2.5" and "1.5 million", 000 by "1,000", so a number the KG
    lacks was confirmed by a different one's edge."""
    words = folded_text(label).split()
    if not words:
        return None
    text = " ".join(words)
    before = _NUMBER_BEFORE if text[0].isdigit() else r"(?<!\w)"
    after = _NUMBER_AFTER if text[-1].isdigit() else r"(?!\w)"
    return re.compile(before + re.escape(text) + after, re.IGNORECASE)


def mentions_label(text: str, label: str) -> bool:
    """Does ``text`` name ``label`` (:func:`find_label`)?"""
    return find_label(text, label) is not None


#: a capitalised word or a number right after a label, or a capitalised word right before it:
#: the label is part of a longer name there ("The Dark Knight" in "The Dark Knight Rises",
#: "Rocky" in "Rocky II", "Frankenstein" in "Young Frankenstein")
_NAME_GOES_ON = re.compile(r" [A-Z0-9]")
_NAME_CAME_BEFORE = re.compile(r"(?<![\w'’])[A-Z][\w'’.-]* \Z")
#: words that, starting a sentence right before a label, introduce it and begin no longer name:
#: a role ("Director Christopher Nolan") or "Answer" ("Answer Tom Hanks"). Role nouns only, on
#: purpose: a title's first word is any other word ("Only Yesterday", "Authors Anonymous",
#: "Movie Crazy", "Film noir" are MetaQA films or genres whose rest, "Yesterday", "Anonymous",
#: "crazy", "noir", is another entity), and there it must still make a longer name.
_INTRODUCING_WORDS = frozenset({
    "director", "directors", "actor", "actors", "actress", "actresses", "writer", "writers",
    "screenwriter", "screenwriters", "producer", "producers", "composer", "composers", "singer",
    "singers", "artist", "artists", "answer",
})
#: capitalised words that start the text or a sentence (after ". ", ": ", a line break, an
#: opening quote, bracket or list mark) and run up to the end: the words before a label
_SENTENCE_LEAD = re.compile(r"(?:\A|[.!?:;]\s|\n)[\s\"'“‘(\[*-]*((?:[A-Z][A-Za-z]* )+)\Z")


def _introduced(text: str, start: int) -> bool:
    """Are the words before ``start`` (where a label begins) a sentence's first words, each one
    of :data:`_INTRODUCING_WORDS` ("Director", "Writer Director")?"""
    lead = _SENTENCE_LEAD.search(text, 0, start)
    return lead is not None and all(w.casefold() in _INTRODUCING_WORDS for w in lead.group(1).split())


def names_entity(text: str, label: str) -> bool:
    """Does ``text`` name the entity labelled ``label`` as itself: an occurrence of the label as
    whole words (:func:`find_label`) that is not part of a longer name, a capitalised word or a
    number joined to it by one space. "The Dark Knight Rises", a film the KG lacks, named "The
    Dark Knight" and was taken as confirmed by its edges; "Nolan directed it" still names
    "Nolan". A role or answer word that starts the sentence (:data:`_INTRODUCING_WORDS`) is no
    part of the name: "Director Christopher Nolan" names "Christopher Nolan". Text and label
    are read folded (:func:`folded_text`): "Eve Angstrom" names "Éve Ångström"."""
    pattern = _whole_words(label)
    if pattern is None:
        return False
    text = folded_text(text)  # the label is folded alike: "Dan O’Brien" names "Dan O'Brien"
    for m in pattern.finditer(text):
        if _NAME_GOES_ON.match(text, m.end()):
            continue
        if not _NAME_CAME_BEFORE.search(text, 0, m.start()) or _introduced(text, m.start()):
            return True
    return False


def _canonical_values(text: str) -> str:
    """``text`` with its dates and numbers in one writing (:mod:`traversals.canonical`, the
    forms the answer metrics compare): "March 31, 1999" -> "1999-03-31", "1,000" -> "1000"."""
    return canonical_numbers(canonical_dates(text))


def names(text: str, entity: Entity) -> bool:
    """Does ``text`` name ``entity`` (:func:`names_entity`)? A literal value (a date, a
    number) is also named written another way, where both read in one writing
    (:func:`_canonical_values`) name it: "March 31, 1999" names the date 1999-03-31, "1,000"
    the number 1000, "2.5" the decimal 2.50, as the metrics score them right; before, such a
    right answer was "not among the entities reached" (× 0.7) with no supporting edge."""
    if names_entity(text, entity.label):
        return True
    return is_literal_id(entity.id) and names_entity(_canonical_values(text), _canonical_values(entity.label))


class Machine:
    """Builds prompts, parses outputs, lists options and applies transitions."""

    def __init__(
        self,
        kgs: KGSet,
        *,
        max_depth: int = 7,
        screen_limit: int = DEFAULT_SCREEN_LIMIT,
        group_option: bool = False,
        prompts: PromptSet | None = None,
    ) -> None:
        self.kgs = kgs
        #: the templates every prompt is rendered from (``--prompts``: default, paper, a directory)
        self.prompts = prompts or default_prompts()
        self.max_depth = max_depth
        #: how many entities an expansion reached are checked for dead ends (0: none)
        self.screen_limit = screen_limit
        #: selections offer the latest expansion's entities as one option too (:func:`selection_group`)
        self.group_option = group_option
        self._ids = count()
        #: (kg, relation key, the entities' keys) of the relations :meth:`_drop_walks_back`
        #: found with more edges than a call shows: they never only walk back (the KG does
        #: not change during a question), so a hub is not read again to see it
        self._more_than_shown: set[tuple[str, str, frozenset[tuple[str, str]]]] = set()

    # -- nodes -----------------------------------------------------------------
    def root(self, subgraph: Subgraph) -> Node:
        self._ids = count()
        return Node(id=next(self._ids), state=State.DEFAULT, subgraph=subgraph)

    def must_answer(self, node: Node) -> bool:
        return node.state is State.DEFAULT and node.depth >= self.max_depth

    # -- prompts ---------------------------------------------------------------
    def parts(self, query: str, node: Node) -> dict[str, str]:
        """What every prompt of a node may show (:data:`~.templates.VARIABLES`): the preamble,
        the query, the subgraph, the previous actions, and the context they make."""
        parts = {
            "preamble": self.prompts.fixed("preamble"), "query": query, "subgraph": node.subgraph.render(),
            "history": "\n".join(node.history) if node.history else "(none)",
        }
        return {**parts, "context": self.prompts.render("context", **parts)}

    def context(self, query: str, node: Node) -> str:
        return self.parts(query, node)["context"]

    def prompt(
        self,
        query: str,
        node: Node,
        *,
        force_answer: bool = False,
        intent: str | None = None,
        reverse_options: bool = False,
    ) -> str:
        """The node's state prompt. ``reverse_options``: a relation selection lists its
        options last to first (the choice asked again so that the order's influence is pooled out,
        ``TreeConfig.both_orders``)."""
        parts = self.parts(query, node)
        render = self.prompts.render
        if node.state is State.DEFAULT:
            if force_answer or self.must_answer(node):
                return render("answer_only", **parts)
            names = [a.value for a in allowed_default_actions(node)]
            return render("default", **parts, actions=", ".join(names[:-1]) + " or " + names[-1])
        intent = expansion_goal(node.history) if intent is None else intent
        if node.state is State.SELECTING_ENTITIES:
            return render(
                "selecting_entities", **parts, intent=intent or "(none)",
                options=", ".join(text for text, _ in self.options(node)),
            )
        if node.state is State.SELECTING_RELATION:
            lines = self._relation_lines(node, reverse=reverse_options)
            return render(
                "selecting_relation",
                **parts,
                intent=intent or "(none)",
                selected=", ".join(node.subgraph.handle(e) for e in node.selected),
                options="\n".join(lines),
            )
        raise ValueError(f"no prompt for state {node.state}")

    def neutral_prompt(self, node: Node, *, force_answer: bool = False, reverse_options: bool = False) -> str:
        """The node's prompt with the query and the expansion goal taken out (subgraph,
        history and options kept), for calibrating option probabilities
        (:func:`~traversals.search.choices.calibrated_probs`, the answer choice)."""
        return self.prompt(NEUTRAL, node, force_answer=force_answer, intent="(none)", reverse_options=reverse_options)

    def _relation_lines(self, node: Node, *, reverse: bool = False) -> list[str]:
        lines = [option_line(k, r) for k, r in zip(node.relation_keys, node.relation_options)]
        if reverse:
            lines.reverse()
        if node.relations_omitted:
            lines.append(f"({node.relations_omitted} more not shown)")
        return lines

    # -- options (constrained decoding) ---------------------------------------
    def options(self, node: Node) -> list[tuple[str, Action]]:
        """Every valid action of a selection state, with the text the LLM would write."""
        if node.state is State.SELECTING_ENTITIES:
            # Newest first, with labels and what was already expanded: the 1.5B model
            # otherwise keeps picking the question's own entity (E1) for the second hop
            # (PathQuestion 2-hop probes: P(new entity) 0.5 -> 0.85).
            done: dict[tuple[str, str], list[str]] = {}
            for entity, _kg, _key, label in sorted(node.expanded):
                done.setdefault(entity, []).append(label)

            def text(e: Entity) -> str:
                labels = done.get(entity_key(e))
                note = f"; already expanded: {', '.join(shown(x) for x in labels)}" if labels else ""
                return f"{node.subgraph.handle(e)} ({shown(e.label)}{note})"

            singles = [
                (text(e), Action(ActionType.SELECT_ENTITIES, entities=(e,)))
                for e in reversed(node.subgraph.entities)
                if entity_key(e) not in node.exhausted
            ]
            group = selection_group(node) if self.group_option else ()
            if not group:
                return singles
            # IDs only, as the paper's LLM writes them: scored as a sum of token log-probs,
            # a list of labels after them would cost the group its chance (2-hop probes:
            # the group the model's first choice 1 of 6 times with labels, 4 of 6 without)
            handles = ", ".join(node.subgraph.handle(e) for e in group)
            return [(handles, Action(ActionType.SELECT_ENTITIES, entities=group)), *singles]
        if node.state is State.SELECTING_RELATION:
            return [
                (option_line(k, r), Action(ActionType.SELECT_RELATION, relation=r, relation_key=k))
                for k, r in zip(node.relation_keys, node.relation_options)
            ]
        raise ValueError(f"state {node.state} has no closed option list")

    # -- parsing (sampled decoding) -------------------------------------------
    def parse(self, node: Node, text: str, *, prefix: str = "") -> Action:
        raw = (prefix + text).strip()
        if node.state is State.DEFAULT:
            return self._parse_default(raw, forced=self.must_answer(node) or prefix.startswith("ANSWER"))
        if node.state in (State.SELECTING_ENTITIES, State.SELECTING_RELATION):
            parse = self._parse_entities if node.state is State.SELECTING_ENTITIES else self._parse_relation
            action = parse(node, raw, strip=True)
            if action.type is ActionType.INVALID and _ACTION_RE.match(raw):
                # a label that starts with an action word: "Think Like a Man", "answer"
                action = parse(node, raw, strip=False)
            return action if action.type is not ActionType.INVALID else Action(ActionType.INVALID, raw)
        return Action(ActionType.INVALID, raw)

    def _parse_default(self, raw: str, *, forced: bool) -> Action:
        m = _ACTION_RE.match(raw)
        if not m:
            if forced and raw:
                return Action(ActionType.ANSWER, _first_line(raw))
            return Action(ActionType.INVALID, raw)
        kind = m.group(1).upper().replace(" ", "_")
        opened = left_open(raw[: m.start(1)], raw[m.end(1): m.start(2)])
        body = without_emphasis(m.group(2), opened=opened)
        answer = without_emphasis(_first_line(m.group(2)), opened=opened)  # the first line's own marks
        again = _ECHO_RE.match(body)  # "ANSWER: ANSWER: x" when the prefix was echoed
        if again and again.group(1).upper().replace(" ", "_") == kind:
            body = again.group(2).strip()
            answer = without_emphasis(_first_line(body))
        elif again and kind == "ANSWER":  # "ANSWER: EXPAND_KG: E1": another action, not an answer
            return Action(ActionType.INVALID, raw)
        if kind == "ANSWER":
            return Action(ActionType.ANSWER, answer) if answer else Action(ActionType.INVALID, raw)
        if forced:
            return Action(ActionType.INVALID, raw)
        body = " ".join(body.split())
        if kind == "THINK":
            return Action(ActionType.THINK, body) if body else Action(ActionType.INVALID, raw)
        if kind == "EXPAND_KG":
            return Action(ActionType.EXPAND_KG, body)
        return Action(ActionType.INVALID, raw)

    def _parse_entities(self, node: Node, raw: str, *, strip: bool = True) -> Action:
        """The entities the reply chooses: its first line that chooses some (a line of prose
        before it, a code fence, are passed over), with the ids of the id-only lines right
        below it ("- E2" then "- E3" is both)."""
        m = _ACTION_RE.match(raw) if strip else None
        lines = _reply_lines(m.group(2) if m else raw)
        for i, line in enumerate(lines):
            # below the first line, ids alone ("Here is my choice:" then "E2"), never the ids
            # a line of explanation names ("None would help.\nE1 was expanded already")
            if i and not _ID_LINE.fullmatch(line):
                continue
            action = self._entities_in(node, raw, line)
            if action.type is ActionType.INVALID:
                continue
            chosen = list(action.entities)
            for below in lines[i + 1:]:
                if not _ID_LINE.fullmatch(below):
                    break
                more = self._entities_in(node, raw, below)
                chosen += [e for e in more.entities if e not in chosen]
            return Action(ActionType.SELECT_ENTITIES, entities=tuple(chosen))
        return Action(ActionType.INVALID, raw)

    def _entities_in(self, node: Node, raw: str, line: str) -> Action:
        """The entities one line of a reply chooses (INVALID: none); a list item's mark is
        dropped unless the line is a label as it is ("1. FC Köln")."""
        whole = self._entities_found(node, raw, _ECHOED_TASK.sub("", line))
        if whole.type is not ActionType.INVALID or not LIST_MARK.match(line):
            return whole
        return self._entities_found(node, raw, _ECHOED_TASK.sub("", LIST_MARK.sub("", line)))

    def _entities_found(self, node: Node, raw: str, body: str) -> Action:
        """The entities ``body`` names, by id or label (INVALID: none)."""
        chosen: list[Entity] = []
        sg = node.subgraph
        handles = {h.upper(): e for h, e in zip(sg.handles(), sg.entities)}
        # labels shared by several entities name none of them
        by_label: dict[str, list[Entity]] = {}
        for ent in sg.entities:
            by_label.setdefault(normalise_label(shown(ent.label)), []).append(ent)
        labels = {k: v[0] for k, v in by_label.items() if len(v) == 1 and k}
        whole = labels.get(normalise_label(body))
        if whole is not None and entity_key(whole) not in node.exhausted and re.sub(r"\b[A-Za-z]\d+\b|\band\b|[\s,;\[\]]", "", body):
            # the reply is exactly one entity's label ("Room E2"), not a list of ids
            return Action(ActionType.SELECT_ENTITIES, entities=(whole,))
        # an option copied whole, "E2 (label; already expanded: …)": the label's own
        # id-like words ("Q42") are not choices
        for ent in sorted(sg.entities, key=lambda x: -len(x.label)):
            if ent.label:
                pattern = rf"\b{re.escape(sg.handle(ent))}\s*\(\s*{re.escape(shown(ent.label))}(?:;[^)]*)?\)?"
                body = re.sub(pattern, sg.handle(ent), body, flags=re.I)
        # a reply that starts with ids chooses those ("E2, E5"), not the ids its explanation
        # names after them ("E2 (the mother of E1)", "E2, not E1"); else any id in it
        leading = _LEADING_IDS.match(body)
        for tok in re.findall(r"\b[A-Za-z]\d+\b", leading.group(1) if leading else body):
            e = handles.get(tok.upper())
            if e is not None and e not in chosen:
                chosen.append(e)
        if leading and not chosen:  # ids the subgraph does not have: not a choice of others named later
            return Action(ActionType.INVALID, raw)
        if not chosen:  # the model may answer with labels instead of ids
            for part in re.split(r"[,;\[\]]|\band\b", body):
                e = labels.get(normalise_label(part))
                if e is not None and e not in chosen:
                    chosen.append(e)
        # an exhausted entity is not offered (options()): a sample naming one would take one
        # of the k children only to end a dead end again
        chosen = [e for e in chosen if entity_key(e) not in node.exhausted]
        if not chosen:
            return Action(ActionType.INVALID, raw)
        return Action(ActionType.SELECT_ENTITIES, entities=tuple(chosen))

    def _parse_relation(self, node: Node, raw: str, *, strip: bool = True) -> Action:
        """The relation the reply chooses: on its first line that names one (a line of prose
        before it, a code fence, are passed over)."""
        m = _ACTION_RE.match(raw) if strip else None
        for i, line in enumerate(_reply_lines(m.group(2) if m else raw)):
            if i and not _KEY_LINE.fullmatch(line):  # below the first line, a key alone
                continue
            action = self._relation_in(node, raw, line)
            if action.type is not ActionType.INVALID:
                return action
        return Action(ActionType.INVALID, raw)

    def _relation_in(self, node: Node, raw: str, line: str) -> Action:
        """The relation one line of a reply names (INVALID: none)."""
        # "**P31**" in markdown; "~ similar_to" is "~similar_to" (the bare key walks forward)
        body = re.sub(r"~\s+", "~", _ECHOED_TASK.sub("", LIST_MARK.sub("", line)).strip().strip("*`"))
        options = list(zip(node.relation_keys, node.relation_options))
        by_key = {shown(k).casefold(): (k, r) for k, r in options}
        for k, r in options:
            # "directed_by" for the only option "~directed_by": models drop the inverse mark
            bare = shown(k).casefold().lstrip("~")
            if k.startswith("~") and bare not in by_key:
                by_key[bare] = (k, r)
        # labels shared by several options name none of them
        by_label: dict[str, list[tuple[str, Relation]]] = {}
        for k, r in options:
            by_label.setdefault(normalise_label(shown(r.display)), []).append((k, r))
        labels = {x: v[0] for x, v in by_label.items() if len(v) == 1 and x}
        # the key as the option line shows it, whole or before its " - label": a key's own
        # brackets, quotes, full stops or " - " ("directed by (film)", '"directed"', "dir - film")
        # are kept; then without the punctuation a reply puts around a key ("[P25].")
        hit = by_key.get(body.casefold())
        for part in ([body.rsplit(" - ", 1)[0]] if " - " in body else []) + [body.split(" - ")[0]]:
            hit = hit or by_key.get(part.strip().casefold())
        hit = hit or by_key.get(body.split(" - ")[0].strip().strip("[]()'\"`.,").casefold())
        if hit is None:  # the whole reply is one option's label ("mother of P2")
            hit = labels.get(normalise_label(body.strip(" ~.,:;[]()")))
        if hit is None:  # the first word that is an option's key
            for word in re.split(r"[\s,;]+", body):
                hit = by_key.get(word.strip("[]()'\"`.,:").casefold())
                if hit is not None:
                    break
        if hit is None:  # by label
            hit = labels.get(normalise_label(body.split(" - ")[-1].strip(" ~.,:;[]()")))
        if hit is None:
            return Action(ActionType.INVALID, raw)
        key, rel = hit
        return Action(ActionType.SELECT_RELATION, relation=rel, relation_key=key)

    # -- transitions -----------------------------------------------------------
    async def transition(self, node: Node, action: Action, usage: Usage) -> Node:
        child = await self._transition(node, action, usage)
        if action.cut:
            child.add_note("the LLM's output was cut at max_tokens" + (
                ": its last item, maybe unfinished, was not read"
                if action.type in (ActionType.SELECT_ENTITIES, ActionType.SELECT_RELATION) else ""))
        return child

    async def _transition(self, node: Node, action: Action, usage: Usage) -> Node:
        child = Node(
            id=next(self._ids),
            state=node.state,
            subgraph=node.subgraph,
            history=node.history,
            parent=node,
            action=action,
            depth=node.depth + 1,
            usage=usage,
            expanded=node.expanded,
            exhausted=node.exhausted,
        )
        t = action.type
        if t is ActionType.INVALID:
            child.invalid = True
            child.selected, child.relation_options = node.selected, node.relation_options
            child.relation_keys, child.relations_omitted = node.relation_keys, node.relations_omitted
            child.note = "unparseable or invalid LLM output"
            return child
        line = action.history_line(node.subgraph)
        child.history = node.history + (line,)
        if node.state is State.DEFAULT and t is ActionType.THINK:
            repeated = repeats_thought(node, action)
            if repeated or t not in allowed_default_actions(node):
                child.invalid, child.history = True, node.history
                child.note = "repeated thought" if repeated else "THINK right after THINK"
            return child
        if node.state is State.DEFAULT and t is ActionType.EXPAND_KG:
            child.state = State.SELECTING_ENTITIES
            return child
        if node.state is State.DEFAULT and t is ActionType.ANSWER:
            child.state, child.answer = State.DONE, action.text
            return child
        if node.state is State.SELECTING_ENTITIES and t is ActionType.SELECT_ENTITIES:
            rels, fresh, back = await self._fresh_relations(action.entities, node.subgraph, node.expanded, usage)
            child.selected = action.entities
            if not fresh:
                # A dead end: the entities are exhausted, and the retry of this invalid
                # node selects again among the others.
                child.invalid, child.history = True, node.history
                child.exhausted = node.exhausted | {entity_key(e) for e in action.entities}
                child.note = (
                    "the selected entities have no relations in the KG" if not rels.items
                    else "every relation of the selected entities was already expanded or walks back"
                )
                return child
            if back:
                child.note = "left out, they only walk back along known edges: " + ", ".join(back)
            child.state = State.SELECTING_RELATION
            child.relation_options = fresh
            child.relation_keys = tuple(self.kgs.option_keys(fresh))
            child.relations_omitted = rels.omitted
            return child
        if node.state is State.SELECTING_RELATION and t is ActionType.SELECT_RELATION:
            assert action.relation is not None
            got = await self.kgs.get_edges(node.selected, action.relation, usage)
            facts = [self._walked(e, action.relation, node.selected) for e in got.edges]
            omitted, together = omitted_marks(got, node.selected, action.relation.key, action.relation.kg)
            child.state = State.DEFAULT
            rel = action.relation
            child.expanded = node.expanded | {(entity_key(e), rel.kg, rel.key, rel.display) for e in node.selected}
            if len(node.selected) == 1 and not node.relations_omitted:
                # the options shown were all the entity's relations: once each is
                # expanded the entity is exhausted and no longer offered
                (only,) = node.selected
                done = {(k, kg) for i, kg, k, _ in child.expanded if i == entity_key(only)}
                if all((r.key, r.kg) in done for r in node.relation_options):
                    child.exhausted = node.exhausted | {entity_key(only)}
            child.subgraph = node.subgraph.extend(facts, omitted, together)
            known = set(node.subgraph.facts)
            child.new_facts = tuple(f for f in facts if f not in known)
            await self.kgs.link([f.target for f in child.new_facts], usage)
            dead = await self._dead_ends(child, usage)
            if dead:
                child.exhausted = child.exhausted | dead
            if not facts:
                child.note = "no edges"
            return child
        child.invalid = True
        child.note = f"action {t.value} is not allowed in state {node.state.value}"
        return child

    async def _fresh_relations(
        self, entities: Sequence[Entity], subgraph: Subgraph, expanded: frozenset, usage: Usage
    ) -> tuple[Relations, tuple[Relation, ...], list[str]]:
        """The KG's relations of ``entities``, those of them a selection could still
        expand (not expanded for every one of the entities on this path, not only walking
        back along known edges), and the keys left out as walking back.

        At most the KGs' ``max_relations`` are offered, and as many as that when the KG
        has them: it is asked for as many more as can be left out here (one per relation
        expanded for every entity, one per relation that may walk back), and what is
        over the cap after leaving them out is counted in the returned ``omitted``."""
        cap = self.kgs.max_relations
        # A relation already expanded for every selected entity would add nothing.
        done = {x[:3] for x in expanded}
        spent = {(kg, key) for _, kg, key in done if all((entity_key(e), kg, key) in done for e in entities)}
        rels = await self.kgs.get_relations(
            entities, usage, limit=cap + len(spent) + len(self._reversals(entities, subgraph))
        )
        fresh = tuple(r for r in rels.items if any((entity_key(e), r.kg, r.key) not in done for e in entities))
        fresh, back = await self._drop_walks_back(entities, fresh, subgraph, usage)
        if len(fresh) > cap:
            rels = Relations(rels.items, rels.omitted + len(fresh) - cap)
            fresh = fresh[:cap]
        return rels, fresh, back

    async def _dead_ends(self, node: Node, usage: Usage) -> frozenset[tuple[str, str]]:
        """The entity_key()s of the entities an expansion just reached that a selection could take
        nowhere new — e.g. a writer reached from his one film, whose only relation walks
        back to it. They are exhausted at once, so no selection offers them (before, the
        LLM picked them, the node was a dead end and the choice was retried: 47 of 3,600
        actions on MetaQA 3-hop). At most :attr:`screen_limit` new entities, in the order
        the expansion reached them, are checked (one ``get_relations`` each,
        concurrently); the others are still caught when selected."""
        if self.screen_limit <= 0:
            return frozenset()
        known = {entity_key(e) for e in node.parent.subgraph.entities} if node.parent is not None else set()
        new = list(dict.fromkeys(f.target for f in node.new_facts if entity_key(f.target) not in known))
        new = [e for e in new if entity_key(e) not in node.exhausted][: self.screen_limit]
        found = await gather(
            *(self._fresh_relations((e,), node.subgraph, node.expanded, usage) for e in new)
        )
        return frozenset(entity_key(e) for e, (_, fresh, _) in zip(new, found) if not fresh)

    async def _drop_walks_back(
        self, entities: Sequence[Entity], relations: tuple[Relation, ...], subgraph: Subgraph, usage: Usage
    ) -> tuple[tuple[Relation, ...], list[str]]:
        """Leave out the relations that would only walk back along edges the subgraph
        already has — from a film reached by "~directed_by", "directed_by" returns to its
        director and adds nothing (the 1.5B model picked it for "who acted in the films
        directed by X" because the query says "directed"). Only a relation that reverses
        an edge into a selected entity can do that; each is checked with one KG call, once
        a question for one with more edges than a call shows (a hub: "~has_genre" from
        Drama read its 100,000 edges at every check, 2-4 times a question)."""
        reverses = self._reversals(entities, subgraph)
        keys = frozenset(entity_key(e) for e in entities)
        suspects = [
            r for r in relations
            if (r.kg, r.id, r.inverse) in reverses and (r.kg, r.key, keys) not in self._more_than_shown
        ]
        if not suspects:
            return relations, []
        known = {(e.relation.kg, e.subject.id, e.relation.id, e.object.id) for e in subgraph.edges()}
        found = await gather(*(self.kgs.get_edges(entities, r, usage) for r in suspects))
        self._more_than_shown.update((r.kg, r.key, keys) for r, got in zip(suspects, found) if got.omitted)
        back = [
            r for r, got in zip(suspects, found)
            if not got.omitted and all((e.relation.kg, e.subject.id, e.relation.id, e.object.id) in known for e in got.edges)
        ]
        return tuple(r for r in relations if r not in back), [r.key for r in back]

    @staticmethod
    def _reversals(entities: Sequence[Entity], subgraph: Subgraph) -> set[tuple[str, str, bool]]:
        """``(kg, relation id, inverse)`` of the relations that reverse an edge of the
        subgraph into one of ``entities``: the ones that may only walk back."""
        keys = {entity_key(e) for e in entities}
        return {(f.relation.kg, f.relation.id, not f.relation.inverse) for f in subgraph.facts if entity_key(f.target) in keys}

    def _walked(self, edge, relation: Relation, selected: Sequence[Entity]) -> Fact:
        """Turn a forward KG edge into the fact as walked from the selected entity.

        With several KGs the edge may start at a linked copy of a selected entity (same
        thing, other KG); the fact is attached to the entity as the subgraph knows it."""
        source, target = (edge.object, edge.subject) if relation.inverse else (edge.subject, edge.object)
        if source not in selected:
            for e in selected:
                if source in self.kgs.copies(e, self.kgs.by_name.get(source.kg, self.kgs.kgs[0])):
                    source = e
                    break
        return Fact(source, relation, target)
