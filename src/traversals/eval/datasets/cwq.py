"""ComplexWebQuestions (Talmor & Berant 2018) as shipped by Think-on-Graph (``cwq.json``).

Keys used: ``question``, ``answer`` (one string: a single gold label), ``topic_entity``
(Freebase MID -> name; the names become ``topic_entities``), ``qid_topic_entity`` (Wikidata
QID -> name, kept in ``meta``), ``ID`` (kept as ``meta["source_id"]``). The file is the
CWQ test set (3,531 questions); ``--split`` is ignored. The native KG is Freebase, for
which no backend exists here: run with ``--kg wikidata`` (3,054 questions have Wikidata
topic entities) or use it for CoT / metric checks.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import BadInput
from .base import Dataset, Gold, Question, dedupe, read_json, require

SUBDIRS = ("questions-only", "cwq", "CWQ")


def load_cwq(data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    path = require(Path(data_dir), ("cwq.json",), SUBDIRS, "cwq")
    data = read_json(path)
    if not isinstance(data, list):
        raise BadInput(f"{path}: expected a JSON list of questions")
    questions = []
    for i, item in enumerate(data):
        answers = item.get("answer", [])
        answers = [answers] if isinstance(answers, str) else list(answers)
        gold = [Gold(a) for a in dedupe(str(a) for a in answers)]
        if answerable_only and not gold:
            continue
        questions.append(
            Question(
                id=f"cwq:{i}",
                text=str(item.get("question", "")).strip(),
                gold=gold,
                topic_entities=dedupe((item.get("topic_entity") or {}).values()),
                meta={
                    "source_id": item.get("ID"),
                    "compositionality_type": item.get("compositionality_type"),
                    "topic_mids": list((item.get("topic_entity") or {}).keys()),
                    "qid_topic_entity": item.get("qid_topic_entity") or {},
                },
            )
        )
    return Dataset(
        name="cwq",
        split="test",
        questions=questions,
        kg_specs=["freebase"],
        description="ComplexWebQuestions test (Think-on-Graph JSON); native KG Freebase (not available)",
        files=[str(path)],
        answerable_only=answerable_only,
    )
