"""Named exceptions. The CLI turns every ``TraversalsError`` into one clear line."""

from __future__ import annotations


class TraversalsError(Exception):
    """Base class of every error this library raises on purpose."""

    #: when the error is an HTTP endpoint's refusal: its status and its own message (one line)
    status: int | None = None
    detail: str = ""


class BadInput(TraversalsError):
    """A user-supplied value (flag, spec, file) cannot be used."""


class KGError(TraversalsError):
    """A knowledge-graph backend failed."""


class KGUnavailable(KGError):
    """The KG cannot be reached (server down, connection refused, file missing)."""


class KGTimeout(KGError):
    """A KG query took longer than its time budget."""


class KGQueryError(KGError):
    """The KG rejected a query (syntax error, 4xx)."""


class KGAuthError(KGError):
    """A KG endpoint refused the request for want of valid credentials (HTTP 401 or 403):
    none were given, or those given were refused. Not a :class:`KGQueryError`: another query
    would be refused the same way, so nothing skips past it."""


class LLMError(TraversalsError):
    """An LLM backend failed."""


class PromptTooLong(LLMError):
    """A prompt (with the room for its reply) does not fit the LLM's context window: this
    request's own failure (a big subgraph); a search gives up that node, not the question."""


class LLMTimeout(LLMError):
    """A request to an LLM endpoint took longer than its time limit (``--llm-timeout``): this
    request's own failure (a long prompt, a slow reply), so a search records it for that
    question; the scoring probe, whose request is tiny, re-raises it (the server is not ready)."""


class LLMUnavailable(LLMError):
    """The LLM endpoint or model file cannot be reached or loaded."""


class ModelIntegrityError(LLMError):
    """An assembled model file has the wrong size or SHA-256."""


class ScoringNotSupported(LLMError):
    """The backend cannot score options (no token log-probabilities)."""


class EmbedderError(TraversalsError):
    """A sentence-embedding backend failed (an embeddings endpoint's error or bad reply)."""


class EmbedderUnavailable(EmbedderError):
    """A sentence-embedding model cannot be loaded (missing package, file or model) or its
    endpoint cannot be reached."""


class RunStopped(TraversalsError):
    """An evaluation stopped itself: too many questions in a row failed, which says the
    cause is not the questions, or it cannot write its files (a full disk); resume once it
    is fixed."""


class TraversalsWarning(UserWarning):
    """Base class of the warnings this library gives (the CLI prints each as one line)."""


class ValueModelMismatch(TraversalsWarning):
    """A trained value model (``--value-model``) rates paths over relations it was never
    trained on: it belongs to another KG's schema, so its values say nothing here. A warning,
    not an error, because a KG may add relations a model has not seen."""
