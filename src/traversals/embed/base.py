"""The embedder protocol and the cosine similarity of its vectors."""

from __future__ import annotations

import inspect
import math
from typing import Protocol, Sequence, Union

#: a dense vector, or a sparse one (feature -> weight)
Vector = Union[list[float], dict[str, float]]


class Embedder(Protocol):
    name: str

    async def embed(self, texts: Sequence[str]) -> Sequence[Vector]:
        """One vector per text, for cosine similarity."""
        ...


async def close_embedder(embedder: object) -> None:
    """Close an embedder that holds a connection (``aclose``, else ``close``); others have
    nothing to close."""
    close = getattr(embedder, "aclose", None) or getattr(embedder, "close", None)
    if close is not None:
        result = close()
        if inspect.isawaitable(result):
            await result


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity of two vectors of the same kind (0.0 if either is zero)."""
    if isinstance(a, dict) and isinstance(b, dict):
        dot = sum(v * b.get(k, 0.0) for k, v in a.items())
        na, nb = math.sqrt(sum(v * v for v in a.values())), math.sqrt(sum(v * v for v in b.values()))
    elif isinstance(a, dict) or isinstance(b, dict):
        raise TypeError("cosine of a sparse and a dense vector")
    else:
        dot = sum(x * y for x, y in zip(a, b))
        na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
