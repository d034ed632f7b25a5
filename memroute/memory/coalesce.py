"""Concurrent calls of a batch function, run as one call.

Sixteen tenants each adding ten sentences at once embed ten sentences sixteen times; the
model is much faster on one batch of 160 (sorted by length, little padding, one run at a
time on the cores instead of sixteen fighting over them). `Coalescer` gathers the calls made
while a batch runs, or within a short wait, into the next batch, and hands each caller its
own slice of the results.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R", bound=Sequence[Any])

MAX_ITEMS = 256  # items in one coalesced batch (a larger call runs as a batch of its own)
MAX_WAIT_S = 0.002  # how long the first call of an idle coalescer waits for others


@dataclass
class _Call(Generic[T]):
    items: list[T]
    result: asyncio.Future


@dataclass
class _LoopState:
    pending: deque[_Call] = field(default_factory=deque)
    runner: asyncio.Task[None] | None = None


class Coalescer(Generic[T, R]):
    """``await coalescer(items)`` returns ``run(items)``, but calls made at the same time
    run as one ``run`` of all their items, in order of arrival, one batch at a time.

    ``run`` must return one result per item, in order (a list or an array: each caller gets
    its rows). When a batch of several calls fails, each call runs again alone, so an error
    reaches only the caller whose items caused it. A cancelled caller's items are left out of
    the next batch. Each event loop coalesces its own calls.

    Args:
        run: the batch function.
        max_items: items in one batch at most; a call with more runs alone.
        max_wait_s: how long the first call waits for others when no batch is running.
    """

    def __init__(self, run: Callable[[list[T]], Awaitable[R]], *, max_items: int = MAX_ITEMS,
                 max_wait_s: float = MAX_WAIT_S) -> None:
        self._run = run
        self.max_items = max_items
        self.max_wait_s = max_wait_s
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary())
        self.batches = 0  # batches run (each call alone after a failed batch counts as one)

    async def __call__(self, items: list[T]) -> R:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopState()
        call = _Call(list(items), loop.create_future())
        state.pending.append(call)
        if state.runner is None:
            state.runner = loop.create_task(self._drain(state))
        return await call.result

    async def _drain(self, state: _LoopState) -> None:
        batch: list[_Call] = []
        try:
            await asyncio.sleep(self.max_wait_s)
            while state.pending:
                batch, size = [], 0
                while state.pending and (not batch or size + len(state.pending[0].items)
                                         <= self.max_items):
                    call = state.pending.popleft()
                    if not call.result.done():  # done: its caller was cancelled
                        batch.append(call)
                        size += len(call.items)
                if batch:
                    await self._run_batch(batch)
        except BaseException:  # cancelled (the loop is closing): no caller is left waiting
            for call in [*batch, *state.pending]:
                call.result.cancel()
            state.pending.clear()
            raise
        finally:
            state.runner = None

    async def _run_batch(self, batch: list[_Call]) -> None:
        self.batches += 1
        try:
            results = await self._run([item for call in batch for item in call.items])
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0], exc=exc)
                return
            for call in batch:  # whose items failed: each call alone
                self.batches += 1
                try:
                    _settle(call, await self._run(call.items))
                except Exception as alone:
                    _settle(call, exc=alone)
            return
        start = 0
        for call in batch:
            _settle(call, results[start:start + len(call.items)])
            start += len(call.items)


def _settle(call: _Call, result: Any = None, *, exc: BaseException | None = None) -> None:
    if call.result.done():  # its caller was cancelled meanwhile
        return
    if exc is not None:
        call.result.set_exception(exc)
    else:
        call.result.set_result(result)
