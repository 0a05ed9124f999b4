"""Dates and numbers in one writing, where the same value is written in several ways.

The answer metrics (:mod:`traversals.eval.metrics`) read an answer and a gold label in
these forms, and the search (:func:`traversals.search.machine.names`) reads an answer and a
literal value's label in them too, so a value the metrics score as the right one is also
the KG's value the answer names: ``March 31, 1999`` is the literal ``1999-03-31``,
``1,000`` the literal ``1000``. Here, not in the metrics, so the search does not import
the evaluation.

Dates become ``YYYY-MM-DD`` (or ``YYYY-MM``): ISO ``1941-05-24`` (a leading ``+`` and a
``T...`` time part or a time zone dropped: ``1941-05-24Z``), ``24 May 1941``, ``24th May, 1941``, ``May 24, 1941``, ``May
1941``; English month names and 3-letter abbreviations, in any case; a year before 1000 as
it is written (``3 August 979`` is ``979-08-03``).
"""

from __future__ import annotations

import re

__all__ = ["canonical_dates", "canonical_numbers"]

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORD = r"(?:st|nd|rd|th)?"
#: an XSD time zone: ``Z`` or an offset (``+02:00``, ``-05:00``)
_ZONE = r"(?:z|[+\-]\d{2}:\d{2})"
#: an ISO date, with a time or a time zone (``1999-03-31Z``: an xsd:date with its zone, as a
#: store writes it) dropped
_ISO = re.compile(
    rf"(?<![\w.])[+]?(\d{{3,4}})-(\d{{1,2}})-(\d{{1,2}})"
    rf"(?:t\d{{1,2}}:\d{{2}}(?::\d{{2}}(?:\.\d+)?)?{_ZONE}?|{_ZONE})?(?!\w)",
    re.I,
)
_DMY = re.compile(rf"(?<![\w])(\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MONTH},?\s+(\d{{3,4}})(?!\w)", re.I)
_MDY = re.compile(rf"(?<![\w]){_MONTH}\s+(\d{{1,2}}){_ORD},?\s+(\d{{3,4}})(?!\w)", re.I)
_MY = re.compile(rf"(?<![\w]){_MONTH},?\s+(\d{{4}})(?!\w)", re.I)

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_PLUS = re.compile(r"(?<![\w.])\+(?=\d)")
_DECIMAL = re.compile(r"(?<![\w.])(\d+)\.(\d+)(?![\w.])")
#: a year as xsd:gYear writes it: four digits, zero-padded before 1000 (``0979``), a minus
#: before the common era (``-0500``), maybe the time zone ``Z`` (``1999Z``; not an offset,
#: which would swallow what follows a number: ``1990-12:00``). A minus after a word or a
#: number is a hyphen, not the year's sign (``x-0500``). Any other four-digit number that
#: starts with ``0`` loses its padding too (``Gundam 0079`` is ``gundam 79``): alike in
#: prediction and gold, it still matches itself.
_YEAR = re.compile(r"(?<![\w.\-\u2212])([\-\u2212]?)(\d{4})z?(?![\w:]|\.\d)", re.I)
#: ``44 BC``, ``44 B.C.``, ``44 BCE``, ``44 B.C.E.``, in any case: the year ``-44``.
_BCE = re.compile(r"(?<![\w.\-\u2212])(\d+)\s*b\.?\s?c\.?(?:\s?e\.?)?(?!\w)", re.I)


def _date(y: str, m: int, d: int | None = None) -> str | None:
    if not 1 <= m <= 12 or (d is not None and not 1 <= d <= 31):
        return None
    # the year as a bare year is written (979, not 0979): a gold year is found in a full date
    return f"{int(y)}-{m:02d}" + (f"-{d:02d}" if d is not None else "")


def canonical_dates(text: str) -> str:
    """Rewrite the date forms listed in the module doc to ``YYYY-MM-DD`` / ``YYYY-MM``
    (``May 24, 1941`` -> ``1941-05-24``, ``+0979-08-03T00:00:00Z`` -> ``979-08-03``)."""

    def iso(m: re.Match) -> str:
        return _date(m.group(1), int(m.group(2)), int(m.group(3))) or m.group(0)

    def dmy(m: re.Match) -> str:
        return _date(m.group(3), _MONTHS[m.group(2).lower()], int(m.group(1))) or m.group(0)

    def mdy(m: re.Match) -> str:
        return _date(m.group(3), _MONTHS[m.group(1).lower()], int(m.group(2))) or m.group(0)

    def my(m: re.Match) -> str:
        return _date(m.group(2), _MONTHS[m.group(1).lower()]) or m.group(0)

    text = _ISO.sub(iso, text)
    text = _DMY.sub(dmy, text)
    text = _MDY.sub(mdy, text)
    return _MY.sub(my, text)


def _year(m: re.Match) -> str:
    """A four-digit year unpadded and without its time zone: ``0979`` -> ``979`` (as a year
    before 1000 is written, and as a full date reads it), ``-0500`` -> ``-500`` (as ``500
    BC`` reads), ``1999Z`` -> ``1999``."""
    year = int(m.group(2))
    return ("-" if m.group(1) and year else "") + str(year)


def canonical_numbers(text: str) -> str:
    """Numbers in one writing: no thousands separators (``1,000`` -> ``1000``), no leading
    ``+`` (``+709000``), no trailing fractional zeros (``2.50`` -> ``2.5``, ``3.0`` ->
    ``3``), a year before the common era negative (``44 BC`` -> ``-44``), a year as
    xsd:gYear writes it unpadded and without its time zone (``0979`` -> ``979``, ``-0500``
    -> ``-500``, ``1999Z`` -> ``1999``)."""
    text = _THOUSANDS.sub("", text)
    text = _PLUS.sub("", text)
    text = _BCE.sub(r"-\1", text)
    text = _YEAR.sub(_year, text)

    def dec(m: re.Match) -> str:
        frac = m.group(2).rstrip("0")
        return m.group(1) + ("." + frac if frac else "")

    return _DECIMAL.sub(dec, text)
