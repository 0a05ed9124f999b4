"""Small text helpers shared by the LLM backends (no I/O, no model).

- :func:`prefix_instruction` asks a chat model that cannot be pre-filled to start its
  reply with ``prefix``; :func:`strip_prefix` removes the prefix again when the model
  repeated it, so every backend returns the continuation *after* the prefix.
- :func:`apply_stop` cuts a text at the first stop sequence (backends that cannot stop
  server-side, or send at most 4 stops, apply the rest here).
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["apply_stop", "prefix_instruction", "strip_prefix"]


def prefix_instruction(prompt: str, prefix: str) -> str:
    """The user message for a chat API: ``prompt`` plus, when ``prefix`` is not empty, a
    line asking the model to start its reply with it."""
    if not prefix:
        return prompt
    return f'{prompt.rstrip()}\n\nStart your reply with "{prefix.strip()}".'


def strip_prefix(text: str, prefix: str) -> str:
    """Remove ``prefix`` from the start of ``text`` if the model repeated it.

    Leading whitespace, the prefix's own surrounding whitespace, and case are ignored for
    the comparison; a reply that is only the start of the prefix (cut by ``max_tokens``) is
    ``""``. When the prefix ends with whitespace (``"Answer: "``), the whitespace that
    follows it in ``text`` is dropped too, as a pre-filled reply would not have it.
    """
    p = prefix.strip()
    if not p:
        return text
    t = text.lstrip()
    for candidate in (p, f'"{p}"', f"**{p}**"):
        if t.lower().startswith(candidate.lower()):  # "Rating [0.0-1.0]:" for "RATING [0.0-1.0]:" too
            rest = t[len(candidate) :]
            if prefix != prefix.rstrip():
                rest = rest.lstrip(" \t")
            return rest
    # the echo cut short by max_tokens ("RATING [0.0"): nothing after it (its "0.0" is no answer)
    if len(t.rstrip()) >= min(len(p), 4) and p.lower().startswith(t.rstrip().lower()):
        return ""
    return text


def apply_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` up to (not including) the earliest occurrence of any stop sequence."""
    if not stop:
        return text
    cut = len(text)
    for s in stop:
        if s:
            i = text.find(s)
            if 0 <= i < cut:
                cut = i
    return text[:cut]
