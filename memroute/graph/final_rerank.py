"""``final_rerank``: rerank the pooled evidence against the question and every query used, keep the top k."""

from __future__ import annotations

import time

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from memroute.graph.context import ContextResolver
from memroute.graph.events import Final, as_payload
from memroute.graph.state import (
    RetrievalState,
    as_record,
    for_output,
    from_record,
    node_cost,
)
from memroute.graph.trace import record_decision

NODE = "final_rerank"
# Each pooled result scores on its whole context window (a neighbour still never outranks
# its match): the windows around the searches' strong matches fill the top k, which on
# LoCoMo holds more evidence than crediting each matched turn (docs/evaluation.md).
FINAL_CREDIT = "window"


def make_final_rerank(resolve: ContextResolver):
    async def final_rerank(state: RetrievalState, runtime: Runtime) -> dict:
        """One query: its search's order stands. Several: `Memory.rerank` against all of them
        (fused per candidate, or MemMachine's concatenated query; ``credit="window"``), on
        the pooled hits' stored vectors (re-read in one statement: state carries no
        vectors)."""
        ctx = await resolve(runtime.context)
        started = time.time()
        pool = list((state.get("pool") or {}).values())
        # the question is scored too when a chain's first search was a part of it
        queries = list(dict.fromkeys([state["query"], *(state.get("queries") or [])]))
        k = state["k"]
        if len(queries) <= 1:
            results = sorted(pool, key=lambda r: -r["rerank_score"])[:k]
        else:
            pooled = await ctx.memory.with_stored_embeddings(
                state["scope"], [from_record(r) for r in pool])
            ranked = await ctx.memory.rerank(pooled, queries, k, mode=ctx.rerank_mode,
                                             credit=FINAL_CREDIT)
            results = [as_record(r) for r in ranked]
        results = [for_output(r) for r in results]
        stop_reason = state.get("stop_reason") or "done"
        await record_decision(state, stop_reason)
        runtime.stream_writer(as_payload(Final(state.get("route", ""), stop_reason,
                                               list(state.get("queries") or []), len(results))))
        # The pool has served its purpose: the run's last checkpoint keeps the results only.
        return {"results": results, "stop_reason": stop_reason, "pool": Overwrite({}),
                "costs": [node_cost(NODE, started, detail=f"{len(pool)} pooled, "
                                    f"{len(queries)} queries, {ctx.rerank_mode}")]}

    return final_rerank
