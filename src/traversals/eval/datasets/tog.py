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
    if not isinstance(data, list):
        raise BadInput(f"{path}: expected a JSON list of questions")
    questions = []
    for i, item in enumerate(data):
        answers = item.get(answer_key, [])
        answers = [answers] if isinstance(answers, str) else list(answers)
        gold = [Gold(a) for a in dedupe(str(a) for a in answers)]
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
