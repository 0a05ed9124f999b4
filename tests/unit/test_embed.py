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


def _tiny_bert(path, *, hidden: int = 4, layers: int = 1) -> None:
    """A sentence-transformers BERT directory of a few hundred bytes (random weights)."""
    import json
    import struct

    import numpy as np
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    path.mkdir()
    tok = Tokenizer(WordLevel({"[PAD]": 0, "[UNK]": 1, "hello": 2, "world": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(path / "tokenizer.json"))
    (path / "config.json").write_text(json.dumps({
        "model_type": "bert", "hidden_act": "gelu", "num_hidden_layers": layers, "num_attention_heads": 2,
        "max_position_embeddings": 8}))
    shapes = {"embeddings.word_embeddings.weight": (4, hidden), "embeddings.position_embeddings.weight": (8, hidden),
              "embeddings.token_type_embeddings.weight": (2, hidden), "embeddings.LayerNorm.weight": (hidden,),
              "embeddings.LayerNorm.bias": (hidden,)}
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for m in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[p + m + ".weight"], shapes[p + m + ".bias"] = (hidden, hidden), (hidden,)
        shapes[p + "intermediate.dense.weight"], shapes[p + "intermediate.dense.bias"] = (2 * hidden, hidden), (2 * hidden,)
        shapes[p + "output.dense.weight"], shapes[p + "output.dense.bias"] = (hidden, 2 * hidden), (hidden,)
        for m in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + m + ".weight"], shapes[p + m + ".bias"] = (hidden,), (hidden,)
    rng = np.random.default_rng(0)
    header, blobs, offset = {}, [], 0
    for name, shape in shapes.items():
        data = rng.standard_normal(shape).astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def _damage_weights_cut(d):
    w = d / "model.safetensors"
    w.write_bytes(w.read_bytes()[:-40])


def _damage_weights_lack_a_layer(d):
    (d / "config.json").write_text((d / "config.json").read_text().replace('"num_hidden_layers": 1', '"num_hidden_layers": 2'))


@pytest.mark.parametrize(
    "damage, message",
    [
        (_damage_weights_cut, r"model.safetensors is damaged or not a safetensors file \(cut short: .*`traversals model fetch NAME`"),
        (lambda d: (d / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00[]"),
         r"model.safetensors is damaged or not a safetensors file \(its header is not a JSON object\)"),
        (_damage_weights_lack_a_layer, r"model.safetensors lacks 16 tensor\(s\) the BERT encoder needs \(first: encoder.layer.1."),
        (lambda d: (d / "tokenizer.json").write_text("{bad"), r"tokenizer.json is damaged \(the tokenizers package cannot read it"),
        (lambda d: (d / "config.json").write_text("[1]"), r"config.json is damaged \(not a JSON object\)"),
        (lambda d: (d / "config.json").write_text('{"model_type": "bert"}'), r"config.json is damaged \(no valid num_hidden_layers"),
        (lambda d: (d / "modules.json").write_text('{"a": 1}'), r"modules.json is damaged \(not a JSON list\)"),
        (lambda d: (d / "config.json").write_text((d / "config.json").read_text().replace(
            '"num_attention_heads": 2', '"num_attention_heads": 3, "hidden_size": 4')),
         r"config.json is damaged: hidden_size 4 does not split into num_attention_heads 3"),  # was a reshape error
        (lambda d: (d / "sentence_bert_config.json").write_text('{"max_seq_length": "abc"}'),
         r"sentence_bert_config.json is damaged \(max_seq_length"),  # config.json was blamed
    ],
)
async def test_a_damaged_model_directory_is_one_named_error_not_a_numpy_or_key_error(tmp_path, damage, message):
    from traversals.errors import EmbedderUnavailable

    _tiny_bert(tmp_path / "m")
    assert len((await SentenceBert(tmp_path / "m").embed(["hello world"]))[0]) == 4  # intact, it embeds
    damage(tmp_path / "m")
    with pytest.raises(EmbedderUnavailable, match=message):
        await SentenceBert(tmp_path / "m").embed(["hello world"])


async def test_a_max_seq_length_past_the_models_positions_is_cut_to_them(tmp_path):
    """sentence_bert_config.json's max_seq_length over max_position_embeddings: a text longer than the
    positions failed with numpy's IndexError."""
    _tiny_bert(tmp_path / "m")
    (tmp_path / "m" / "sentence_bert_config.json").write_text('{"max_seq_length": 100}')
    [vector] = await SentenceBert(tmp_path / "m").embed(["hello world " * 20])
    assert len(vector) == 4


async def test_a_users_embedder_that_fails_is_one_embedder_error_naming_it():
    """A raising, short or sync embed() was a raw RuntimeError, a KeyError deep in the critical
    model, or a TypeError; docs/library.md promises EmbedderError."""
    from traversals.api import build_solver
    from traversals.errors import EmbedderError
    from traversals.llm.scripted import ScriptedLLM

    from .kgdouble import dylan_kg

    class Raising:
        name = "mine"

        async def embed(self, texts):
            raise RuntimeError("embedding server 500")

    class Short:
        name = "short"

        async def embed(self, texts):
            return [[1.0, 0.0]]

    class Sync:
        name = "sync"

        def embed(self, texts):
            return [[1.0] for _ in texts]

    llm = ScriptedLLM(rules=[("three most likely answers", "A: Beatrice, B: x, C: y]"), ("", "ANSWER: x")],
                      score=lambda prompt, options, prefix: [-1.0] * len(options))
    for embedder, says in ((Raising(), "raised RuntimeError: embedding server 500"),
                           (Short(), "returned 1 vectors for"), (Sync(), "is not async")):
        for strategy in ("beam", "retrieve"):
            solver = build_solver(strategy, llm, [dylan_kg()], embedder=embedder)
            with pytest.raises(EmbedderError, match=f"embedder '{embedder.name}': embed\\(\\) {says}"):
                await solver.ask("who is the mother of [Bob Dylan]")


async def test_lexical_vectors_keep_marks_and_compose_accents():
    """"हिन्दी" and "हिन्दू" had one vector (the vowel signs were separators); "Dvořák" written with
    a combining accent was another word."""
    import unicodedata

    a, b, c, d = await LexicalEmbedder().embed(["हिन्दी", "हिन्दू", "Antonín Dvořák",
                                                 unicodedata.normalize("NFD", "Antonín Dvořák")])
    assert cosine(a, b) < 0.9 and cosine(c, d) == 1.0


async def test_dense_vectors_of_two_lengths_are_an_error_not_a_similarity():
    """zip cut the longer vector: cosine([1, 0, 0], [1, 0]) was 1.0, and an embedder whose vectors'
    length varied made the critical model rate a wrong state 1.0."""
    from traversals.embed.base import checked_embedder
    from traversals.errors import EmbedderError

    with pytest.raises(ValueError, match="3 and 2 dimensions"):
        cosine([1.0, 0.0, 0.0], [1.0, 0.0])

    class Varying:
        name = "varying"

        async def embed(self, texts):
            return [[1.0] * (len(t) % 3 + 1) for t in texts]

    emb = checked_embedder(Varying())
    assert len((await emb.embed(["ab"]))[0]) == 3
    with pytest.raises(EmbedderError, match="a vector of 1 dimensions after ones of 3"):
        await emb.embed(["abc"])


async def test_a_users_vectors_come_back_as_python_floats_and_bad_components_are_named():
    """NumPy vectors (sentence-transformers' encode()) went on as they were, and their float32
    cosines reached Answer.value and the traces, which JSON refused; a vector of strings was a
    TypeError in cosine, a NaN a NaN similarity."""
    np = pytest.importorskip("numpy")
    from traversals.embed.base import checked_embedder
    from traversals.errors import EmbedderError

    class Given:
        name = "given"

        def __init__(self, vectors):
            self.vectors = vectors

        async def embed(self, texts):
            return self.vectors

    dense = await checked_embedder(Given(np.array([[1, 2], [3, 4]], dtype=np.float32))).embed(["a", "b"])
    assert dense == [[1.0, 2.0], [3.0, 4.0]] and all(type(x) is float for v in dense for x in v)
    assert type(cosine(np.float32([1, 0]), np.float32([1, 1]))) is float  # unchecked, as a CriticalModel's own
    [sparse] = await checked_embedder(Given([{"ab": np.float32(0.5), 7: np.int64(2)}])).embed(["a"])
    assert sparse == {"ab": 0.5, "7": 2.0} and all(type(x) is float for x in sparse.values())
    [listed] = await checked_embedder(Given([(np.float64(1.0), 2)])).embed(["a"])
    assert listed == [1.0, 2.0] and all(type(x) is float for x in listed)
    for vectors, says in (([["0.5", "1"]], "a vector holding '0.5'"), ([[float("nan"), 1.0]], "a vector holding nan"),
                          ([{"ab": float("inf")}], "a vector holding inf"), ([[True, 1.0]], "a vector holding True"),
                          (np.array([[[1.0]]]), "a vector holding \\[1.0\\]"),
                          (["ab"], "str 'ab' as a vector"), ([0.5], "float 0.5 as a vector")):
        with pytest.raises(EmbedderError, match=f"embedder 'given': embed\\(\\) returned {says}"):
            await checked_embedder(Given(vectors)).embed(["a"])
