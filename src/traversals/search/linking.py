"""``initialize(q)``: mentions → KG candidates → the LLM picks one per mention (App. B.3).

Mentions come from, in order: ``topic_entities`` given by the caller (a dataset's gold
topic entity), ``[...]`` spans in the question (MetaQA's convention), or an LLM call
with the ``extract_entities`` prompt. Of the names the LLM gives, those written in the
question come first, each as the question writes it and a KG labels it (widened to
"Jayne Mansfield's Car" from "Jayne Mansfield", narrowed to "Song of the Sea" from "The
film script for Song of the Sea"); when none of them is in a KG, the question's
name-like spans (:func:`name_spans`) that a KG has as a label, else the KG labels it
writes in lowercase (:meth:`Linker.labels_written`: "sunandha", "the congress"); a name not in the
question (a small model may answer instead: "1953" for "what year was A Midsummer
Night's Dream released") only when all of these found nothing.

Each mention is searched in every KG. A mention with exactly one exact-label candidate
is linked without asking the LLM; otherwise the LLM picks among the candidates (by
option probability when the backend can score, else by sampling and parsing an id).
Mentions with no candidates are dropped.

With several KGs the entities chosen are linked (:meth:`KGSet.merge
<traversals.search.kgset.KGSet.merge>`) and one thing found in two KGs is one entity,
the first KG's, whose relations come from both; another KG's pick for the same mention
is its copy there when no explicit link says otherwise.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..errors import BadInput
from ..kg.base import Entity
from ..llm.base import LLM, Usage
from .choices import option_probs
from .kgset import KGSet
from .machine import find_label, mentions_label, normalise_label
from .subgraph import shown
from .templates import PromptSet, default_prompts

_BRACKETS = re.compile(r"\[([^\[\]]+)\]")
MAX_MENTIONS = 6
CANDIDATES = 5
# name_spans: lowercase words that may sit inside a name ("Beyond a Reasonable Doubt")
_CONNECTORS = frozenset("a an and of the from in on to for with at by de la le les du des del von van der y & 's".split())
# a capitalised first word that only starts the sentence ("Which company ...")
_OPENERS = frozenset(
    "which what who whom whose where when why how in on at is are was were did does do name list give tell "
    "for of from to and can could has have had show find".split()
)
_POSSESSIVE = re.compile(r"['’]s?$")
MAX_SPAN_WORDS = 8
MAX_SPAN_SEARCHES = 24
MAX_RESPAN_SEARCHES = 3
Found = dict[str, list[Entity]]  # a question's KG searches by their text


def bracketed_mentions(question: str) -> list[str]:
    return [m.strip() for m in _BRACKETS.findall(question) if m.strip()]


def without_brackets(question: str) -> str:
    """The question as an LLM reads it: MetaQA's ``[entity]`` marks dropped, the names kept."""
    return _BRACKETS.sub(r"\1", question)


