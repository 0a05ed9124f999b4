"""The embedder protocol, the cosine similarity of its vectors, and how its calls are
counted (:func:`embed_counted`)."""

from __future__ import annotations

import inspect
import math
import numbers
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol, Sequence, Union

if TYPE_CHECKING:
    from ..llm.base import Usage

#: a dense vector, or a sparse one (feature -> weight)
Vector = Union[list[float], dict[str, float]]


class Embedder(Protocol):
    name: str

    async def embed(self, texts: Sequence[str]) -> Sequence[Vector]:
        """One vector per text, for cosine similarity."""
        ...


#: the tokens the embedder call running in this task (and the tasks it starts) was charged
#: for, as its endpoint reported them (:func:`count_embedding_tokens`)
_TOKENS: ContextVar[list[int] | None] = ContextVar("traversals_embedding_tokens", default=None)


def count_embedding_tokens(n: int) -> None:
    """Called by an embedder with the tokens a request was charged for (an embeddings
    endpoint's ``usage``): they count in the ``embedding_tokens`` of the search's call.
    Outside :func:`embed_counted` it does nothing."""
    tokens = _TOKENS.get()
    if tokens is not None:
        tokens.append(n)


async def embed_counted(embedder: Embedder, texts: Sequence[str], usage: Usage | None) -> Sequence[Vector]:
    """``embedder.embed(texts)``, counted in ``usage`` as one embedder call of ``len(texts)``
    texts with the tokens its endpoint reported (an embedder at a paid endpoint costs money
    and time that an answer's LLM and KG counts did not show). ``usage`` None: not counted."""
    spent: list[int] = []
    token = _TOKENS.set(spent)  # the requests of this call (its tasks share the list), none of another's
    try:
        vectors = await embedder.embed(texts)
    finally:
        _TOKENS.reset(token)
        if usage is not None:  # a call that failed was still paid for
            usage.add_embedding(len(texts), sum(spent))
    return vectors


async def close_embedder(embedder: object) -> None:
    """Close an embedder that holds a connection (``aclose``, else ``close``); others have
    nothing to close."""
    close = getattr(embedder, "aclose", None) or getattr(embedder, "close", None)
    if close is not None:
        result = close()
        if inspect.isawaitable(result):
            await result


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity of two vectors of the same kind (0.0 if either is zero): a Python
    float even of NumPy vectors, which reach it from a user's embedder not wrapped in
    :class:`CheckedEmbedder` (a ``CriticalModel`` built by hand)."""
    if isinstance(a, dict) and isinstance(b, dict):
        dot = sum(v * b.get(k, 0.0) for k, v in a.items())
        na, nb = math.sqrt(sum(v * v for v in a.values())), math.sqrt(sum(v * v for v in b.values()))
    elif isinstance(a, dict) or isinstance(b, dict):
        raise TypeError("cosine of a sparse and a dense vector")
    else:
        if len(a) != len(b):  # zip would cut the longer: [1, 0, 0] and [1, 0] came out 1.0
            raise ValueError(f"cosine of vectors of {len(a)} and {len(b)} dimensions")
        dot = sum(x * y for x, y in zip(a, b))
        na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return float(dot / (na * nb)) if na and nb else 0.0


class CheckedEmbedder:
    """A user's embedder, checked at the boundary as :class:`~traversals.llm.checked.CheckedLLM`
    checks an LLM: a failure, a sync ``embed``, or a reply without one vector per text is an
    :class:`~traversals.errors.EmbedderError` naming it (they were a raw exception, or a
    KeyError deep in RwT's critical model). Each vector comes back as the library's own kind
    (:func:`_plain`): a dense one a list of Python floats, a sparse one ``{str: float}``.
    Other attributes are the wrapped embedder's."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        #: the length of the dense vectors it returned first: every later one must have it
        self.dimensions: int | None = None

    def __getattr__(self, name: str) -> object:
        if name == "embedder":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.embedder, name)

    async def embed(self, texts: Sequence[str]) -> Sequence[Vector]:
        from ..errors import EmbedderError
        from ..plugin_call import call_plugin

        where = f"embedder {getattr(self.embedder, 'name', type(self.embedder).__name__)!r}: embed()"
        got = await call_plugin(
            self.embedder, "embed", (texts,),
            missing=lambda: EmbedderError(f"{where} is missing: an embedder has async embed(texts)"),
            not_async=lambda _: EmbedderError(f"{where} is not async: define it with `async def`"),
            failed=lambda exc: EmbedderError(f"{where} raised {type(exc).__name__}: {exc}"))
        sized = hasattr(got, "__len__") and not isinstance(got, (str, bytes, dict))  # a list, a numpy array
        if not sized or len(got) != len(texts):
            n = len(got) if sized else type(got).__name__
            raise EmbedderError(f"{where} returned {n} vectors for {len(texts)} texts: one per text belongs there")
        vectors = [_plain(vector, where) for vector in got]
        for vector in vectors:
            if isinstance(vector, dict):  # sparse: any keys
                continue
            size = len(vector)
            if self.dimensions is None:
                self.dimensions = size
            elif size != self.dimensions:  # compared by cosine, which needs one length
                raise EmbedderError(f"{where} returned a vector of {size} dimensions after ones of "
                                    f"{self.dimensions}: every vector of an embedder has one length")
        return vectors


def _plain(vector: object, where: str) -> Vector:
    """``vector`` as a list of Python floats (dense) or ``{str: float}`` (sparse). NumPy's
    float32s (what sentence-transformers' ``encode()`` returns) passed through unchanged made
    every cosine, and so RwT's state values, ``Answer.value`` and retrieve's fact scores,
    NumPy scalars that ``json.dumps`` refuses; a component that is no finite number (a
    string, a NaN) is an :class:`~traversals.errors.EmbedderError` here, not a TypeError or a
    NaN similarity later (as :class:`~traversals.embed.openai.OpenAIEmbedder` refuses one)."""
    from ..errors import EmbedderError

    if isinstance(vector, dict):
        items = list(vector.items())
        values = [v for _, v in items]
    else:
        if hasattr(vector, "tolist"):  # a NumPy array or a tensor: its numbers as Python's, at once
            vector = vector.tolist()
        if isinstance(vector, (str, bytes)) or not isinstance(vector, Sequence):
            raise EmbedderError(f"{where} returned {type(vector).__name__} {_short(vector)} as a vector: a list of "
                                "numbers (dense) or a dict of feature -> number (sparse) belongs there")
        values = list(vector)
    for x in values:
        if not isinstance(x, numbers.Real) or isinstance(x, bool) or not math.isfinite(x):
            raise EmbedderError(f"{where} returned a vector holding {_short(x)}: its components are finite numbers")
    if isinstance(vector, dict):
        return {str(k): float(v) for k, v in items}
    return [float(x) for x in values]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def checked_embedder(embedder: Embedder) -> Embedder:
    """``embedder`` wrapped in :class:`CheckedEmbedder`, unless it already is."""
    return embedder if isinstance(embedder, CheckedEmbedder) else CheckedEmbedder(embedder)  # type: ignore[return-value]
