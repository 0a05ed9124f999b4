"""Answer metrics: EM-in (Tree-of-Traversals §3.2), Hits@1 and F1 (RwT).

Gold answers are *labels*, each with accepted alternatives (aliases). Accepted gold forms:
a string (one label), a list of strings (one label each), a list of lists of strings (one
label per inner list, first item canonical, rest aliases), or a list of
:class:`~traversals.eval.datasets.Gold`.

Normalisation (:func:`normalize`), applied to predictions and gold alike:

1. Unicode NFKC, ``casefold``, accents stripped (NFKD, combining marks dropped), and the
   letters with a stroke or ligature NFKD keeps whole spelled plainly (``ł`` -> ``l``,
   ``ø`` -> ``o``, ``æ`` -> ``ae``, ``þ`` -> ``th``).
2. Dates to ``YYYY-MM-DD`` (or ``YYYY-MM``; :func:`~traversals.canonical.canonical_dates`,
   shared with the search's reading of literal values): ISO ``1941-05-24`` (a ``T...`` time part
   or a time zone dropped: ``1941-05-24Z``, ``1941-05-24+02:00``), ``24 May 1941``, ``24th May, 1941``, ``May 24, 1941``, ``May 1941``; English
   month names and 3-letter abbreviations. The dashes then become spaces, so a date is
   the tokens ``1941 05 24`` and a gold year ``1941`` is found inside a full date (a year
   before 1000 as it is written: ``3 August 979`` is ``979 08 03``).
3. Numbers: thousands separators removed (``1,000`` -> ``1000``), a leading ``+`` dropped,
   trailing fractional zeros removed (``3.0`` -> ``3``, ``2.50`` -> ``2.5``); number words
   become digits, a compound its one value (``twenty-five`` and ``twenty five`` -> ``25``,
   ``one hundred and five`` -> ``105``, ``two thousand five hundred`` -> ``2500``; words a
   comma parts stay apart). A minus that starts a number is
   kept (``-5``, ``minus 5``), years before the common era are negative (``44 BC`` ->
   ``-44``), and ``thousand`` .. ``trillion`` after a number multiply it out. A year as
   xsd:gYear writes it is read as a bare year is written: unpadded, without a time zone
   (``0979`` -> ``979``, ``-0500`` -> ``-500``, ``1999Z`` -> ``1999``).
4. Apostrophes removed (``God's`` -> ``gods``); underscores (PathQuestion names) and every
   other punctuation or symbol character become a space, except a ``.`` between digits.
5. The articles ``a``, ``an``, ``the`` removed; whitespace collapsed. (A gold string that
   would normalise to nothing, like ``"The"``, is compared with its articles kept.) An ``a``
   that is a letter stays: one followed by a dot (``Howard A. Rodman``, ``L.A. Story``) or
   by the end of a name (the end of the text or a line, ``,`` ``;`` ``|`` ``)`` and the like:
   ``Easy A``, ``Boy A``). A gold that keeps such a letter is also looked for in the
   prediction with its articles kept (``Easy A and Friends``, ``Howard A Rodman``).

Matching is by whole tokens: gold ``"paris"`` is in ``"it is paris texas"`` but gold
``"1"`` is not in ``"1941"``. A prediction that is empty or ``"Cannot find answer"``
scores 0 on every metric, and so does a question without gold labels.

A yes/no question (every gold label ``yes``/``true`` or ``no``/``false``, as QALD-10's ASK
questions and 2WikiMultiHopQA's comparisons) is scored by the prediction's polarity, its
first ``yes``/``no``/``true``/``false`` word (``not true`` is no): containment would
credit ``"No, that is not true"`` against gold ``yes`` (alias ``true``) and ``"Yes, there
is no doubt"`` against gold ``no``. 1 on every metric when the polarities agree, else 0.
"""

from __future__ import annotations

import json
import re
import unicodedata
from decimal import Decimal
from typing import Collection, Iterable, cast

from ..canonical import canonical_dates, canonical_numbers
from ..search.result import NO_ANSWER
from .datasets.base import Gold, GoldJSON

