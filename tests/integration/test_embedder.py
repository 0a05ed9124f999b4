"""The sentence-embedding model of RwT's critical model, run with NumPy: it must give the
embeddings sentence-transformers gives for the same model (reference figures computed with
sentence-transformers 6.2 and torch on CPU), and through the critical model it must rate an
alias of a guess close where character trigrams cannot. And ``--embedder openai:MODEL``
against a real ``python -m llama_cpp.server --embedding true`` serving the small GGUF."""

from __future__ import annotations

import importlib.util
import math

import pytest

from traversals.embed import (
    LexicalEmbedder,
    OpenAIEmbedder,
    SentenceBert,
    cosine,
    open_embedder,
)
from traversals.kg.base import Entity
from traversals.search.rwt import CriticalModel
from traversals.search.rwt.state import PathNode

pytestmark = pytest.mark.timeout(300)

#: the first six dimensions of sentence-transformers' all-MiniLM-L6-v2 embeddings
REFERENCE = {
    "Bob Dylan": [-0.0419, 0.00382, -0.0222, -0.01581, -0.02939, 0.05047],
    "The Gumball Rally": [-0.00119, 0.01636, -0.04999, -0.04382, -0.01327, 0.0354],
    'O\'Brien "The Boss" — naïve café': [-0.04707, 0.03851, -0.00602, 0.00976, 0.04551, 0.03602],
}
#: cosines between the reference embeddings
REFERENCE_COSINES = {("Bob Dylan", "Robert Allen Zimmerman"): 0.5885, ("car", "automobile"): 0.8645,
                     ("car", "banana"): 0.3899}


async def test_embeddings_match_sentence_transformers(embedding_model_dir):
    model = SentenceBert(embedding_model_dir)
    texts = list(REFERENCE)
    vectors = await model.embed(texts)
    for text, vector in zip(texts, vectors):
        assert len(vector) == 384 and math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-5)
        assert vector[:6] == pytest.approx(REFERENCE[text], abs=1e-4), text
    for (a, b), expected in REFERENCE_COSINES.items():
        va, vb = await model.embed([a, b])
        assert cosine(va, vb) == pytest.approx(expected, abs=1e-3), (a, b)
    # a batch gives what one text at a time gives (padding is masked out), and long text is truncated
    long_text = "film " * 400
    batched = await model.embed(["Bob Dylan", long_text])
    assert batched[0] == pytest.approx(vectors[0], abs=1e-5)
    assert batched[1] == pytest.approx((await model.embed([long_text]))[0], abs=1e-5)


async def test_the_critical_model_rates_an_alias_of_a_guess(embedding_model_dir):
    guesses = ["Bob Dylan"]
    alias = PathNode(1, (Entity("a", "Robert Allen Zimmerman"),))
    other = PathNode(2, (Entity("b", "The Gumball Rally"),))
    sbert, lexical = CriticalModel(SentenceBert(embedding_model_dir)), CriticalModel(LexicalEmbedder())
    assert await sbert.value(guesses, alias) > await sbert.value(guesses, other) + 0.3
    assert await lexical.value(guesses, alias) < 0.1  # no trigram in common



@pytest.mark.server
@pytest.mark.model
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python[server] is not installed")
async def test_llama_cpp_server_embeddings_through_the_openai_embedder(embedding_llama_server):
    emb = open_embedder("openai:qwen-embed", url=embedding_llama_server, timeout=120)
    assert isinstance(emb, OpenAIEmbedder)
    texts = ["Bob Dylan", "Robert Allen Zimmerman", "The Gumball Rally", "Bob Dylan"]
    try:
        dylan, zimmerman, gumball, dylan_again = await emb.embed(texts)
    finally:
        await emb.aclose()
    assert len({len(dylan), len(zimmerman), len(gumball), len(dylan_again)}) == 1 and emb.dimensions == 896
    # llama-cpp-python 0.3.x gives this chat model (no pooling layer) one vector per token,
    # right only for the first input of a request: the client averages them, one text a request
    assert emb.one_per_request, "the server pooled the vectors itself: the one-text-a-request workaround may go"
    assert cosine(dylan, dylan_again) == pytest.approx(1.0, abs=1e-6)  # the 4th input is not misplaced
    # a chat model's averaged hidden states are a weak sentence embedding, but an alias is
    # still closer than a film title (0.78 against 0.46 for this model)
    assert cosine(dylan, zimmerman) > cosine(dylan, gumball) + 0.1


@pytest.mark.server
@pytest.mark.model
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python[server] is not installed")
async def test_the_critical_model_on_a_served_embedding_rates_the_matching_state_higher(embedding_llama_server):
    emb = open_embedder("openai:qwen-embed", url=embedding_llama_server, timeout=120)
    critical = CriticalModel(emb)
    try:
        match = await critical.value(["Bob Dylan"], PathNode(1, (Entity("a", "Bob Dylan"),)))
        alias = await critical.value(["Bob Dylan"], PathNode(2, (Entity("b", "Robert Allen Zimmerman"),)))
        other = await critical.value(["Bob Dylan"], PathNode(3, (Entity("c", "The Gumball Rally"),)))
    finally:
        await emb.aclose()
    assert match == pytest.approx(1.0, abs=1e-6)
    assert match > alias > other


@pytest.mark.server
@pytest.mark.model
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python[server] is not installed")
async def test_the_embedding_server_still_answers_chat(embedding_llama_server):
    """One llama_cpp.server with --embedding true can serve both --llm and --embedder."""
    from traversals.llm.factory import open_llm

    llm = open_llm("openai:qwen-embed", url=embedding_llama_server, timeout=120)
    try:
        g = await llm.generate("What is the capital of France? Answer with one word.", max_tokens=4)
    finally:
        await llm.close()
    assert "paris" in g.texts[0].lower()
