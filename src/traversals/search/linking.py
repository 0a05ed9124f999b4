"""``initialize(q)``: mentions → KG candidates → the LLM picks one per mention (App. B.3).

Mentions come from, in order: ``topic_entities`` given by the caller (a dataset's gold
topic entity), ``[...]`` spans in the question (MetaQA's convention), or an LLM call
with the ``extract_entities`` prompt. Each mention is searched in every KG. A mention
with exactly one exact-label candidate is linked without asking the LLM; otherwise the
LLM picks among the candidates (by option probability when the backend can score,
else by sampling and parsing an id). Mentions with no candidates are dropped.

With several KGs the entities chosen are linked (:meth:`KGSet.merge
<traversals.search.kgset.KGSet.merge>`) and one thing found in two KGs is one entity,
the first KG's, whose relations come from both; another KG's pick for the same mention
is its copy there when no explicit link says otherwise.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..kg.base import Entity
from ..llm.base import LLM, Usage
from .choices import option_probs
from .kgset import KGSet
from .machine import normalise_label
from .subgraph import shown
from .templates import PromptSet, default_prompts

_BRACKETS = re.compile(r"\[([^\[\]]+)\]")
MAX_MENTIONS = 6
CANDIDATES = 5


def bracketed_mentions(question: str) -> list[str]:
    return [m.strip() for m in _BRACKETS.findall(question) if m.strip()]


def without_brackets(question: str) -> str:
    """The question as an LLM reads it: MetaQA's ``[entity]`` marks dropped, the names kept."""
    return _BRACKETS.sub(r"\1", question)


def parse_mentions(text: str, question: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip("\"'`")
        for part in [line] if "," not in line or line in question else line.split(","):
            part = part.strip().strip("\"'`.")
            if part and part.casefold() not in {m.casefold() for m in out} and len(part) < 120:
                out.append(part)
    return out[:MAX_MENTIONS]


class Linker:
    def __init__(self, llm: LLM, kgs: KGSet, *, constrained: bool, prompts: PromptSet | None = None) -> None:
        self.llm = llm
        self.kgs = kgs
        self.constrained = constrained
        self.prompts = prompts or default_prompts()

    async def initialize(self, question: str, usage: Usage, topic_entities: Sequence[str] | None = None) -> list[Entity]:
        mentions = list(topic_entities or []) or bracketed_mentions(question)
        if not mentions:
            mentions = await self.extract(question, usage)
        linked: list[Entity] = []
        chosen: list[list[Entity]] = []
        for mention in mentions:
            chosen.append(await self.link(question, mention, usage))
            for entity in chosen[-1]:
                if entity not in linked:
                    linked.append(entity)
        # several KGs: one node per thing named, linked to its copies in the other KGs
        return await self.kgs.merge(linked, usage, together=chosen)

    async def extract(self, question: str, usage: Usage) -> list[str]:
        gen = await self.llm.generate(self.prompts.render("extract_entities", query=question), n=1, temperature=0.0, max_tokens=64)
        usage.add_generation(gen)
        mentions = parse_mentions(gen.texts[0] if gen.texts else "", question)
        # Keep mentions that really occur in the question (a small model may answer it).
        found = [m for m in mentions if normalise_label(m) in normalise_label(question)]
        return found or mentions[:2]

    async def link(self, question: str, mention: str, usage: Usage) -> list[Entity]:
        """The best candidate for ``mention`` in each KG (several KGs: one per KG, and none
        from a KG with only partial matches when another KG has the name exactly)."""
        candidates = await self.kgs.search(mention, usage, limit=CANDIDATES)
        if not candidates:
            return []
        by_kg: dict[str, list[Entity]] = {}
        for c in candidates:
            by_kg.setdefault(c.kg, []).append(c)
        named = {kg for kg, cands in by_kg.items()
                 if any(normalise_label(c.label) == normalise_label(mention) for c in cands)}
        chosen = []
        for cands in by_kg.values():
            exact = [c for c in cands if normalise_label(c.label) == normalise_label(mention)]
            if named and not exact:
                # another KG has the name itself: partial matches here ("Inception Records"
                # for "Inception") are other things; a copy under another label is found
                # by an explicit link when the question's entity is linked
                continue
            if len(exact) == 1 or len(cands) == 1:
                chosen.append((exact or cands)[0])
            else:
                chosen.append(await self._choose(question, mention, exact or cands, usage))
        return chosen

    async def _choose(self, question: str, mention: str, cands: list[Entity], usage: Usage) -> Entity:
        ids = [f"C{i + 1}" for i in range(len(cands))]
        lines = "\n".join(
            f"{i}: {shown(c.label)}" + (f" - {shown(c.description)}" if c.description else "") for i, c in zip(ids, cands)
        )
        prompt = self.prompts.render("link_entity", query=question, mention=mention, options=lines)
        if self.constrained:
            probs = await option_probs(self.llm, prompt, ids, usage)
            return cands[max(range(len(cands)), key=lambda i: probs[i])]
        gen = await self.llm.generate(prompt, n=1, temperature=0.0, max_tokens=8)
        usage.add_generation(gen)
        m = re.search(r"C(\d+)", gen.texts[0] if gen.texts else "")
        if m and 1 <= int(m.group(1)) <= len(cands):
            return cands[int(m.group(1)) - 1]
        return cands[0]
