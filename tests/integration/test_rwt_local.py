"""RwT's hop-level beam search with the real local model and the real sentence-embedding
critical model on MetaQA's KB: one hop, one relation — the policy must put the relation
that answers first."""

from __future__ import annotations

import pytest

from traversals.embed import SentenceBert
from traversals.kg.store import OxigraphKG
from traversals.llm.factory import open_llm
from traversals.search.kgset import KGSet
from traversals.search.rwt import CriticalModel, HopBeamSearch, RwTConfig

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]


async def test_beam_search_with_the_real_model(SHARED, default_model_path, embedding_model_dir):
    kb = SHARED / "data" / "metaqa" / "kb.txt"
    if not kb.exists():
        pytest.skip(f"{kb} is not there")
    llm = open_llm(f"local:{default_model_path}")
    try:
        embedded: list[str] = []
        model = SentenceBert(embedding_model_dir)

        class Recording:
            name = model.name

            async def embed(self, texts):
                embedded.extend(texts)
                return await model.embed(texts)

        critical = CriticalModel(Recording())
        search = HopBeamSearch(llm, KGSet([OxigraphKG.from_file(kb)]), RwTConfig(beam_width=1, beam_branch=1, max_hops=1),
                               critical=critical)
        answer = await search.ask("what films did [Charles Bail] direct")
    finally:
        await llm.close()
    assert answer.decoding == "constrained" and answer.usage.llm_calls >= 3  # guesses, priors, a value
    assert "The Gumball Rally" in answer.text
    assert {e.relation.id for e in answer.supporting_edges} == {"directed_by"}
    assert answer.trace["hops"] == 1 and answer.stopped == "max_hops"  # one hop walked, as many as allowed
    assert "The Gumball Rally" in embedded and len(embedded) > 1  # the reached film beside the LLM's guesses
