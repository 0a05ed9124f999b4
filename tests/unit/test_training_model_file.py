"""A file given as --value-model that is not a model says what it is and what to give instead,
in one line: the KG file, the questions file, a folder (it had said "is not readable JSON:
Expecting value: line 1 column 1 (char 0)" and nothing more)."""

from __future__ import annotations

import pytest

from traversals.errors import BadInput
from traversals.search.rwt import ValueModel


@pytest.mark.parametrize("name, text, says", [
    ("kb.txt", "Heat|directed_by|Michael Mann\n", "is not JSON (Expecting value"),
    ("m.json.questions.jsonl", '{"index": 0}\n{"index": 1}\n', "is not JSON (Extra data"),
    ("kb.txt.gz", b"\x1f\x8b\x08\x00\xff", "is not JSON ("),
    ("models", None, "is a directory"),
])
def test_a_file_that_is_not_a_model_says_what_to_give(tmp_path, name, text, says):
    path = tmp_path / name
    if text is None:
        path.mkdir()
    elif isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(BadInput) as caught:
        ValueModel.load(path)
    message = str(caught.value)
    assert says in message and message.endswith("--value-model takes the model file `traversals train-value --out` "
                                                 "wrote") and "\n" not in message
