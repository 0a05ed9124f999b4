"""Chain-of-Thought baseline (paper §3.3): the LLM alone, no KG."""

from __future__ import annotations

import re
import time
from typing import Sequence

from ..llm.base import LLM, Usage
from .linking import checked_question, without_brackets
from .machine import LIST_MARK, left_open, without_emphasis
from .result import NO_ANSWER, Answer
from .templates import PromptSet, default_prompts

#: "ANSWER: x", also in markdown emphasis ("**Answer**: x", "**ANSWER:** x")
_ANSWER = re.compile(r"ANSWER[*_`]*[ \t]*:[*_`]*[ \t]*(.*)", re.I)


def extract_answer(text: str) -> str:
    """The text after the last "ANSWER:"; when that line has nothing after it, the lines
    below it up to a blank line, as one comma-separated list ("Answer:" then "- Rome",
    "- Oslo" is "Rome, Oslo"); "" when nothing follows it. Without an "ANSWER:", the last
    non-empty line."""
    lines = text.splitlines()
    for i in reversed(range(len(lines))):
        m = _ANSWER.search(lines[i])
        if m is None:
            continue
        opened = left_open(lines[i][: m.start()], lines[i][m.start() + len("ANSWER"): m.start(1)])
        if got := without_emphasis(m.group(1), opened=opened):
            return got
        below: list[str] = []
        for line in lines[i + 1:]:
            if not line.strip():
                if below:
                    break
                continue
            below.append(LIST_MARK.sub("", line.strip()))
        return ", ".join(below)  # "" when the mark is all there is: no answer
    rest = [ln.strip() for ln in lines if ln.strip()]
    return rest[-1] if rest else ""


class ChainOfThought:
    name = "cot"

    def __init__(self, llm: LLM, *, max_tokens: int = 256, prompts: PromptSet | None = None) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self.prompts = prompts or default_prompts()

    async def ask(self, question: str, *, topic_entities: Sequence[str] | None = None) -> Answer:
        started = time.perf_counter()
        usage = Usage()
        query = without_brackets(checked_question(question))
        gen = await self.llm.generate(self.prompts.render("cot", query=query), n=1, temperature=0.0, max_tokens=self.max_tokens)
        usage.add_generation(gen)
        raw = gen.texts[0] if gen.texts else ""
        text = extract_answer(raw) or NO_ANSWER
        answer = Answer(question, text, usage=usage, seconds=time.perf_counter() - started, strategy=self.name)
        answer.trace = {"question": question, "answer": text, "strategy": self.name, "raw": raw,
                        "prompts": self.prompts.identity(), "nodes": []}
        return answer
