"""Character-trigram vectors: no model, catches spelling variants, not synonyms."""

from __future__ import annotations

import unicodedata
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
        """Trigrams of the text composed (NFC), case-folded, with every run of characters that
        are neither letters, digits nor combining marks one space: a vowel sign or a virama is
        part of its word ("हिन्दी" and "हिन्दू" had the same vector, their consonants), and an
        accent written apart is the accented letter ("Dvořák" either way)."""
        folded = unicodedata.normalize("NFC", text).casefold()
        kept = "".join(c if c.isalnum() or unicodedata.category(c).startswith("M") else " " for c in folded)
        norm = " " + " ".join(kept.split()) + " "
        return dict(Counter(norm[i : i + 3] for i in range(max(0, len(norm) - 2))))