#: A minus sign that starts a number (``-5``, ``(−5``), not a hyphen inside a word or
#: between numbers (``COVID-19``, ``1990-1995``).
_MINUS = "-\u2212"
_SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_APOSTROPHES = re.compile(r"['\u2018\u2019\u02bc`]")
_ARTICLES = {"a", "an", "the"}
#: what follows an ``a`` that is a letter, not the article (an article is followed by a
#: word): a dot at once (the initial of ``Howard A. Rodman``, ``L.A. Story``), or, after
#: spaces, the end of the text or of a line, or a mark that ends a name or an item
#: (``Easy A``, ``Project A, Police Story``, ``"Boy A"``, ``Plan A (film)``). A dot after a
#: space is not one (``Love and a .45``); a hyphen is not one either (``A-Haunting We Will Go``).
_LETTER_A_FOLLOWS = re.compile(r"\.|[ \t]*(?:$|[\n,;:!?|()\[\]{}\"\u201c\u201d\u00ab\u00bb])")
_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
#: ordinals after a tens word: ``twenty-first`` is no 20 (ordinals are not read)
_ORDINALS = frozenset("first second third fourth fifth sixth seventh eighth ninth".split())
#: what may stand between the words of one number: spaces, or a hyphen (``twenty-five``)
_NUMBER_JOIN = re.compile(r"[ \t_]*[-\u2010\u2011]?[ \t_]*")


#: Latin letters whose diacritic is part of the letter (a stroke, a ligature), so NFKD
#: leaves them whole: ``Małgorzata`` and ``Malgorzata``, ``Øresund`` and ``Oresund`` are
#: one name as ``Trémoille`` and ``Tremoille`` are. Lower case: applied after casefold.
_LETTERS = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ð": "d", "ħ": "h", "ı": "i", "ŧ": "t",
                          "ƚ": "l", "ƀ": "b", "æ": "ae", "œ": "oe", "þ": "th"})  # fmt: skip


def _strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize(
        "NFC", "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    ).translate(_LETTERS)


def _punct_to_space(text: str) -> str:
    out = []
    n = len(text)
    for i, ch in enumerate(text):
        cat = unicodedata.category(ch)
        if ch == "." and 0 < i < n - 1 and text[i - 1].isdigit() and text[i + 1].isdigit():
            out.append(ch)
        elif (
            ch in _MINUS
            and i < n - 1
            and text[i + 1].isdigit()
            and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in _MINUS + "._"))
        ):
            out.append("-")
        elif ch == "_" or cat[0] in "PS":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def normalize(text: object, *, drop_articles: bool = True) -> str:
    """The normalised form of an answer or gold string (see the module doc).

    Applied until nothing changes (at most a few rounds), so that the result is a fixpoint
    even when removing an article or a comma brings a month next to a year (``"may the
    1941"``). Articles go in the first round only: it reads the text as written, where a
    letter ``a`` is told from the article by the dot or the end that follows it (``Howard
    A. Rodman``, ``Easy A``); the later rounds keep the ``a`` it kept. So ``normalize`` is
    idempotent except on text with such a letter before another word: ``howard a rodman``,
    with its dot gone, reads as the article."""
    s = _normalize_once(str(text), drop_articles)
    for _ in range(3):
        again = _normalize_once(s, drop_articles=False)
        if again == s:
            break
        s = again
    return s


def _normalize_once(text: str, drop_articles: bool) -> str:
    s = unicodedata.normalize("NFKC", text).casefold()
    s = _strip_accents(s)
    s = canonical_dates(s)
    s = canonical_numbers(s)
    s = _APOSTROPHES.sub("", s)
    spaced = _punct_to_space(s)  # one character for one: a token's place in s is its place here
    matches = [
        m
        for m in re.finditer(r"\S+", spaced)
        if not (drop_articles and m.group() in _ARTICLES and not _letter_a(s, m))
    ]
    tokens = [m.group() for m in matches]
    # whether each token continues the one before as a number's next word can: after
    # spaces or a hyphen, not a comma (``twenty, five`` is two numbers) nor a dropped word
    joined = [i > 0 and _NUMBER_JOIN.fullmatch(s, matches[i - 1].end(), m.start()) is not None
              for i, m in enumerate(matches)]  # fmt: skip
    return " ".join(_signed_and_scaled(_number_words(tokens, joined)))


