"""What a search reports while it runs: one JSON-able dict per event.

A solver built with ``on_event=callback`` calls it synchronously, in order:

- ``{"event": "linked", "question", "entities": [{id, label, kg}]}`` -- the question's
  entities, once;
- ``{"event": "node", ...}`` -- a node of the search tree as soon as it exists and has its
  value: exactly the node's entry in the final trace (``id``, ``parent``, ``depth``,
  ``state``, ``action``, ``value``, ``usage``, ``new_edges`` …);
- ``{"event": "expand", "node", "expansion", "depth", "value"}`` -- the search picked this
  node to expand next (a jump to another branch is a backtrack).

The HTTP service streams them as server-sent events and ``traversals ask --verbose``
prints them as lines (:func:`describe`). A callback must not block: it runs inside the
search.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..kg.base import Entity
from .machine import Node

Event = dict[str, Any]
EventSink = Callable[[Event], None]

__all__ = ["Event", "EventSink", "action_parts", "describe", "expansion", "linked", "node"]


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
    """One line for a terminal."""
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
