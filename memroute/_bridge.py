"""Run memory-bound coroutines on the event loop that owns the memory's connection pool.

A `Memory` opened with ``await Memory.open()`` lives on the caller's loop: async calls run
there directly. A `SyncMemory` (or a `Memory` opened through ``run_sync``) lives on the
shared background loop: sync calls block on it, and async calls from another loop await it
there without blocking their own loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from memroute._sync import run_sync, shared_loop
from memroute.memory import Memory, SyncMemory
from memroute.errors import InvalidInputError

T = TypeVar("T")


def unwrap(memory: Memory | SyncMemory) -> tuple[Memory, bool]:
    """The async `Memory`, and whether it lives on the shared background loop."""
    if isinstance(memory, SyncMemory):
        return memory.memory, True
    if isinstance(memory, Memory):
        return memory, False
    raise InvalidInputError(f"memory must be a Memory or SyncMemory, not {type(memory).__name__}")


async def run_async(coro: Coroutine[Any, Any, T], on_shared_loop: bool) -> T:
    """Await ``coro`` on the memory's loop (here, unless the memory lives on the shared loop)."""
    if on_shared_loop and asyncio.get_running_loop() is not shared_loop().loop:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, shared_loop().loop))
    return await coro


def run_blocking(coro: Coroutine[Any, Any, T], on_shared_loop: bool, what: str) -> T:
    """Block until ``coro`` finishes on the shared loop (sync entry points only).

    A `Memory` opened with ``await`` belongs to its own event loop, which a blocking call
    cannot drive: that is a usage error, reported before anything waits on a foreign pool.
    """
    if not on_shared_loop:
        coro.close()
        raise InvalidInputError(
            f"{what} is synchronous and needs a SyncMemory (SyncMemory.open(...)); with an "
            "async Memory, use the async call (ainvoke)")
    return run_sync(coro)
