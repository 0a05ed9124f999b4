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

from .base import Dataset, require
from .tog import load_tog_json

SUBDIRS = ("questions-only", "cwq", "CWQ")


def load_cwq(data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    path = require(Path(data_dir), ("cwq.json",), SUBDIRS, "cwq")
    return load_tog_json(
        path,
        name="cwq",
        answer_key="answer",
        meta_keys={"source_id": "ID", "compositionality_type": "compositionality_type"},
        kg_specs=["freebase"],
        description="ComplexWebQuestions test (Think-on-Graph JSON); native KG Freebase (not available)",
        answerable_only=answerable_only,
    )
