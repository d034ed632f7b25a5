"""What the planner nodes share: one planner step within the budget, and the one error
handler that turns a step that kept raising into its node's fallback.

A step runs the same sequence in every node: the run's context, what the budget leaves,
the planner bound to that, the decision asked before the deadline, its cost, and on failure
the stop reason (`PlannerStep`).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from langgraph.errors import NodeError, NodeTimeoutError
from langgraph.runtime import Runtime
from langgraph.types import Command

from memroute._log import get_logger
from memroute.graph.context import ContextResolver, RetrievalContext
from memroute.graph.state import NodeCost, RetrievalState, node_cost
from memroute.planners.base import Planner, PlannerResult
from memroute.strategies.base import Usage
from memroute.strategies.budget import Budget, CallLimits, RequestTally, tallying

log = get_logger(__name__)
T = TypeVar("T")
ATTEMPTS_ATTR = "memroute_attempts"
# The requests each running planner task has sent, by LangGraph task id (shared by a task's
# attempts and its error handler); a task's entry goes when it returns or is handled.
_TALLIES: OrderedDict[str, RequestTally] = OrderedDict()
_MAX_TALLIES = 4096  # entries of tasks that never finished (their run was cancelled) age out


def limits_for(state: RetrievalState, attempt: int = 1, prior_requests: int = 0) -> CallLimits:
    """What the next planner step may spend, given the request's budget and its costs so far
    (``prior_requests``: what earlier attempts of this step sent, at least one each)."""
    return CallLimits.remaining(Budget.coerce(state.get("budget")),
                                Usage.total(state.get("costs") or []),
                                state.get("started_at") or time.time(),
                                max(attempt - 1, prior_requests))


def _task_id(runtime: Any) -> str | None:
    return getattr(getattr(runtime, "execution_info", None), "task_id", None)


def task_tally(runtime: Any, attempt: int) -> RequestTally:
    """The request tally of the task ``runtime`` runs, fresh on its first attempt."""
    task_id = _task_id(runtime)
    if task_id is None:
        return RequestTally()
    if attempt == 1:
        _TALLIES.pop(task_id, None)
    tally = _TALLIES.setdefault(task_id, RequestTally())
    _TALLIES.move_to_end(task_id)
    while len(_TALLIES) > _MAX_TALLIES:
        _TALLIES.popitem(last=False)
    return tally


def finish_tally(runtime: Any) -> RequestTally | None:
    """Remove and return the tally of the task ``runtime`` runs (or handles the error of)."""
    task_id = _task_id(runtime)
    return None if task_id is None else _TALLIES.pop(task_id, None)


def first_attempt_time(runtime: Any) -> float:
    info = getattr(runtime, "execution_info", None)
    return getattr(info, "node_first_attempt_time", None) or time.time()


def attempt_of(runtime: Any) -> int:
    info = getattr(runtime, "execution_info", None)
    return getattr(info, "node_attempt", 1) or 1


async def run_before_deadline(step: Callable[[], Awaitable[PlannerResult[T]]],
                              limits: CallLimits, attempt: int) -> PlannerResult[T]:
    """Run one planner step before the request's deadline.

    A deadline that passes mid-step ends it as ``budget_exhausted: latency``. Any exception
    is tagged with the attempt number, so the error handler can report what it cost.
    """
    left = limits.seconds_left()
    try:
        if left is None:
            return await step()
        try:
            async with asyncio.timeout(max(left, 0.0)) as deadline:
                return await step()
        except TimeoutError:
            if not deadline.expired():
                raise
            return PlannerResult(None, Usage(), [], "budget_exhausted: latency")
    except Exception as exc:
        try:
            setattr(exc, ATTEMPTS_ATTR, attempt)
        except AttributeError:  # pragma: no cover - exceptions with __slots__
            pass
        raise


def failure_reason(step: str, error: str | None) -> str:
    """The stop reason for a planner step that returned no value."""
    error = error or "no value"
    if error.startswith("budget_exhausted"):
        return f"{error} ({step})"
    return f"{step}_failed: {error}"


@dataclass(frozen=True)
class Decided(Generic[T]):
    """A planner step's outcome: the decision (or ``None`` and the stop reason) and its cost."""

    value: T | None
    cost: NodeCost
    failure: str | None = None


