"""asyncio helpers shared by the search, the KG and the LLM clients."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable

__all__ = ["gather"]


async def gather(*aws: Awaitable[Any]) -> list[Any]:
    """``asyncio.gather(*aws)``, except that when one fails the others are cancelled, and
    awaited, before its exception is raised: ``asyncio.gather`` leaves them running, so a
    failed step's sibling LLM and KG calls went on after the question had ended (its cost
    counted short, the next question's calls beside them, a service's after its reply)."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