def _letter_a(text: str, token: re.Match) -> bool:
    """Whether the token ``a`` at ``token`` (in ``text`` with its punctuation spaced) is a
    letter, not the article: a name's last word (``Easy A``, ``Boy A``, ``Project A``: gold
    ``Easy A`` was found in ``Easy Rider``, ``Project A`` was ``Project X``) or an initial
    (``Howard A. Rodman`` was ``Howard Rodman``, another man in MetaQA). ``an`` and
    ``the`` are always articles, and so is an ``A`` before a word with nothing to tell it
    from one (``Brian A Miller`` is ``Brian Miller``): title case writes the article ``A``
    too (``Beyond A Reasonable Doubt`` is MetaQA's ``Beyond a Reasonable Doubt``)."""
    return token.group() == "a" and _LETTER_A_FOLLOWS.match(text, token.end()) is not None


def _number_words(tokens: list[str], joined: list[bool]) -> list[str]:
    """Number words as digits, a compound as its one value: ``twenty-five`` and ``twenty
    five`` -> ``25``, ``two hundred`` -> ``200``, ``one hundred and five`` -> ``105``, ``two
    thousand five hundred`` -> ``2500``. Read word by word, ``twenty-five`` was the tokens
    ``20 5`` and found gold ``5`` and ``20`` but not ``25``. ``joined[i]``: token ``i``
    may continue a number begun before it (see :data:`_NUMBER_JOIN`)."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        value, end = _read_number(tokens, joined, i)
        if value is None:
            out.append(tokens[i])
            i += 1
        else:
            out.append(str(value))
            i = end
    return out


def _read_number(tokens: list[str], joined: list[bool], i: int) -> tuple[int | None, int]:
    """The number the words from ``tokens[i]`` spell and the index after them; (None, i)
    when ``tokens[i]`` begins none. Scales (``thousand`` .. ``trillion``) go down, each
    after a group below 1000; ``and`` is read only after ``hundred`` or a scale and before
    the rest of the number (``two and three`` stays two numbers)."""

    def next_is(j: int, words: Collection[str]) -> bool:
        return j < len(tokens) and joined[j] and tokens[j] in words

    total, last_scale = 0, None
    group, j = _read_group(tokens, joined, i)
    if group is None:
        return None, i
    while group and next_is(j, _SCALES) and (last_scale is None or _SCALES[tokens[j]] < last_scale):
        last_scale = _SCALES[tokens[j]]
        total += group * 10**last_scale
        group, j = 0, j + 1
        k = j + 1 if next_is(j, ("and",)) else j
        if k < len(tokens) and joined[k]:
            more, after = _read_group(tokens, joined, k)
            if more is not None and more > 0:
                group, j = more, after
    return total + group, j


def _read_group(tokens: list[str], joined: list[bool], i: int) -> tuple[int | None, int]:
    """A number below 1000 in words from ``tokens[i]`` (``nineteen``, ``forty-two``, ``three
    hundred and six``, ``twenty-five hundred``): (value, index after it) or (None, i)."""
    value, j = _read_below_100(tokens, joined, i)
    if not value:  # none, or zero, which begins no compound
        return value, j
    if j < len(tokens) and joined[j] and tokens[j] == "hundred":
        value, j = value * 100, j + 1
        k = j + 1 if j < len(tokens) and joined[j] and tokens[j] == "and" else j
        if k < len(tokens) and joined[k]:
            rest, after = _read_below_100(tokens, joined, k)
            if rest:
                value, j = value + rest, after
    return value, j


def _read_below_100(tokens: list[str], joined: list[bool], i: int) -> tuple[int | None, int]:
    if i >= len(tokens):
        return None, i
    word = tokens[i]
    if word in _UNITS:
        return _UNITS[word], i + 1
    if word not in _TENS:
        return None, i
    after = tokens[i + 1] if i + 1 < len(tokens) and joined[i + 1] else ""
    if after in _ORDINALS:
        return None, i  # twenty-first: an ordinal, kept as words
    if 0 < _UNITS.get(after, 0) < 10:
        return _TENS[word] + _UNITS[after], i + 2
    return _TENS[word], i + 1


def _signed_and_scaled(tokens: list[str]) -> list[str]:
    """``minus 5`` -> ``-5``; ``45 million`` -> ``45000000``, ``1.5 billion`` -> ``1500000000``."""
    out: list[str] = []
    for t in tokens:
        if out and _NUMBER.fullmatch(t) and out[-1] == "minus" and not t.startswith("-"):
            out[-1] = "-" + t
        elif out and t in _SCALES and _NUMBER.fullmatch(out[-1]):
            value = Decimal(out[-1]).scaleb(_SCALES[t])
            out[-1] = _plain(value)
        else:
            out.append(t)
    return out


def _plain(value: Decimal) -> str:
    """A decimal written without exponent or trailing fractional zeros."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


