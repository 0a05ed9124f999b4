"""Benchmark loaders. ``load_dataset(name, data_dir, split, answerable_only)``.

Every loader takes ``(data_dir, split="dev", answerable_only=False)`` and returns a
:class:`Dataset` whose questions carry stable ids, gold labels (with aliases), topic
entities when the benchmark gives them, and which KG(s) they need (``kg_specs``).
``data_dir`` may be the benchmark's own folder or the folder above it (``../shared/data``).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable

from ...errors import BadInput
from .base import DEFAULT_SEED, Dataset, Gold, Question, sample_questions
from .cwq import load_cwq
from .metaqa import load_metaqa
from .musicbrainz import load_musicbrainz
from .pathquestion import load_pathquestion
from .qald10 import load_qald10
from .questions import load_questions
from .webquestions import load_webquestions
from .wikimultihop import load_2wikimultihopqa

Loader = Callable[..., Dataset]

#: name -> loader(data_dir, split="dev", answerable_only=False) -> Dataset
DATASETS: dict[str, Loader] = {
    "metaqa-1hop": partial(load_metaqa, 1),
    "metaqa-2hop": partial(load_metaqa, 2),
    "metaqa-3hop": partial(load_metaqa, 3),
    "pq-2h": partial(load_pathquestion, "pq-2h"),
    "pq-3h": partial(load_pathquestion, "pq-3h"),
    "pql-2h": partial(load_pathquestion, "pql-2h"),
    "pql-3h": partial(load_pathquestion, "pql-3h"),
    "qald10": load_qald10,
    "cwq": load_cwq,
    "webquestions": load_webquestions,
    "2wikimultihopqa": load_2wikimultihopqa,
    "musicbrainz-x-wikidata": load_musicbrainz,
    "questions": load_questions,  # your own file of questions and answers, over --kg
}

#: names of benchmarks that are not loaded here and would be mistaken for one that is
NOT_THESE = {
    "webqsp": "WebQSP (1,639 test questions with SPARQL parses) is not WebQuestions (2,032); "
              "no WebQSP loader exists: use 'questions' with your own copy of it",
}

#: accepted alternative spellings
ALIASES = {
    "qald-10": "qald10",
    "2wiki": "2wikimultihopqa",
    "2wikimultihop": "2wikimultihopqa",
    "musicbrainz": "musicbrainz-x-wikidata",
    "music-x-wiki": "musicbrainz-x-wikidata",
    "custom": "questions",
}


def canonical_name(name: str) -> str:
    key = name.strip().lower()
    if key in NOT_THESE:
        raise BadInput(f"unknown dataset {name!r}: {NOT_THESE[key]}")
    key = ALIASES.get(key, key)
    if key not in DATASETS:
        raise BadInput(f"unknown dataset {name!r}; choose one of: {', '.join(DATASETS)}")
    return key


def load_dataset(
    name: str, data_dir: str | Path, split: str = "dev", answerable_only: bool = False
) -> Dataset:
    """Load benchmark ``name`` from ``data_dir`` (see :data:`DATASETS`)."""
    key = canonical_name(name)
    data = Path(data_dir).expanduser()
    if not data.exists():
        raise BadInput(f"--data {data_dir}: no such file or directory")
    dataset = DATASETS[key](data, split=split, answerable_only=answerable_only)
    if not dataset.questions:  # an empty file, or one whose rows are not this benchmark's
        subset = " answerable" if answerable_only else ""
        raise BadInput(f"{key}: no{subset} questions in {', '.join(dataset.files) or data}")
    return dataset


__all__ = [
    "DATASETS",
    "DEFAULT_SEED",
    "Dataset",
    "Gold",
    "Question",
    "canonical_name",
    "load_dataset",
    "sample_questions",
]
