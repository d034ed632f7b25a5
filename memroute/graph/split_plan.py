"""``split_plan``: SplitQuery's planning step, then one concurrent search per sub-query."""

from __future__ import annotations

import time

from langgraph.errors import NodeError
from langgraph.runtime import Runtime
from langgraph.types import Command

from memroute.graph.context import ContextResolver
from memroute.graph.events import SubQueries, as_payload
from memroute.graph.memory_search import send_search
from memroute.graph.state import RetrievalState
from memroute.graph.steps import (
    ask,
    attempt_of,
    bind,
    describe,
    failed_attempt_cost,
    failure_reason,
    limits_for,
    node_cost,
)
from memroute.strategies.split_query import clean_sub_queries

NODE = "split_plan"


def _fan_out(state: RetrievalState, sub_queries: list[str], update: dict,
             runtime: Runtime) -> Command:
    """Search the original query and every sub-query, concurrently (`Send`)."""
    runtime.stream_writer(as_payload(SubQueries(sub_queries)))
    queries = [state["query"], *sub_queries]
    return Command(update={**update, "sub_queries": sub_queries},
                   goto=[send_search(state, q, "split") for q in queries])


def make_split_plan(resolve: ContextResolver):
    async def split_plan(state: RetrievalState, runtime: Runtime) -> Command:
        """Ask the planner for independent sub-queries; validate them; fan out."""
        ctx = await resolve(runtime.context)
        started = time.time()
        attempt = attempt_of(runtime)
        limits = limits_for(state, attempt)
        planner = bind(ctx.planner, limits)
        result = await ask(lambda: planner.split(state["query"]), limits, attempt)
        update: dict = {"costs": [node_cost(NODE, started, result.usage, raw=result.raw)]}
        if result.value is None:
            reason = failure_reason("split", result.error)
            return _fan_out(state, [], {**update, "stop_reason": reason, "notes": [reason]},
                            runtime)
        sub_queries = clean_sub_queries(state["query"], list(result.value.sub_queries))
        notes = [] if sub_queries else ["split: no valid sub-queries; searched the query alone"]
        left = limits.seconds_left()
        if sub_queries and left is not None and left <= 0:
            reason = f"budget_exhausted: latency ({NODE}); searched the query alone"
            return _fan_out(state, [], {**update, "stop_reason": reason, "notes": [reason]},
                            runtime)
        return _fan_out(state, sub_queries, {**update, "notes": notes}, runtime)

    return split_plan


def make_split_fallback(resolve: ContextResolver, max_attempts: int):
    async def on_split_error(state: RetrievalState, error: NodeError, runtime: Runtime) -> Command:
        """After retries: search the original query alone, with the cause as the stop reason."""
        ctx = await resolve(runtime.context)
        reason = f"split_failed: {describe(error.error)}"
        cost = failed_attempt_cost(NODE, error.error, max_attempts, time.time(), ctx.planner)
        return _fan_out(state, [], {"costs": [cost], "stop_reason": reason, "notes": [reason]},
                        runtime)

    return on_split_error
