"""2WikiMultiHopQA (Ho et al. 2020): ``question`` and ``answer``.

The shared file ``2wikimultihopqa_dev1000.json`` holds 1,000 dev questions as
``{"test_id", "question", "answer"}``; ``answer`` is a string or a list whose first item is
the answer and the rest its aliases (one gold label with alternatives). The official
``dev.json`` layout (``_id``, ``question``, ``answer``, optional ``answer_aliases``) is read
too. The paper sampled 500 questions with seed 233 from the dev set; KG: Wikidata.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import BadInput
from .base import Dataset, Gold, Question, dedupe, read_json, require

SUBDIRS = ("questions-only", "2wikimultihopqa", "2WikiMultiHopQA")
NAMES = ("2wikimultihopqa_dev1000.json", "dev.json", "2wikimultihop_dev.json")


def load_2wikimultihopqa(data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    path = require(Path(data_dir), NAMES, SUBDIRS, "2wikimultihopqa")
    data = read_json(path)
    if not isinstance(data, list):
        raise BadInput(f"{path}: expected a JSON list of questions")
    questions = []
    for i, item in enumerate(data):
        answer = item.get("answer", [])
        alts = [answer] if isinstance(answer, str) else list(answer)
        alts += list(item.get("answer_aliases") or [])
        alts = dedupe(str(a) for a in alts)
        gold = [Gold(alts[0], tuple(alts[1:]))] if alts else []
        if answerable_only and not gold:
            continue
        qid = item.get("test_id", item.get("_id", i))
        meta = {"line": i}
        if "type" in item:
            meta["type"] = item["type"]
        questions.append(
            Question(id=f"2wikimultihopqa:dev:{qid}", text=str(item.get("question", "")).strip(), gold=gold, meta=meta)
        )
    return Dataset(
        name="2wikimultihopqa",
        split="dev",
        questions=questions,
        kg_specs=["wikidata"],
        description=f"2WikiMultiHopQA dev ({path.name}), Wikidata",
        files=[str(path)],
        answerable_only=answerable_only,
    )
