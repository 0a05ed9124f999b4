"""MusicBrainz-x-Wikidata (the paper's 109 questions over MusicBrainz + Wikidata).

Not public: the loader reads the authors' CSV (``data/MusicbrainzxWikidata.csv`` in their
code, read there with ``pandas.read_csv(header=0)`` and the columns ``Question``,
``Answer`` and ``Type``). ``--data`` is the CSV itself or a folder holding it (directly or in
``data/``). Columns are found by header name, case-insensitively: the question column is
``question``/``query`` (or the first header containing "question"), the answer column
``answer``/``answers``/``label``/``gold`` (or the first containing "answer"), the type
column ``type``/``question_type`` (optional). Rows with an empty question are skipped (as
the authors skip NaN rows), but ids keep the 0-based data-row number
(``musicbrainz-x-wikidata:<row>``). An answer cell is one gold label, unless it is a
JSON/Python list literal (``["a", "b"]``: one label per item). KGs: Wikidata + MusicBrainz.
"""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

from ...errors import BadInput
from .base import Dataset, Gold, Question, dedupe, require

NAMES = ("MusicbrainzxWikidata.csv", "musicbrainzxwikidata.csv", "musicbrainz-x-wikidata.csv")


def _column(headers: list[str], exact: tuple[str, ...], contains: str) -> int | None:
    low = [h.strip().lower() for h in headers]
    for name in exact:
        if name in low:
            return low.index(name)
    for i, h in enumerate(low):
        if contains and contains in h:
            return i
    return None


def _answers(cell: str) -> list[str]:
    cell = cell.strip()
    if cell.startswith("[") and cell.endswith("]"):
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(cell)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, list):
                return dedupe(str(v) for v in value)
    return [cell] if cell else []


def load_musicbrainz(data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    data_dir = Path(data_dir)
    path = data_dir if data_dir.is_file() else require(data_dir, NAMES, ("data",), "musicbrainz-x-wikidata")
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, csv.Error, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read {path}: {e}") from e
    if not rows:
        raise BadInput(f"{path} is empty")
    headers = rows[0]
    qcol = _column(headers, ("question", "query", "questions"), "question")
    acol = _column(headers, ("answer", "answers", "label", "gold", "gold answer"), "answer")
    tcol = _column(headers, ("type", "question_type", "question type", "qtype"), "")
    if qcol is None or acol is None or qcol == acol:  # one header naming both: not comma-separated?
        raise BadInput(
            f"{path}: need a question and an answer column (comma-separated), found headers {headers}"
        )
    questions = []
    for row_no, row in enumerate(rows[1:]):
        cell = lambda c: row[c].strip() if c is not None and c < len(row) else ""  # noqa: E731
        text = cell(qcol)
        if not text:
            continue
        gold = [Gold(a) for a in _answers(cell(acol))]
        if answerable_only and not gold:
            continue
        meta: dict[str, int | str] = {"row": row_no}
        if tcol is not None and cell(tcol):
            meta["type"] = cell(tcol)
        questions.append(Question(id=f"musicbrainz-x-wikidata:{row_no}", text=text, gold=gold, meta=meta))
    return Dataset(
        name="musicbrainz-x-wikidata",
        split="all",
        questions=questions,
        kg_specs=["wikidata", "musicbrainz"],
        description="MusicBrainz-x-Wikidata (authors' CSV), Wikidata + MusicBrainz",
        files=[str(path)],
        answerable_only=answerable_only,
    )
