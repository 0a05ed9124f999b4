"""Prompt templates (one file per ASM state, under ``prompts/``), loaded once.

Templates use ``string.Template`` placeholders (``$query``). Substituted values are never
re-interpreted, so labels with ``$``, braces or quotes are safe.

Every prompt of a node starts with the same context block (query, subgraph, previous
actions) and ends with its state-specific task, so a model that caches prompt prefixes
(llama.cpp's KV cache) computes the shared part once per node.
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
