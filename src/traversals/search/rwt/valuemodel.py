"""A trainable roll-out model for RwT (§3.3, Eq. 6-7), small enough for a CPU.

The paper fine-tunes LLaMA3-8B to predict a state's value. Here the roll-out model is a
logistic model over sparse features of the question and the relation path — trained in
seconds on a laptop, stored as a JSON file of weights, and read without any ML library.
It has two heads, because a state plays two roles in the search:

- **stop**: how good the state's entities are *as the answer* (trained on the outcome
  reward ``r``, the F1 of the state's entities against the gold answers);
- **go**: how good the best state reachable *below* it is (trained on the best reward
  found in the state's subtree).

The search value of a state is ``max(stop, go)`` (beam and MCTS follow promising paths);
the answer is read from the stop head (so a 1-hop question stops after one hop even when
the search walked three). Features pair the question's words (unigrams and bigrams, the
question's own entity names masked) with the relation at each hop, the last relation, the
whole path and the path length; relations are the KG's
keys (``~directed_by``), so a model belongs to a KG schema (its ``meta`` says which).

Feature sets are versioned (``meta["features"]``; a model without it is version 1 and is
read as it was trained). Version 2 reads the question's words in the singular ("genres",
"stories" → "genre", "story"), so a model trained on "What genre is …" also reads "what
genres are …". Version 3 also reads the kind a question gives its entity ("the film [X]",
"the actor [X]") as a word of its own (``kind=film``), not as one of the words that say what
is asked. Version 4 also reads which of the KG's relations the question names — a word
of the question sharing its stem with a word only that relation's label has ("languages"
→ ``in language``, "screenwriter" → ``written by``; the model's ``meta["lexicon"]``, from the
labels of the relations training walked) — as a word of its own (``named=in_language``),
and marks each named relation the path lacks (``uncovered=…``: "the films written by [X]
were in which languages" is not answered by the films) and each path relation the
question does not name (``unnamed=…``). Version 5 also reads a question that asks for a
person in other words than "who" ("which person directed [X]", "[X] is a film written by
this person") as saying "who": training questions say "who", so the model had never seen
"person" and rated those questions as if they did not ask for a person. Version 6 also
names a relation by the other words the LLM gave for it when the synthetic questions were
made ("type" for *has genre*, "author" for *written by*; ``meta["synonyms"]``,
:func:`synonym_lexicon`), each matched as a whole word: a label word matched by stem would
let "screen", given for *starred actors*, name "screenwriter". Version 7 reads an entity
followed by a participle and "by" ("who was [X] directed by") as the passive it is: without
the bigram of the entity and the participle, which active questions ("[X] directed which
films") taught to mean the entity did it. New models are version 7 (:data:`FEATURES`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import unicodedata
import warnings
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ...errors import BadInput, ValueModelMismatch
from ...llm.base import Usage
from .state import PathNode

FORMAT = "traversals-rwt-value/1"
HEADS = ("stop", "go")
#: scripts written without spaces between words (Han, kana): each character is a word of its own
UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
ENT = "qentity"  # what the question's own entity names become
FEATURES = 7  # the feature set new models are trained on (see the module's docstring)
NAMED = "named="  # the prefix of the words that say which relation the question names
#: Distinct relations rated, none known to a model, that show it is another KG's (the search-time check).
SCHEMA_EVIDENCE = 3
#: Relations of the shared RDF/OWL vocabularies, which KGs of any schema have (most Turtle files
#: state ``rdf:type``): knowing them says nothing about whether a model is this KG's.
SHARED_VOCABULARY = frozenset({"type", "subClassOf", "subPropertyOf", "sameAs", "seeAlso", "isDefinedBy", "domain",
                               "range", "equivalentClass", "equivalentProperty"})


_IE_PLURALS = frozenset({"movies", "zombies", "cookies", "rookies", "calories", "selfies", "brownies", "hippies",
                         "goalies", "species", "pies", "ties", "lies", "dies"})


@lru_cache(maxsize=1 << 16)  # every rating of a state reads the question's words again
def singular(word: str) -> str:
    """A light, rule-based singular of an English word: ``genres`` → ``genre``, ``stories``
    → ``story`` (but ``movies`` → ``movie``), ``actresses`` → ``actress``; ``is``, ``was``,
    ``series``, ``news`` and words of three letters or fewer stay."""
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is", "series", "news", "'s")):
        return word
    if word.endswith("ies") and len(word) > 4 and word not in _IE_PLURALS:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    return word[:-1]


@lru_cache(maxsize=1)
def _word_pattern() -> re.Pattern[str]:
    """A word of a question or a relation label, in any script: letters and digits with the
    combining marks inside them ("für", "गया"), one apostrophe and letters after it ("don't"),
    or one character of a script without spaces ("出生地" is three). On lower-cased ASCII it
    reads what ``[a-z0-9]+(?:'[a-z]+)?`` read (the MetaQA model's words are unchanged); that
    pattern had read "arbeitet für" as "arbeitet", "f", "r", and a Chinese question as no
    word at all."""
    marks, start = [], None
    for cp in range(0x10000 + 1):
        is_mark = cp < 0x10000 and unicodedata.category(chr(cp)).startswith("M")
        if is_mark and start is None:
            start = cp
        elif not is_mark and start is not None:
            marks.append(f"\\u{start:04x}-\\u{cp - 1:04x}")
            start = None
    mark = "[" + "".join(marks) + "]"
    letter, alnum = f"[^\\W\\d_{UNSPACED}]", f"[^\\W_{UNSPACED}]"
    return re.compile(f"[{UNSPACED}]|{alnum}(?:{alnum}|{mark})*(?:'{letter}(?:{letter}|{mark})*)?")


def words_of(text: str) -> list[str]:
    """The lower-cased words of ``text`` (:func:`_word_pattern`), composed characters first (NFC)."""
    return _word_pattern().findall(unicodedata.normalize("NFC", text).lower())


def normalise(words: Sequence[str], version: int, lexicon: Mapping[str, Sequence[str]] | None = None,
              synonyms: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The question words as a feature set of ``version`` reads them (bigrams word by word;
    from version 4, a ``named=…`` word for each relation of ``lexicon`` the question names,
    from version 6 also for each relation one of whose ``synonyms`` it says)."""
    if version < 2:
        return list(words)
    if version < 3:
        return ["_".join(singular(w) for w in word.split("_")) for word in words]
    singulars = [singular(w) for w in words if "_" not in w]
    unigrams, kinds = split_kinds(asks_who(singulars) if version >= 5 else singulars)
    said = (synonyms or {}) if version >= 6 else {}
    named = [NAMED + r for r in named_relations(unigrams, lexicon or {}, said)] if version >= 4 else []
    passive = version >= 7  # "[X] directed by": not the bigram "[X] directed" of "[X] directed which films"
    bigrams = [f"{a}_{b}" for i, (a, b) in enumerate(zip(unigrams, unigrams[1:]))
               if not (passive and a == ENT and unigrams[i + 2: i + 3] == ["by"])]
    return unigrams + bigrams + kinds + named


