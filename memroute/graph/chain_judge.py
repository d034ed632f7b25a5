"""``chain_judge``: ChainOfQuery's step after each search: judge, then stop or search again.

The stop rule is the strategy's (`memroute.strategies.chain_of_query`); this node wires it.
"""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Command

from memroute.graph.context import ContextResolver, RetrievalContext
from memroute.graph.events import HopJudged, as_payload
from memroute.graph.memory_search import send_search
from memroute.graph.planner_step import PlannerStep
from memroute.graph.state import (
    HopRecord,
    NodeCost,
    RetrievalState,
    record_text,
    stored_entities,
)
from memroute.strategies import chain_of_query as strategy
from memroute.strategies.base import ChainJudgment

NODE = "chain_judge"
STEP = "judge"


def _end(state: RetrievalState, decision: str, runtime: Runtime, cost: NodeCost | None,
         judgment: ChainJudgment | None = None, selected: list[str] | None = None,
         goto: object = "final_rerank") -> Command:
    """Record the hop and its decision; go where the decision leads."""
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
    if decision != strategy.CONTINUE:
        update["stop_reason"] = decision
    return Command(update=update, goto=goto)


def make_chain_judge(resolve: ContextResolver):
    async def chain_judge(state: RetrievalState, runtime: Runtime) -> Command:
        """Judge the evidence so far; stop, or search the grounded rewrite as the next hop."""
        ctx = await resolve(runtime.context)
        hop = state.get("hop", 1)
        stop = strategy.stop_before_judging(hop, ctx.max_hops)
        if stop:
            return _end(state, stop, runtime, None)
        selected = list(state.get("selected") or [])
        previous = list(state.get("queries") or [])
        uids = strategy.evidence_uids(selected, state.get("last_hits") or [],
                                      state.get("pool", {}))
        texts = [record_text(state["pool"][u]) for u in uids]
        entities = [stored_entities(state["pool"][u]) for u in uids]
        step = PlannerStep.start(NODE, STEP, ctx, state, runtime)
        decided = await step.ask_planner(
            lambda planner: planner.judge(state["query"], texts, list(previous), hop,
                                          entities),
            detail=f"hop {hop}")
        if decided.value is None:
            return _end(state, decided.failure, runtime, decided.cost)
        judgment, chosen = strategy.newly_selected(decided.value, uids, selected)
        decision = strategy.next_step(judgment, state["query"], previous, texts,
                                      ctx.sufficient_confidence, step.limits.seconds_left())
        if decision == strategy.OUT_OF_TIME:
            decision = f"{decision} ({NODE})"
        goto = (send_search(state, judgment.new_query, "chain", hop + 1,
                            producer=judgment.producer,
                            produced_after=judgment.produced_after,
                            produced_before=judgment.produced_before)
                if decision == strategy.CONTINUE else "final_rerank")
        return _end(state, decision, runtime, decided.cost, judgment, chosen, goto)

    return chain_judge


def fall_back(state: RetrievalState, reason: str, cost: NodeCost, ctx: RetrievalContext,
              runtime: Runtime) -> Command:
    """After retries: stop the chain with the evidence found so far."""
    return _end(state, reason, runtime, cost)
