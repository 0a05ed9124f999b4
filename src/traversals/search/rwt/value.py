"""RwT's value function (Eq. 4): ``V̂(s) = (1 - λ - μ)·V_roll-out(s) + λ·V_critical(s) + μ·r``.

- **Critical model**: how well the entities a state reached fit the LLM's three guessed
  answers — for each guess the best cosine similarity among the state's entity labels,
  averaged over the guesses (the paper uses a fine-tuned Sentence-BERT; here any
  :class:`~traversals.embed.Embedder`: ``build_solver`` opens ``--embedder``, by default
  all-MiniLM-L6-v2, a Sentence-BERT; constructed without one the model compares character
  trigrams, :class:`~traversals.embed.LexicalEmbedder`, which needs no model and catches
  "Florence Stone" vs "Florence Stone (1883)" but not synonyms).
- **Roll-out model**: anything with ``value(question, node, hops_left, usage)`` in [0, 1].
  The paper trains one (LLaMA3-8B) on its own search trees; here ``traversals train-value``
  trains :class:`~.valuemodel.ValueModel` (:mod:`.train`), and without one
  :class:`LLMRollout` asks the policy LLM to rate the state (the expectation of its rating
  tokens under constrained decoding, a parsed number otherwise).
- **Outcome reward** ``r`` (μ = 1 on terminal states) needs gold answers: it is used where
  they exist, in value-model training (:mod:`.train`); at inference μ = 0, as in the paper.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from ...aio import InFlight
from ...embed import Embedder, LexicalEmbedder, Vector, cosine, embed_counted
from ...llm.base import LLM, Usage
from ..choices import expected_rating
from ..templates import PromptSet, default_prompts
from ..value import parse_rating
from .state import PathNode, labels


class CriticalModel:
    """How well a state's entities fit the LLM's guesses: for each guess the best cosine
    among the state's first ``max_entities`` labels, averaged over the guesses. Vectors
    are cached by text (a search meets the same labels at many states): only the texts not
    kept are embedded, and counted in the ``usage`` a call is given. A text another call is
    embedding now is awaited, not sent again: sibling states valued at once embed each
    text once, counted once, in the call that sent it.

    Each cosine is rounded to :data:`COSINE_DECIMALS` places: a sentence embedder's vector
    for a text changes in its last bits with the other texts of its batch (~1e-9), and which
    texts share a batch depends on what the cache holds (a resumed run, concurrent
    questions), so the unrounded value differed between runs that searched alike; 4 places
    are finer than any likeness an embedder tells apart."""

    #: the places a cosine is rounded to (docs/rwt.md, Decisions: "The critical model's value repeats")
    COSINE_DECIMALS = 4

    def __init__(self, embedder: Embedder | None = None, *, max_entities: int = 50, cache_size: int = 20_000) -> None:
        self.embedder: Embedder = embedder or LexicalEmbedder()
        self.max_entities = max_entities
        self.cache_size = cache_size
        self._vectors: dict[str, Vector] = {}
        #: the texts concurrent calls are embedding now: a call awaits another's, not sends them again
        self._embedding: InFlight[str, Vector] = InFlight()

    async def value(self, guesses: Sequence[str], node: PathNode, usage: Usage | None = None) -> float:
        names = [e.label for e in node.entities[: self.max_entities]]
        if not guesses or not names:
            return 0.0
        vectors = await self._embed([*guesses, *names], usage)
        g, n = vectors[: len(guesses)], vectors[len(guesses) :]
        places = self.COSINE_DECIMALS
        return sum(max(max(0.0, round(cosine(x, y), places)) for y in n) for x in g) / len(g)

    async def _embed(self, texts: Sequence[str], usage: Usage | None) -> list[Vector]:
        # this call's vectors are its own: a full cache cleared here (or by a call running
        # beside it while this one awaits the embedder) loses none of them
        known: dict[str, Vector] = {}
        while True:
            # kept: at first, or since (by a call that waited, as this one, on a call that failed)
            known.update((t, self._vectors[t]) for t in texts if t not in known and t in self._vectors)
            missing = [t for t in dict.fromkeys(texts) if t not in known]
            if not missing:
                return [known[t] for t in texts]
            # texts a concurrent call is embedding are awaited; those of a call that failed
            # or was cancelled come back missing, and are this call's on the next turn
            known.update(await self._embedding.run(missing, lambda todo: self._embed_new(todo, usage)))

    async def _embed_new(self, texts: list[str], usage: Usage | None) -> dict[str, Vector]:
        """``texts`` embedded in one counted call, and kept."""
        got = dict(zip(texts, await embed_counted(self.embedder, texts, usage)))
        if len(self._vectors) + len(texts) > self.cache_size:
            self._vectors.clear()
        self._vectors.update(got)
        return got


class RolloutModel(Protocol):
    async def value(self, question: str, node: PathNode, hops_left: int, usage: Usage) -> float: ...

    def answer_value(self, question: str, node: PathNode) -> float | None:
        """The state's value *as the answer*, or None when the model has one value for both."""
        ...


class LLMRollout:
    """The untrained stand-in for RwT's roll-out model: the policy LLM rates the state."""

    def __init__(self, llm: LLM, *, constrained: bool, prompts: PromptSet | None = None) -> None:
        self.llm = llm
        self.constrained = constrained
        self.prompts = prompts or default_prompts()
        self._cache: dict[str, float] = {}  # one question's ratings (:meth:`fresh` per question)

    def fresh(self) -> "LLMRollout":
        """The same rater with no rating kept: one question's. Shared, the cache grew over a
        whole run and made a question asked again cost fewer LLM calls than asked alone."""
        return LLMRollout(self.llm, constrained=self.constrained, prompts=self.prompts)

    def answer_value(self, question: str, node: PathNode) -> float | None:
        return None  # one rating serves the search and the answer

    async def value(self, question: str, node: PathNode, hops_left: int, usage: Usage) -> float:
        prompt = self.prompts.render("rwt_value", question=question, path=node.path_text(), entities=labels(node.entities),
                        hops_left=hops_left)
        if prompt in self._cache:
            return self._cache[prompt]
        if self.constrained:
            v = await expected_rating(self.llm, prompt, usage, prefix="RATING [0.0-1.0]: ")
        else:
            gen = await self.llm.generate(prompt, prefix="RATING [0.0-1.0]: ", n=1, temperature=0.0, max_tokens=6)
            usage.add_generation(gen)
            parsed = parse_rating(gen.texts[0] if gen.texts else "")
            v = 0.5 if parsed is None else parsed
        self._cache[prompt] = v
        return v


def mix(rollout: float, critical: float, *, lam: float) -> float:
    """Eq. 4 at inference (μ = 0): ``(1 - λ)·V_roll-out + λ·V_critical``."""
    return (1 - lam) * rollout + lam * critical
