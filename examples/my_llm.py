"""An LLM of your own: the LLM protocol around any text-completion function.

``generate`` is all a search needs; ``score`` (log-probabilities of given options) lets it
decode constrained -- it picks actions, entities and relations among the valid options
instead of parsing free text. Here the "model" is ``toy_complete``, a few rules that know
the answer to the question in ``ask.py``: swap in a call to your own model.
Run this file to see one call: ``python examples/my_llm.py``.
"""

from __future__ import annotations

import asyncio
import re
from typing import Callable, Sequence

from traversals.llm.base import Generation, Scores

#: your model: (prompt, temperature) -> the text that continues it
Complete = Callable[[str, float], str]


class MyLLM:
    """The LLM protocol over a completion function ``complete``."""

    def __init__(self, complete: Complete, *, name: str = "my-llm") -> None:
        self.name = name
        self.can_score = True  # False if your model cannot give log-probabilities (then never called)
        self.complete = complete

    async def generate(self, prompt: str, *, prefix: str = "", n: int = 1, temperature: float = 0.0,
                       max_tokens: int = 256, stop: Sequence[str] | None = None,
                       seed: int | None = None) -> Generation:
        """``n`` continuations of the reply that starts with ``prefix``, each cut at the
        first ``stop`` string. (A blocking client belongs in ``await asyncio.to_thread(...)``.)"""
        texts = []
        for _ in range(n):
            text = self.complete(prompt + prefix, temperature)
            cuts = [i for s in stop or () if (i := text.find(s)) >= 0]
            texts.append(text[: min(cuts)] if cuts else text)
        return Generation(texts, prompt_tokens=len(prompt.split()),
                          completion_tokens=sum(len(t.split()) for t in texts))

    async def score(self, prompt: str, options: Sequence[str], *, prefix: str = "",
                    transient: bool = False) -> Scores:
        """The log-probability of each option continuing ``prompt + prefix``. A real model
        sums its token log-probabilities; the toy gives 0 to the option it would write."""
        reply = self.complete(prompt + prefix, 0.0).strip()
        return Scores([0.0 if reply and reply.startswith(o.strip()) else -8.0 for o in options],
                      prompt_tokens=len(prompt.split()))

    async def close(self) -> None:
        pass  # close your client here


def toy_complete(text: str, temperature: float) -> str:
    """Rules that answer "Where was the director of Inception born?" -- stand-in for a model."""
    entities = text.rpartition("Knowledge Graph Entities:")[2].partition("Knowledge Graph Edges:")[0]
    if "Provided answer:" in text:  # rating an answer: its score (constrained) or a sentence ending in it
        score = "1.0" if "Provided answer: London" in text else "0.0"
        return score if text.endswith("should be ") else f"So the score for the provided answer should be {score}"
    if text.endswith("RATING [0.0-1.0]: "):  # how promising a search state is
        if "London" in entities or "<current entity>[London" in text:
            return "0.9"
        return "0.6" if "Christopher Nolan" in entities else "0.3"
    if "Find the names in a text" in text:
        return "Inception"
    if "Which entity does the question mean?" in text:
        return "C1"
    if text.endswith("entities to expand:"):  # the entity listed last, by its handle (E1, E2, ...)
        return re.findall(r"(E\d+):", entities)[-1]
    if text.endswith("I suggest selecting property:"):
        return "born_in" if "SELECT RELATION: directed_by" in text else "directed_by"
    if "deduction game" in text:  # RwT (beam, mcts): which relation leads on
        want = "born in" if "<current entity>[Christopher Nolan" in text else "directed by"
        letter = re.search(rf"([A-Z]): {want}", text.rsplit("<current relations>", 1)[-1])
        return f"{letter.group(1) if letter else 'A'}: {want}"
    if "three most likely answers" in text:
        return "London, B: Paris, C: Los Angeles]"
    if text.rstrip().endswith(("ANSWER:", "Question: Where was the director of Inception born?")):
        return " London" if text.rstrip().endswith("ANSWER:") else "Nolan was born in London.\nANSWER: London"
    if text.endswith(("EXPAND_KG:", "THINK:")):
        return " find who directed it, then where they were born"
    if "London" in entities:
        return "ANSWER: London"
    return "EXPAND_KG: find who directed it, then where they were born"


async def main() -> None:
    llm = MyLLM(toy_complete)
    gen = await llm.generate("Find the names in a text: \"Where was the director of Inception born?\"")
    print(gen.texts)


if __name__ == "__main__":
    asyncio.run(main())
