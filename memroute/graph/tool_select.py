"""``tool_select``: validate the request, then pick the route (override, planner or budget)."""

from __future__ import annotations

import time
from typing import Any

from langgraph.errors import NodeError
from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite

from memroute.graph.context import ContextResolver, RetrievalContext
from memroute.graph.events import RouteChosen, as_payload
from memroute.graph.memory_search import send_search
from memroute.graph.state import NodeCost, RetrievalState
from memroute.graph.steps import (
    ask,
    attempt_of,
    bind,
    describe,
    failed_attempt_cost,
    failure_reason,
    first_attempt_time,
    limits_for,
    node_cost,
    uses_llm,
)
from memroute.errors import InvalidInputError
from memroute.memory.models import coerce_scope
from memroute.strategies import tool_select as strategy
from memroute.strategies.base import Route
from memroute.strategies.budget import Budget

NODE = "tool_select"
STRATEGIES = ("auto", "direct", "split", "chain")
MAX_K = 1000


def _request(state: RetrievalState, ctx: RetrievalContext, started_at: float) -> dict[str, Any]:
    """The validated request, and every accumulating field reset for a fresh run."""
    query = state.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    k = state.get("k", 10)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInputError(f"k must be an integer in [1, {MAX_K}], got {k!r:.40}")
    strategy_name = state.get("strategy") or "auto"
    if strategy_name not in STRATEGIES:
        raise InvalidInputError(f"strategy must be one of {STRATEGIES}, got {strategy_name!r:.40}")
    filters = state.get("filters")
    if filters is not None and not isinstance(filters, dict):
        raise InvalidInputError("filters must be a dict or None")
    return {
        "query": query.strip(), "scope": coerce_scope(state.get("scope")), "k": k,
        "filters": filters, "strategy": strategy_name,
        "budget": Budget.coerce(state.get("budget")), "started_at": started_at,
        "queries": Overwrite([]), "hops": Overwrite([]), "notes": Overwrite([]),
        "pool": Overwrite({}), "selected": Overwrite([]), "hop": 0, "last_hits": [],
        "sub_queries": [], "stop_reason": "", "results": [],
        "planner": ctx.planner.name,
        "prompt_versions": Overwrite(dict(getattr(ctx.planner, "prompt_versions", {}) or {})),
    }


def _go(request: dict[str, Any], route: Route, reason: str, source: str, cost: NodeCost,
        runtime: Runtime, **extra: Any) -> Command:
    runtime.stream_writer(as_payload(RouteChosen(route, reason, source)))
    if "notes" in extra:
        extra["notes"] = Overwrite(list(extra["notes"]))
    update = {**request, "route": route, "route_reason": reason, "costs": Overwrite([cost]),
              **extra}
    if route == "split":
        goto: Any = "split_plan"
    else:
        goto = send_search(update, request["query"], route, hop=1 if route == "chain" else 0)
    return Command(update=update, goto=goto)


def make_tool_select(resolve: ContextResolver):
    async def tool_select(state: RetrievalState, runtime: Runtime) -> Command:
        """Pick the route: the caller's override, else the planner's pick if it fits the budget."""
        ctx = await resolve(runtime.context)
        started = time.time()
        request = _request(state, ctx, first_attempt_time(runtime))
        if request["strategy"] != "auto":
            return _go(request, request["strategy"], "strategy override", "override",
                       node_cost(NODE, started), runtime)
        # Budgets steer routing only for planners that spend LLM calls and tokens.
        budget = request["budget"] if uses_llm(ctx.planner) else None
        attempt = attempt_of(runtime)
        limits = limits_for({**state, **request, "costs": []}, attempt)
        if budget is not None:
            skip = strategy.worth_asking(ctx.profiles, ctx.router_profile, limits)
            if skip:
                reason = f"budget_exhausted: {skip} ({NODE})"
                return _go(request, "direct", f"router skipped, budget: {skip}", "budget",
                           node_cost(NODE, started), runtime, stop_reason=reason,
                           notes=[f"router skipped: {reason}"])
        planner = bind(ctx.planner, limits)
        result = await ask(lambda: planner.route(request["query"]), limits, attempt)
        cost = node_cost(NODE, started, result.usage, raw=result.raw)
        if result.value is None:
            reason = failure_reason("router", result.error)
            return _go(request, "direct", reason, "fallback", cost, runtime,
                       stop_reason=reason, notes=[reason])
        route, reason, source = result.value.route, result.value.reason, "planner"
        if budget is not None:
            after = limits_for({**state, **request, "costs": [cost]})
            route, why = strategy.choose_route(route, ctx.profiles, after)
            if why:
                reason, source = why, "budget"
        return _go(request, route, reason, source, cost, runtime,
                   notes=[reason] if source == "budget" else [])

    return tool_select


def make_router_fallback(resolve: ContextResolver, max_attempts: int):
    async def on_router_error(state: RetrievalState, error: NodeError, runtime: Runtime) -> Command:
        """After retries: search the query directly, with the cause as the stop reason."""
        if isinstance(error.error, InvalidInputError):
            raise error.error
        ctx = await resolve(runtime.context)
        request = _request(state, ctx, state.get("started_at") or time.time())
        reason = f"router_failed: {describe(error.error)}"
        cost = failed_attempt_cost(NODE, error.error, max_attempts, time.time(), ctx.planner)
        return _go(request, "direct", reason, "fallback", cost, runtime, stop_reason=reason,
                   notes=[reason])

    return on_router_error