_PERSON_DETERMINERS = frozenset({"which", "what", "this"})
_PERSON_NOUNS = frozenset({"person", "people"})


def asks_who(words: Sequence[str]) -> list[str]:
    """``words`` with "which person", "what people", "this person" … said as ``who``."""
    out: list[str] = []
    for w in words:
        if w in _PERSON_NOUNS and out and out[-1] in _PERSON_DETERMINERS:
            out[-1] = "who"
            continue
        out.append(w)
    return out


_LABEL_STOPWORDS = frozenset({"a", "an", "the", "by", "in", "of", "on", "at", "to", "for", "from", "with", "is",
                              "has", "have", "was", "are", "and"})


def relation_lexicon(labels: Mapping[str, str]) -> dict[str, list[str]]:
    """Relation id -> the words of its (forward) label that no other relation's label has,
    in the singular ("release year" -> ``release``, ``year``; "has imdb votes" -> ``vote``,
    not ``imdb``, which "has imdb rating" shares); words under three letters are left out."""
    words = {rid: [singular(w) for w in words_of(label.replace("_", " "))
                   if w not in _LABEL_STOPWORDS and len(w) >= 3]
             for rid, label in labels.items()}
    shared = Counter(w for ws in words.values() for w in set(ws))
    return {rid: [w for w in ws if shared[w] == 1] for rid, ws in sorted(words.items())}


_SUFFIXES = ("ing", "ed", "er", "or", "ion")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def names(word: str, label_word: str) -> bool:
    """Whether a question's ``word`` says a relation label's ``label_word``, by stem: the
    same first four letters ("directed" / "director"), the label word's first four inside
    the word ("written" / "screenwriter"), or the same word less a suffix ("acted" /
    "actor"; not "rather" / "rating")."""
    shared = len(os.path.commonprefix([word, label_word]))
    return (shared >= min(4, len(label_word)) or (len(label_word) >= 5 and label_word[:4] in word)
            or _stem(word) == _stem(label_word))