@dataclass(frozen=True)
class PlannerStep:
    """One planner decision of a node: ``step`` names it in stop reasons (``router``,
    ``split``, ``judge``), ``limits`` is what the budget leaves for it."""

    node: str
    step: str
    ctx: RetrievalContext
    limits: CallLimits
    attempt: int
    started: float
    runtime: Any = None
    tally: RequestTally = field(default_factory=RequestTally)

    @classmethod
    def start(cls, node: str, step: str, ctx: RetrievalContext, state: RetrievalState,
              runtime: Runtime, started: float | None = None) -> PlannerStep:
        attempt = attempt_of(runtime)
        tally = task_tally(runtime, attempt)
        return cls(node, step, ctx, limits_for(state, attempt, tally.sent), attempt,
                   time.time() if started is None else started, runtime, tally)

    async def ask_planner(self, decide: Callable[[Planner], Awaitable[PlannerResult[T]]],
                  detail: str | None = None) -> Decided[T]:
        """``decide`` asked of the planner bound to the limits, before the deadline."""
        planner = self.ctx.planner.with_limits(self.limits)
        with tallying(self.tally):
            result = await run_before_deadline(lambda: decide(planner), self.limits,
                                               self.attempt)
        finish_tally(self.runtime)
        cost = node_cost(self.node, self.started, result.usage, detail=detail, raw=result.raw,
                         decided_by=result.decided_by)
        if result.value is None:
            return Decided(None, cost, failure_reason(self.step, result.error))
        return Decided(result.value, cost)


def describe(exc: BaseException) -> str:
    """A short, one-line cause for a stop reason."""
    if isinstance(exc, NodeTimeoutError):
        return f"timeout after {exc.timeout:g}s"
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failed_attempt_cost(node: str, error: BaseException, max_attempts: int, started_at: float,
                        planner: Planner, requests_sent: int = 0) -> NodeCost:
    """What a step that ended in an exception is charged: for a planner that spends LLM
    calls, one call per request its attempts sent and at least one per attempt (a timed-out
    request may have been billed), tokens unknown."""
    attempts = (max(getattr(error, ATTEMPTS_ATTR, max_attempts), requests_sent)
                if planner.spends_llm_calls else 0)
    log.warning("graph.step_failed", node=node, attempts=attempts, error=describe(error))
    return node_cost(node, started_at, Usage(llm_calls=attempts, estimated=attempts > 0),
                     detail=f"failed: {describe(error)}")


FallBack = Callable[[RetrievalState, str, NodeCost, RetrievalContext, Runtime], Command]
"""A node's way out after its step kept raising: (state, stop reason, cost, context, runtime)."""


def make_fallback(node: str, step: str, resolve: ContextResolver, max_attempts: int,
                  fall_back: FallBack, *, reraise: tuple[type[Exception], ...] = ()):
    """The error handler of a planner node: an error of a ``reraise`` type is raised; any
    other, after the retries, is charged and handed to ``fall_back`` with the stop reason
    ``<step>_failed: <cause>``."""

    async def on_error(state: RetrievalState, error: NodeError, runtime: Runtime) -> Command:
        if isinstance(error.error, reraise):
            raise error.error
        ctx = await resolve(runtime.context)
        tally = finish_tally(runtime)
        cost = failed_attempt_cost(node, error.error, max_attempts, time.time(), ctx.planner,
                                   tally.sent if tally else 0)
        return fall_back(state, f"{step}_failed: {describe(error.error)}", cost, ctx, runtime)

    on_error.__name__ = f"on_{node}_error"
    return on_error
