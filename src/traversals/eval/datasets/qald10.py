"""QALD-10 (Usbeck et al.): 394 questions with SPARQL over Wikidata.

The English question string is used. Gold labels come from the stored answer bindings
(one label per bound value): Wikidata entity IRIs become QIDs (``Q42299``); other IRIs stay
as they are; literals keep their value (a leading ``+`` on numbers dropped); ``xsd:dateTime``
values become ``YYYY-MM-DD``, or just the year when the date is 1 January (the authors'
``format_date`` treats those as year precision; the full date stays as an alias), a year
before the common era ``-7000-01-01`` becomes ``7000 BC`` (which the metrics read as
``-7000``, as they read ``7000 BCE`` and ``7000 B.C.``); ASK
questions get ``yes``/``no`` (aliases ``true``/``false``).

Entity labels need a Wikidata endpoint, which is not available offline. If a file
``labels.json`` (``{"Q42299": ["Bernhard Riemann", ...]}``) sits next to ``qald_10.json``,
its labels become the label's answer with the QID as alias; otherwise gold is the QID only,
and EM-in can only match answers that print QIDs. ``--answerable-only`` drops questions
with no gold value (one question, id 313).
"""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import BadInput
from .base import Dataset, Gold, Question, locate, read_json, require

WD_ENTITY = re.compile(r"^https?://www\.wikidata\.org/entity/([QLP]\d+)$")
_DATETIME = re.compile(r"^([+-]?)(\d{1,})-(\d{2})-(\d{2})(?:T.*)?$")


def gold_from_value(v: dict, labels: dict[str, list[str]]) -> Gold | None:
    kind, value = v.get("type"), str(v.get("value", "")).strip()
    if not value:
        return None
    if kind == "uri":
        m = WD_ENTITY.match(value)
        if not m:
            return Gold(value)
        qid = m.group(1)
        names = [n for n in labels.get(qid, []) if n]
        return Gold(names[0], (*names[1:], qid)) if names else Gold(qid)
    datatype = v.get("datatype", "")
    if datatype.endswith("#dateTime") or datatype.endswith("#date"):
        m = _DATETIME.match(value)
        if m and m.group(1) == "-" and (m.group(3), m.group(4)) == ("01", "01"):
            return Gold(f"{int(m.group(2))} BC", (value,))
        if m and m.group(1) != "-" and len(m.group(2)) <= 4:
            year, month, day = m.group(2).zfill(4), m.group(3), m.group(4)
            iso = f"{year}-{month}-{day}"
            if (month, day) == ("01", "01"):
                return Gold(str(int(year)), (iso,))
            return Gold(iso)
        return Gold(value)
    if re.match(r"^\+\d", value):
        value = value[1:]
    return Gold(value)


def load_qald10(data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    path = require(Path(data_dir), ("qald_10.json",), ("qald10", "qald_10", "QALD-10"), "qald10")
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise BadInput(f'{path}: not QALD JSON (an object with a "questions" list expected)')
    labels: dict[str, list[str]] = {}
    label_file = locate(path.parent, ("labels.json",))
    if label_file:
        raw = read_json(label_file)
        if not isinstance(raw, dict):
            raise BadInput(f'{label_file}: expected {{"Q42299": ["Bernhard Riemann", ...], ...}}')
        labels = {k: [v] if isinstance(v, str) else [str(x) for x in v] for k, v in raw.items()}

    questions: list[Question] = []
    for q in data["questions"]:
        text = next(
            (s.get("string", "") for s in q.get("question", []) if s.get("language") == "en"), ""
        ).strip()
        if not text:
            continue
        gold: list[Gold] = []
        for ans in q.get("answers", []):
            if "boolean" in ans:
                gold.append(Gold("yes", ("true",)) if ans["boolean"] else Gold("no", ("false",)))
                continue
            for binding in ans.get("results", {}).get("bindings", []):
                for v in binding.values():
                    g = gold_from_value(v, labels)
                    if g is not None and g not in gold:
                        gold.append(g)
        if answerable_only and not gold:
            continue
        questions.append(
            Question(
                id=f"qald10:test:{q.get('id')}",
                text=text,
                gold=gold,
                meta={
                    "qald_id": q.get("id"),
                    "aggregation": q.get("aggregation"),
                    "sparql": q.get("query", {}).get("sparql", ""),
                },
            )
        )
    return Dataset(
        name="qald10",
        split="test",
        questions=questions,
        kg_specs=["wikidata"],
        description="QALD-10 test (English questions, Wikidata)"
        + ("" if labels else "; gold entities are QIDs (no labels.json)"),
        files=[str(path)] + ([str(label_file)] if label_file else []),
        answerable_only=answerable_only,
        notes=[] if labels else [
            f"no labels.json beside {path.name}: QALD-10's gold entities are Wikidata ids (Q42299), so an answer "
            "scores only where it prints the id, and EM-in on entity questions stays near 0; put "
            '{"Q42299": ["Bernhard Riemann"], ...} in labels.json to score labels'],
    )
