"""What the nodes share: cost records, the budget left, and asking the planner within it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from memroute._log import get_logger
from langgraph.errors import NodeTimeoutError

from memroute.graph.state import NodeCost, RetrievalState
from memroute.strategies.base import Usage
from memroute.planners.base import Planner, PlannerResult
from memroute.strategies.budget import Budget, CallLimits, Spend

log = get_logger(__name__)
T = TypeVar("T")
ATTEMPTS_ATTR = "memroute_attempts"


RAW_CHARS = 2000


def node_cost(node: str, started_at: float, usage: Usage | None = None,
              detail: str | None = None, raw: list[str] | None = None) -> NodeCost:
    usage = usage or Usage()
    ended = time.time()
    record = NodeCost(node=node, llm_calls=usage.llm_calls, input_tokens=usage.input_tokens,
                      output_tokens=usage.output_tokens, wall_ms=(ended - started_at) * 1000,
                      estimated=usage.estimated, started_at=started_at, ended_at=ended)
    if detail:
        record["detail"] = detail
    if raw:
        record["raw"] = [text[:RAW_CHARS] for text in raw]
    return record


def spent(costs: list[NodeCost]) -> Spend:
    return Spend(sum(c["llm_calls"] for c in costs), sum(c["input_tokens"] for c in costs),
                 sum(c["output_tokens"] for c in costs))


def limits_for(state: RetrievalState, attempt: int = 1) -> CallLimits:
    """What the next planner step may spend, given the request's budget and its costs so far."""
    budget = state.get("budget")
    return CallLimits.remaining(budget if isinstance(budget, Budget) else None,
                                spent(state.get("costs") or []),
                                state.get("started_at") or time.time(), attempt - 1)


def bind(planner: Planner, limits: CallLimits) -> Planner:
    """The planner bound to ``limits`` when it supports it (`LLMPlanner.with_limits`)."""
    with_limits = getattr(planner, "with_limits", None)
    return with_limits(limits) if callable(with_limits) else planner


async def ask(step: Callable[[], Awaitable[PlannerResult[T]]], limits: CallLimits,
              attempt: int) -> PlannerResult[T]:
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


def describe(exc: BaseException) -> str:
    """A short, one-line cause for a stop reason."""
    if isinstance(exc, NodeTimeoutError):
        return f"timeout after {exc.timeout:g}s"
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failure_reason(step: str, error: str | None) -> str:
    """The stop reason for a planner step that returned no value."""
    error = error or "no value"
    if error.startswith("budget_exhausted"):
        return f"{error} ({step})"
    return f"{step}_failed: {error}"


def failed_attempt_cost(node: str, error: BaseException, max_attempts: int, started_at: float,
                        planner: Planner) -> NodeCost:
    """What a step that ended in an exception is charged: for an LLM planner, one call per
    attempt (a timed-out request may have been billed), tokens unknown."""
    attempts = getattr(error, ATTEMPTS_ATTR, max_attempts) if uses_llm(planner) else 0
    log.warning("graph.step_failed", node=node, attempts=attempts, error=describe(error))
    return node_cost(node, started_at, Usage(llm_calls=attempts, estimated=attempts > 0),
                     detail=f"failed: {describe(error)}")


def uses_llm(planner: Planner) -> bool:
    """Whether the planner spends LLM calls (and so takes call limits)."""
    return callable(getattr(planner, "with_limits", None))


def first_attempt_time(runtime: Any) -> float:
    info = getattr(runtime, "execution_info", None)
    return getattr(info, "node_first_attempt_time", None) or time.time()


def attempt_of(runtime: Any) -> int:
    info = getattr(runtime, "execution_info", None)
    return getattr(info, "node_attempt", 1) or 1
