"""The event loop a memory's connection pool lives on, and how to run coroutines there.

A `Memory` opened with ``await Memory.open()`` lives on its caller's loop (`CallerLoop`):
async calls run in place, and blocking calls are a usage error. A `SyncMemory` lives on
memroute's background loop (`LoopHandle`): blocking calls wait for it, and async calls
from any other loop hop to it without blocking their own.
"""

from __future__ import annotations

import asyncio
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
        try:
            while True:
                done, item = self.run_as_sync(_next(stream))
                if done:
                    return
                yield item
        finally:
            if hasattr(stream, "aclose"):
                self.run_as_sync(stream.aclose())

    async def iterate_as_async(self, stream: AsyncIterator[T]) -> AsyncIterator[T]:
        """Items of an async iterator that runs on this loop, for a caller on any loop."""
        try:
            while True:
                done, item = await self.run_as_async(_next(stream))
                if done:
                    return
                yield item
        finally:
            if hasattr(stream, "aclose"):
                await self.run_as_async(stream.aclose())


_NEEDS_SYNC_MEMORY = (
    "this synchronous call needs a SyncMemory (SyncMemory.open(...)); with a Memory opened by "
    "`await Memory.open()`, use the async call (ainvoke, aretrieve, astream)")


class CallerLoop:
    """The loop of whoever awaits: the home of a `Memory` opened with ``await``."""

    def run_as_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        coro.close()
        raise InvalidInputError(_NEEDS_SYNC_MEMORY)

    def iterate_as_sync(self, stream: AsyncIterator[T]) -> Iterator[T]:
        raise InvalidInputError(_NEEDS_SYNC_MEMORY)

    async def run_as_async(self, coro: Coroutine[Any, Any, T]) -> T:
        return await coro

    def iterate_as_async(self, stream: AsyncIterator[T]) -> AsyncIterator[T]:
        return stream


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
