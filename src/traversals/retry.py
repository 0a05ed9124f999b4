"""Retry timing shared by every HTTP client here (SPARQL endpoints, LLM APIs)."""

from __future__ import annotations

import email.utils
import random
import time


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date)."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:  # pragma: no cover - old Pythons
        return None
    if when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random.

    ``attempt`` counts from 0 (the wait before the first retry).
    """
    d = min(cap, base * (2**attempt))
    return d / 2 + rng.uniform(0, d / 2)
