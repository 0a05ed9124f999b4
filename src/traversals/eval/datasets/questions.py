"""Your own questions: a file of questions and gold answers over your own KG (``questions``).

``--data`` is the file, or a folder holding ``{split}.jsonl`` / ``.json`` / ``.csv`` /
``.tsv`` / ``.txt`` (so ``--split test`` picks ``test.jsonl``). Formats, by extension:

- ``.jsonl`` -- one JSON object a line (blank lines skipped)::

      {"question": "who directed [Inception]", "answers": ["Christopher Nolan"]}
      {"id": "q7", "question": "when was it released", "answers": [["2010", "2010-07-16"]],
       "topic_entities": ["Inception"]}

  ``question`` is required; ``answers`` (or ``answer``) lists the gold labels, each a
  string, a list of accepted spellings (the canonical one first) or ``{"answer": ...,
  "aliases": [...]}``; ``id`` (string or number, unique in the file) and
  ``topic_entities`` (entity names the search starts from instead of the ``[...]`` spans
  of the question) are optional; other fields are kept in the results' ``meta``.
- ``.json`` -- a list of the same objects, or ``{"questions": [...]}``.
- ``.csv`` -- a header row with a ``question`` column and optional ``answers`` (or
  ``answer``, as in JSON), ``id`` and ``topic_entities`` columns; answers and topic entities are separated by ``|``.
- ``.tsv`` / ``.txt`` -- ``question<TAB>answer1|answer2`` a line, as MetaQA writes them
  (the answers may be left out); a first line whose first field is ``question`` is a
  header and skipped.

A question's id is ``questions:<its id>``, or ``questions:<n>`` for the n-th question of the
file (1-based) when it has none: keep them stable to resume a run after editing the file.
Questions without answers are answered and score 0; ``--answerable-only`` drops them. The
KG is not in the file: pass ``--kg SPEC``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any, Iterator

from ...errors import BadInput
from .base import Dataset, Gold, Question, dedupe, read_lines

NAME = "questions"
EXTENSIONS = (".jsonl", ".json", ".csv", ".tsv", ".txt")
#: fields of a JSON question that are read, not kept in ``meta``
_READ = {"question", "answers", "answer", "id", "topic_entities"}


def _file(data: Path, split: str) -> Path:
    if data.is_file():
        return data
    for ext in EXTENSIONS:
        if (data / f"{split}{ext}").is_file():
            return data / f"{split}{ext}"
    names = ", ".join(f"{split}{ext}" for ext in EXTENSIONS)
    raise BadInput(f"{NAME}: no question file in {data} (looked for {names}); give --data FILE")


def _rows(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, raw row) of each question in the file: a dict, or a TSV line's fields."""
    ext = path.suffix.lower()
    if ext == ".jsonl":
        for n, line in enumerate(read_lines(path), 1):
            if line.strip():
                yield f"{path} line {n}", _json(line, f"{path} line {n}")
    elif ext == ".json":
        data = _json("\n".join(read_lines(path)), str(path))
        items = data.get("questions") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise BadInput(f'{path}: a list of questions (or {{"questions": [...]}}) expected')
        for n, item in enumerate(items, 1):
            yield f"{path} question {n}", item
    elif ext == ".csv":
        reader = csv.DictReader(io.StringIO("\n".join(read_lines(path))))
        if "question" not in (reader.fieldnames or []):
            raise BadInput(f"{path}: the header row needs a 'question' column (has {reader.fieldnames or 'none'})")
        for row in reader:
            yield f"{path} line {reader.line_num}", {
                "question": row.get("question") or "",
                "answers": (row.get("answers", row.get("answer")) or "").split("|"),
                **({"id": row["id"]} if (row.get("id") or "").strip() else {}),
                "topic_entities": (row.get("topic_entities") or "").split("|"),
            }
    elif ext in (".tsv", ".txt"):
        for n, line in enumerate(read_lines(path), 1):
            if line.strip():
                text, *rest = line.split("\t")
                if n == 1 and text.strip().lower() == "question":  # a header row, not a question
                    continue
                if len(rest) > 1:
                    raise BadInput(f"{path} line {n}: {len(rest) + 1} tab-separated columns; a question file's line "
                                   "is the question, a tab and its answers separated by '|' (a PathQuestion "
                                   "file's third column, the path, is read by the pq-* datasets)")
                answers = rest[0] if rest else ""
                yield f"{path} line {n}", {"question": text, "answers": answers.split("|")}
    else:
        raise BadInput(f"{NAME}: --data {path} is not a question file ({', '.join(EXTENSIONS)})")


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise BadInput(f"{where}: not JSON ({e})") from None