#: A normalised gold alternative: (text, articles kept?). A string that normalises to
#: nothing (``"The"``) or to articles alone (``"A"``, the letter kept) is compared with
#: articles kept, on both sides: gold ``A`` is in ``it is A indeed``.
Alt = tuple[str, bool]


def _alt(text: str) -> Alt | None:
    n = normalize(text)
    if set(n.split()) - _ARTICLES:
        return (n, False)
    n = normalize(text, drop_articles=False)
    return (n, True) if n else None


def contains(prediction_norm: str, gold_norm: str) -> bool:
    """Whole-token containment of normalised strings."""
    return bool(gold_norm) and f" {gold_norm} " in f" {prediction_norm} "


class _Pred:
    """A prediction normalised both ways (with articles only when needed)."""

    def __init__(self, text: object):
        self.text = text
        self.norm = normalize(text)
        self._full: str | None = None

    def full(self) -> str:
        if self._full is None:
            self._full = normalize(self.text, drop_articles=False)
        return self._full

    def forms(self, alt: Alt) -> tuple[str, ...]:
        """The prediction's forms ``alt`` is looked for in. A gold that keeps a letter ``a``
        (``easy a``, ``howard a rodman``) is looked for in the articles-kept form too: the
        prediction's ``a`` is read as the article when a word follows it, so ``Easy A and
        Friends with Benefits`` and ``Howard A Rodman`` (no dot) lost the letter the gold
        has and scored 0; kept, ``easy a`` is still not in ``easy rider``."""
        if alt[1]:
            return (self.full(),)
        if "a" in alt[0].split():
            return (self.norm, self.full())
        return (self.norm,)

    def has(self, alt: Alt) -> bool:
        return any(contains(f, alt[0]) for f in self.forms(alt))

    def equals(self, alt: Alt) -> bool:
        return alt[0] in self.forms(alt)


def as_gold(gold: object) -> list[Gold]:
    """Any accepted gold form -> list of :class:`Gold` labels."""
    if gold is None:
        return []
    if isinstance(gold, (str, Gold, dict)):
        gold = [gold]
    # Parsed JSON (or Gold objects): each item is a form Gold.from_json reads.
    return [Gold.from_json(g) for g in cast("Iterable[GoldJSON]", gold)]


def _labels(gold: object) -> list[frozenset[Alt]]:
    """Gold labels as sets of normalised alternatives, duplicate labels merged (the
    authors' scorer used a set of labels)."""
    out: list[frozenset[Alt]] = []
    for g in as_gold(gold):
        alts = frozenset(a for a in (_alt(x) for x in g.alternatives) if a)
        if alts and alts not in out:
            out.append(alts)
    return out


def is_no_answer(prediction: object) -> bool:
    if prediction is None:
        return True
    text = str(prediction).strip()
    return not text or text.casefold().rstrip(".") == NO_ANSWER.casefold()


