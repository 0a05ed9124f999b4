"""Training questions without labels: random relation walks over the KG, put into words by the LLM.

RwT's roll-out model (:mod:`traversals.search.rwt.valuemodel`) learns from questions with
known answers. A user with their own KG rarely has such questions; the KG itself can make
them. ``traversals train-value --synthetic N`` (:mod:`.training`):

1. draws entities at random (:class:`~traversals.kg.base.EntitySampler`);
2. walks 1 … ``max_hops`` relations from each (hop counts in turn), at random among the
   relations that reach an entity the walk has not met (or come back on a round trip the
   KG stores both ways, :func:`~traversals.search.rwt.state.comes_back`), keeping walks
   whose states stay small (a question whose answer is 500 films is not one a person asks);
3. has the LLM say, once per relation the walks took, how a person asks for what it
   leads to, in both directions — a question ("Who directed {}?") and a noun phrase ("the
   director of {}"), then the reverse ("What films did {} direct?", "the films directed by
   {}"), each question also starting with the entity ("{} was directed by whom?") —
   shown three of the KG's own edges (``prompts/relation_phrases.txt``, worked
   examples on other domains; a few variants, the first greedy), and each direction's
   first question again in other everyday words ("What genre is {}?" → "What kind of
   story is {} about?"; ``prompts/question_paraphrase.txt``), and which other words a
   question may use for it ("type, category, classification" for *has genre*;
   ``prompts/relation_synonyms.txt``, read by the value model through
   :func:`listed_words`);
4. keeps a phrasing only if the LLM, asked which of an example entity's relations answers
   it (``prompts/relation_check.txt``; the example with the most relations, since one with a
   single relation passes anything), ranks the relation first, against what it prefers
   when nothing is asked (contextual calibration), and a question only if it reads as one
   (the best-scored phrasing if none passes);
5. composes each walk's question from them, innermost hop first: "When was {} released?"
   ∘ "the films directed by {}" ∘ "the director of {}" gives "When was the films directed
   by the director of [The Confessional] released?". Half the time a round trip (a relation,
   then back along it) is said as one unit instead, in fixed English forms around the head
   nouns of the two hops' phrases ("the films that share directors with {}", "the films with
   the same director as {}", "the co-writers of {}"; :data:`ROUND_TRIP_PHRASES`). A hop
   against the KG's edges is also asked by its entity's role ("[X] was the director of
   which films?"; :data:`ROLE_QUESTIONS`), and 30 % of the questions name their entity
   with its kind ("Who directed the film [X]?"): the kind most of the entity's relations
   give it, read from the head nouns of the LLM's phrases that lead to it ("the films
   directed by {}" → film, movie; :func:`entity_kinds`).

Why this shape (docs/rwt.md, "Training without labelled questions"): asked to write a
whole multi-hop question from a walk, the 1.5B model mostly described one hop of it or
named the walk's entities; asked for one direction of a relation at a time, it often wrote
the other direction ("What films did {} direct?" for *directed by*); asked for both at once
it tells them apart; asked to phrase a round trip as one unit, it wrote one hop of it ("Who
directed the film {}?"), hence the fixed forms — ordinary English for a round trip, written
by us knowing that benchmark questions (MetaQA's among them) say round trips this way (and
name their entity's kind, and ask by role, as people do). The
walk's last entities are the gold answers. No benchmark question or label is read. The
phrasings are kept in a JSON file (read back by a rerun, so the LLM is asked once per
relation) and every question with its walk in a JSONL file, to be read before a model is
trained on them.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from ..errors import BadInput
from ..kg.base import Edge, Entity, Relation
from ..llm.base import LLM, Usage
from ..search.choices import calibrate, option_probs
from ..search.kgset import KGSet
from ..search.machine import option_line
from ..search.rwt.state import MemoEdges, PathNode, offered_relations, step
from ..search.rwt.valuemodel import UNSPACED, ListedWords, singular
from ..search.templates import render
from .runfiles import write_json_atomic

SLOT = "{}"


@dataclass
class SyntheticConfig:
    questions: int = 500  # questions to make
    max_hops: int = 3
    max_answers: int = 20  # a walk ending on more entities is dropped
    max_width: int = 30  # … and one passing through more
    max_relations: int = 50  # relations considered at each step
    draws: int = 5  # entities drawn per question wanted (walks fail: dead ends, huge fan-outs)
    #: how many times the draw is walked while questions are wanted: a small KG has fewer
    #: entities to start from than questions wanted (PathQuestion's PQ-2H KB: 1,056 entities,
    #: 539 walks in one pass, for 85 of its two-hop relation paths)
    passes: int = 3
    variants: int = 3  # phrasings asked per relation (the first greedy, the others sampled)
    #: each direction's first question is also said in other everyday words this many times
    #: (the first greedy, the others sampled; :meth:`SyntheticQuestions.paraphrase`): the
    #: phrasing prompt's questions repeat the relation's own words ("What genre is {}?"),
    #: a person also asks "What kind of film is {}?". 0: off
    paraphrases: int = 4
    temperature: float = 0.7  # of the sampled variants
    round_trips: float = 0.5  # share of round trips (a relation, then back) said as one unit
    typed_mentions: float = 0.3  # share of questions naming their entity with its kind ("the film [X]")
    #: a walk goes on from what a relation reached only by relations at least this share of
    #: that relation's ends have (:meth:`SyntheticQuestions.usual_next`): a year reached by
    #: "release year" that is also a film's title ("2012") does not lead on to "directed by".
    #: On MetaQA 7 % of the years are titles, while 15-17 % of the films have a language (0.25
    #: cut the walks through "in language" from 45 of 1,500 to 9)
    usual_share: float = 0.1
    usual_after: int = 10  # … once this many of the relation's ends were looked at
    #: the check divides each relation's probability by its probability with no question
    #: (contextual calibration, :func:`~traversals.search.choices.calibrate`): on PathQuestion's
    #: KB the 1.5B model gave *gender* 0.82 for "Who are the parents of [Ludwig II of
    #: Bavaria]?" and every question about him, so no *parents* question passed
    calibrated_check: bool = True
    seed: int = 0


@dataclass
class Phrasing:
    """How a person asks for what one relation leads to; ``{}`` is where it starts."""

    questions: list[str] = field(default_factory=list)  # "When was {} released?"
    phrases: list[str] = field(default_factory=list)  # "the release year of {}"
    #: each phrasing the LLM wrote -> the probability the LLM gives the relation back when
    #: asked which relation answers it (:meth:`SyntheticQuestions.check`)
    checked: dict[str, float] = field(default_factory=dict)
    #: other words a question may use for the relation, as the LLM listed them (a forward
    #: relation's only; None: not asked yet — phrasings files of earlier versions lack them)
    synonyms: list[str] | None = None


@dataclass
class SyntheticQuestion:
    """A walk and the question composed for it (a line of the questions file)."""

    index: int  # position in the seeded draw
    start: dict  # the first entity, as :meth:`Entity.ref` gives it
    path: list[str]  # relation keys walked
    path_text: str
    answers: list[str]  # labels of the walk's last entities
    question: str

    def entity(self) -> Entity:
        return Entity(id=self.start["id"], label=self.start["label"], kg=self.start.get("kg", ""))


#: the lines of a phrasing reply (the first continues the ``Question:`` prefix)
LINES = ("question", "question starting with {}", "phrase",
         "reverse question", "reverse question starting with {}", "reverse phrase")


#: the questions :meth:`SyntheticQuestions.paraphrase` adds, by direction
PARAPHRASED = ("question in other words", "reverse question in other words")
#: the questions of a direction besides its first (checked and kept like it)
OTHER_QUESTIONS = ("question starting with {}", "question in other words")
#: the paraphrase prompt's reply starts by repeating the question (``prompts/question_paraphrase.txt``
#: shows the examples; the 1.5B model paraphrased the examples when the question ended the prompt)
PARAPHRASE_PREFIX = "Question: {question}\nIn other words:"
#: the reply to ``prompts/relation_synonyms.txt`` (comma-separated words) follows this
SYNONYMS_PREFIX = "\nRelation: {relation}\nWords:"


def asks_for_a_person(question: str) -> bool:
    return re.search(r"\bwhom?\b", question, re.IGNORECASE) is not None


#: the words a question may start with when it does not end with "?" ("Who died from {}")
_QUESTION_STARTS = frozenset({"who", "whom", "whose", "what", "which", "when", "where", "why", "how", "in", "is", "are",
                              "was", "were", "do", "does", "did", "can", "has", "have", "had", "name", "list"})


#: how a question ends: "?", and the full-width "？" (Chinese, Japanese) and Arabic "؟"
QUESTION_MARKS = ("?", "\uff1f", "\u061f")


def reads_as_question(text: str) -> bool:
    """Whether ``text`` is a question: it ends with a question mark (:data:`QUESTION_MARKS`)
    or starts with a question word. On PathQuestion's KB the 1.5B model wrote "{} and his
    parents are related to each other." as the question for *parents*, and the check kept it
    as the best-scored one."""
    words = text.strip().split()
    return bool(words) and (text.rstrip().endswith(QUESTION_MARKS) or words[0].casefold().strip(",") in _QUESTION_STARTS)


def has_another_word(text: str) -> bool:
    """Whether a phrasing has a word besides its ``{}``: two words apart, or a character of a
    script written without spaces ("{}的导演是谁？" is one "word" to ``split``, and had been
    dropped, so a KG whose LLM phrases in Chinese made no question)."""
    return len(text.split()) >= 2 or re.search(f"[{UNSPACED}]", text) is not None


def parse_phrasing(reply: str) -> dict[str, str]:
    """The lines of the LLM's reply by name (:data:`LINES`), each kept only if it has exactly
    one ``{}`` and another word, and a question line only if it :func:`reads_as_question`."""
    out: dict[str, str] = {}
    for n, line in enumerate(ln.strip() for ln in reply.strip().split("\n") if ln.strip()):
        name, _, text = line.partition(":")
        if n == 0:
            name, text = "question", line
        name, text = name.strip().casefold(), text.strip()
        if (name in LINES and name not in out and text.count(SLOT) == 1 and has_another_word(text)
                and ("question" not in name or reads_as_question(text))):
            out[name] = text
    return out


#: how a last hop's noun phrase becomes a question, besides the LLM's own question forms
#: ("What is the genre of [X]?" is a 1-hop question; without this, "the genre of" would
#: only ever appear in the inner hops of longer ones)
PHRASE_QUESTIONS = ("What is {}?", "What are {}?", "Which are {}?", "Name {}.")


#: how a round trip (a relation, then back along it: a film's director, then that director's
#: films) is said as one unit; ``{result}`` and ``{middle}`` are head nouns taken from the two
#: hops' noun phrases (:func:`head_noun`), ``{middle_one}`` the middle one in the singular
ROUND_TRIP_PHRASES = ("the {result} that share {middle} with {{}}", "the {result} with the same {middle_one} as {{}}",
                      "the other {result} of the {middle} of {{}}")
#: … and, when the walk first goes against the KG's edges (from a person to their works), "co-"
CO_PHRASE = "the co-{result} of {{}}"
#: how a hop against the KG's edges is also asked, from the role its entity plays in the edge:
#: "[X] was the director of which films?" (``{role}`` and ``{result}`` are head nouns of the
#: relation's two noun phrases, :func:`role_questions`)
ROLE_QUESTIONS = ("{{}} is the {role} of which {result}?", "{{}} was the {role} of which {result}?")
_NOT_NOUN = frozenset({"of", "by", "with", "in", "who", "whom", "which", "that", "for", "from", "on", "at", "as",
                       "to", "{}", "and", "or"})


def head_noun(phrase: str) -> str | None:
    """The head noun of a noun phrase the LLM wrote ("the films directed by {}" → "films",
    "the release year of {}" → "release year"), or None when it does not start with an
    article or has no noun before ``{}``."""
    words = phrase.strip().rstrip("?.!").split()
    if len(words) < 2 or words[0].casefold() not in ("the", "a", "an"):
        return None
    noun: list[str] = []
    for w, after in zip(words[1:], words[2:] + [""]):
        participle = w.casefold().endswith(("ed", "en")) or (w.casefold().endswith("ing") and after != "of")
        if w.casefold() in _NOT_NOUN or SLOT in w or (noun and participle):  # "the IMDb rating of" is a noun
            break
        noun.append(w)
    return " ".join(noun) if 0 < len(noun) <= 3 else None


def listed_words(phrasings: dict[str, Phrasing]) -> ListedWords:
    """What the phrasings say about each relation's words, by relation id: the synonyms the
    LLM listed, and the head nouns of both directions' phrases in the singular ("the films
    directed by {}" → ``film`` for ``directed_by``), for :func:`~traversals.search.rwt.valuemodel.synonym_lexicon`."""
    called: dict[str, list[str]] = {}
    for key, ph in phrasings.items():
        nouns = called.setdefault(key.lstrip("~"), [])
        for noun in filter(None, map(head_noun, ph.phrases)):
            if (word := singular(noun.split()[-1].casefold())) not in nouns:
                nouns.append(word)
    synonyms = {key: list(ph.synonyms) for key, ph in phrasings.items() if ph.synonyms and not key.startswith("~")}
    return ListedWords(synonyms, called)