def _number_text(item: Any) -> Any:
    """A JSON number given as an answer (``"answers": [3]``, ``"answer": 1976``) as its text;
    anything else as it is."""
    if isinstance(item, int) and not isinstance(item, bool):
        return str(item)
    if isinstance(item, float) and math.isfinite(item):
        return repr(item)
    return item


def _gold(raw: Any, where: str) -> list[Gold]:
    if raw is None:
        return []
    raw = _number_text(raw)
    if isinstance(raw, (str, dict)):
        raw = [raw]
    if not isinstance(raw, list):
        raise BadInput(f"{where}: 'answers' must be a list of answers, got {type(raw).__name__}")
    gold: list[Gold] = []
    for item in map(_number_text, raw):
        if isinstance(item, str) and not item.strip():
            continue  # an empty CSV/TSV cell
        try:
            g = Gold.from_json(item)
        except (BadInput, KeyError, TypeError):
            raise BadInput(f"{where}: an answer is a string, a list of spellings or "
                           f'{{"answer": ..., "aliases": [...]}}, got {json.dumps(item)[:80]}') from None
        g = Gold(g.answer.strip(), tuple(a.strip() for a in g.aliases if a.strip()))
        if g.answer and g not in gold:
            gold.append(g)
    return gold


def _question(row: Any, where: str, n: int) -> Question:
    if not isinstance(row, dict):
        raise BadInput(f"{where}: a question is an object with a 'question' field, got {type(row).__name__}")
    text = row.get("question")
    if not isinstance(text, str) or not text.strip():
        raise BadInput(f"{where}: no 'question' text")
    topics = row.get("topic_entities") or []
    if isinstance(topics, str):
        topics = [topics]
    if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
        raise BadInput(f"{where}: 'topic_entities' must be a list of entity names")
    qid = row.get("id")
    if qid is not None and (isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip()):
        raise BadInput(f"{where}: 'id' must be a non-empty string or a number")
    return Question(
        id=f"{NAME}:{str(qid).strip() if qid is not None else n}",
        text=text.strip(),
        gold=_gold(row.get("answers", row.get("answer")), where),
        topic_entities=dedupe(topics),
        meta={k: v for k, v in row.items() if k not in _READ},
    )


def load_questions(data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    """The questions of a user's file (see the module's docstring)."""
    path = _file(Path(data_dir), split)
    questions: list[Question] = []
    seen: dict[str, str] = {}
    for n, (where, row) in enumerate(_rows(path), 1):
        q = _question(row, where, n)
        numbered = isinstance(row, dict) and row.get("id") is None
        if q.id in seen:
            why = ("; a question without an id is numbered by its place in the file, give it an id"
                   if numbered or " (numbered)" in seen[q.id] else "")
            raise BadInput(f"{where}: id {q.id.split(':', 1)[1]!r} again (first at {seen[q.id]}); "
                           f"ids must be unique{why}")
        seen[q.id] = where + (" (numbered)" if numbered else "")
        questions.append(q)
    without = sum(not q.gold for q in questions)
    if answerable_only:
        questions = [q for q in questions if q.gold]
    note = f"; {without} without answers" + (" dropped" if answerable_only else " (score 0; --answerable-only drops them)")
    return Dataset(
        name=NAME,
        split=split if not Path(data_dir).is_file() else path.stem,
        questions=questions,
        kg_specs=[],  # the file names no KG: --kg
        description=f"your questions from {path.name}" + (note if without else ""),
        files=[str(path.resolve())],
        answerable_only=answerable_only,
    )
