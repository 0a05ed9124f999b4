"""`traversals train-value`'s inputs and what it keeps: a phrasings file of the wrong shape,
an --out that is not a model file, too few questions to train on, an interruption (a
scripted LLM and tiny triple files; the real LLM's run is in tests/integration/test_train_value.py)."""

from __future__ import annotations

import json

import pytest

from traversals.errors import BadInput
from traversals.eval.synthetic import PHRASINGS_FORMAT, read_phrasings


def _file(tmp_path, relations) -> object:
    path = tmp_path / "m.json.phrasings.json"
    path.write_text(json.dumps({"format": PHRASINGS_FORMAT, "llm": "scripted", "relations": relations}))
    return path


@pytest.mark.parametrize(
    "relations, says",
    [
        ([1], "'relations' is list, not an object"),
        ({"knows": [1, 2]}, "knows: list, not an object"),
        ({"knows": {"questions": "Who knows {}?"}}, "knows: 'questions' is not a list of texts"),
        ({"knows": {"phrases": [3]}}, "knows: 'phrases' is not a list of texts"),
        ({"knows": {"questions": ["Who knows?"]}}, "knows: 'Who knows?' has no '{}'"),
        ({"knows": {"checked": {"Who knows {}?": "high"}}}, "knows: 'checked' is not an object of numbers"),
        ({"knows": {"synonyms": "pal"}}, "knows: 'synonyms' is not a list of texts"),
        ({"knows": {"bogus": 1}}, "knows: unknown field 'bogus'"),
    ],
)
def test_a_phrasings_file_of_the_wrong_shape_is_one_line(tmp_path, relations, says):
    """A hand-edited or damaged file: a list of relations had been a traceback, and a question
    given as a string had been read letter by letter (the question "}")."""
    path = _file(tmp_path, relations)
    with pytest.raises(BadInput, match=f"{path} is not a phrasings file .*{_escape(says)}.*move it away"):
        read_phrasings(path, "scripted")


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_a_phrasings_file_of_the_right_shape_is_read(tmp_path):
    path = _file(tmp_path, {"knows": {"questions": ["Who knows {}?"], "phrases": ["the friends of {}"],
                                      "checked": {"Who knows {}?": 1}, "synonyms": None},
                            "~knows": {}})
    got = read_phrasings(path, "scripted")
    assert got["knows"].questions == ["Who knows {}?"] and got["knows"].checked == {"Who knows {}?": 1.0}
    assert got["~knows"].questions == [] and got["~knows"].synonyms is None
