"""WebQuestions (Berant et al. 2013) as shipped by Think-on-Graph (``webquestions.json``).

Keys used: ``question``, ``answers`` (a list: each answer is its own gold label),
``topic_entity`` (Freebase MID -> name; names become ``topic_entities``),
``qid_topic_entity`` (Wikidata QID -> name, in ``meta``; every question has one), ``url``.
The file is the WebQuestions test set (2,032 questions); ``--split`` is ignored. The
default KG is Wikidata, as Think-on-Graph ran it; the answers are Freebase names.
"""

from __future__ import annotations

from pathlib import Path

from .base import Dataset, require
from .tog import load_tog_json

SUBDIRS = ("questions-only", "webquestions", "WebQuestions")


def load_webquestions(data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    path = require(Path(data_dir), ("webquestions.json",), SUBDIRS, "webquestions")
    return load_tog_json(
        path,
        name="webquestions",
        answer_key="answers",
        meta_keys={"url": "url"},
        kg_specs=["wikidata"],
        description="WebQuestions test (Think-on-Graph JSON), Wikidata",
        answerable_only=answerable_only,
    )
