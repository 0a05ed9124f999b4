"""Calling a method of a user's plugin (a KG or LLM backend) at the boundary.

:meth:`~traversals.search.kgset.KGSet._call` and :meth:`~traversals.llm.checked.CheckedLLM._call`
both go through :func:`call_plugin`: look the method up, check it is there and ``async``,
await it, and turn anything it raises into the library's named error. The library's own
errors (:class:`~traversals.errors.TraversalsError`) pass through unchanged, and so does a
``BaseException`` that is not an ``Exception`` (a task's cancellation, Ctrl-C). What each
caller says -- the messages, the error types, how a timeout is named -- stays with it,
given here as the three ``missing`` / ``not_async`` / ``failed`` functions.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable, Mapping, Sequence

from .errors import TraversalsError


async def call_plugin(
    plugin: object,
    method: str,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    missing: Callable[[], TraversalsError],
    not_async: Callable[[object], TraversalsError],
    failed: Callable[[Exception], TraversalsError],
    timeout: float | None = None,
) -> Any:
    """``plugin.method(*args, **kwargs)`` awaited (within ``timeout`` seconds, if given).

    * no callable ``method``: ``missing()`` is raised;
    * the call returns something not awaitable: ``not_async(what it returned)`` is raised;
    * the call or its awaiting raises a ``TraversalsError``: it is raised as it is;
    * it raises any other ``Exception`` (``timeout`` running out: :class:`DeadlineExceeded`,
      a ``TimeoutError``): ``failed(exc)`` is raised, with ``exc`` as its ``__cause__``.
    """
    fn = getattr(plugin, method, None)
    if not callable(fn):
        raise missing()
    try:
        pending = fn(*args, **(kwargs or {}))
        if not inspect.isawaitable(pending):
            raise not_async(pending)
        if timeout is None:
            return await pending
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await pending
        except TimeoutError:
            if deadline.expired():  # ours, not one the plugin raised itself
                raise DeadlineExceeded(timeout) from None
            raise
    except TraversalsError:
        raise
    except Exception as exc:
        raise failed(exc) from exc


class DeadlineExceeded(TimeoutError):
    """The ``timeout`` :func:`call_plugin` was given ran out (a ``TimeoutError`` the plugin
    raised itself, a client's own, is not one); given to ``failed``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"took longer than {seconds:g} s")
        self.seconds = seconds