_YES, _NO = frozenset({"yes", "true"}), frozenset({"no", "false"})
#: after ``no``, words that make it a determiner, not the answer no: ``No answer``, ``No
#: information`` are abstentions (as ``Cannot find answer`` is), not a no
_ABSTAIN_NOUNS = frozenset({"answer", "answers", "idea", "information", "info", "data", "result", "results",
                            "record", "records", "evidence", "match", "matches"})


def _gold_polarity(labels: list[frozenset[Alt]]) -> bool | None:
    """True (yes) or False (no) when the gold is a yes/no answer, else None."""
    words = {a[0] for alts in labels for a in alts}
    if words and words <= _YES:
        return True
    if words and words <= _NO:
        return False
    return None


def polarity(prediction: object) -> bool | None:
    """The answer a yes/no prediction gives: its first ``yes``/``no``/``true``/``false``
    word (after ``not``, ``true``/``false`` flips; a ``no`` that starts ``no answer``, ``no
    information`` ... is an abstention, not a no); None when it has none."""
    tokens = normalize(prediction).split()
    for i, t in enumerate(tokens):
        if t == "no" and i + 1 < len(tokens) and tokens[i + 1] in _ABSTAIN_NOUNS:
            continue  # "No answer found": an abstention, no polarity
        if t in _YES or t in _NO:
            said = t in _YES
            return not said if t in ("true", "false") and i and tokens[i - 1] == "not" else said
    return None


def _boolean_score(prediction: object, labels: list[frozenset[Alt]]) -> float | None:
    """1.0 / 0.0 for a yes/no question (the polarities agree or not), None otherwise."""
    want = _gold_polarity(labels)
    if want is None:
        return None
    return float(not is_no_answer(prediction) and polarity(prediction) is want)


def em_in(prediction: object, gold: object) -> float:
    """Exact Match Included: for each gold label, 1 if any of its alternatives appears
    (whole tokens, normalised) in the prediction; averaged over labels (a yes/no question:
    by polarity, see the module's docstring)."""
    labels = _labels(gold)
    if is_no_answer(prediction) or not labels:
        return 0.0
    if (yes_no := _boolean_score(prediction, labels)) is not None:
        return yes_no
    pred = _Pred(prediction)
    # each item normalised on its own too: normalising the whole joins neighbours ("Taken 2,
    # A Million Ways …" read "taken 2000000 ways", "2012 | BC Rich" "-2012 rich")
    items = [_Pred(i) for i in split_items(prediction, _with_commas(gold))]
    return sum(any(pred.has(a) or any(i.has(a) for i in items) for a in alts) for alts in labels) / len(labels)


# ---------------------------------------------------------------------------- answer sets

_SPLIT_STRONG = re.compile(r"\s*(?:\||;|\n)\s*")
_QUOTES = "\"'`\u201c\u201d\u2018\u2019 "


def _clean(item: str) -> str:
    return item.strip().strip(_QUOTES).rstrip(".").strip()


def _join_kept(pieces: list[str], keep: Collection[str], sep: str = ",") -> list[str]:
    """``pieces`` split at ``sep`` (``","``; ``";"``: any of ``|``, ``;``, a newline) with the
    runs that together spell a name in ``keep`` (normalised) joined again, longest first."""
    if not keep:
        return pieces
    span = 1 + max(k.count(",") if sep == "," else len(_SPLIT_STRONG.findall(k)) for k in keep)
    norms = {normalize(k) for k in keep} - {""}
    out, i = [], 0
    while i < len(pieces):
        j = next(
            (j for j in range(min(len(pieces), i + span), i + 1, -1)
             if normalize(_clean(sep.join(pieces[i:j]))) in norms),
            i + 1,
        )  # fmt: skip
        out.append(sep.join(pieces[i:j]))
        i = j
    return out


