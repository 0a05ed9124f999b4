"""The usage docs name the fields the code returns: ``ask --json`` (README), the service's
reply (docs/service.md) and ``Answer.to_json()`` are the same object."""

from __future__ import annotations

import re
from pathlib import Path

from traversals.kg.base import Entity
from traversals.llm.base import Usage
from traversals.search.result import Answer

ROOT = Path(__file__).resolve().parents[2]


def answer_keys() -> set[str]:
    answer = Answer("q", "a", 0.5, [], usage=Usage(), seconds=1.0, decoding="constrained", strategy="chain",
                    linked_entities=[Entity("x", "X")])
    return set(answer.to_json())


def named(text: str, start: str, end: str) -> set[str]:
    part = text.split(start, 1)[1].split(end, 1)[0]
    return set(re.findall(r"`([a-z_]+)`", part))


def test_the_readme_and_the_service_doc_list_every_field_ask_json_prints():
    keys = answer_keys()
    readme = (ROOT / "README.md").read_text()
    assert keys <= named(readme, "`--json` prints", "`--trace FILE` writes"), keys - named(
        readme, "`--json` prints", "`--trace FILE` writes")
    service = (ROOT / "docs" / "service.md").read_text()
    assert keys <= named(service, "Reply: the object", "## Streaming")


def test_the_eval_synopsis_in_docs_evaluation_names_every_eval_flag():
    from traversals.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["eval"]
    flags = {s for a in sub._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    flags -= {"--no-group-selection"}  # the negative form of --group-selection
    doc = (ROOT / "docs" / "evaluation.md").read_text()
    synopsis = doc.split("```\ntraversals eval DATASET", 1)[1].split("```", 1)[0]
    shown = set(re.findall(r"--[a-z][a-z-]*", synopsis))
    assert flags == shown, (sorted(flags - shown), sorted(shown - flags))


def test_the_readme_flags_table_says_where_evals_defaults_differ():
    """The table of `ask`'s flags is also eval's: a default eval does not have (it requires
    --strategy; its KG is the dataset's) is said in the row, not left false for eval."""
    from traversals.cli import build_parser

    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Flags of `ask`", 1)[1].split("\n#", 1)[0]
    defaults = {}
    for line in table.splitlines():
        cells = re.split(r"(?<!\\)\|", line)
        if len(cells) > 3 and (flag := re.match(r"\s*`(--[a-z-]+)", cells[1])):
            defaults[flag.group(1)] = cells[-2]
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["eval"]
    required = {s for a in sub._actions if a.required for s in a.option_strings if s in defaults}
    assert required == {"--strategy"}
    for flag in required:
        assert "eval: required" in defaults[flag], defaults[flag]
    assert "eval: the dataset's KG" in defaults["--kg"], defaults["--kg"]
