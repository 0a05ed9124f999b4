"""Character-trigram vectors: no model, catches spelling variants, not synonyms."""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence


class LexicalEmbedder:
    """Sparse character-trigram vectors of normalised text (case, punctuation and
    spacing aside): "Florence Stone" is close to "Florence Stone (1883)", far from "Bob"."""

    name = "lexical"

    async def embed(self, texts: Sequence[str]) -> list[dict[str, float]]:
        return [self.vector(t) for t in texts]

    @staticmethod
    def vector(text: str) -> dict[str, float]:
        norm = " " + re.sub(r"[\W_]+", " ", text.casefold()).strip() + " "
        return dict(Counter(norm[i : i + 3] for i in range(max(0, len(norm) - 2))))
