"""Think-on-Graph's question files (``cwq.json``, ``webquestions.json``): one reader.

Each item has ``question``, an answer key (a string or a list: each answer its own gold
label), ``topic_entity`` (Freebase MID -> name; the names become ``topic_entities``) and
``qid_topic_entity`` (Wikidata QID -> name, kept in ``meta``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ...errors import BadInput
from .base import Dataset, Gold, Question, dedupe, read_json


def is_fragment(answer: str, answers: Sequence[str]) -> bool:
    """Is ``answer`` debris of another answer in ``answers``?

    Think-on-Graph's WebQuestions file cut some answers that contain an apostrophe at the
    apostrophe and kept the tail with a stray quote as one more answer: beside
    ``Battle of Hoke's Run`` stands ``s Run" ``, beside ``Ginevra de' Benci`` stands
    `` Benci" ``. Such an answer has a ``"`` and every piece of it between quotes is the
    part of another answer after (or before) an apostrophe. It is no gold answer: kept, it
    would be a label no correct prediction contains, and EM-in and F1 would count it."""
    if '"' not in answer:
        return False
    pieces = [p.strip() for p in answer.split('"') if p.strip()]
    others = [o for o in answers if o != answer and '"' not in o]
    return bool(pieces) and all(
        any(o.endswith(("'" + p, "' " + p)) or o.startswith(p + "'") for o in others) for p in pieces
    )


def load_tog_json(
    path: Path,
    *,
    name: str,
    answer_key: str,
    meta_keys: dict[str, str],
    kg_specs: Sequence[str],
    description: str,
    answerable_only: bool,
) -> Dataset:
    """``meta_keys`` maps a ``meta`` field to the item key it is copied from."""
    data = read_json(path)
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise BadInput(f"{path}: expected a JSON list of questions")
    if data and not any(answer_key in item for item in data):  # another benchmark's file
        raise BadInput(f"{path}: no question has an {answer_key!r} key: not the {name} file")
    questions = []
    for i, item in enumerate(data):
        answers = item.get(answer_key, [])
        answers = [answers] if isinstance(answers, str) else list(answers)
        texts = dedupe(str(a) for a in answers)
        gold = [Gold(a) for a in texts if not is_fragment(a, texts)]
        if answerable_only and not gold:
            continue
        topic = item.get("topic_entity") or {}
        questions.append(
            Question(
                id=f"{name}:{i}",
                text=str(item.get("question", "")).strip(),
                gold=gold,
                topic_entities=dedupe(topic.values()),
                meta={
                    **{field: item.get(key) for field, key in meta_keys.items()},
                    "topic_mids": list(topic.keys()),
                    "qid_topic_entity": item.get("qid_topic_entity") or {},
                },
            )
        )
    return Dataset(
        name=name,
        split="test",
        questions=questions,
        kg_specs=list(kg_specs),
        description=description,
        files=[str(path)],
        answerable_only=answerable_only,
    )
