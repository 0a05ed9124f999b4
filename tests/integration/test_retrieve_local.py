"""``--strategy retrieve`` (KAPING-style retrieve-then-read) with the real local model on
MetaQA's KB: the facts around [Charles Bail], ranked by the lexical embedder, in one prompt;
the model must name his film (kb.txt: The Gumball Rally is the one he directed)."""

from __future__ import annotations

import pytest

from traversals.api import SearchConfig, build_solver
from traversals.kg.factory import open_kg
from traversals.llm.factory import open_llm

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]


async def test_retrieve_answers_a_metaqa_question_with_the_real_model(SHARED, default_model_path):
    kb = SHARED / "data" / "metaqa" / "kb.txt"
    if not kb.exists():
        pytest.skip(f"{kb} is not there")
    llm = open_llm(f"local:{default_model_path}")
    try:
        solver = build_solver("retrieve", llm, [open_kg(str(kb))], SearchConfig(embedder="lexical"))
        answer = await solver.ask("what films did [Charles Bail] direct")
    finally:
        await llm.close()
    assert "The Gumball Rally" in answer.text, answer.trace["raw"]
    assert answer.usage.llm_calls == 1 and answer.strategy == "retrieve"  # one exact match: no linking call
    assert answer.trace["facts"][0]["fact"] == "The Gumball Rally | directed by | Charles Bail"
    assert ("The Gumball Rally", "directed_by", "Charles Bail") in {
        (e.subject.label, e.relation.id, e.object.label) for e in answer.supporting_edges}
