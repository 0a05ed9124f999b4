"""PathQuestion (Zhou et al. 2018, IRN): PQ-2H, PQ-3H, PQL-2H, PQL-3H.

Line format (``readme.txt``)::

    question<TAB>answer(alt1/alt2/...)<TAB>subject#r1#e1#r2#...#answer[#<end>#answer]

The gold label is the path's answer; the parenthesised answer set lists every entity the
path reaches, all accepted as alternatives (IRN scores a prediction as right when it is in
the set). The subject of the path is the topic entity. The question is kept as written
(entity names with underscores, the space before ``'s``); only surrounding whitespace is
removed (PQL lines start with a space).

PathQuestion has no official split: the whole file is the dataset and ``--split`` is
ignored (recorded as ``all``). ``pql-3h`` reads ``PQL-3H.txt`` and, when present,
``PQL-3H_more.txt`` (ids ``pql-3h:<line>`` and ``pql-3h:more:<line>``).
"""

from __future__ import annotations

from pathlib import Path

from ...errors import BadInput
from .base import Dataset, Gold, Question, dedupe, locate, read_lines, require

SUBDIRS = ("pathquestion", "PathQuestion")

#: dataset name -> (question files, KB file, description)
FILES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "pq-2h": (("PQ-2H.txt",), "2H-kb.txt", "PathQuestion PQ-2H (2-hop, 2H-kb)"),
    "pq-3h": (("PQ-3H.txt",), "3H-kb.txt", "PathQuestion PQ-3H (3-hop, 3H-kb)"),
    "pql-2h": (("PQL-2H.txt",), "PQL2-KB.txt", "PathQuestion-Large PQL-2H (2-hop, PQL2-KB)"),
    "pql-3h": (
        ("PQL-3H.txt", "PQL-3H_more.txt"),
        "PQL3-KB.txt",
        "PathQuestion-Large PQL-3H + PQL-3H_more (3-hop, PQL3-KB)",
    ),
}


def parse_answer_field(field: str, answer: str) -> tuple[str, list[str]]:
    """Split ``answer(alt1/alt2/)`` into the answer and its alternatives.

    Answers may themselves contain parentheses (``PG_(USA)(PG_(USA)/)``), so the answer
    from the path decides where the set starts; failing that, the first ``(`` whose
    alternatives contain the text before it.
    """
    field = field.strip()
    if answer and field.startswith(answer + "(") and field.endswith(")"):
        return answer, dedupe(field[len(answer) + 1 : -1].split("/"))
    if field.endswith(")"):
        for i, ch in enumerate(field):
            if ch == "(":
                head, alts = field[:i], dedupe(field[i + 1 : -1].split("/"))
                if head in alts:
                    return head, alts
    return field, [field]


def parse_path(path: str) -> list[str]:
    """``s#r1#e1#r2#a#<end>#a`` -> ``[s, r1, e1, r2, a]``."""
    parts = [p.strip() for p in path.strip().split("#")]
    if "<end>" in parts:
        parts = parts[: parts.index("<end>")]
    return [p for p in parts if p != ""]


def _questions(name: str, path: Path, tag: str) -> list[Question]:
    out: list[Question] = []
    for i, line in enumerate(read_lines(path)):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 3:  # a MetaQA line has two columns
            raise BadInput(
                f"{path}:{i + 1}: expected question<TAB>answer(...)<TAB>path, found {len(cols)} column(s)"
            )
        text = cols[0].strip()
        hops = parse_path(cols[2])
        answer, alts = parse_answer_field(cols[1], hops[-1] if len(hops) >= 3 else "")
        aliases = tuple(a for a in alts if a != answer)
        meta: dict = {"line": i, "file": path.name}
        if len(hops) >= 3:
            meta["path"] = hops
            meta["relations"] = hops[1::2]
        out.append(
            Question(
                id=f"{name}:{tag}{i}",
                text=text,
                gold=[Gold(answer, aliases)],
                topic_entities=[hops[0]] if hops else [],
                meta=meta,
            )
        )
    return out


def load_pathquestion(name: str, data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    qfiles, kb_name, desc = FILES[name]
    first = require(Path(data_dir), (qfiles[0],), SUBDIRS, name)
    questions = _questions(name, first, "")
    files = [str(first)]
    for extra in qfiles[1:]:
        p = first.parent / extra
        if p.is_file():
            tag = "more:" if extra.endswith("_more.txt") else extra + ":"
            questions += _questions(name, p, tag)
            files.append(str(p))
        else:
            desc += f" -- {extra} not found, read {qfiles[0]} only"
    if answerable_only:  # every PathQuestion question has a gold answer
        questions = [q for q in questions if q.gold]
    kb = locate(first.parent, (kb_name,))
    return Dataset(
        name=name,
        split="all",
        questions=questions,
        kg_specs=[str(kb.resolve())] if kb else [],
        description=desc + ("" if kb else f"; {kb_name} not found: pass --kg"),
        files=files,
        answerable_only=answerable_only,
    )
