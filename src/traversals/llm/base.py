"""The LLM interface: sample text, optionally score options, report token usage.

Every backend (OpenAI-compatible HTTP, llama.cpp in-process, the scripted test double)
implements :class:`LLM`. Prompts are plain strings (the "user" message); ``prefix`` is
the start of the assistant's reply (e.g. ``"SELECT ENTITIES:"``) that a backend either
pre-fills (local model, completions API) or asks for in the prompt (chat APIs).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterator, Protocol, Sequence, runtime_checkable


@dataclass
class Generation:
    """What one call returned: ``n`` texts (continuations after ``prefix``) and tokens."""

    texts: list[str]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: prompt tokens the backend really computed (the rest came from a KV/prefix cache);
    #: equal to ``prompt_tokens`` when the backend cannot tell.
    computed_prompt_tokens: int | None = None
    #: the reply came from a reply cache (:mod:`~traversals.llm.cache`), not the model
    cached: bool = False
    #: why each text ended, as the backend said (one per text): ``"length"`` when it was cut
    #: at ``max_tokens``, ``"stop"`` at a stop sequence or the model's end, None when not
    #: told; None (unknown for all) from a backend that does not say (a user's, the scripted)
    finish_reasons: list[str | None] | None = None

    @property
    def computed_tokens(self) -> int:
        """Prompt tokens computed: ``computed_prompt_tokens``, or all of them when unknown."""
        return self.prompt_tokens if self.computed_prompt_tokens is None else self.computed_prompt_tokens

    def cut(self, i: int = 0) -> bool:
        """Whether text ``i`` was cut at ``max_tokens`` (its end is missing); False when the
        backend did not say."""
        reasons = self.finish_reasons
        return reasons is not None and 0 <= i < len(reasons) and reasons[i] == "length"


def finish_reason(reason: object, text: str, stopped: str) -> str | None:
    """A text's finish reason as :class:`Generation` keeps it: ``stopped`` (the text after the
    stop sequences applied here) shorter than ``text`` ended at a stop sequence, whatever
    the backend said (a server that ignores ``stop`` runs on to ``max_tokens``); a reason
    that is not a string is unknown."""
    if stopped != text:
        return "stop"
    return reason if isinstance(reason, str) else None


@dataclass
class Scores:
    """Log-probabilities of each option as the continuation of ``prompt + prefix``. A score
    generates nothing, so it has no completion tokens: the options' tokens count as prompt
    tokens (the one token an endpoint's echo request must generate is not counted)."""

    logprobs: list[float]
    prompt_tokens: int = 0
    computed_prompt_tokens: int | None = None
    #: number of tokens of each option (for length-normalised comparisons), if known
    token_counts: list[int] | None = None
    #: the reply came from a reply cache (:mod:`~traversals.llm.cache`), not the model
    cached: bool = False

    @property
    def computed_tokens(self) -> int:
        """Prompt tokens computed: ``computed_prompt_tokens``, or all of them when unknown."""
        return self.prompt_tokens if self.computed_prompt_tokens is None else self.computed_prompt_tokens

    def per_token(self, options: Sequence[str]) -> list[float]:
        """Mean log-probability per option token (estimated from characters if the
        backend did not report token counts)."""
        counts = self.token_counts or [max(1, round(len(o) / 4)) for o in options]
        return [lp / max(1, c) for lp, c in zip(self.logprobs, counts)]


@dataclass
class Usage:
    """Costs of one question (or one node): LLM and KG calls and tokens, and the embedder's
    calls (RwT's critical model, retrieve's fact ranking). A reply from a reply cache counts
    in ``llm_cache_hits``, not as a call, and costs no token."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    computed_prompt_tokens: int = 0
    kg_calls: int = 0
    llm_cache_hits: int = 0
    #: ``embed()`` calls the search made (an ``openai:`` embedder sends one as requests of
    #: at most 64 texts); texts already embedded and kept by the critical model are not sent
    embedder_calls: int = 0
    #: texts those calls embedded
    embedded_texts: int = 0
    #: tokens an embeddings endpoint reported (its reply's ``usage``); 0 when none did
    embedding_tokens: int = 0
    extra: dict = field(default_factory=dict)

    def add_generation(self, g: Generation) -> None:
        self._add_generation(g)
        if spent := _metered(self, g):
            spent._add_generation(g)

    def _add_generation(self, g: Generation) -> None:
        if g.cached:
            self.llm_cache_hits += 1
            return
        self.llm_calls += 1
        self.prompt_tokens += g.prompt_tokens
        self.completion_tokens += g.completion_tokens
        self.computed_prompt_tokens += g.computed_tokens

    def add_scores(self, s: Scores) -> None:
        self._add_scores(s)
        if spent := _metered(self, s):
            spent._add_scores(s)

    def _add_scores(self, s: Scores) -> None:
        if s.cached:
            self.llm_cache_hits += 1
            return
        self.llm_calls += 1
        self.prompt_tokens += s.prompt_tokens
        self.computed_prompt_tokens += s.computed_tokens

    def add_kg_call(self) -> None:
        self.kg_calls += 1
        if spent := _metered(self, None):
            spent.kg_calls += 1

    def add_embedding(self, texts: int, tokens: int = 0) -> None:
        """One embedder call of ``texts`` texts, ``tokens`` of them as its endpoint counted."""
        self._add_embedding(texts, tokens)
        if spent := _metered(self, None):
            spent._add_embedding(texts, tokens)

    def _add_embedding(self, texts: int, tokens: int) -> None:
        self.embedder_calls += 1
        self.embedded_texts += texts
        self.embedding_tokens += tokens

    def merge(self, other: "Usage") -> None:
        self.llm_calls += other.llm_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.computed_prompt_tokens += other.computed_prompt_tokens
        self.kg_calls += other.kg_calls
        self.llm_cache_hits += other.llm_cache_hits
        self.embedder_calls += other.embedder_calls
        self.embedded_texts += other.embedded_texts
        self.embedding_tokens += other.embedding_tokens

    def to_json(self) -> dict:
        return {
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "computed_prompt_tokens": self.computed_prompt_tokens,
            "kg_calls": self.kg_calls,
            **({"llm_cache_hits": self.llm_cache_hits} if self.llm_cache_hits else {}),  # with --llm-cache only
            **self.embedding_json(),
        }

    def embedding_json(self) -> dict:
        """The embedder's counts, when the search called one (mcts, beam, retrieve): absent
        otherwise, as in what was written before they were counted."""
        if not self.embedder_calls:
            return {}
        return {"embedder_calls": self.embedder_calls, "embedded_texts": self.embedded_texts,
                **({"embedding_tokens": self.embedding_tokens} if self.embedding_tokens else {})}


#: the meter of :func:`spending` in this task (and the tasks it starts): its Usage, and the
#: replies it counted (one reply recorded in two Usages, a node's and a total, counts once)
_SPENT: ContextVar[tuple[Usage, dict[int, object]] | None] = ContextVar("traversals_spent", default=None)


def _metered(usage: Usage, reply: object) -> Usage | None:
    meter = _SPENT.get()
    if meter is None or meter[0] is usage:
        return None
    spent, counted = meter
    if reply is not None:
        if id(reply) in counted:
            return None
        counted[id(reply)] = reply  # kept: a freed reply's id could be another's
    return spent


@contextmanager
def spending() -> Iterator[Usage]:
    """What the code run inside spends, whatever becomes of its own accounts: every reply and
    KG call recorded in any :class:`Usage` in this task, or the tasks it starts, is added to
    the yielded one too. An evaluation meters each question with it, so a question that
    fails still counts the calls it made (a search's own usage is lost with its exception)."""
    spent = Usage()
    token = _SPENT.set((spent, {}))
    try:
        yield spent
    finally:
        _SPENT.reset(token)


@runtime_checkable
class LLM(Protocol):
    """A language model. ``can_score`` says whether :meth:`score` works."""

    name: str
    can_score: bool

    async def generate(
        self,
        prompt: str,
        *,
        prefix: str = "",
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> Generation:
        """Sample ``n`` continuations of the assistant reply that starts with ``prefix``."""
        ...

    async def score(
        self, prompt: str, options: Sequence[str], *, prefix: str = "", transient: bool = False
    ) -> Scores:
        """Total log-probability of each option continuing ``prefix``. Raises
        :class:`~traversals.errors.ScoringNotSupported` when ``can_score`` is false.

        ``transient`` marks a one-off prompt (a calibration prompt): a backend that keeps
        the previous prompt's context cached keeps that context rather than this prompt's.
        Backends without such a cache ignore it; it does not change what is scored (the
        values may differ by float noise)."""
        ...

    async def close(self) -> None:
        ...
