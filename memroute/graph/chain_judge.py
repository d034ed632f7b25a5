"""``chain_judge``: ChainOfQuery's step after each hop: judge, then stop or search again
(the rewrite, and the independent queries a judgment may add, all at once: one hop).

The stop rule is the strategy's (`memroute.strategies.chain_of_query`); this node wires it.
"""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Command

from memroute.graph.context import ContextResolver, RetrievalContext
from memroute.graph.events import HopJudged, as_payload
from memroute.graph.memory_search import send_planned
from memroute.graph.planner_step import PlannerStep
from memroute.graph.state import (
    HopRecord,
    NodeCost,
    RetrievalState,
    hop_hits,
    record_text,
    record_time,
    reference_time,
    stored_entities,
)
from memroute.strategies import chain_of_query as strategy
from memroute.strategies.base import ChainJudgment

NODE = "chain_judge"
STEP = "judge"


def _end(state: RetrievalState, decision: str, runtime: Runtime, cost: NodeCost | None,
         judgment: ChainJudgment | None = None, selected: list[str] | None = None,
         goto: object = "final_rerank", next_queries: list[str] | None = None,
         answer: list[str] | None = None) -> Command:
    """Record the hop (every query it searched) and its decision (with the queries of the
    next hop, ``next_queries``, when it continues); go where the decision leads."""
    next_queries = next_queries or ([judgment.new_query] if judgment and judgment.new_query
                                    else [])
    hop = state.get("hop", 1)
    searched = [s["query"] for s in state.get("last_searches") or []]
    searched = searched or [(state.get("queries") or [state["query"]])[-1]]
    record = HopRecord(hop=hop, query=searched[0],
                       is_sufficient=None if judgment is None else judgment.is_sufficient,
                       confidence=None if judgment is None else judgment.confidence,
                       evidence_indices=[] if judgment is None else judgment.evidence_indices,
                       new_query=next_queries[0] if next_queries else "",
                       decision=decision)
    if len(searched) > 1:
        record["concurrent_queries"] = searched[1:]
    if len(next_queries) > 1:
        record["new_concurrent_queries"] = next_queries[1:]
    if judgment is not None and judgment.reason:
        record["reason"] = judgment.reason
    runtime.stream_writer(as_payload(HopJudged(hop, searched[0], record["is_sufficient"],
                                               record["confidence"], record["new_query"],
                                               decision, searched[1:], next_queries[1:],
                                               record.get("reason", ""))))
    update: dict = {"hops": [record], "selected": selected or []}
    if answer:
        update["answer"] = answer
    if cost is not None:
        update["costs"] = [cost]
    if decision != strategy.CONTINUE:
        update["stop_reason"] = decision
    return Command(update=update, goto=goto)


def accepted(judgment: ChainJudgment, uids: list[str]) -> list[str]:
    """What the judge accepted as the answer (kept in the final top k): the item it names,
    if any. (Keeping the best hit of every hop judged sufficient instead cost LoCoMo's
    multi-hop questions 1.5 points at k = 3 and 5: docs/research.md.)"""
    at = judgment.answer_index
    return [uids[at]] if at is not None and 0 <= at < len(uids) else []


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
        uids = strategy.evidence_uids(selected, hop_hits(state.get("last_searches") or []),
                                      state.get("pool", {}))
        texts = [record_text(state["pool"][u]) for u in uids]
        entities = [stored_entities(state["pool"][u]) for u in uids]
        timed = ({"evidence_times": [record_time(state["pool"][u]) for u in uids],
                  "as_of": reference_time(state)}
                 if getattr(ctx.planner, "reads_time", False) else {})
        step = PlannerStep.start(NODE, STEP, ctx, state, runtime)
        decided = await step.ask_planner(
            lambda planner: planner.judge(state["query"], texts, list(previous), hop,
                                          entities, **timed),
            detail=f"hop {hop}")
        if decided.value is None:
            return _end(state, decided.failure, runtime, decided.cost)
        judgment, chosen = strategy.newly_selected(decided.value, uids, selected)
        decision = strategy.next_step(judgment, state["query"], previous, texts,
                                      ctx.sufficient_confidence, step.limits.seconds_left())
        if decision == strategy.OUT_OF_TIME:
            decision = f"{decision} ({NODE})"
        if decision != strategy.CONTINUE:
            return _end(state, decision, runtime, decided.cost, judgment, chosen,
                        answer=accepted(judgment, uids) if decision == "sufficient" else [])
        # the next hop: the rewrite and any independent queries beside it, sent at once
        searches = strategy.hop_searches(judgment, state["query"], previous, texts)
        goto = [send_planned(state, s, "chain", hop + 1, slot=slot)
                for slot, s in enumerate(searches)]
        return _end(state, decision, runtime, decided.cost, judgment, chosen, goto,
                    [s.query for s in searches])

    return chain_judge


def fall_back(state: RetrievalState, reason: str, cost: NodeCost, ctx: RetrievalContext,
              runtime: Runtime) -> Command:
    """After retries: stop the chain with the evidence found so far."""
    return _end(state, reason, runtime, cost)
