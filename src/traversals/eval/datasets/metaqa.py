"""MetaQA vanilla 1/2/3-hop (Zhang et al. 2018) over the WikiMovies KB.

Layout read (``--data`` is this folder, or its parent holding ``metaqa/``)::

    kb.txt                       subject|relation|object
    qa_{split}_{h}hop.txt        question<TAB>ans1|ans2|...   (topic entity in [...])
    qa_{split}_qtype_{h}hop.txt  relation path of each line (optional)
    answerable_{split}_{h}hop.idx  0-based line numbers whose whole gold set is
                                   reachable in kb.txt (needed for --answerable-only)

The original MetaQA download layout (``{h}-hop/vanilla/qa_{split}.txt``,
``{h}-hop/qa_{split}_qtype.txt``, ``kb.txt``) is read too.

Question text is kept exactly as in the file, brackets included: the brackets mark the
topic entity for the LLM as they did for the dataset's authors; the entity name inside is
also passed as ``topic_entities``. Each ``|``-separated answer is its own gold label.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import BadInput
from .base import Dataset, Gold, Question, dedupe, read_lines

_TOPIC = re.compile(r"\[([^\]]+)\]")


def _base_dir(data: Path, split: str, hops: int) -> Path:
    data = Path(data)
    if data.is_file():  # the question file itself: not another hop count's or benchmark's
        name = f"qa_{split}_{hops}hop.txt"
        if data.name == name:
            data = data.parent
        elif data.name == f"qa_{split}.txt" and data.parent.parent.name == f"{hops}-hop":
            data = data.parent.parent.parent  # {h}-hop/vanilla/qa_{split}.txt
        else:
            raise BadInput(f"metaqa-{hops}hop: --data {data} is not {name} (give that file or its folder)")
    for base in (data, data / "metaqa", data / "MetaQA"):
        if (base / f"qa_{split}_{hops}hop.txt").is_file():
            return base
        if (base / f"{hops}-hop" / "vanilla" / f"qa_{split}.txt").is_file():
            return base
    raise BadInput(
        f"metaqa-{hops}hop: no qa_{split}_{hops}hop.txt (or {hops}-hop/vanilla/qa_{split}.txt) "
        f"in {data}"
    )


def load_metaqa(hops: int, data_dir: Path, split: str = "dev", answerable_only: bool = False) -> Dataset:
    name = f"metaqa-{hops}hop"
    base = _base_dir(data_dir, split, hops)
    qa = base / f"qa_{split}_{hops}hop.txt"
    qtype = base / f"qa_{split}_qtype_{hops}hop.txt"
    idx_file = base / f"answerable_{split}_{hops}hop.idx"
    if not qa.is_file():  # original layout
        qa = base / f"{hops}-hop" / "vanilla" / f"qa_{split}.txt"
        qtype = base / f"{hops}-hop" / f"qa_{split}_qtype.txt"
    lines = read_lines(qa)
    qtypes = read_lines(qtype) if qtype.is_file() else []
    if qtypes and len(qtypes) != len(lines):
        raise BadInput(f"{qtype} has {len(qtypes)} lines but {qa} has {len(lines)}")
    files = [str(qa)] + ([str(qtype)] if qtypes else [])

    keep: set[int] | None = None
    if answerable_only:
        if not idx_file.is_file():
            raise BadInput(f"--answerable-only needs {idx_file}")
        try:
            keep = {int(x) for x in read_lines(idx_file) if x.strip()}
        except ValueError as e:
            raise BadInput(f"{idx_file}: not a list of line numbers ({e})") from e
        outside = sorted(i for i in keep if not 0 <= i < len(lines))
        if outside:  # another split's or hop count's index file
            raise BadInput(f"{idx_file}: line {outside[0]} is not a line of {qa} ({len(lines)} lines)")
        files.append(str(idx_file))

    questions: list[Question] = []
    for i, line in enumerate(lines):
        if keep is not None and i not in keep:
            continue
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:  # a PathQuestion line has three columns
            raise BadInput(f"{qa}:{i + 1}: expected question<TAB>answers, found {len(cols)} column(s)")
        text, answers = cols
        text = text.strip()
        m = _TOPIC.search(text)
        meta: dict = {"line": i, "hops": hops}
        if qtypes:
            meta["qtype"] = qtypes[i].strip()
        questions.append(
            Question(
                id=f"{name}:{split}:{i}",
                text=text,
                gold=[Gold(a) for a in dedupe(answers.split("|"))],
                topic_entities=[m.group(1).strip()] if m else [],
                meta=meta,
            )
        )

    kb = base / "kb.txt"
    return Dataset(
        name=name,
        split=split,
        questions=questions,
        kg_specs=[str(kb.resolve())] if kb.is_file() else [],
        description=(
            f"MetaQA vanilla {hops}-hop, {split} split"
            + (" (answerable subset: gold set reachable in kb.txt)" if answerable_only else "")
            + ("" if kb.is_file() else "; kb.txt not found: pass --kg")
        ),
        files=files,
        answerable_only=answerable_only,
    )