def first_noun(ph: Phrasing) -> str | None:
    """The head noun of the first of ``ph``'s noun phrases that has one (:func:`head_noun`)."""
    return next((n for n in map(head_noun, ph.phrases) if n), None)


def singular_noun(noun: str) -> str:
    """``noun`` with its last word in the singular ("release years" → "release year")."""
    *first, last = noun.split()
    return " ".join(first + [singular(last)])


def plural(noun: str) -> str:
    """``noun`` in the plural (its last word; a word :func:`singular` changes is already plural)."""
    *first, last = noun.split()
    if singular(last) != last or last.casefold() in ("people", "children", "media", "data"):
        return noun
    if last.endswith("y") and last[-2:-1] not in tuple("aeiou"):
        last = last[:-1] + "ies"
    elif last.endswith(("s", "x", "ch", "sh")):
        last += "es"
    else:
        last += "s"
    return " ".join(first + [last])


def round_trip(there: Phrasing, back: Phrasing, *, co: bool) -> Phrasing:
    """A phrasing of a relation followed by its reverse, as one unit (:data:`ROUND_TRIP_PHRASES`;
    ``co``: also :data:`CO_PHRASE`); no phrase when either hop's head noun cannot be read."""
    middle, result = first_noun(there), first_noun(back)
    if middle is None or result is None:
        return Phrasing()
    names = {"result": plural(result), "middle": plural(middle), "middle_one": singular(middle)}
    return Phrasing(phrases=[f.format(**names) for f in ROUND_TRIP_PHRASES + ((CO_PHRASE,) if co else ())])