def parse_mentions(text: str, question: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip("\"'`")
        for part in [line] if "," not in line or line in question else line.split(","):
            part = part.strip().strip("\"'`.")
            if part and part.casefold() not in {m.casefold() for m in out} and len(part) < 120:
                out.append(part)
    return out[:MAX_MENTIONS]


def name_spans(question: str) -> list[str]:
    """Spans of the question that look like names, longest first: runs of capitalised
    words, numbers or ``snake_case`` tokens (MetaQA's and PathQuestion's ids), with
    lowercase connectors inside ("Beyond a Reasonable Doubt"), and every shorter run of
    those that starts and ends on such a word ("Paris and Rouen" -> "Paris", "Rouen"),
    each ending in a possessive also without it ("Bob Dylan's" -> "Bob Dylan").
    The question's opening word is left out when it only opens the sentence ("Which").
    A comma inside a span is kept ("See No Evil, Hear No Evil", "Washington, D.C.")."""
    written = [w.strip("?;:\"()") for w in without_brackets(question).split()]
    written = [w for w in written if w.strip(",")]
    words = [w.strip(",") for w in written]

    def namelike(i: int) -> bool:
        w = words[i]
        if i == 0 and w.casefold() in _OPENERS:
            return False
        return w[0].isupper() or w[0].isdigit() or "_" in w

    def joins(i: int) -> bool:
        """A connector followed, after more connectors, by a name-like word ("of the Sea")."""
        while i < len(words) and words[i].casefold() in _CONNECTORS:
            i += 1
        return i < len(words) and namelike(i)

    runs: list[list[int]] = []
    run: list[int] = []
    for i, w in enumerate(words):
        if namelike(i) or (run and joins(i)):
            run.append(i)
        else:
            if run:
                runs.append(run)
            run = []
    if run:
        runs.append(run)
    spans: list[tuple[int, int, str]] = []
    for run in runs:
        run = run[:MAX_SPAN_WORDS]
        for a in range(len(run)):
            for b in range(a, len(run)):
                if namelike(run[a]) and namelike(run[b]) and not (a == b and words[run[a]].casefold() in _CONNECTORS):
                    text = " ".join(written[run[a]:run[b]] + [words[run[b]]]).lstrip(",")
                    spans.append((b - a, -run[a], text))
    spans.sort(reverse=True)
    out: list[str] = []
    for _, _, text in spans:
        # a possessive ends the name before it: "Bob Dylan's" -> "Bob Dylan" too
        for t in (text, _POSSESSIVE.sub("", text)):
            if t and t not in out:
                out.append(t)
    return out


#: lowercase words of questions that name nothing (the words that ask, point and relate)
_FUNCTION_WORDS = _OPENERS | _CONNECTORS | frozenset(
    "the this that these those there their them they his her its it he she was were been being be not no yes "
    "one ones also than then into onto about over under after before during between same other any some all "
    "many much more most few each every both either neither whose film films movie movies book books "
    "person people someone something thing things kind type year years or nor but if as so".split()
)
#: what a question asks for or goes through, not what it starts from: dropped from the model's names
#: when it copies them beside a name ("who are the actors in pee-wee's big adventure")
_ASKING_WORDS = _FUNCTION_WORDS | frozenset(
    "actor actors actress director directors writer writers screenwriter screenwriters creator creators script "
    "genre genres language languages release date dates star stars cast producer producers author authors "
    "mother father son daughter child children parent parents spouse wife husband couple sibling siblings "
    "nationality religion gender sex birthplace country city".split()
)
MIN_WORD_CHARS = 4
MAX_WORD_SEARCHES = 6
#: labels a word's search brings to compare with the question (more than a mention's CANDIDATES:
#: "adventure" is in many titles, and the one the question writes is one of them)
WORD_CANDIDATES = 25


def content_words(question: str) -> list[str]:
    """The question's lowercase words that may be part of a name written in lowercase
    ("sunandha", "adventure" of "pee-wee's big adventure"): not a word that asks, points or
    relates, at least :data:`MIN_WORD_CHARS` characters, a possessive's 's dropped;
    longest first (a long word is the rarer)."""
    words = [_POSSESSIVE.sub("", w.strip("?,;:\"()")) for w in without_brackets(question).split()]
    out = [w for w in words if len(w) >= MIN_WORD_CHARS and w[0].islower() and w.casefold() not in _FUNCTION_WORDS
           and "_" not in w]  # snake_case ids are name_spans already
    return sorted(dict.fromkeys(out), key=len, reverse=True)


def _written_lowercase(question: str, mention: str) -> bool:
    """Does the question write ``mention`` (in any case, as whole words) starting lowercase?
    A model may capitalise what the question does not ("Congress" for "the congress")."""
    found = find_label(question, mention)
    return found is not None and found.group(0)[:1].islower()


def checked_question(question: object) -> str:
    """``question`` when it is a string, else :class:`BadInput` (``ask(None)`` failed inside
    the linking with a TypeError)."""
    if not isinstance(question, str):
        raise BadInput(f"the question is a string, got {type(question).__name__}")
    return question


def checked_topics(question: object, topic_entities: object) -> list[str]:
    """The caller's topic entities as a list of names (one name given as a string is one
    entity: it was read letter by letter, and every letter linked); :class:`BadInput` for
    anything else, and for a question that is not a string."""
    checked_question(question)
    if topic_entities is None:
        return []
    if isinstance(topic_entities, str):
        return [topic_entities] if topic_entities.strip() else []
    if isinstance(topic_entities, (bytes, dict)) or not isinstance(topic_entities, (list, tuple)):
        raise BadInput(f"topic_entities is a list of entity names, got {type(topic_entities).__name__}")
    if bad := [t for t in topic_entities if not isinstance(t, str)]:
        raise BadInput(f"topic_entities is a list of entity names (strings), and holds {bad[0]!r}")
    return [t for t in topic_entities if t.strip()]


class Linker:
    def __init__(self, llm: LLM, kgs: KGSet, *, constrained: bool, prompts: PromptSet | None = None) -> None:
        self.llm = llm
        self.kgs = kgs
        self.constrained = constrained
        self.prompts = prompts or default_prompts()

    async def initialize(self, question: str, usage: Usage, topic_entities: Sequence[str] | None = None) -> list[Entity]:
        mentions = checked_topics(question, topic_entities) or bracketed_mentions(question)
        found: Found = {}  # this question's searches, each asked of the KGs once
        if mentions:
            linked, chosen = await self._link_all(question, mentions, usage, found)
        else:
            linked, chosen = await self._link_extracted(question, usage, found)
        # several KGs: one node per thing named, linked to its copies in the other KGs
        return await self.kgs.merge(linked, usage, together=chosen)

    async def _link_all(self, question: str, mentions: list[str], usage: Usage, found: Found) -> tuple[list[Entity], list[list[Entity]]]:
        linked: list[Entity] = []
        chosen: list[list[Entity]] = []
        for mention in mentions:
            chosen.append(await self.link(question, mention, usage, found))
            for entity in chosen[-1]:
                if entity not in linked:
                    linked.append(entity)
        return linked, chosen

    async def _link_extracted(self, question: str, usage: Usage, found: Found) -> tuple[list[Entity], list[list[Entity]]]:
        """The names the LLM finds in the question, in this order of trust: those written in
        the question; else the question's name-like spans that a KG has as a label (the LLM
        named nothing the KGs have: "father" for "the kid of father of princess_tenagnework");
        else, as a last resort, the first two names the LLM gave that are not in the question
        (a spelling of its own, or an answer: the search starts there)."""
        mentions = await self.extract(question, usage)
        asked = normalise_label(question)
        written = [await self._as_written(question, m, usage, found) for m in mentions if normalise_label(m) in asked]
        # words that name nothing ("The films") are no name; a word the question asks with
        # ("actors", "director") copied beside a name is no second start
        written = [m for m in written if not set(normalise_label(m).split()) <= _FUNCTION_WORDS]
        asking = [m for m in written if set(normalise_label(m).split()) <= _ASKING_WORDS]
        if len(asking) < len(written):
            written = [m for m in written if m not in asking]
        linked, chosen = await self._link_all(question, written, usage, found)
        if not linked:
            linked, chosen = await self._link_all(question, await self.spans_in_kg(question, usage, found), usage, found)
        if not linked:
            # not the prompt's own examples echoed ("The Last Emperor", "Paris" for a question
            # with no name the model saw): those name nothing the question asks about
            examples = normalise_label(self.prompts.render("extract_entities", query=""))
            unwritten = [m for m in mentions if normalise_label(m) not in asked
                         and not mentions_label(examples, normalise_label(m))]
            linked, chosen = await self._link_all(question, unwritten[:2], usage, found)
        return linked, chosen

    async def _search(self, text: str, usage: Usage, found: Found) -> list[Entity]:
        """The KGs' candidates for ``text``, searched once a question."""
        if text not in found:
            found[text] = await self.kgs.search(text, usage, limit=CANDIDATES)
        return found[text]

    async def _is_label(self, text: str, usage: Usage, found: Found) -> bool:
        key = normalise_label(text)
        return any(normalise_label(c.label) == key for c in await self._search(text, usage, found))

    async def _as_written(self, question: str, mention: str, usage: Usage, found: Found) -> str:
        """The name as the question writes it and a KG labels it: the longest name-like
        span around ``mention`` that is a KG label ("Jayne Mansfield's Car" for "Jayne
        Mansfield"), for a mention in lowercase also a label the question writes around it
        (:meth:`labels_written`: "Pee-wee's Big Adventure" for "adventure"); else
        ``mention`` if it is one; else the longest span inside it that is ("Song of the Sea"
        for "The film script for Song of the Sea"); else ``mention`` (at most
        :data:`MAX_RESPAN_SEARCHES` searches each way)."""
        key = normalise_label(mention)
        spans = name_spans(question)
        wider = [s for s in spans if key in normalise_label(s) and len(normalise_label(s)) > len(key)]
        narrower = [s for s in spans if normalise_label(s) in key and len(normalise_label(s)) < len(key)]
        for span in wider[:MAX_RESPAN_SEARCHES]:
            if await self._is_label(span, usage, found):
                return span
        if _written_lowercase(question, mention):  # no name-like span holds it: a label written around it
            for label in await self.labels_written(question, usage, found):  # "adventure": "Pee-wee's Big Adventure"
                if mentions_label(normalise_label(label), key) and len(normalise_label(label)) > len(key):
                    return label
        for span in ([mention] if narrower else []) + narrower[:MAX_RESPAN_SEARCHES]:
            if await self._is_label(span, usage, found):
                return span
        return mention

    async def extract(self, question: str, usage: Usage) -> list[str]:
        """The names the ``extract_entities`` prompt finds (one greedy LLM call)."""
        gen = await self.llm.generate(self.prompts.render("extract_entities", query=question), n=1, temperature=0.0, max_tokens=64)
        usage.add_generation(gen)
        return parse_mentions(gen.texts[0] if gen.texts else "", question)

    async def spans_in_kg(self, question: str, usage: Usage, found: Found) -> list[str]:
        """The question's :func:`name_spans` that some KG has as a label, longest first, none
        inside a longer one taken (at most :data:`MAX_SPAN_SEARCHES` of them looked up); when
        none is, the KG labels the question writes in lowercase (:meth:`labels_written`).
        One already searched this question is not asked of the KGs again."""
        taken = await self._labels_among(name_spans(question)[:MAX_SPAN_SEARCHES], usage, found)
        return taken or await self.labels_written(question, usage, found)

    async def labels_written(self, question: str, usage: Usage, found: Found) -> list[str]:
        """KG labels written in the question, found from its lowercase words ("what genre of
        movie is the congress": "The Congress"; "who are the actors in pee-wee's big
        adventure": "Pee-wee's Big Adventure"): the labels a search for each of its
        :func:`content_words` brings (at most :data:`MAX_WORD_SEARCHES` words, up to
        :data:`WORD_CANDIDATES` labels each) that the question holds as whole words, the
        longest first, none inside one taken."""
        asked = normalise_label(question)
        written: dict[str, str] = {}
        for word in content_words(question)[:MAX_WORD_SEARCHES]:
            key = f"{word}\x00wide"  # a wider search than a mention's, memoised apart
            if key not in found:
                found[key] = await self.kgs.search(word, usage, limit=WORD_CANDIDATES)
            for c in found[key]:
                label = normalise_label(c.label)
                if len(label) >= MIN_WORD_CHARS and mentions_label(asked, label) \
                        and not set(label.split()) <= _FUNCTION_WORDS:
                    written.setdefault(label, c.label)
        # a label of what the question asks with ("actors": a tag) only when it names nothing else
        named = [label for label in written if not set(label.split()) <= _ASKING_WORDS] or list(written)
        taken: list[str] = []
        for label in sorted(named, key=len, reverse=True):
            if not any(mentions_label(t, label) for t in taken):
                taken.append(label)
        return [written[t] for t in taken[:MAX_MENTIONS]]

    async def _labels_among(self, spans: Sequence[str], usage: Usage, found: Found) -> list[str]:
        taken: list[str] = []
        for span in spans:
            if any(normalise_label(span) in normalise_label(t) for t in taken):
                continue
            if await self._is_label(span, usage, found):
                taken.append(span)
            if len(taken) == MAX_MENTIONS:
                break
        return taken

    async def link(self, question: str, mention: str, usage: Usage, found: Found | None = None) -> list[Entity]:
        """The best candidate for ``mention`` in each KG (several KGs: one per KG, and none
        from a KG with only partial matches when another KG has the name exactly)."""
        candidates = await self._search(mention, usage, {} if found is None else found)
        if not candidates:
            return []
        by_kg: dict[str, list[Entity]] = {}
        for c in candidates:
            by_kg.setdefault(c.kg, []).append(c)
        named = {kg for kg, cands in by_kg.items()
                 if any(normalise_label(c.label) == normalise_label(mention) for c in cands)}
        chosen = []
        for cands in by_kg.values():
            exact = [c for c in cands if normalise_label(c.label) == normalise_label(mention)]
            if named and not exact:
                # another KG has the name itself: partial matches here ("Inception Records"
                # for "Inception") are other things; a copy under another label is found
                # by an explicit link when the question's entity is linked
                continue
            cased = [c for c in exact if " ".join(c.label.split()) == " ".join(mention.split())]
            if len(exact) == 1 or len(cands) == 1:
                chosen.append((exact or cands)[0])
            elif len(cased) == 1 and mention != mention.lower():
                # "Bruno Ganz" the actor, not "bruno ganz" the tag: a name written with capitals
                # is the one written so (MetaQA's kb.txt has 3,057 names twinned in lower case,
                # and the LLM was asked to tell two identical-looking options apart)
                chosen.append(cased[0])
            else:
                chosen.append(await self._choose(question, mention, exact or cands, usage))
        return chosen

    async def _choose(self, question: str, mention: str, cands: list[Entity], usage: Usage) -> Entity:
        ids = [f"C{i + 1}" for i in range(len(cands))]
        lines = "\n".join(
            f"{i}: {shown(c.label)}" + (f" - {shown(c.description)}" if c.description else "") for i, c in zip(ids, cands)
        )
        prompt = self.prompts.render("link_entity", query=question, mention=mention, options=lines)
        if self.constrained:
            probs = await option_probs(self.llm, prompt, ids, usage)
            return cands[max(range(len(cands)), key=lambda i: probs[i])]
        gen = await self.llm.generate(prompt, n=1, temperature=0.0, max_tokens=8)
        usage.add_generation(gen)
        m = re.search(r"C(\d+)", gen.texts[0] if gen.texts else "")
        if m and 1 <= int(m.group(1)) <= len(cands):
            return cands[int(m.group(1)) - 1]
        return cands[0]
