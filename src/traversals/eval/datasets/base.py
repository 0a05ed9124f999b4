"""Values shared by every benchmark loader: gold answers, questions, datasets, sampling.

A gold answer is a *label* with accepted alternative spellings (:class:`Gold`). A question
has one or more labels; EM-in averages over labels, and a label counts as found when any
of its alternatives is found (see :mod:`traversals.eval.metrics`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence, Union

from ...errors import BadInput

#: The paper's (and ReAct's) sampling seed.
DEFAULT_SEED = 233


@dataclass(frozen=True)
class Gold:
    """One gold label: the canonical ``answer`` and other accepted ``aliases``."""

    answer: str
    aliases: tuple[str, ...] = ()

    @property
    def alternatives(self) -> tuple[str, ...]:
        """``answer`` followed by the aliases, without duplicates, order kept."""
        return tuple(dict.fromkeys((self.answer, *self.aliases)))

    def to_json(self) -> list[str]:
        """A label as a JSON list of accepted strings, the canonical answer first."""
        return list(self.alternatives)

    @classmethod
    def from_json(cls, value: GoldJSON) -> Gold:
        if isinstance(value, Gold):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, dict):  # tolerate {"answer": .., "aliases": [..]}
            if "answer" not in value:
                raise BadInput(f'a gold label object needs an "answer", got {_shown(value)}')
            answer = _spellings(value["answer"], "its answer")
            aliases = value.get("aliases") or ()
            # one alias written as a string is one alias, not one a letter
            return cls(answer[0], answer[1:] + _spellings([aliases] if isinstance(aliases, str) else aliases, "its aliases"))
        items = _spellings(value, "a gold label")
        if not items:
            raise BadInput("a gold label needs at least one string")
        return cls(items[0], items[1:])


def _shown(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)[:80]
    except (TypeError, ValueError):
        return repr(value)[:80]


def _spellings(value: Any, what: str) -> tuple[str, ...]:
    """A string, a number or a list of them as strings; anything else is refused (a nested
    list or an object stringified would be a spelling nobody answers, or anybody)."""
    def one(v: Any) -> str | None:
        if isinstance(v, str):
            return v
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
        return None

    if (single := one(value)) is not None:
        return (single,)
    if isinstance(value, (list, tuple)) and all(one(v) is not None for v in value):
        return tuple(str(one(v)) for v in value)
    raise BadInput(f"{what} must be a string or a list of strings, got {_shown(value)}")


#: What :meth:`Gold.from_json` reads: a string, a list of strings (canonical first), a
#: ``{"answer": .., "aliases": [..]}`` object or a :class:`Gold`.
GoldJSON = Union[str, Sequence[str], dict[str, Any], Gold]


@dataclass
class Question:
    """One benchmark question.

    ``id`` is stable across runs (``<dataset>:<split>:<line>`` or ``<dataset>:<line>``);
    ``text`` is the question exactly as the file has it (surrounding whitespace removed);
    ``topic_entities`` are entity names a dataset gives (MetaQA's ``[...]`` span, the
    subject of a PathQuestion path, Think-on-Graph's topic entities) or empty.
    """

    id: str
    text: str
    gold: list[Gold]
    topic_entities: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def gold_json(self) -> list[list[str]]:
        return [g.to_json() for g in self.gold]


@dataclass
class Dataset:
    """A loaded benchmark split and what it needs to be run.

    ``kg_specs`` are the ``open_kg`` specs of the KG(s) the questions are asked over: a
    triple file path, ``"wikidata"``, ``"musicbrainz"`` or ``"freebase"`` (no Freebase
    backend exists; pass ``--kg`` to use another KG). Empty when the KG file is missing.
    """

    name: str
    split: str
    questions: list[Question]
    kg_specs: list[str] = field(default_factory=list)
    description: str = ""
    files: list[str] = field(default_factory=list)
    answerable_only: bool = False
    #: what a user should know before a run (``eval`` prints each as a note)
    notes: list[str] = field(default_factory=list)

    @property
    def kg_spec(self) -> str | None:
        """The first (main) KG spec, or None."""
        return self.kg_specs[0] if self.kg_specs else None

    def __len__(self) -> int:
        return len(self.questions)

    def by_id(self) -> dict[str, Question]:
        return {q.id: q for q in self.questions}


def sample_questions(
    questions: Sequence[Question], limit: int | None, seed: int = DEFAULT_SEED, skip: int = 0
) -> list[Question]:
    """The questions a run evaluates.

    ``limit=None`` and ``skip=0`` keep all of them in file order. Otherwise the indices
    ``0..n-1`` are shuffled with ``random.Random(seed).shuffle``, the first ``skip`` are left
    out and the next ``limit`` (all the rest when ``limit`` is None) are taken, in that
    shuffled order -- exactly what ReAct and the Tree-of-Traversals authors' scripts do
    (``idxs = list(range(n)); random.Random(233).shuffle(idxs); idxs[:500]``). A smaller
    limit is therefore always a prefix of a larger one with the same seed and skip, and
    ``skip=100`` selects none of the questions ``limit=100`` does: questions held out from
    whatever was tuned or trained on the first ones.
    """
    if limit is not None and limit < 0:
        raise BadInput(f"--limit must be >= 0, got {limit}")
    if skip < 0:
        raise BadInput(f"--skip must be >= 0, got {skip}")
    if limit is None and not skip:
        return list(questions)
    idxs = list(range(len(questions)))
    random.Random(seed).shuffle(idxs)
    return [questions[i] for i in idxs[skip:None if limit is None else skip + limit]]


def dedupe(items: Iterable[str]) -> list[str]:
    """Non-empty stripped strings, duplicates removed, order kept."""
    out: dict[str, None] = {}
    for item in items:
        item = item.strip()
        if item:
            out.setdefault(item, None)
    return list(out)


def locate(data: Path, names: Sequence[str], subdirs: Sequence[str] = ()) -> Path | None:
    """Find the first of ``names`` in ``data`` (a file or a directory) or ``data/<sub>``."""
    data = Path(data)
    if data.is_file():
        return data if data.name in names or not names else None
    for base in (data, *(data / s for s in subdirs)):
        for name in names:
            p = base / name
            if p.is_file():
                return p
    return None


def require(data: Path, names: Sequence[str], subdirs: Sequence[str], what: str) -> Path:
    found = locate(data, names, subdirs)
    if found is None:
        looked = ", ".join(names)
        raise BadInput(f"{what}: cannot find {looked} in {data} (or its {', '.join(subdirs) or 'sub'} folder)")
    return found


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file without their line ends (``\\n`` or ``\\r\\n``)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise BadInput(f"cannot read {path}: {e}") from e
    # not str.splitlines(): it also breaks on \x1c, \u2028 ... and would shift line numbers
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_json(path: Path):
    try:
        import json

        return json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as e:
        raise BadInput(f"cannot read {path}: {e}") from e
