"""What a search reports while it runs: one JSON-able dict per event.

A solver built with ``on_event=callback`` calls it synchronously, in order:

- ``{"event": "linked", "question", "entities": [{id, label, kg}]}`` -- the question's
  entities, once;
- ``{"event": "node", ...}`` -- a node of the search tree as soon as it exists and has its
  value: exactly the node's entry in the final trace (``id``, ``parent``, ``depth``,
  ``state``, ``action``, ``value``, ``usage``, ``new_edges`` …);
- ``{"event": "expand", "node", "expansion", "depth", "value"}`` -- the search picked this
  node to expand next (a jump to another branch is a backtrack).

The HTTP service streams them as server-sent events, ``traversals ask --verbose``
prints them as lines (:func:`describe`), and ``traversals ask`` on a terminal keeps one
status line up to date with them (:class:`StatusLine`). A callback must not block: it runs inside the
search.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence, TextIO

from ..kg.base import Entity
from ..validate import terminal_text
from .machine import Node

Event = dict[str, Any]
EventSink = Callable[[Event], None]

__all__ = ["Event", "EventSink", "StatusLine", "action_parts", "describe", "expansion", "linked", "node"]


def linked(question: str, entities: Sequence[Entity]) -> Event:
    return {"event": "linked", "question": question,
            "entities": [e.ref() for e in entities]}


def node(n: Node) -> Event:
    return {"event": "node", **n.to_trace()}


def expansion(n: Node) -> Event:
    return {"event": "expand", "node": n.id, "expansion": n.expansion, "depth": n.depth, "value": n.value}


def action_parts(action: dict | None) -> tuple[str, str]:
    """``(kind, what)`` of an action as a trace records it: ``("SELECT_RELATION",
    "director (wd)")``, ``("THINK", "the text")``; ``("root", "")`` for the root."""
    if not action:
        return "root", ""
    kind = str(action.get("type", "?"))
    if kind == "SELECT_ENTITIES":
        what = ", ".join(str(e.get("label", e.get("id", "?"))) for e in action.get("entities", []))
    elif kind == "SELECT_RELATION":
        rel = action.get("relation") or {}
        what = str(rel.get("label") or rel.get("key", "?"))
        if rel.get("kg"):
            what += f" ({rel['kg']})"
    else:
        what = str(action.get("text", ""))
    return kind, what


def describe(event: Event) -> str:
    """One line for a terminal (its labels' and replies' control characters shown, not acted on)."""
    return terminal_text(_describe(event))


def _describe(event: Event) -> str:
    kind = event.get("event")
    if kind == "linked":
        return "linked: " + (", ".join(e["label"] for e in event["entities"]) or "(nothing)")
    if kind == "expand":
        value = "-" if event.get("value") is None else f"{event['value']:.2f}"
        return f"expand #{event['node']} (expansion {event['expansion']}, depth {event['depth']}, value {value})"
    if kind == "node":
        action, what = action_parts(event.get("action"))
        value = "" if event.get("value") is None else f" · value {event['value']:.2f}"
        invalid = " · invalid" if event.get("invalid") else ""
        if event.get("new_edges"):
            invalid = f" · +{len(event['new_edges'])} edges" + invalid
        parent = "" if event.get("parent") is None else f" ← #{event['parent']}"
        return f"  #{event['id']}{parent} {event.get('state')}: {action} {what}".rstrip() + value + invalid
    return str(event)


class StatusLine:
    """An event sink that keeps one line on a terminal up to date while a search runs --
    ``searching: 12 nodes · 3 expansions · 25 LLM calls · 48 s`` -- rewritten in place
    (``\\r``) at every event, so that a search of minutes on a slow CPU is seen to be
    working. :meth:`clear` erases it before the answer is printed. The seconds are those
    since the sink was made (they move when an event comes)."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self.nodes = self.expansions = self.llm_calls = 0
        self._width = 0  # of the line shown, 0 when none is

    def __call__(self, event: Event) -> None:
        kind = event.get("event")
        if kind == "node":
            self.nodes += 1
            usage = event.get("usage") or {}
            self.llm_calls += int(usage.get("llm_calls") or 0)
        elif kind == "expand":
            self.expansions = max(self.expansions, int(event.get("expansion") or 0))
        counts = ((self.nodes, "node"), (self.expansions, "expansion"), (self.llm_calls, "LLM call"))
        self._show("searching: " + " · ".join(f"{n} {what}{'s' * (n != 1)}" for n, what in counts)
                   + f" · {self.clock() - self.started:.0f} s")

    def _show(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def clear(self) -> None:
        """Erase the line (nothing when none was shown)."""
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
