"""Prompt templates (one file per ASM state, under ``prompts/``), loaded once.

Templates use ``string.Template`` placeholders (``$query``). Substituted values are never
re-interpreted, so labels with ``$``, braces or quotes are safe.

Prompts are ordered from most to least shared, so a model that caches prompt prefixes
(llama.cpp's KV cache) computes each part once: the static preamble (instructions and
action list, identical in every ASM prompt), then the node's context (query, subgraph,
previous actions — shared by a node's policy and value prompts, and largely by siblings),
then the short state-specific task. The paper (App. F) puts the instructions after the
context; the content is the same, only the order differs.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from string import Template


@lru_cache(maxsize=None)
def template(name: str) -> Template:
    text = resources.files(__package__).joinpath("prompts", f"{name}.txt").read_text("utf-8")
    return Template(text.rstrip("\n"))


def render(name: str, **values: object) -> str:
    return template(name).substitute({k: str(v) for k, v in values.items()})
