"""``split_plan``: SplitQuery's planning step, then one concurrent search per sub-query (the
original query's search runs meanwhile, sent by ``tool_select``)."""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Command

from memroute.graph.context import ContextResolver, RetrievalContext
from memroute.graph.events import SubQueries, as_payload
from memroute.graph.memory_search import send_search
from memroute.graph.planner_step import PlannerStep
from memroute.graph.state import NodeCost, RetrievalState, reference_time
from memroute.strategies.split_query import clean_sub_queries

NODE = "split_plan"
STEP = "split"


def _fan_out(state: RetrievalState, sub_queries: list[str], update: dict,
             runtime: Runtime) -> Command:
    """Search every sub-query, concurrently (`Send`); with none, go on to the final rerank.
    The original query's search was sent beside this node (`tool_select`), so it ran while
    the planner decided, and its hits are in the pool; when it was not (the planner chose
    the sub-queries alone), it is searched here unless two or more sub-queries are left."""
    runtime.stream_writer(as_payload(SubQueries(sub_queries)))
    queries = (sub_queries if state.get("question_searched", True) or len(sub_queries) >= 2
               else [state["query"], *sub_queries])
    # after the question's search beside the planner, the sub-queries are a second round
    rounds = 2 if state.get("question_searched", True) else 1
    goto = [send_search(state, q, "split", search_round=rounds) for q in queries] or "final_rerank"
    return Command(update={**update, "sub_queries": sub_queries}, goto=goto)


def make_split_plan(resolve: ContextResolver):
    async def split_plan(state: RetrievalState, runtime: Runtime) -> Command:
        """Ask the planner for independent sub-queries; clean them; fan out."""
        ctx = await resolve(runtime.context)
        step = PlannerStep.start(NODE, STEP, ctx, state, runtime)
        timed = ({"as_of": reference_time(state)} if getattr(ctx.planner, "reads_time", False)
                 else {})
        decided = await step.ask_planner(lambda planner: planner.split(state["query"], **timed))
        update: dict = {"costs": [decided.cost]}
        if decided.value is None:
            reason = decided.failure
            return _fan_out(state, [], {**update, "stop_reason": reason, "notes": [reason]},
                            runtime)
        sub_queries = clean_sub_queries(state["query"], list(decided.value.sub_queries))
        notes = [] if sub_queries else ["split: no valid sub-queries; searched the query alone"]
        left = step.limits.seconds_left()
        if sub_queries and left is not None and left <= 0:
            reason = f"budget_exhausted: latency ({NODE}); searched the query alone"
            return _fan_out(state, [], {**update, "stop_reason": reason, "notes": [reason]},
                            runtime)
        return _fan_out(state, sub_queries, {**update, "notes": notes}, runtime)

    return split_plan


def fall_back(state: RetrievalState, reason: str, cost: NodeCost, ctx: RetrievalContext,
              runtime: Runtime) -> Command:
    """After retries: search the original query alone, with the cause as the stop reason."""
    return _fan_out(state, [], {"costs": [cost], "stop_reason": reason, "notes": [reason]},
                    runtime)
