"""Sentence embeddings: RwT's critical model compares the entities a search reached with
the LLM's guessed answers by the cosine of their embeddings.

- :class:`~.base.Embedder`: the protocol (``async embed(texts) -> vectors``);
- :class:`~.sbert.SentenceBert`: a sentence-transformers BERT model (the default,
  all-MiniLM-L6-v2, is the paper's Sentence-BERT family) run with NumPy, no torch;
- :class:`~.lexical.LexicalEmbedder`: character trigrams, no model;
- :class:`~.openai.OpenAIEmbedder`: an OpenAI-compatible ``/embeddings`` endpoint;
- :func:`~.factory.open_embedder`: an ``--embedder`` spec to an embedder;
- :func:`~.base.embed_counted`: an embedder's call counted in a search's
  :class:`~traversals.llm.base.Usage` (``embedder_calls``, ``embedded_texts``,
  ``embedding_tokens``; an embedder of your own reports tokens with
  :func:`~.base.count_embedding_tokens`).
"""

from .base import Embedder, Vector, close_embedder, cosine, count_embedding_tokens, embed_counted
from .factory import EMBEDDER_FORMS, open_embedder
from .lexical import LexicalEmbedder
from .openai import OpenAIEmbedder
from .sbert import SentenceBert

__all__ = [
    "EMBEDDER_FORMS", "Embedder", "LexicalEmbedder", "OpenAIEmbedder", "SentenceBert", "Vector", "close_embedder",
    "cosine", "count_embedding_tokens", "embed_counted", "open_embedder",
]
