"""Run coroutines from synchronous code on one background event loop (sync facades only)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop in a daemon thread; `run` blocks until a coroutine finishes there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="memroute-loop",
                                        daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)


_shared: LoopThread | None = None
_lock = threading.Lock()


def shared_loop() -> LoopThread:
    """The process-wide background loop used by every sync facade."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = LoopThread()
        return _shared


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    return shared_loop().run(coro)