def split_items(prediction: object, keep: Collection[str] = ()) -> list[str]:
    """A prediction as a ranked list of answer items.

    ``["A", "B"]`` / ``[A, B]`` (a list literal) gives its items; otherwise the text is split
    on ``|``, ``;`` or newlines when it has any, else on commas. Dates such as
    ``May 24, 1941`` and numbers such as ``1,000`` are protected from the comma split, and
    so is a name in ``keep`` (the gold answers that contain a comma: ``Hi, Mom!`` in
    ``Blow Out, Hi, Mom!`` is one item). Surrounding quotes, whitespace and a final period
    are stripped; empty items dropped.
    """
    if is_no_answer(prediction):
        return []
    text = str(prediction).strip()
    items: list[str] | None = None
    if text.startswith("[") and text.endswith("]"):
        try:
            value = json.loads(text)
            if isinstance(value, list):
                items = [str(v) for v in value]
        except ValueError:
            text = text[1:-1]
    if items is None:
        text = canonical_numbers(canonical_dates(text))
        if _SPLIT_STRONG.search(text):
            items = _join_kept(_SPLIT_STRONG.split(text), [k for k in keep if _SPLIT_STRONG.search(k)], sep=";")
        else:
            items = _join_kept(text.split(","), [k for k in keep if "," in k])
    return [item for item in map(_clean, items) if item]


def _with_commas(gold: object) -> list[str]:
    """The gold alternatives that contain a comma, ``|``, ``;`` or a newline: no split cuts
    them ("Campfire Stories;Comes Around Gos Around", a WebQuestions answer, is one)."""
    return [a for g in as_gold(gold) for a in g.alternatives if "," in a or _SPLIT_STRONG.search(a)]


def _item_matches(item: _Pred, alts: frozenset[Alt]) -> bool:
    return any(item.has(a) for a in alts)


def _whole_is_gold(prediction: object, labels: list[frozenset[Alt]]) -> bool:
    whole = _Pred(prediction)
    return any(whole.equals(a) for alts in labels for a in alts)


def hits_at_1(prediction: object, gold: object) -> float:
    """1 if the top-ranked predicted item (the first item of a list answer, or the whole
    answer) contains any alternative of any gold label, or if the whole prediction equals
    one (so ``"Paris, Texas"`` is not cut at its comma); else 0."""
    labels = _labels(gold)
    items = split_items(prediction, _with_commas(gold))
    if not items or not labels:
        return 0.0
    if (yes_no := _boolean_score(prediction, labels)) is not None:
        return yes_no
    top = _Pred(items[0])
    if any(_item_matches(top, alts) for alts in labels) or _whole_is_gold(prediction, labels):
        return 1.0
    return 0.0


def f1(prediction: object, gold: object) -> float:
    """F1 of the predicted answer set against the gold labels. A predicted item is correct
    when it contains an alternative of some gold label (precision over distinct predicted
    items); a gold label is recalled when some item contains one of its alternatives. If
    the whole prediction equals a gold alternative it is one item."""
    labels = _labels(gold)
    items = split_items(prediction, _with_commas(gold))
    if not items or not labels:
        return 0.0
    if (yes_no := _boolean_score(prediction, labels)) is not None:
        return yes_no
    if _whole_is_gold(prediction, labels):
        preds = [_Pred(prediction)]
    else:
        seen: dict[str, _Pred] = {}
        for i in items:
            p = _Pred(i)
            key = p.norm or normalize(i, drop_articles=False)
            if key:
                seen.setdefault(key, p)
        preds = list(seen.values())
    if not preds:
        return 0.0
    correct = sum(any(_item_matches(p, alts) for alts in labels) for p in preds)
    recalled = sum(any(_item_matches(p, alts) for p in preds) for alts in labels)
    if not correct or not recalled:
        return 0.0
    precision, recall = correct / len(preds), recalled / len(labels)
    return 2 * precision * recall / (precision + recall)


def score(prediction: object, gold: object) -> dict[str, float]:
    """All metrics of one answer: ``{"hits@1", "em_in", "f1"}`` (fractions in [0, 1])."""
    return {"hits@1": hits_at_1(prediction, gold), "em_in": em_in(prediction, gold), "f1": f1(prediction, gold)}


METRICS = ("hits@1", "em_in", "f1")
