"""The LLM as RwT's policy model (§3, Appendix D, Figures 7-8).

- :meth:`RelationPolicy.guesses`: the three most likely answers from the model's own
  knowledge (the critical model compares the entities a path reaches with them);
- :meth:`RelationPolicy.priors`: ``P(s, a)`` over the relations of the current entities —
  each relation's probability as the continuation of the Figure 7/8 prompt (constrained
  decoding: one scoring call), or, for endpoints without log-probabilities, the
  likelihoods the model writes in the paper's ``[A: rel 0.5, …]`` format, or as percentages
  (``A: rel 70``; :func:`read_likelihoods`), normalised (uniform when it writes none).
"""

from __future__ import annotations

import re
from typing import Sequence

from ...kg.base import Relation
from ...llm.base import LLM, Usage
from ..choices import option_probs
from ..templates import PromptSet, default_prompts
from ..subgraph import shown
from .state import PathNode, labels

#: ``A: Crouching Tiger, Hidden Dragon, B: Hero``: a guess runs to the next option's handle
#: (", B:"), the closing "]" or the line's end -- not to its first comma ("Washington, D.C.",
#: "20,000 Leagues Under the Sea", which cut to "20" out-rated the right state)
_GUESS = re.compile(r"(?:^|,|\[)\s*[A-C]\s*:\s*(.*?)(?=\s*,\s*[A-C]\s*:|\]|\n|$)")
#: ``A: rel 0.5`` (or ``70``, ``70%``, ``(0.5)``): the handle and the number that ends its item; the
#: number starts after no digit, point or letter (``70`` was read as its ``0``, ``P25`` is no likelihood)
_LIKELIHOOD = re.compile(
    r"([A-Z]{1,2})\s*:\s*[^,\]\n]*?(?<![\w.])\(?(\d+(?:\.\d+)?|\.\d+)\s*(%?)\)?\s*(?=,|\]|$)", re.M)


def letters(n: int) -> list[str]:
    """A, B, … Z, AA, AB …: option handles as in the paper's prompts."""
    out = []
    for i in range(n):
        out.append(chr(65 + i) if i < 26 else chr(64 + i // 26) + chr(65 + i % 26))
    return out


def parse_guesses(text: str) -> list[str]:
    return [g.strip().strip("\"'") for g in _GUESS.findall(text) if g.strip()][:3]


class RelationPolicy:
    def __init__(self, llm: LLM, *, constrained: bool, max_tokens: int = 64, prompts: PromptSet | None = None) -> None:
        self.llm = llm
        self.prompts = prompts or default_prompts()
        self.constrained = constrained
        self.max_tokens = max_tokens

    async def guesses(self, question: str, usage: Usage) -> list[str]:
        gen = await self.llm.generate(
            self.prompts.render("rwt_guess", question=question), prefix="<answer>[A:", n=1, temperature=0.0,
            max_tokens=self.max_tokens, stop=["</answer>", "\n"],
        )
        usage.add_generation(gen)
        return parse_guesses("[A:" + (gen.texts[0] if gen.texts else ""))

    def prompt(self, question: str, node: PathNode, relations: Sequence[Relation]) -> str:
        past = "" if node.parent is None else f" <past reasoning paths>[{node.path_text()}]</past reasoning paths>"
        handles = letters(len(relations))
        return self.prompts.render(
            "rwt_relations", question=question, entities=labels(node.entities), past=past,
            relations=", ".join(f"{h}: {shown(r.display)}" for h, r in zip(handles, relations)),
        )

    async def priors(self, question: str, node: PathNode, relations: Sequence[Relation], usage: Usage) -> list[float]:
        if not relations:
            return []
        if len(relations) == 1:
            return [1.0]
        prompt = self.prompt(question, node, relations)
        handles = letters(len(relations))
        if self.constrained:
            return await option_probs(self.llm, prompt, [f" {h}: {shown(r.display)}" for h, r in zip(handles, relations)],
                                      usage)
        gen = await self.llm.generate(prompt, prefix=" <answer>[", n=1, temperature=0.0, max_tokens=12 * len(relations),
                                      stop=["</answer>"])
        usage.add_generation(gen)
        given = read_likelihoods(gen.texts[0] if gen.texts else "")
        raw = [given.get(h, 0.0) for h in handles] if given is not None else []
        total = sum(raw)
        if total <= 0:
            node.note = ("policy: no likelihoods in the output; uniform prior" if given is not None else
                         "policy: a likelihood over 100 in the output; uniform prior")
            return [1.0 / len(relations)] * len(relations)
        return [x / total for x in raw]


def read_likelihoods(text: str) -> dict[str, float] | None:
    """Each handle's likelihood as the model wrote it in ``[A: rel 0.5, B: rel 0.3]``, as a
    probability: a value with ``%``, or every value of a reply that writes any over 1
    (``A: rel 70, B: rel 21, C: rel 9``: whole percentages), is read in percent. None when a
    value is over 100 (percent): no likelihood, so no value of that reply can be trusted."""
    found = _LIKELIHOOD.findall(text)
    in_percent = any(float(value) > 1 and not percent for _, value, percent in found)
    given = {handle: float(value) / 100 if percent or in_percent else float(value) for handle, value, percent in found}
    return None if any(p > 1 for p in given.values()) else given
