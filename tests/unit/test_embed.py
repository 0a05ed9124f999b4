"""``--embedder`` specs: what each form opens, and the errors of the ones that cannot work
(the real sentence-embedding model: tests/integration/test_embedder.py)."""

from __future__ import annotations

import pytest

from traversals.embed import LexicalEmbedder, SentenceBert, cosine, open_embedder
from traversals.errors import BadInput
from traversals.llm.factory import resolve_local_model


def test_lexical_and_registry_forms(tmp_path):
    assert isinstance(open_embedder("lexical"), LexicalEmbedder)
    sbert = open_embedder("sbert", cache_dir=tmp_path)
    assert isinstance(sbert, SentenceBert) and sbert.name == "sbert:all-minilm-l6-v2"
    assert list(tmp_path.iterdir()) == []  # nothing is fetched before the first embedding
    assert open_embedder("sbert:all-minilm-l6-v2", cache_dir=tmp_path).name == "sbert:all-minilm-l6-v2"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("word2vec", "unknown embedder 'word2vec'"),
        ("sbert:qwen2.5-coder-1.5b", "is an LLM, not a sentence-embedding model"),
        ("sbert:/no/such/dir", "neither a registry model (all-minilm-l6-v2) nor a directory"),
    ],
)
def test_bad_specs_say_what_would_work(spec, message):
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        open_embedder(spec)


def test_a_directory_without_a_model_is_refused(tmp_path):
    with pytest.raises(BadInput, match="no config.json"):
        open_embedder(f"sbert:{tmp_path}")


def test_the_embedding_model_is_not_an_llm(tmp_path):
    with pytest.raises(BadInput, match="sentence-embedding model, not an LLM"):
        resolve_local_model("all-minilm-l6-v2", cache_dir=tmp_path)


async def test_lexical_vectors_catch_spelling_variants_not_synonyms():
    a, b, c = await LexicalEmbedder().embed(["Florence Stone", "florence  stone (1883)", "Beatrice Stone"])
    assert cosine(a, b) > 0.7 > cosine(a, c) > 0.2
    with pytest.raises(TypeError):
        cosine(a, [1.0, 0.0])


async def test_a_missing_tokenizers_package_says_how_to_install_it(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    monkeypatch.setitem(__import__("sys").modules, "tokenizers", None)  # import fails
    from traversals.errors import EmbedderUnavailable

    with pytest.raises(EmbedderUnavailable, match=r"pip install 'traversals\[embed\]', or use --embedder lexical"):
        await SentenceBert(tmp_path).embed(["x"])