def role_questions(forward: Phrasing, reverse: Phrasing) -> list[str]:
    """Questions for the reverse of a relation (from the entity an edge ends at) by the
    entity's role in it (:data:`ROLE_QUESTIONS`): the role is the head noun of the forward
    noun phrase ("the director of {}"), the result that of the reverse one ("the films
    directed by {}"); none when either cannot be read."""
    role, result = first_noun(forward), first_noun(reverse)
    if role is None or result is None:
        return []
    names = {"role": singular_noun(role), "result": plural(result)}
    return [f.format(**names) for f in ROLE_QUESTIONS]


def join_round_trips(relations: Sequence[Relation], phrasings: Sequence[Phrasing], rng: random.Random,
                     share: float = 0.5) -> list[Phrasing]:
    """The hops' phrasings with, ``share`` of the time, a relation followed by its reverse
    said as one unit (:func:`round_trip`; "co-" when the first of the two goes against the
    KG's edges)."""
    out: list[Phrasing] = []
    i = 0
    while i < len(phrasings):
        if i + 1 < len(phrasings) and relations[i + 1] == relations[i].reversed() and rng.random() < share:
            joined = round_trip(phrasings[i], phrasings[i + 1], co=relations[i].inverse)
            if joined.phrases:
                out.append(joined)
                i += 2
                continue
        out.append(phrasings[i])
        i += 1
    return out


