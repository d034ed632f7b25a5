"""``chain_judge``: ChainOfQuery's step after each search: judge, then stop or search again."""

from __future__ import annotations

import time

from langgraph.errors import NodeError
from langgraph.runtime import Runtime
from langgraph.types import Command

from memroute.graph.context import ContextResolver, RetrievalContext
from memroute.graph.events import HopJudged, as_payload
from memroute.graph.memory_search import send_search
from memroute.graph.state import HopRecord, NodeCost, RetrievalState
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
from memroute.strategies.base import ChainJudgment
from memroute.strategies.chain_of_query import MAX_EVIDENCE, rewrite_problem

NODE = "chain_judge"


def evidence_uids(state: RetrievalState) -> list[str]:
    """What the judge sees: evidence it selected at earlier hops, then this hop's new hits."""
    selected = list(dict.fromkeys(state.get("selected") or []))
    fresh = [u for u in state.get("last_hits") or [] if u not in selected][:MAX_EVIDENCE]
    return [u for u in selected + fresh if u in state.get("pool", {})]


def _end(state: RetrievalState, decision: str, runtime: Runtime, cost: NodeCost | None,
         judgment: ChainJudgment | None = None, selected: list[str] | None = None,
         goto: object = "final_rerank") -> Command:
    hop = state.get("hop", 1)
    query = (state.get("queries") or [state["query"]])[-1]
    record = HopRecord(hop=hop, query=query,
                       is_sufficient=None if judgment is None else judgment.is_sufficient,
                       confidence=None if judgment is None else judgment.confidence,
                       evidence_indices=[] if judgment is None else judgment.evidence_indices,
                       new_query="" if judgment is None else judgment.new_query,
                       decision=decision)
    runtime.stream_writer(as_payload(HopJudged(hop, query, record["is_sufficient"],
                                               record["confidence"], record["new_query"],
                                               decision)))
    update: dict = {"hops": [record], "selected": selected or []}
    if cost is not None:
        update["costs"] = [cost]
    if decision != "continue":
        update["stop_reason"] = decision
    return Command(update=update, goto=goto)


def _decide(state: RetrievalState, ctx: RetrievalContext, judgment: ChainJudgment,
            texts: list[str], left: float | None) -> str:
    if judgment.is_sufficient and judgment.confidence >= ctx.sufficient_confidence:
        return "sufficient"
    previous = list(state.get("queries") or [])
    problem = rewrite_problem(judgment.new_query, state["query"], previous, texts)
    if problem:
        return problem
    if left is not None and left <= 0:
        return f"budget_exhausted: latency ({NODE})"
    return "continue"


def make_chain_judge(resolve: ContextResolver):
    async def chain_judge(state: RetrievalState, runtime: Runtime) -> Command:
        """Judge the evidence so far; stop, or search the grounded rewrite as the next hop."""
        ctx = await resolve(runtime.context)
        started = time.time()
        hop = state.get("hop", 1)
        if hop >= ctx.max_hops:  # a new query could not be searched: skip the call
            return _end(state, "hop_limit", runtime, None)
        uids = evidence_uids(state)
        texts = [state["pool"][u].text for u in uids]
        attempt = attempt_of(runtime)
        limits = limits_for(state, attempt)
        planner = bind(ctx.planner, limits)
        result = await ask(lambda: planner.judge(state["query"], texts,
                                                 list(state.get("queries") or []), hop),
                           limits, attempt)
        cost = node_cost(NODE, started, result.usage, detail=f"hop {hop}", raw=result.raw)
        if result.value is None:
            return _end(state, failure_reason("judge", result.error), runtime, cost)
        judgment = result.value
        indices = [i for i in dict.fromkeys(judgment.evidence_indices) if 0 <= i < len(uids)]
        judgment = judgment.model_copy(update={"evidence_indices": indices})
        chosen = [uids[i] for i in indices if uids[i] not in (state.get("selected") or [])]
        decision = _decide(state, ctx, judgment, texts, limits.seconds_left())
        goto = (send_search(state, judgment.new_query, "chain", hop + 1)
                if decision == "continue" else "final_rerank")
        return _end(state, decision, runtime, cost, judgment, chosen, goto)

    return chain_judge


def make_judge_fallback(resolve: ContextResolver, max_attempts: int):
    async def on_judge_error(state: RetrievalState, error: NodeError, runtime: Runtime) -> Command:
        """After retries: stop the chain with the evidence found so far."""
        ctx = await resolve(runtime.context)
        cost = failed_attempt_cost(NODE, error.error, max_attempts, time.time(), ctx.planner)
        return _end(state, f"judge_failed: {describe(error.error)}", runtime, cost)

    return on_judge_error