def named_relations(unigrams: Sequence[str], lexicon: Mapping[str, Sequence[str]],
                    synonyms: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The relation ids of ``lexicon`` some question word :func:`names`, and those of
    ``synonyms`` one of whose words the question says as it is (the question's entity and
    its kind are not among ``unigrams``)."""
    said, synonyms = set(unigrams) - {ENT}, synonyms or {}
    return [rid for rid in sorted(set(lexicon) | set(synonyms))
            if any(names(w, lw) for lw in lexicon.get(rid, ()) for w in said) or said.intersection(synonyms.get(rid, ()))]


@dataclass(frozen=True)
class ListedWords:
    """What an LLM said about the relations' words, by relation id: the other words a
    question may use for each (``synonyms``: "type", "category" for *has genre*) and what
    its phrases call the entities it leads to, either way (``called``: "film" for *directed
    by*, from "the films directed by {}"). :func:`synonym_lexicon` keeps the telling ones."""

    synonyms: Mapping[str, Sequence[str]]
    called: Mapping[str, Sequence[str]] = field(default_factory=dict)


def synonym_lexicon(lexicon: Mapping[str, Sequence[str]], listed: ListedWords) -> dict[str, list[str]]:
    """Relation id (of ``lexicon``) -> the words ``listed`` gives for it that can only mean
    it: single words of three letters or more, in the singular, less any word listed for two
    relations ("category": genre and tags), any word that :func:`names` a label word (another
    relation's, or its own, which ``lexicon`` reads already), and any word another relation
    is ``called``."""
    words = {rid: list(dict.fromkeys(singular(w.casefold()) for w in ws if re.fullmatch(r"[A-Za-z]{3,}", w)))
             for rid, ws in listed.synonyms.items() if rid in lexicon}
    count = Counter(w for ws in words.values() for w in ws)
    out: dict[str, list[str]] = {}
    for rid, ws in sorted(words.items()):
        others = [r for r in lexicon if r != rid]
        keep = [w for w in ws if count[w] == 1 and not any(names(w, lw) for r in lexicon for lw in lexicon[r])
                and not any(w in listed.called.get(r, ()) for r in others)]
        if keep:
            out[rid] = keep
    return out


_ARTICLES = frozenset({"the", "a", "an"})


def split_kinds(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """The words without the kind the question gives its entity ("the film [X]" → "[X]"),
    and that kind as a word of its own (``kind=film``): it says what the entity is, not
    what is asked of it, so "film" in "who directed the film [X]" is not read as asking
    for films."""
    out: list[str] = []
    kinds: list[str] = []
    for i, w in enumerate(words):
        if 0 < i < len(words) - 1 and words[i - 1] in _ARTICLES and words[i + 1] == ENT and w != ENT:
            out.pop()  # the article before it
            kinds.append(f"kind={w}")
            continue
        out.append(w)
    return out, kinds


def question_words(question: str, mentions: Sequence[str] = ()) -> list[str]:
    """Lower-cased words and bigrams of the question; ``[...]`` spans and the given entity
    mentions become ``ENT``, so features generalise across questions of one shape."""
    text = re.sub(r"\[[^\]]*\]", f" {ENT} ", question)
    for m in sorted((m for m in mentions if m.strip()), key=len, reverse=True):
        # as a whole word (or words): "M" is not the m of "movie", "It" not the it of an ENT
        text = re.sub(rf"(?<!\w){re.escape(m)}(?!\w)", f" {ENT} ", text, flags=re.IGNORECASE)
    words = words_of(text)
    return words + [f"{a}_{b}" for a, b in zip(words, words[1:])]


def features(words: Sequence[str], path: Sequence[str], head: str, version: int = FEATURES,
             lexicon: Mapping[str, Sequence[str]] | None = None,
             synonyms: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The active (binary) features of a state (its question words and relation path) for
    one head, in feature set ``version`` (from 4, with the relations ``lexicon`` names; from
    6, also those named by ``synonyms``)."""
    return _features(normalise(words, version, lexicon, synonyms), path, head, version)


def _features(words: Sequence[str], path: Sequence[str], head: str, version: int) -> list[str]:
    """:func:`features` of words already normalised."""
    t = len(path)
    h = head + "|"
    out = [h + "bias", f"{h}len={t}", f"{h}path={'>'.join(path)}"]
    last = path[-1] if path else "-"
    for w in words:
        out.append(f"{h}len={t}|w={w}")
        out.append(f"{h}last={last}|w={w}")
        for i, rel in enumerate(path, 1):
            out.append(f"{h}h{i}={rel}|w={w}")
        if version >= 3:  # two hops in a row ("share directors with": a relation and back)
            out += [f"{h}pair={a}>{b}|w={w}" for a, b in zip(path, path[1:])]
    if version >= 4:  # what the question names and the path lacks, and the other way round
        named = {w[len(NAMED):] for w in words if w.startswith(NAMED)}
        walked = {rel.lstrip("~") for rel in path}
        out += [f"{h}uncovered={r}" for r in sorted(named - walked)]
        out += [f"{h}unnamed={r}" for r in sorted(walked - named)]
        out += [f"{h}uncovered>0"] * bool(named - walked) + [f"{h}unnamed>0"] * bool(walked - named)
    return out


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass
class Example:
    """One training target: a state's features for one head and the value to predict."""

    features: list[str]
    target: float


def _kept(weights: Mapping[str, float]) -> dict[str, float]:
    """The weights as a model file keeps them: sorted, to 5 decimals, the ones that round to 0 left out."""
    return {k: round(v, 5) for k, v in sorted(weights.items()) if abs(v) >= 1e-5}


@dataclass
class ValueModel:
    """Weights of the logistic model, keyed by feature name; ``meta`` records how it was
    trained (datasets, KG, rounds, figures)."""

    weights: dict[str, float] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    #: where the model was read from (:meth:`load`), for messages
    source: str = field(default="", compare=False)
    #: SHA-256 of the file's bytes as :meth:`load` read them ("" when not read from a file):
    #: what a run records, so a model retrained in place is told apart
    sha256: str = field(default="", compare=False)
    #: check the relations rated against the model's (:meth:`_check_schema`); off while
    #: training, once settled, or once a KG's own list settled it (:meth:`check_kg`)
    check_schema: bool = field(default=True, compare=False)
    #: relations rated so far, none known to the model (:meth:`_check_schema`)
    _unknown: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    _relations: frozenset[str] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def version(self) -> int:
        """The feature set the model was trained on (1 for models older than versioning)."""
        return int(self.meta.get("features", 1))

    @property
    def digest(self) -> str:
        """SHA-256 of what the model predicts with: its weights as :meth:`save` writes them,
        its feature set, lexicon and synonyms. Two trainings that learned the same model have
        the same digest, though their files differ in what ``meta`` records of the run (the
        seconds each round took, the paths of the files read), and so in :attr:`sha256`."""
        what = {"features": self.version, "lexicon": self.lexicon, "synonyms": self.synonyms,
                "weights": _kept(self.weights)}
        return hashlib.sha256(json.dumps(what, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    @property
    def lexicon(self) -> dict[str, list[str]]:
        """Relation id -> its label's own words (:func:`relation_lexicon`; feature set 4)."""
        return self.meta.get("lexicon") or {}

    @property
    def synonyms(self) -> dict[str, list[str]]:
        """Relation id -> other words that name it, matched whole (:func:`synonym_lexicon`;
        feature set 6)."""
        return self.meta.get("synonyms") or {}

    @property
    def relations(self) -> frozenset[str]:
        """The relation ids (without ``~``) the model was trained on: its lexicon's and those
        its path features name."""
        known = self._relations
        if known is None:
            paths = (f.split("|path=", 1)[1] for f in self.weights if "|path=" in f)
            known = frozenset(self.lexicon) | {r.lstrip("~") for p in paths for r in p.split(">") if r}
            self._relations = known
        return known

    def mismatch(self, kg_relations: Iterable[str]) -> str | None:
        """Why the model cannot rate a KG whose relation ids are ``kg_relations`` — it
        knows none of them but :data:`SHARED_VOCABULARY`'s — or None when it knows some (or
        the KG lists none)."""
        ids = {r.lstrip("~") for r in kg_relations} - SHARED_VOCABULARY
        if not ids or not self.relations - SHARED_VOCABULARY or ids & self.relations:
            return None
        trained = sorted(self.relations - SHARED_VOCABULARY)
        kg = self.meta.get("kg")
        where = f" (of {', '.join(map(str, kg))})" if isinstance(kg, list) and kg else ""
        return (f"value model {self.source or '(in memory)'} was trained on the relations "
                f"{', '.join(trained[:9])}{', ...' if len(trained) > 9 else ''}{where}; the KG searched has "
                f"{', '.join(sorted(ids)[:6])}{', ...' if len(ids) > 6 else ''}, none of them, so its values "
                "mean nothing here. A model for this KG: traversals train-value --synthetic 1500 --kg SPEC --out FILE")

    def check_kg(self, kg_relations: Iterable[str]) -> None:
        """Check the model against a KG that lists its relation ids (an embedded one): warn
        (:class:`~traversals.errors.ValueModelMismatch`) when it knows none of them. The
        check during the search (:meth:`_check_schema`) is then off: the KG settled it."""
        why = self.mismatch(kg_relations)
        if why is not None:
            warnings.warn(ValueModelMismatch(why), stacklevel=3)
        self.check_schema = False

    def _check_schema(self, path: Sequence[str]) -> None:
        """For a KG that does not list its relations (a SPARQL endpoint): warn once
        (:class:`~traversals.errors.ValueModelMismatch`) when the first
        :data:`SCHEMA_EVIDENCE` distinct relations rated are all unknown to the model.
        One known relation settles it: a model trained on the KG need not have walked
        every relation."""
        if not self.check_schema or not path or not self.relations:
            return
        rels = {r.lstrip("~") for r in path} - SHARED_VOCABULARY  # a path of rdf:type alone tells nothing
        if not rels:
            return
        if rels & self.relations:
            self.check_schema = False
            return
        self._unknown |= rels
        if len(self._unknown) >= SCHEMA_EVIDENCE:
            self.check_schema = False
            warnings.warn(ValueModelMismatch(self.mismatch(self._unknown) or ""), stacklevel=4)

    def score(self, feats: Iterable[str]) -> float:
        return _sigmoid(sum(self.weights.get(f, 0.0) for f in feats))

    def predict(self, words: Sequence[str], path: Sequence[str]) -> dict[str, float]:
        self._check_schema(path)
        read = normalise(words, self.version, self.lexicon, self.synonyms)  # once for both heads
        return {head: self.score(_features(read, path, head, self.version)) for head in HEADS}

    def search_value(self, words: Sequence[str], path: Sequence[str], *, final: bool) -> float:
        """``max(stop, go)``; the stop head alone where nothing lies below (``final``)."""
        heads = self.predict(words, path)
        return heads["stop"] if final else max(heads.values())

    def stop_value(self, words: Sequence[str], path: Sequence[str]) -> float:
        """The stop head: how good the path's state is as the answer."""
        self._check_schema(path)
        return self.score(features(words, path, "stop", self.version, self.lexicon, self.synonyms))

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        kept = _kept(self.weights)
        # through a temporary file of this process: a model file is whole or as it was, never half written
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps({"format": FORMAT, "meta": self.meta, "weights": kept}, indent=0) + "\n")
            tmp.replace(p)
        finally:
            tmp.unlink(missing_ok=True)
        return p

    @classmethod
    def load(cls, path: str | Path) -> "ValueModel":
        p = Path(path)
        try:
            raw = p.read_bytes()
            data = json.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            raise BadInput(f"value model {p} not found (train one with `traversals train-value`)") from None
        except (OSError, ValueError) as e:
            raise BadInput(_unreadable(p, e)) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BadInput(_not_a_model(p, data.get("format") if isinstance(data, dict) else None))
        model = cls(_weights(data.get("weights", {}), p), _meta(data.get("meta", {}), p), source=str(p),
                    sha256=hashlib.sha256(raw).hexdigest())
        if model.version > FEATURES:
            raise BadInput(f"value model {p} uses feature set {model.version}; this traversals reads up to "
                           f"{FEATURES} (upgrade traversals, or train the model again)")
        return model


#: what to do, at the end of a message about a file that is not a value model
_TAKES = "--value-model takes the model file `traversals train-value --out` wrote"


def _unreadable(p: Path, e: OSError | ValueError) -> str:
    """Why a value model file could not be read, and what to give instead, in one line."""
    if isinstance(e, IsADirectoryError):
        return f"value model {p} is a directory: {_TAKES}"
    if isinstance(e, OSError):
        return f"value model {p} cannot be read ({e.strerror or type(e).__name__})"
    return f"value model {p} is not JSON ({e}), so not a value model: {_TAKES}"


def _not_a_model(p: Path, fmt: object) -> str:
    """Why a JSON file read as a value model is not one, by its ``format`` field."""
    family = FORMAT.rsplit("/", 1)[0] + "/"
    if isinstance(fmt, str) and fmt.startswith(family):
        return (f"value model {p} uses the value model format {fmt}; this traversals reads {FORMAT} "
                "(upgrade traversals, or train the model again)")
    if isinstance(fmt, str) and fmt.startswith("traversals-"):
        return f"{p} is a {fmt} file, not a value model ({_TAKES})"
    return f"{p} is not a value model ({FORMAT!r} expected in its 'format' field): {_TAKES}"


def is_model_file(path: str | Path) -> bool:
    """Whether ``path`` holds a value model (what :meth:`ValueModel.save` writes starts with its
    ``format``) or nothing: a file ``traversals train-value --out`` may write over."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return not head.strip() or re.match(rb'\s*\{\s*"format"\s*:\s*"' + re.escape(FORMAT.encode()), head) is not None


def _weights(raw: object, p: Path) -> dict[str, float]:
    """A model file's ``weights``: feature -> a finite number, or :class:`BadInput`."""
    if not isinstance(raw, dict):
        raise BadInput(f"value model {p}: 'weights' is {type(raw).__name__}, not an object of feature weights")
    out = {}
    for k, v in raw.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise BadInput(f"value model {p}: the weight of {str(k)[:60]!r} is {v!r}, not a finite number")
        out[str(k)] = float(v)
    return out


def _meta(raw: object, p: Path) -> dict:
    """A model file's ``meta``, its fields the model reads checked: ``features`` a positive
    integer, ``lexicon`` and ``synonyms`` objects of word lists."""
    if not isinstance(raw, dict):
        raise BadInput(f"value model {p}: 'meta' is {type(raw).__name__}, not an object")
    features = raw.get("features", 1)
    if isinstance(features, bool) or not isinstance(features, int) or features < 1:
        raise BadInput(f"value model {p}: meta.features is {features!r}, not a feature set number (1, 2, ...)")
    for key in ("lexicon", "synonyms"):
        words = raw.get(key)
        if words is not None and not (isinstance(words, dict) and all(
                isinstance(ws, list) and all(isinstance(w, str) for w in ws) for ws in words.values())):
            raise BadInput(f"value model {p}: meta.{key} is not an object of relation -> word list")
    return dict(raw)


def fit(examples: Sequence[Example], *, epochs: int = 8, lr: float = 0.3, l2: float = 1e-4, seed: int = 0,
        model: ValueModel | None = None) -> ValueModel:
    """Logistic regression on soft targets in [0, 1] (cross-entropy), AdaGrad, L2.

    Deterministic for a seed; continues from ``model``'s weights if given (the examples'
    features then have to be of ``model.version``); a new model is of version ``FEATURES``."""
    weights = dict(model.weights) if model else {}
    grad2: dict[str, float] = {}
    order = list(range(len(examples)))
    rng = random.Random(seed)
    for _ in range(epochs):
        rng.shuffle(order)
        for i in order:
            ex = examples[i]
            p = _sigmoid(sum(weights.get(f, 0.0) for f in ex.features))
            g = p - ex.target
            for f in ex.features:
                w = weights.get(f, 0.0)
                gf = g + l2 * w
                grad2[f] = grad2.get(f, 0.0) + gf * gf
                weights[f] = w - lr * gf / math.sqrt(grad2[f] + 1e-8)
    return ValueModel(weights, dict(model.meta) if model else {"features": FEATURES})


def path_keys(node: PathNode) -> list[str]:
    return [n.relation.key for n in node.path() if n.relation is not None]


def mentions_of(node: PathNode) -> list[str]:
    """The labels of the question's own entities (the root's), masked in the question."""
    return [e.label for e in node.path()[0].entities]


class TrainedRollout:
    """A :class:`~.value.RolloutModel` backed by a trained :class:`ValueModel`: no LLM call.

    ``value`` is the search value ``max(stop, go)``; ``answer_value`` the stop head."""

    def __init__(self, model: ValueModel) -> None:
        self.model = model

    async def value(self, question: str, node: PathNode, hops_left: int, usage: Usage) -> float:
        words = question_words(question, mentions_of(node))
        return self.model.search_value(words, path_keys(node), final=hops_left <= 0)

    def answer_value(self, question: str, node: PathNode) -> float:
        return self.model.stop_value(question_words(question, mentions_of(node)), path_keys(node))
