"""The event loop a memory's connection pool lives on, and how to run coroutines there.

A `Memory` opened with ``await Memory.open()`` lives on the loop that opened it (`PoolLoop`):
async calls from that loop run in place, and every other call (blocking, or from another
loop) runs there too. A `SyncMemory` lives on memroute's background loop (`LoopHandle`):
blocking calls wait for it, and async calls from any other loop hop to it without blocking
their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, ClassVar, TypeVar

from memroute.errors import InvalidInputError

T = TypeVar("T")


class LoopHandle:
    """Owns an event loop running in a daemon thread (one per process: `LoopHandle.shared`)."""

    _shared: ClassVar[LoopHandle | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="memroute-loop",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def shared(cls) -> LoopHandle:
        """The process-wide background loop every `SyncMemory` opens on."""
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def run_as_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Block until ``coro`` finishes on this loop (never call it from this loop)."""
        if _running_loop() is self.loop:
            coro.close()
            raise RuntimeError("a blocking memroute call was made on memroute's own loop")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def run_as_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on this loop, from this loop or any other."""
        if asyncio.get_running_loop() is self.loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def iterate_as_sync(self, stream: AsyncIterator[T]) -> Iterator[T]:
        """Items of an async iterator that runs on this loop, for a blocking caller."""
        return _iterate_as_sync(self, stream)

    def iterate_as_async(self, stream: AsyncIterator[T]) -> AsyncIterator[T]:
        """Items of an async iterator that runs on this loop, for a caller on any loop."""
        return _iterate_as_async(self, stream)


class PoolLoop:
    """The loop a `Memory` opened with ``await`` lives on (its pool is bound to it).

    Async calls from that loop run in place; from another loop they hop to it. A blocking
    call runs its coroutine on that loop too: handed to the loop when it is running (in
    another thread: a sync tool that an async agent runs in a worker thread), else driven
    by the calling thread until the coroutine, and whatever other threads handed the loop
    meanwhile, are done (a script between ``run_until_complete`` calls). A blocking call
    from inside that loop would wait for the loop it blocks: it is an `InvalidInputError`,
    as is any call once the loop is closed.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._driven = False  # a blocking call is running the loop
        self._guests: set[concurrent.futures.Future[Any]] = set()  # handed to it meanwhile

    def _check(self, coro: Coroutine[Any, Any, Any] | None = None) -> None:
        problem = None
        if self.loop.is_closed():
            problem = _LOOP_CLOSED
        elif _running_loop() is self.loop:
            problem = _WOULD_DEADLOCK
        if problem:
            if coro is not None:
                coro.close()
            raise InvalidInputError(problem)

    def _hand_over(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T] | None:
        """``coro`` scheduled on the loop if something runs it (or is about to), else
        ``None``: the caller is to drive the loop (it is now marked driven)."""
        with self._lock:
            if self._driven or self.loop.is_running():
                future = asyncio.run_coroutine_threadsafe(coro, self.loop)
                if self._driven:
                    self._guests.add(future)
                return future
            self._driven = True
            return None

    def run_as_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Block until ``coro`` finishes on the memory's loop."""
        self._check(coro)
        future = self._hand_over(coro)
        if future is not None:
            return future.result()
        if _running_loop() is None:
            return self._drive(coro)
        # this thread runs another loop (which waits, as for any blocking call)
        with concurrent.futures.ThreadPoolExecutor(1, "memroute-drive") as helper:
            return helper.submit(self._drive, coro).result()

    def _drive(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            return self.loop.run_until_complete(coro)
        finally:
            while True:
                with self._lock:
                    pending = {f for f in self._guests if not f.done()}
                    self._guests = pending
                    if not pending:
                        self._driven = False
                        break
                self.loop.run_until_complete(_all_done(pending))

    async def run_as_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the memory's loop, from that loop or any other."""
        if asyncio.get_running_loop() is self.loop:
            return await coro
        self._check(coro)
        future = self._hand_over(coro)
        if future is not None:
            return await asyncio.wrap_future(future)
        return await asyncio.to_thread(self._drive, coro)

    def iterate_as_sync(self, stream: AsyncIterator[T]) -> Iterator[T]:
        """Items of an async iterator that runs on the memory's loop, for a blocking caller."""
        self._check()
        return _iterate_as_sync(self, stream)

    def iterate_as_async(self, stream: AsyncIterator[T]) -> AsyncIterator[T]:
        """Items of an async iterator that runs on the memory's loop, for any loop."""
        if _running_loop() is self.loop:
            return stream
        return _iterate_as_async(self, stream)


async def _all_done(futures: set[concurrent.futures.Future[Any]]) -> None:
    await asyncio.wait([asyncio.wrap_future(f) for f in futures])


_LOOP_CLOSED = (
    "the event loop this Memory was opened on is closed (asyncio.run returned?): open the "
    "Memory inside the loop that uses it, or use SyncMemory.open(...) for blocking calls")
_WOULD_DEADLOCK = (
    "a blocking call on a Memory from inside the event loop it was opened on would wait for "
    "that loop forever: await the async call (ainvoke, aretrieve, astream), run the blocking "
    "one in a thread (asyncio.to_thread), or use SyncMemory.open(...)")


def _iterate_as_sync(loop: LoopHandle | PoolLoop, stream: AsyncIterator[T]) -> Iterator[T]:
    try:
        while True:
            done, item = loop.run_as_sync(_next(stream))
            if done:
                return
            yield item
    finally:
        if hasattr(stream, "aclose"):
            loop.run_as_sync(stream.aclose())


async def _iterate_as_async(loop: LoopHandle | PoolLoop, stream: AsyncIterator[T]
                            ) -> AsyncIterator[T]:
    try:
        while True:
            done, item = await loop.run_as_async(_next(stream))
            if done:
                return
            yield item
    finally:
        if hasattr(stream, "aclose"):
            await loop.run_as_async(stream.aclose())


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _next(stream: AsyncIterator[T]) -> tuple[bool, T | None]:
    """The next item as ``(done, item)`` (StopAsyncIteration cannot cross a future)."""
    try:
        return False, await anext(stream)
    except StopAsyncIteration:
        return True, None
