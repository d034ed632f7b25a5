"""``tool_select``: validate the request, then pick the route (override, planner or budget)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite

from memroute._log import get_logger
from memroute.errors import InvalidInputError
from memroute.graph.context import ContextResolver, RetrievalContext, scope_speakers
from memroute.graph.events import RouteChosen, as_payload
from memroute.graph.memory_search import send_planned, send_search
from memroute.graph.planner_step import PlannerStep, first_attempt_time, limits_for
from memroute.graph.state import NodeCost, RetrievalState, node_cost, reference_time
from memroute.memory.bounds import ReadBound
from memroute.memory.limits import MAX_K, MAX_QUERY_CHARS
from memroute.memory.models import coerce_scope, text_problem
from memroute.planners.base import Planner
from memroute.reading.question import read
from memroute.strategies import tool_select as strategy
from memroute.strategies.base import STRATEGIES, ChainJudgment, ChainSearch, Route
from memroute.strategies.budget import Budget
from memroute.strategies.chain_of_query import hop_searches

log = get_logger(__name__)
NODE = "tool_select"
STEP = "router"


def _request(state: RetrievalState, ctx: RetrievalContext, started_at: float) -> dict[str, Any]:
    """The validated request, and every accumulating field reset for a fresh run."""
    query = state.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    # checked as the search will check it, but before any planner call is paid for
    problem = text_problem(query)
    if problem:
        raise InvalidInputError(f"query {problem}")
    if len(query.strip()) > MAX_QUERY_CHARS:
        raise InvalidInputError(f"query is {len(query.strip())} characters; the limit is "
                                f"{MAX_QUERY_CHARS}")
    k = state.get("k", 10)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInputError(f"k must be an integer in [1, {MAX_K}], got {k!r:.40}")
    strategy_name = state.get("strategy") or "auto"
    if strategy_name not in STRATEGIES:
        raise InvalidInputError(f"strategy must be one of {STRATEGIES}, got {strategy_name!r:.40}")
    filters = state.get("filters")
    # one filter or a list that must all hold, checked before any planner call is paid for
    bound = ReadBound.of(filters, state.get("as_of"))
    budget = Budget.coerce(state.get("budget"))
    return {
        "query": query.strip(), "scope": coerce_scope(state.get("scope")).as_dict(), "k": k,
        "filters": filters, "strategy": strategy_name,
        "budget": None if budget is None else asdict(budget), "started_at": started_at,
        "as_of": None if bound.as_of is None else bound.as_of.isoformat(),
        "queries": Overwrite([]), "hops": Overwrite([]), "notes": Overwrite([]),
        "pool": Overwrite({}), "selected": Overwrite([]), "hop": Overwrite(0), "answer": [],
        "newest_first": False, "windows": [],
        "last_searches": Overwrite([]), "search_rounds": Overwrite(0),
        "sub_queries": [], "stop_reason": "", "results": [],
        "planner": ctx.planner.name,
        "prompt_versions": Overwrite(dict(ctx.planner.prompt_versions)),
    }


def confined(request: dict[str, Any], planner: Planner, asked: datetime) -> dict[str, Any]:
    """``request`` with the windows of time the question names (read at ``asked``) as the
    bound of every search of the run, when the planner `confines_to_windows` (so that no
    search it lays out leaves them). ``strategy="direct"`` stays the plain search."""
    if request["strategy"] == "direct" or not getattr(planner, "confines_to_windows", False):
        return request
    windows = read(request["query"], asked).windows
    return {**request, "windows": [w.model_dump(include={"produced_after", "produced_before",
                                                         "mentions_days"}) for w in windows]}


def _take_route(request: dict[str, Any], route: Route, reason: str, source: str,
                cost: NodeCost, runtime: Runtime, first_query: str = "",
                search_question: bool = True, first_searches: Sequence[ChainSearch] = (),
                **extra: Any) -> Command:
    """Record the route and send the request to its first node (a chain's first search:
    ``first_query`` when the planner gave one, else the question, with ``first_searches``
    beside it, at once, those the chain's stop rules let through; a split's planner, and the
    question's search beside it unless ``search_question`` is false)."""
    runtime.stream_writer(as_payload(RouteChosen(route, reason, source)))
    if "notes" in extra:
        extra["notes"] = Overwrite(list(extra["notes"]))
    update = {**request, "route": route, "route_reason": reason, "costs": Overwrite([cost]),
              "question_searched": route == "split" and search_question, **extra}
    if route == "split" and not search_question:
        goto: Any = "split_plan"  # the sub-queries alone (the question, if none is left)
    elif route == "split":
        # The original query is searched while the planner splits it: the final rerank
        # needs its hits anyway, and this way one search hides behind planning.
        goto = ["split_plan", send_search(update, request["query"], "split",
                                          beside_planner=True)]
    elif route == "chain":
        first = first_query.strip() or request["query"]
        judgment = ChainJudgment(is_sufficient=False, new_query=first,
                                 concurrent_searches=list(first_searches))
        searches = hop_searches(judgment, request["query"], [], [])
        goto = [send_planned(update, s, route, hop=1, slot=slot)
                for slot, s in enumerate(searches)]
        goto = goto[0] if len(goto) == 1 else goto
    else:
        # direct: the question, and beside it, at once, the planner's first searches (a
        # named speaker's own turns)
        goto = send_search(update, request["query"], route, hop=0)
        if first_searches:
            goto = [goto, *(send_planned(update, s, route, hop=0) for s in first_searches)]
    return Command(update=update, goto=goto)


def make_tool_select(resolve: ContextResolver):
    async def tool_select(state: RetrievalState, runtime: Runtime) -> Command:
        """Pick the route: the caller's override, else the planner's pick if it fits the budget."""
        ctx = await resolve(runtime.context)
        started = time.time()
        request = _request(state, ctx, first_attempt_time(runtime))
        asked = reference_time(request)
        request = confined(request, ctx.planner, asked)
        if request["strategy"] != "auto":
            return _take_route(request, request["strategy"], "strategy override", "override",
                               node_cost(NODE, started), runtime)
        # Budgets steer routing only for planners that spend LLM calls and tokens.
        budget = Budget.coerce(request["budget"]) if ctx.planner.spends_llm_calls else None
        step = PlannerStep.start(NODE, STEP, ctx, {**state, **request, "costs": []}, runtime,
                                 started)
        if budget is not None:
            skip = strategy.router_skip_reason(ctx.profiles, ctx.router_profile, step.limits)
            if skip:
                reason = f"budget_exhausted: {skip} ({NODE})"
                return _take_route(request, "direct", f"router skipped, budget: {skip}",
                                   "budget", node_cost(NODE, started), runtime,
                                   stop_reason=reason, notes=[f"router skipped: {reason}"])
        # Every route searches the question first: its vector is computed (in the embedder's
        # thread) while the planner decides, and that search finds it kept.
        embedding = asyncio.ensure_future(
            ctx.memory.embed_queries([request["query"]])
            if ctx.memory.settings.query_cache_size else asyncio.sleep(0))
        await asyncio.sleep(0)  # the embedding's first step hands it to its thread
        try:
            reads_time = getattr(ctx.planner, "reads_time", False)
            # the question's one reading, made before routing: every node and planner reads
            # this one (`memroute.reading.question`)
            read(request["query"], asked if reads_time else None)
            speakers = (await scope_speakers(ctx, request)
                        if getattr(ctx.planner, "wants_speakers", False) else [])
            decided = await step.ask_planner(
                lambda planner: planner.route(request["query"], speakers, **(
                    {"as_of": asked} if reads_time else {}))
                if speakers or reads_time else planner.route(request["query"]))
        finally:
            with contextlib.suppress(Exception):  # a failed embedding fails in the search
                await embedding
        if decided.value is None:
            return _take_route(request, "direct", decided.failure, "fallback", decided.cost,
                               runtime, stop_reason=decided.failure, notes=[decided.failure])
        route, reason, source = decided.value.route, decided.value.reason, "planner"
        if budget is not None:
            after = limits_for({**state, **request, "costs": [decided.cost]})
            route, why = strategy.route_within_budget(route, ctx.profiles, after)
            if why:
                reason, source = why, "budget"
        return _take_route(request, route, reason, source, decided.cost, runtime,
                           first_query=decided.value.first_query,
                           first_searches=decided.value.first_searches,
                           search_question=decided.value.search_question,
                           newest_first=decided.value.newest_first,
                           notes=[reason] if source == "budget" else [])

    return tool_select


def fall_back(state: RetrievalState, reason: str, cost: NodeCost, ctx: RetrievalContext,
              runtime: Runtime) -> Command:
    """After retries: search the query directly, with the cause as the stop reason."""
    request = _request(state, ctx, state.get("started_at") or time.time())
    request = confined(request, ctx.planner, reference_time(request))
    return _take_route(request, "direct", reason, "fallback", cost, runtime, stop_reason=reason,
                       notes=[reason])
