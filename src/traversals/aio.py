"""asyncio helpers shared by the search, the KG and the LLM clients."""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType
from typing import Any, Awaitable

__all__ = ["LoopLock", "gather"]


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


class LoopLock:
    """An ``asyncio.Lock`` for each running event loop, used as ``async with lock:``. One
    ``asyncio.Lock`` is bound to the loop of the first call that waits on it, and raises
    ``RuntimeError: ... is bound to a different event loop`` in any other: an object kept
    across ``asyncio.run`` calls (a library user answering questions one ``asyncio.run`` at a
    time, a CLI command that runs several) would fail every call that waits in the second
    loop. Calls in different loops cannot share an asyncio lock anyway; what such a lock
    guards across threads needs a ``threading.Lock`` beside it."""

    def __init__(self) -> None:
        self._locks: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = (
            weakref.WeakKeyDictionary()
        )

    def lock(self) -> asyncio.Lock:
        """The running loop's lock, made on its first use. The locks of closed loops are
        dropped here: a lock that was waited on holds its loop, so the weak keys alone
        would keep every loop it served (about 4 KB each, one per ``asyncio.run``)."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            for old in [other for other in self._locks if other.is_closed()]:
                del self._locks[old]
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def __aenter__(self) -> None:
        await self.lock().acquire()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.lock().release()
