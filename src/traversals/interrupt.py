"""SIGTERM stops an asynchronous command where it awaits, as Ctrl-C does.

``timeout``, ``docker stop`` and job schedulers send SIGTERM. Inside ``asyncio.run`` Ctrl-C
cancels the main task where it awaits (asyncio's own SIGINT handler), and the command
then stops as it was written to (an evaluation keeps every answered question and says how
to resume). SIGTERM gets the same here, also for a job started in the background by a
script, whose SIGINT is ignored and so has no Ctrl-C handler to hand SIGTERM to (raising
``KeyboardInterrupt`` from the signal handler instead ended inside whatever task ran, with
"Task exception was never retrieved" and a traceback).
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")

__all__ = ["run_interruptible"]


class _Stopped:
    """What the main coroutine returns when SIGTERM cancelled it."""


def run_interruptible(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, a SIGTERM cancelling ``coro`` where it awaits; it then raises
    ``KeyboardInterrupt`` (outside the event loop), as Ctrl-C does."""

    async def main() -> T | _Stopped:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        stopped: list[bool] = []
        previous = signal.getsignal(signal.SIGTERM)

        def stop() -> None:
            stopped.append(True)
            if task is not None:
                task.cancel()

        try:
            loop.add_signal_handler(signal.SIGTERM, stop)
            handled = True
        except (NotImplementedError, RuntimeError, ValueError):  # Windows; not the main thread
            handled = False
        try:
            return await coro
        except asyncio.CancelledError:
            if stopped:
                return _Stopped()
            raise
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGTERM)  # which leaves SIG_DFL: the handler before it back
                signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)

    result = asyncio.run(main())
    if isinstance(result, _Stopped):
        raise KeyboardInterrupt
    return result
