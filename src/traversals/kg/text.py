"""The normal form of label text, shared by the embedded store's search and the linking of
one entity across KGs (``search.kgset``): what one calls the same label the other does."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["fold_accents", "normalise"]

#: Combining marks removed by :func:`normalise`: the generic diacritics that accented
#: Latin, Greek and Cyrillic letters decompose into (U+0300-036F and its supplements,
#: U+1AB0-1AFF, U+1DC0-1DFF, U+20D0-20FF, U+FE20-FE2F). Script-specific marks (Indic
#: vowel signs and viramas, kana voicing marks, Arabic and Hebrew points) stay: dropping
#: them would turn one letter or word into another.
_DIACRITICS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def fold_accents(text: str) -> str:
    """``text`` without accents: NFKD, generic combining diacritics dropped, then NFC
    (``"Zoë Müller"`` -> ``"Zoe Muller"``; compatibility forms such as full-width
    letters and ligatures are folded too)."""
    return unicodedata.normalize("NFC", _DIACRITICS.sub("", unicodedata.normalize("NFKD", text)))


def normalise(text: str) -> str:
    """Search normal form: accents dropped (:func:`fold_accents`), casefold, ``_`` ->
    space, collapsed whitespace, no punctuation at either end
    (``"  The_Gumball  Rally!"`` -> ``"the gumball rally"``, ``"Zoë"`` -> ``"zoe"``).

    The label index is built with this function and every query goes through it too, so
    the normalised and fuzzy stages of search are accent- and case-insensitive."""
    t = " ".join(fold_accents(text.casefold()).replace("_", " ").split())
    start, end = 0, len(t)
    while start < end and (t[start].isspace() or unicodedata.category(t[start]).startswith("P")):
        start += 1
    while end > start and (t[end - 1].isspace() or unicodedata.category(t[end - 1]).startswith("P")):
        end -= 1
    return t[start:end]