def side_kinds(back: Phrasing) -> list[str]:
    """What kind of thing sits where a relation starts, read from its reverse's phrasing:
    the head nouns of its noun phrases in the singular ("the films directed by {}", "the
    movies directed by {}" → "film", "movie"), first noun first, without repeats."""
    return list(dict.fromkeys(singular_noun(n) for n in map(head_noun, back.phrases) if n))


def entity_kinds(relations: Sequence[list[str]]) -> list[str]:
    """The kinds an entity goes by, given :func:`side_kinds` of each of its relations: the
    first kind most of them name (the first named on a tie), with the other nouns of the
    phrasings that name it first ("film", "movie"); none when no relation names one."""
    named = Counter(kinds[0] for kinds in relations if kinds)
    if not named:
        return []
    top = named.most_common(1)[0][0]
    out: list[str] = []
    for kinds in relations:
        if kinds and kinds[0] == top:
            out += [k for k in kinds if k not in out]
    return out


def compose(phrasings: Sequence[Phrasing], mention: str, rng: random.Random, kind: str | None = None) -> str:
    """The question of a walk whose hops have ``phrasings`` (first hop first): the last hop's
    question — one of its question forms, or one of its noun phrases inside a
    :data:`PHRASE_QUESTIONS` form, half the time each — around the earlier hops' noun
    phrases, innermost first. With a ``kind`` the entity is named with it ("the film [X]")."""
    def phrase(ph: Phrasing) -> str:  # a phrase goes inside a sentence: no "?" of its own
        return rng.choice(ph.phrases).rstrip("?.! \uff1f\u3002\uff01")

    inner = f"the {kind} [{mention}]" if kind else f"[{mention}]"
    for ph in phrasings[:-1]:
        inner = phrase(ph).replace(SLOT, inner)
    last = phrasings[-1]
    if last.phrases and (not last.questions or rng.random() < 0.5):
        text = rng.choice(PHRASE_QUESTIONS).replace(SLOT, phrase(last).replace(SLOT, inner))
    else:
        text = rng.choice(last.questions).replace(SLOT, inner)
    return re.sub(r"\b([Tt]he) the\b", r"\1", text)  # "What was the the films …" (a form with "the" around a phrase)


PHRASINGS_FORMAT = "traversals-phrasings/1"


def write_phrasings(path: Path, phrasings: dict[str, Phrasing], llm: str, kgs: Sequence[str] = ()) -> None:
    """The phrasings file: the relations' phrasings by relation key, the LLM that wrote them
    (a rerun with another LLM must not silently reuse them, :func:`read_phrasings`) and the
    names of the KGs they were phrased over (``kgs``; a rerun over another KG says so)."""
    # through a temporary file: an interrupted write keeps the previous file whole
    try:
        write_json_atomic(path, {"format": PHRASINGS_FORMAT, "llm": llm, **({"kg": list(kgs)} if kgs else {}),
                                 "relations": {k: asdict(v) for k, v in phrasings.items()}})
    except OSError as e:
        raise BadInput(f"cannot write {path} ({e.strerror or type(e).__name__})") from None


def phrasings_kgs(path: Path) -> list[str] | None:
    """The names of the KGs a phrasings file records its relations were phrased over (None:
    not recorded — files written before the record, or unreadable)."""
    try:
        kgs = json.loads(path.read_text()).get("kg")
    except (OSError, ValueError, AttributeError):
        return None
    return [str(k) for k in kgs] if isinstance(kgs, list) and kgs else None


