"""asyncio helpers shared by the search, the KG and the LLM clients.

An object kept across event loops -- a library user's LLM or KG answering one question per
``asyncio.run``, or shared by threads that each run their own loop -- cannot keep one
asyncio primitive or one ``httpx.AsyncClient``: each belongs to the loop that first used
it. :class:`PerLoop` keeps one value per loop (:class:`LoopLock`, :class:`LoopClients`);
what must hold across loops and threads at once (a cap on requests in flight) is a
:class:`SharedSemaphore`.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

__all__ = ["InFlight", "LoopClients", "LoopLock", "PerLoop", "SharedSemaphore", "gather"]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


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


class PerLoop(Generic[T]):
    """One value for each event loop, made by ``make`` on the loop's first :meth:`get`.

    The values of closed loops are dropped whenever a new loop's is made: a value that
    refers to its loop (a lock that was waited on, a client's connections) would otherwise
    keep it, and every loop before it, alive through the weak keys (one per ``asyncio.run``).
    Loops in several threads may share one ``PerLoop``: a ``threading.Lock`` guards the table."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._values: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T]" = weakref.WeakKeyDictionary()
        self._guard = threading.Lock()

    def __len__(self) -> int:
        with self._guard:
            return len(self._values)

    def get(self) -> T:
        """The running loop's value, made on its first use."""
        loop = asyncio.get_running_loop()
        with self._guard:
            value = self._values.get(loop)
        if value is None:
            value = self._make()  # outside the guard: only this loop's thread makes this loop's value
            with self._guard:
                for old in [other for other in self._values if other.is_closed()]:
                    del self._values[old]
                self._values[loop] = value
        return value

    def pop_all(self) -> list[tuple[asyncio.AbstractEventLoop, T]]:
        """Every loop's value, taken out of the table."""
        with self._guard:
            values = list(self._values.items())
            self._values.clear()
        return values


class LoopLock:
    """An ``asyncio.Lock`` for each running event loop, used as ``async with lock:``. One
    ``asyncio.Lock`` is bound to the loop of the first call that waits on it, and raises
    ``RuntimeError: ... is bound to a different event loop`` in any other: an object kept
    across ``asyncio.run`` calls (a library user answering questions one ``asyncio.run`` at a
    time, a CLI command that runs several) would fail every call that waits in the second
    loop. Calls in different loops cannot share an asyncio lock anyway; what such a lock
    guards across threads needs a ``threading.Lock`` beside it."""

    def __init__(self) -> None:
        self._locks: PerLoop[asyncio.Lock] = PerLoop(asyncio.Lock)

    def lock(self) -> asyncio.Lock:
        """The running loop's lock, made on its first use."""
        return self._locks.get()

    async def __aenter__(self) -> None:
        await self.lock().acquire()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.lock().release()


class _Kept(Generic[T]):
    """A client and the async generator that closes it when its loop shuts down."""

    def __init__(self, client: T, close: Callable[[T], Awaitable[None]]) -> None:
        self.client = client
        self.keeper = self._keep(client, close)
        self.started = False

    @staticmethod
    async def _keep(client: T, close: Callable[[T], Awaitable[None]]) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await close(client)


class LoopClients(Generic[T]):
    """A client for each event loop (an ``httpx.AsyncClient``: its kept-alive connections
    belong to the loop that opened them, and fail in another with "Event loop is closed"),
    closed with ``close`` while its loop still runs.

    A closed loop's connections cannot be closed any more: closing an asyncio transport
    schedules a callback on its loop (``RuntimeError: Event loop is closed``), and what
    ``httpx``, ``httpcore`` and asyncio show of its socket (``TransportSocket``) cannot close
    it either. Each loop's client is therefore closed as the loop shuts down: a started async
    generator that holds it is closed by ``loop.shutdown_asyncgens()``, which ``asyncio.run``,
    ``asyncio.Runner`` and pytest-asyncio call before closing the loop, and its ``finally``
    closes the client there. (A client made anew in each ``asyncio.run`` without that was
    left to the garbage collector with its sockets open: "ResourceWarning: unclosed
    transport", one file descriptor each until a collection.) A loop closed without
    ``shutdown_asyncgens`` leaves its client to the garbage collector, as before."""

    def __init__(self, make: Callable[[], T], close: Callable[[T], Awaitable[None]]) -> None:
        self._kept: PerLoop[_Kept[T]] = PerLoop(lambda: _Kept(make(), close))

    def __len__(self) -> int:
        return len(self._kept)

    async def get(self) -> T:
        """The running loop's client, made on its first use."""
        kept = self._kept.get()
        if not kept.started:
            kept.started = True
            # runs to the generator's yield at once, and registers it with the loop's
            # asyncgen hooks: from here the loop's shutdown closes the client
            await kept.keeper.asend(None)
        return kept.client

    async def aclose(self) -> None:
        """Close every loop's client: the running loop's now, another running loop's in that
        loop (scheduled there, not waited for); a closed loop's is dropped. A later
        :meth:`get` makes a new one."""
        running = asyncio.get_running_loop()
        for loop, kept in self._kept.pop_all():
            if not kept.started:
                continue
            if loop is running:
                await kept.keeper.aclose()
            elif not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(loop.create_task, kept.keeper.aclose())
                except RuntimeError:  # it closed meanwhile: nothing left to close it in
                    pass


def _wake(waiter: "asyncio.Future[None]") -> None:
    if not waiter.done():
        waiter.set_result(None)


class SharedSemaphore:
    """A semaphore that every event loop and thread shares, used as ``async with``: at most
    ``value`` holders at once, whichever loop each runs in, served in the order they came.
    An ``asyncio.Semaphore`` is bound to one loop, so a client used from several threads
    (each with its own ``asyncio.run``) or from one ``asyncio.run`` after another needed one
    per loop, and each loop got the whole cap: 4 threads with ``max_concurrency=2`` had 8
    requests in flight at the server.

    A waiter waits on a future of its own loop, which a release in any thread completes
    (``call_soon_threadsafe``), so no loop is ever blocked; a ``threading.Lock`` guards the
    count for the moment it is read and changed. A release hands its place straight to the
    first waiter; a waiter cancelled after that passes it on.

    Each place is counted to the loop that holds it. A loop closed while one of its tasks
    held a place (``loop.close()`` after an ``asyncio.wait(..., timeout=)`` that left the
    task pending; ``asyncio.run`` cancels its tasks first) gives its places back: the next
    :meth:`acquire` takes them back, and a waiter looks again every
    :data:`RECLAIM_SECONDS`. Without that, a cap of 1 (WDQS's rate limit) would hang every
    later request of the object for good."""

    #: how often a waiter looks for places held by loops that were closed meanwhile
    RECLAIM_SECONDS = 1.0

    def __init__(self, value: int) -> None:
        if value < 1:
            raise ValueError("a semaphore's value must be >= 1")
        self._free = value
        self._guard = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        #: places held (or handed over) by each loop; a closed loop's are taken back
        self._held: dict[asyncio.AbstractEventLoop, int] = {}

    def _hold(self, loop: asyncio.AbstractEventLoop, n: int) -> None:
        held = self._held.get(loop, 0) + n
        if held > 0:
            self._held[loop] = held
        else:
            self._held.pop(loop, None)

    def _hand_out(self) -> None:
        """Give free places to the first waiters (the guard is held)."""
        while self._free > 0 and self._waiters:
            loop, future = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(_wake, future)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                continue
            self._free -= 1
            self._hold(loop, 1)

    def _reclaim(self) -> None:
        """Take back the places of closed loops and hand them out (the guard is held)."""
        for loop in [loop for loop in self._held if loop.is_closed()]:
            self._free += self._held.pop(loop)
        self._hand_out()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._guard:
            self._reclaim()
            if self._free > 0 and not self._waiters:
                self._free -= 1
                self._hold(loop, 1)
                return
            waiter = (loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            while not waiter[1].done():
                await asyncio.wait({waiter[1]}, timeout=self.RECLAIM_SECONDS)
                if not waiter[1].done():
                    with self._guard:
                        self._reclaim()
        except BaseException:  # cancelled: give up the place, or pass it on if it was handed over
            with self._guard:
                handed = waiter not in self._waiters
                if not handed:
                    self._waiters.remove(waiter)
            if handed:
                self.release()
            raise

    def release(self) -> None:
        """Give back a place taken in the running loop."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._guard:
            if loop is not None:
                self._hold(loop, -1)
            self._free += 1
            self._hand_out()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.release()


class InFlight(Generic[K, V]):
    """Work on keys that concurrent calls of one event loop share (labels to link, texts to
    embed): a key another call is working on now is awaited, not worked on again, so the
    work is done, and counted, once, by the call that did it, however the calls interleave.
    A call that failed or was cancelled gives its waiters no result for its keys: they are
    theirs to do then (:meth:`run` leaves them out, and the caller asks again)."""

    def __init__(self) -> None:
        self._pending: dict[K, asyncio.Future[dict[K, V]]] = {}

    async def run(self, keys: Sequence[K], work: Callable[[list[K]], Awaitable[dict[K, V]]]) -> dict[K, V]:
        """``work`` for the keys no other call is working on (one call of it), the others'
        results awaited: each key's result, a key of a call that failed missing."""
        loop = asyncio.get_running_loop()
        theirs = {k: f for k in keys if (f := self._pending.get(k)) is not None and f.get_loop() is loop}
        mine = [k for k in dict.fromkeys(keys) if k not in theirs]
        got: dict[K, V] = {}
        if mine:
            done: asyncio.Future[dict[K, V]] = loop.create_future()
            self._pending.update(dict.fromkeys(mine, done))
            try:
                got.update(await work(mine))
            finally:
                for k in mine:
                    if self._pending.get(k) is done:
                        del self._pending[k]
                done.set_result(dict(got))  # {} when the work failed: the waiters do it
        if theirs:  # awaited through wait(): a waiter cancelled leaves the result to the others
            await asyncio.wait(set(theirs.values()))
            got.update((k, result[k]) for k, f in theirs.items() if k in (result := f.result()))
        return got
