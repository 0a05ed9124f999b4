"""WebQuestions (Berant et al. 2013) as shipped by Think-on-Graph (``webquestions.json``).

Keys used: ``question``, ``answers`` (a list: each answer is its own gold label),
``topic_entity`` (Freebase MID -> name; names become ``topic_entities``),
``qid_topic_entity`` (Wikidata QID -> name, in ``meta``; every question has one), ``url``.
The file is the WebQuestions test set (2,032 questions); ``--split`` is ignored. The
default KG is Wikidata, as Think-on-Graph ran it; the answers are Freebase names.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import BadInput
from .base import Dataset, Gold, Question, dedupe, read_json, require

SUBDIRS = ("questions-only", "webquestions", "WebQuestions")


def load_webquestions(data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    path = require(Path(data_dir), ("webquestions.json",), SUBDIRS, "webquestions")
    data = read_json(path)
    if not isinstance(data, list):
        raise BadInput(f"{path}: expected a JSON list of questions")
    questions = []
    for i, item in enumerate(data):
        answers = item.get("answers", [])
        answers = [answers] if isinstance(answers, str) else list(answers)
        gold = [Gold(a) for a in dedupe(str(a) for a in answers)]
        if answerable_only and not gold:
            continue
        questions.append(
            Question(
                id=f"webquestions:{i}",
                text=str(item.get("question", "")).strip(),
                gold=gold,
                topic_entities=dedupe((item.get("topic_entity") or {}).values()),
                meta={
                    "url": item.get("url"),
                    "topic_mids": list((item.get("topic_entity") or {}).keys()),
                    "qid_topic_entity": item.get("qid_topic_entity") or {},
                },
            )
        )
    return Dataset(
        name="webquestions",
        split="test",
        questions=questions,
        kg_specs=["wikidata"],
        description="WebQuestions test (Think-on-Graph JSON), Wikidata",
        files=[str(path)],
        answerable_only=answerable_only,
    )
