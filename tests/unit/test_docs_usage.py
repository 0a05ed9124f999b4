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
