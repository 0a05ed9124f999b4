"""Chain-of-Thought baseline (paper §3.3): the LLM alone, no KG."""

from __future__ import annotations

import re
import time
from typing import Sequence

from ..llm.base import LLM, Usage
from .linking import _BRACKETS
from .result import NO_ANSWER, Answer
from .templates import render

_ANSWER = re.compile(r"ANSWER\s*:\s*(.+)", re.I)


def extract_answer(text: str) -> str:
    found = _ANSWER.findall(text)
    if found:
        return found[-1].strip()
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class ChainOfThought:
    name = "cot"

    def __init__(self, llm: LLM, *, max_tokens: int = 256) -> None:
        self.llm = llm
        self.max_tokens = max_tokens

    async def ask(self, question: str, *, topic_entities: Sequence[str] | None = None) -> Answer:
        started = time.perf_counter()
        usage = Usage()
        query = _BRACKETS.sub(r"\1", question)
        gen = await self.llm.generate(render("cot", query=query), n=1, temperature=0.0, max_tokens=self.max_tokens)
        usage.add_generation(gen)
        raw = gen.texts[0] if gen.texts else ""
        text = extract_answer(raw) or NO_ANSWER
        answer = Answer(question, text, usage=usage, seconds=time.perf_counter() - started, strategy=self.name)
        answer.trace = {"question": question, "answer": text, "strategy": self.name, "raw": raw, "nodes": []}
        return answer
