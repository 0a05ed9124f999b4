"""Dataset names: an alias never makes one benchmark stand in for another."""

from __future__ import annotations

import pytest

from traversals.errors import BadInput
from traversals.eval.datasets import canonical_name, load_dataset


def test_webqsp_is_not_run_as_webquestions():
    """WebQSP is a different benchmark (a 1,639-question subset with SPARQL parses); a run
    named webqsp that read webquestions.json recorded 2,032 WebQuestions questions."""
    with pytest.raises(BadInput, match="WebQSP .* is not WebQuestions"):
        canonical_name("WebQSP")
    with pytest.raises(BadInput, match="not WebQuestions"):
        load_dataset("webqsp", ".")
    assert canonical_name("webquestions") == "webquestions"
    assert canonical_name("2wiki") == "2wikimultihopqa"
