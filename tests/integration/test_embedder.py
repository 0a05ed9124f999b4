"""The sentence-embedding model of RwT's critical model, run with NumPy: it must give the
embeddings sentence-transformers gives for the same model (reference figures computed with
sentence-transformers 6.2 and torch on CPU), and through the critical model it must rate an
alias of a guess close where character trigrams cannot."""

from __future__ import annotations

import math

import pytest

from traversals.embed import LexicalEmbedder, SentenceBert, cosine
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
