"""Concurrent batches of one `MemrouteStore`, run as one; a failing op fails its own caller.

LangGraph's async stores merge the ops of concurrent calls into one batch
(`langgraph.store.base.batch.AsyncBatchedBaseStore`), and when that batch raises, every
merged caller gets the error. Here each caller's batch is validated before it waits (a bad
op never joins), and a merged run that fails is run again caller by caller, so the others
get their results and the failing caller its own error. A caller's batch keeps its own
promises either way: its reads see the state before its writes, which commit together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

Plan = list[Any]
Results = list[Any]


class MergedBatches:
    """Runs the batches (plans) waiting on this loop as one, with ``execute``."""

    def __init__(self, execute: Callable[[Plan], Awaitable[Results]]) -> None:
        self.execute = execute
        self._waiting: list[tuple[Plan, asyncio.Future[Results]]] = []
        self._running: asyncio.Task[None] | None = None

    async def run(self, plan: Plan) -> Results:
        """``plan``'s results, run with every other plan waiting when its turn comes."""
        done: asyncio.Future[Results] = asyncio.get_running_loop().create_future()
        self._waiting.append((plan, done))
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._run_waiting())
        return await done

    async def _run_waiting(self) -> None:
        while self._waiting:
            taken = [(plan, done) for plan, done in self._waiting if not done.done()]
            self._waiting = []
            try:
                await self._run_taken(taken)
            except asyncio.CancelledError:
                for _, done in taken:
                    done.cancel()
                raise

    async def _run_taken(self, taken: list[tuple[Plan, asyncio.Future[Results]]]) -> None:
        if not taken:
            return
        try:
            results = await self.execute([step for plan, _ in taken for step in plan])
        except Exception as exc:
            if len(taken) == 1:
                _settle(taken[0][1], exception=exc)
                return
            for plan, done in taken:  # whose op failed: each plan on its own
                if not done.done():  # (unless its caller stopped waiting)
                    await self._run_alone(plan, done)
            return
        start = 0
        for plan, done in taken:
            _settle(done, results[start:start + len(plan)])
            start += len(plan)

    async def _run_alone(self, plan: Plan, done: asyncio.Future[Results]) -> None:
        try:
            results = await self.execute(plan)
        except Exception as exc:
            _settle(done, exception=exc)
        else:
            _settle(done, results)


def _settle(done: asyncio.Future[Results], results: Results | None = None, *,
            exception: BaseException | None = None) -> None:
    if done.done():
        return
    if exception is not None:
        done.set_exception(exception)
    else:
        done.set_result(results or [])