def read_phrasings(path: Path, llm: str) -> dict[str, Phrasing]:
    """The phrasings :func:`write_phrasings` wrote to ``path`` (or a file of the first
    format, a bare mapping of relation keys, whose LLM is not recorded). Raises
    :class:`BadInput` for a file that is not one, or one another LLM wrote."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        if "format" in data:
            if data["format"] != PHRASINGS_FORMAT:
                raise TypeError(f"format {data['format']!r}, not {PHRASINGS_FORMAT!r}")
            if data.get("llm") != llm:
                raise BadInput(f"{path} holds phrasings written by {data.get('llm')}, not by {llm}: move it away to "
                               f"have {llm} phrase the relations (or name another file stem with --questions-out)")
            data = data.get("relations", {})
        if not isinstance(data, dict):
            raise TypeError(f"'relations' is {type(data).__name__}, not an object")
        return {str(k): _phrasing(str(k), v) for k, v in data.items()}
    except (ValueError, TypeError) as e:
        raise BadInput(f"{path} is not a phrasings file ({e}); move it away to start afresh") from None


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(t, str) for t in value)


def _phrasing(key: str, raw: object) -> Phrasing:
    """One relation's entry of a phrasings file, its fields checked (``TypeError`` says which):
    a hand-edited question given as a string had been read letter by letter."""
    if not isinstance(raw, dict):
        raise TypeError(f"{key}: {type(raw).__name__}, not an object")
    unknown = sorted(set(raw) - {"questions", "phrases", "checked", "synonyms"})
    if unknown:
        raise TypeError(f"{key}: unknown field {unknown[0]!r}")
    ph = Phrasing(**raw)
    for name in ("questions", "phrases"):
        texts = getattr(ph, name)
        if not _texts(texts):
            raise TypeError(f"{key}: {name!r} is not a list of texts")
        for text in texts:
            if text.count(SLOT) != 1:
                raise TypeError(f"{key}: {text[:60]!r} has no {SLOT!r} where the entity goes" if SLOT not in text
                                else f"{key}: {text[:60]!r} has more than one {SLOT!r}")
    if not (isinstance(ph.checked, dict) and all(isinstance(p, (int, float)) and not isinstance(p, bool)
                                                 for p in ph.checked.values())):
        raise TypeError(f"{key}: 'checked' is not an object of numbers")
    ph.checked = {str(t): float(p) for t, p in ph.checked.items()}
    if ph.synonyms is not None and not _texts(ph.synonyms):
        raise TypeError(f"{key}: 'synonyms' is not a list of texts")
    return ph


class HopCounts:
    """The hop counts walks take in turn (1 … ``max_hops``), less those given up: a hop count
    whose walks failed ``give_up_after`` times in a row. While none is given up the turn is
    ``made % max_hops + 1``, as it always was (MetaQA's draw never fails a whole draw in a row)."""

    def __init__(self, max_hops: int, give_up_after: int) -> None:
        self.open = list(range(1, max_hops + 1))
        self.give_up_after = max(1, give_up_after)
        self._failed: Counter[int] = Counter()  # hop count -> failures since its last walk

    def next(self, made: int) -> int:
        """The hop count of the next walk, ``made`` walks made so far."""
        return self.open[made % len(self.open)]

    def record(self, hops: int, walked: bool) -> None:
        """A walk of ``hops`` relations was made (``walked``) or failed."""
        self._failed[hops] = 0 if walked else self._failed[hops] + 1
        if self._failed[hops] >= self.give_up_after and hops in self.open:
            self.open.remove(hops)


class SyntheticQuestions:
    """Walks over ``kgs`` and questions for them, phrased by ``llm`` (see the module doc)."""

    def __init__(self, kgs: KGSet, llm: LLM, config: SyntheticConfig | None = None) -> None:
        self.kgs = kgs
        self.llm = llm
        self.config = config or SyntheticConfig()
        self._edges = MemoEdges(kgs)
        self._relations: dict[tuple[str, str], list[Relation]] = {}
        #: (kg, relation key) -> the ends of that relation looked at, and how many of them have
        #: each relation (kg, key)
        self._ends: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self._end_relations: dict[tuple[str, str], Counter[tuple[str, str]]] = {}
        self._neutrals: dict[tuple[str, str], list[float]] = {}  # (kg, entity id) -> the check's bias
        self.usage = Usage()
        #: after :meth:`run`: how many of the walked relations had their phrasings read back from
        #: the phrasings file, how many the LLM phrased now, and the KGs the file was written for
        #: when none of them is searched here (None otherwise)
        self.reused = 0
        self.phrased = 0
        self.written_for: list[str] | None = None
        #: after :meth:`walks`: how many entities were drawn and how many walks were made from them
        self.drawn = 0
        self.walked = 0

    async def walk(self, start: Entity, hops: int, rng: random.Random) -> PathNode | None:
        """A random walk of ``hops`` relations from ``start``, or None where every relation
        reaches nothing new, too many entities, or more than the KG interface returns."""
        cfg = self.config
        node = PathNode(id=0, entities=(start,))
        for hop in range(1, hops + 1):
            rels = list((await self.kgs.get_relations(list(node.entities), self.usage)).items)
            rels = await offered_relations(self._edges, node, rels, self.usage, cfg.max_relations)
            if node.relation is not None:
                usual = await self.usual_next(node.relation, node.entities)
                rels = [r for r in rels if usual is None or (r.kg, r.key) in usual]
            rng.shuffle(rels)
            cap = cfg.max_answers if hop == hops else cfg.max_width
            nxt = None
            for rel in rels:
                reached, edges, omitted = await step(self._edges, node, rel, self.usage)
                if reached and not omitted and len(reached) <= cap:
                    nxt = PathNode(id=hop, entities=reached, parent=node, relation=rel, edges=edges, depth=hop)
                    break
            if nxt is None:
                return None
            node = nxt
        return node

    async def walks(self, progress: Callable[[int, int], None] | None = None) -> list[tuple[int, PathNode]]:
        """Up to ``questions`` walks, hop counts in turn, from a seeded draw of entities; the
        draw is walked again (``passes`` in all, each walk its own seed) while questions are
        wanted, keeping only walks not made before. A walk's index is its entity's position
        in the draw, plus the draw's size times the pass. A hop count whose walks failed from
        as many starts in a row as the draw has is given up (:class:`HopCounts`): a KG with no
        walk of three relations had made its one- and two-hop questions and then, wanting
        three hops from every later start, none."""
        cfg = self.config
        pool = await self.kgs.sample_entities(cfg.questions * cfg.draws, self.usage, seed=cfg.seed)
        if not pool:
            raise BadInput("the KG has no entity to start a walk from")
        self.drawn, self.walked = len(pool), 0
        out: list[tuple[int, PathNode]] = []
        made: set[tuple] = set()
        hop_counts = HopCounts(cfg.max_hops, give_up_after=len(pool))
        for turn in range(max(1, cfg.passes)):
            for i, start in enumerate(pool):
                if len(out) >= cfg.questions or not hop_counts.open:
                    return out
                seed = f"{cfg.seed}:{i}" if turn == 0 else f"{cfg.seed}:{i}:{turn}"
                hops = hop_counts.next(len(out))
                end = await self.walk(start, hops, random.Random(seed))
                hop_counts.record(hops, end is not None)
                if end is None:
                    continue
                key = (start.kg, start.id, tuple(n.relation.key for n in end.path()[1:] if n.relation is not None))
                if key not in made:
                    made.add(key)
                    out.append((i + turn * len(pool), end))
                    self.walked = len(out)
                    if progress:
                        progress(len(out), cfg.questions)
        return out

    @staticmethod
    def examples(relation: Relation, ends: Sequence[PathNode], limit: int = 3) -> list[Edge]:
        """Edges the walks took with ``relation`` (either direction), at most ``limit``."""
        shown: list[Edge] = []
        for node in ends:
            for n in node.path():
                if n.relation is not None and n.relation.id == relation.id and n.relation.kg == relation.kg:
                    for e in n.edges[:1]:
                        if all(e.subject.id != x.subject.id for x in shown):
                            shown.append(e)
                if len(shown) >= limit:
                    return shown
        return shown

    async def phrase(self, forward: Relation, ends: Sequence[PathNode]) -> tuple[Phrasing, Phrasing]:
        """Phrasings of ``forward`` and of its reverse, asked together (one prompt shows the
        relation with example edges and asks for both directions: asked one direction at a
        time, the 1.5B model mixed them up). ``variants`` replies, the first greedy; each
        phrasing is kept only if the LLM, asked which of an example entity's relations
        answers it, ranks the relation first (the best-scored one if none does)."""
        cfg = self.config
        edges = self.examples(forward, ends)
        shown = "; ".join(f"{e.subject.label} -> {forward.label} -> {e.object.label}" for e in edges)
        prompt = render("relation_phrases", relation=forward.label, examples=shown)
        replies = await self._replies(prompt, "Question:", cfg.variants, max_tokens=120, stop="\n\n")
        named = {x.label.casefold() for edge in edges for x in (edge.subject, edge.object) if len(x.label) > 3}
        written: dict[str, list[str]] = {name: [] for name in (*LINES, *PARAPHRASED)}

        def keep(name: str, text: str) -> None:  # a text naming an example's entity is no phrasing
            if text not in written[name] and not any(f" {w} " in f" {text.casefold()} " for w in named):
                written[name].append(text)

        for reply in replies:
            for name, text in parse_phrasing(reply).items():
                keep(name, text)
        for side in ("", "reverse "):
            for text in await self.paraphrase(written[side + "question"][:1]):
                if text not in written[side + "question"]:
                    keep(side + "question in other words", text)
        out = Phrasing(), Phrasing()
        for ph, relation, reverse in ((out[0], forward, False), (out[1], forward.reversed(), True)):
            source = await self.check_source(edges, reverse=reverse)
            for kind, kept in (("question", ph.questions), ("phrase", ph.phrases)):
                side = "reverse " if reverse else ""
                texts = written[side + kind] + [t for o in OTHER_QUESTIONS for t in written[side + o] if kind == "question"]
                if source is None:
                    kept += texts
                    continue
                checks = [await self.check(relation, source, t, as_question=kind == "question") for t in texts]
                ph.checked.update((t, round(p, 4)) for t, (p, _) in zip(texts, checks))
                first = [t for t, (_, top) in zip(texts, checks) if top]
                kept += first or [t for t, _ in sorted(zip(texts, checks), key=lambda x: -x[1][0])[:1]]
        return out

    async def paraphrase(self, questions: Sequence[str]) -> list[str]:
        """Each of ``questions`` said again in other everyday words (``paraphrases`` replies
        each, the first greedy): distinct texts with exactly one ``{}`` and another word that
        ask for a person only if the question does — the check cannot catch a paraphrase
        turned around ("Which films did {} star in?" → "Who appeared in the movies of {}?")
        when the example entity has one relation of the kind."""
        cfg = self.config
        out: list[str] = []
        for question in questions if cfg.paraphrases > 0 else ():
            texts = await self._replies(render("question_paraphrase"), PARAPHRASE_PREFIX.format(question=question),
                                        cfg.paraphrases, max_tokens=40, stop="\n")
            for text in (t.strip() for t in texts):
                if (text.count(SLOT) == 1 and has_another_word(text) and text not in out and reads_as_question(text)
                        and asks_for_a_person(text) == asks_for_a_person(question)):
                    out.append(text)
        return out

    async def synonyms(self, relation: Relation) -> list[str]:
        """The other words a question may use for ``relation``, as the LLM lists them (greedy,
        ``prompts/relation_synonyms.txt``: worked examples on other domains), in its order."""
        reply = (await self._replies(render("relation_synonyms"), SYNONYMS_PREFIX.format(relation=relation.label),
                                     1, max_tokens=30, stop="\n"))[0]
        words = (w.strip().strip(".").casefold() for w in reply.split(","))
        return list(dict.fromkeys(w for w in words if w))

    async def _replies(self, prompt: str, prefix: str, count: int, *, max_tokens: int, stop: str) -> list[str]:
        """``count`` replies to ``prompt`` (at least one): the first greedy, the others sampled
        at the configured temperature and seed."""
        gen = await self.llm.generate(prompt, prefix=prefix, temperature=0.0, max_tokens=max_tokens, stop=[stop])
        self.usage.add_generation(gen)
        texts = gen.texts[:1]
        if count > 1:
            gen = await self.llm.generate(prompt, prefix=prefix, n=count - 1, temperature=self.config.temperature,
                                          max_tokens=max_tokens, stop=[stop], seed=self.config.seed)
            self.usage.add_generation(gen)
            texts += gen.texts
        return texts

    async def _relations_of(self, entity: Entity) -> list[Relation]:
        """``entity``'s relations, asked of the KG once per entity (checks and kinds ask again)."""
        key = (entity.kg, entity.id)
        if key not in self._relations:
            self._relations[key] = list((await self.kgs.get_relations([entity], self.usage)).items)
        return self._relations[key]

    async def usual_next(self, via: Relation, reached: Sequence[Entity]) -> set[tuple[str, str]] | None:
        """The relations (kg, key) that at least ``usual_share`` of ``via``'s ends have, from
        every end of ``via`` looked at so far (up to ten of ``reached`` are added now), or None
        while fewer than ``usual_after`` were looked at. A KG that merges things sharing a
        label (MetaQA's year "2012" is also a film) gives such a node both kinds' relations;
        a walk taking the rare ones (release year, then directed by) is not a question anyone
        asks, and training on it teaches that a release year is not where a question stops."""
        ends = self._ends.setdefault((via.kg, via.key), set())
        counts = self._end_relations.setdefault((via.kg, via.key), Counter())
        for entity in reached[:10]:
            if (entity.kg, entity.id) not in ends:
                ends.add((entity.kg, entity.id))
                counts.update({(r.kg, r.key) for r in await self._relations_of(entity)})
        if len(ends) < self.config.usual_after:
            return None
        return {rel for rel, n in counts.items() if n >= self.config.usual_share * len(ends)}

    async def kinds_of(self, entity: Entity, known: dict[str, Phrasing]) -> list[str]:
        """What kind of thing ``entity`` is, as the phrasings of its relations say (:func:`entity_kinds`)."""
        rels = await self._relations_of(entity)
        backs = (known.get(r.reversed().key) for r in rels)
        return entity_kinds([side_kinds(b) for b in backs if b is not None])

    async def check(self, relation: Relation, source: Entity, text: str, *, as_question: bool) -> tuple[float, bool]:
        """The probability the LLM gives ``relation`` among ``source``'s relations as the one
        that answers ``text`` (a question, or "What is <phrase>?") about ``source``, and
        whether no other relation is more probable; with ``calibrated_check``, each relation's
        probability divided by its probability when nothing is asked (:meth:`_neutral`)."""
        rels = await self._relations_of(source)  # one KG call per example entity, not per phrasing
        lines = [option_line(k, r) for k, r in zip(self.kgs.option_keys(rels), rels)]
        at = [i for i, r in enumerate(rels) if r.key == relation.key and r.kg == relation.kg]
        if not at:
            return 0.0, False
        filled = text.replace(SLOT, f"[{source.label}]")
        question = filled if as_question else f"What is {filled}?"
        prompt = render("relation_check", entity=source.label, options="\n".join(lines), question=question)
        probs = await option_probs(self.llm, prompt, lines, self.usage)
        if self.config.calibrated_check:
            probs = calibrate(probs, await self._neutral(source, lines))
        return probs[at[0]], probs[at[0]] >= max(probs)

    async def check_source(self, edges: Sequence[Edge], *, reverse: bool) -> Entity | None:
        """The example entity the check asks about: of the example edges' subjects (their
        objects for the reverse), the one with the most relations, the first on a tie. An
        entity with one relation passes every phrasing: 25 of the 32 places of death in
        PathQuestion's PQ-2H KB have no other, and "Who was born in {}?" was kept (checked
        1.0) for the reverse of *place of death*."""
        ends = list(dict.fromkeys(e.object if reverse else e.subject for e in edges))
        sizes = [len(await self._relations_of(end)) for end in ends]
        return ends[sizes.index(max(sizes))] if ends else None

    async def _neutral(self, source: Entity, lines: list[str]) -> list[float]:
        """The check's option probabilities with no question ("N/A"), once per example
        entity: what the LLM prefers among ``source``'s relations whatever is asked."""
        key = (source.kg, source.id)
        if key not in self._neutrals:
            prompt = render("relation_check", entity=source.label, options="\n".join(lines), question="N/A")
            self._neutrals[key] = await option_probs(self.llm, prompt, lines, self.usage, transient=True)
        return self._neutrals[key]

    async def run(self, phrasings_file: Path, questions_file: Path,
                  progress: Callable[[int, int], None] | None = None) -> list[SyntheticQuestion]:
        """Walks, phrasings (read from ``phrasings_file`` when it has the relation, else asked
        and written back), and the composed questions (written to ``questions_file``)."""
        cfg = self.config
        # read first: a file that cannot be used is said before the walks (minutes on a large KG)
        known = read_phrasings(phrasings_file, self.llm.name) if phrasings_file.exists() else {}
        recorded = phrasings_kgs(phrasings_file) if known else None
        here = sorted({str(getattr(kg, "name", "")) for kg in self.kgs.kgs} - {""})
        self.written_for = recorded if recorded and not set(recorded) & set(here) else None
        kg_names = sorted(set(recorded or ()) | set(here))
        self.reused = self.phrased = 0
        ends = await self.walks(progress)
        forward: dict[str, Relation] = {}
        for _, end in ends:
            for n in end.path()[1:]:
                assert n.relation is not None
                rel = n.relation.reversed() if n.relation.inverse else n.relation
                forward.setdefault(rel.key, rel)
        phrasings_file.parent.mkdir(parents=True, exist_ok=True)
        for key, rel in forward.items():
            back = rel.reversed().key
            if key not in known or back not in known:
                known[key], known[back] = await self.phrase(rel, [e for _, e in ends])
                write_phrasings(phrasings_file, known, self.llm.name, kg_names)  # kept if interrupted
                self.phrased += 1
            else:
                self.reused += 1
            if known[key].synonyms is None:
                known[key].synonyms = await self.synonyms(rel)
                write_phrasings(phrasings_file, known, self.llm.name, kg_names)
        asked = dict(known)  # a hop against the edges is also asked by role
        for key, rel in forward.items():
            back = rel.reversed().key
            roles = role_questions(known[key], known[back])
            asked[back] = replace(known[back], questions=known[back].questions + roles)
        out: list[SyntheticQuestion] = []
        for i, end in ends:
            rels = [n.relation for n in end.path()[1:] if n.relation is not None]
            keys = [r.key for r in rels]
            rng = random.Random(f"{cfg.seed}:q{i}")
            phr = join_round_trips(rels, [asked[k] for k in keys], rng, cfg.round_trips)
            if not (phr[-1].questions or phr[-1].phrases) or any(not p.phrases for p in phr[:-1]):
                continue  # the LLM gave this relation no usable phrasing
            start = end.path()[0].entities[0]
            # its own draws, so the rest of the question is what it is without kinds
            draw = random.Random(f"{cfg.seed}:k{i}")
            kinds = await self.kinds_of(start, known) if draw.random() < cfg.typed_mentions else []
            kind = draw.choice(kinds) if kinds else None
            out.append(SyntheticQuestion(
                i, start.ref(), keys, end.path_text(" -> ", per_step=3),
                [e.label for e in end.entities], compose(phr, start.label, rng, kind),
            ))
        tmp = questions_file.with_name(f".{questions_file.name}.tmp")  # an interrupted write leaves no half file
        try:
            questions_file.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text("".join(json.dumps(asdict(q)) + "\n" for q in out))
            tmp.replace(questions_file)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise BadInput(f"cannot write {questions_file} ({e.strerror or type(e).__name__})") from None
        except BaseException:  # Ctrl-C while writing: no temporary file left beside the questions file
            tmp.unlink(missing_ok=True)
            raise
        return out
