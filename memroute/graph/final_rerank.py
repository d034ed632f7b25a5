"""``final_rerank``: rerank the pooled evidence against the question and every query used, keep the top k."""

from __future__ import annotations

import time

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from memroute.graph.context import ContextResolver
from memroute.graph.events import Final, as_payload
from memroute.graph.state import (
    OWN_RANK,
    ResultRecord,
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


def own_turns_first(pool: list[ResultRecord]) -> tuple[list[ResultRecord], list[ResultRecord]]:
    """The hits of the chain's search of one speaker's turns, in that search's order, and the
    rest of the pool. A question about one speaker is answered from their own turns: fused
    with the question's search, the other speaker's turns that name them ("Wow, Melanie!")
    outrank the evidence (LoCoMo, docs/evaluation.md, "noun-phrase bridges and lists")."""
    own = sorted((r for r in pool if OWN_RANK in r["extra"]), key=lambda r: r["extra"][OWN_RANK])
    return own, [r for r in pool if OWN_RANK not in r["extra"]]


def make_final_rerank(resolve: ContextResolver):
    async def final_rerank(state: RetrievalState, runtime: Runtime) -> dict:
        """The chain's search of one speaker's turns: its order stands, first
        (`own_turns_first`). The places left: with one query, its search's order; with
        several, `Memory.rerank` against all of them (fused per candidate, or MemMachine's
        concatenated query; ``credit="window"``) on the pooled hits' stored vectors
        (re-read in one statement: state carries no vectors)."""
        ctx = await resolve(runtime.context)
        started = time.time()
        own, pool = own_turns_first(list((state.get("pool") or {}).values()))
        # the question is scored too when a chain's first search was a part of it
        queries = list(dict.fromkeys([state["query"], *(state.get("queries") or [])]))
        k = state["k"]
        results, left = own[:k], k - len(own[:k])
        if pool and left and len(queries) <= 1:
            results += sorted(pool, key=lambda r: -r["rerank_score"])[:left]
        elif pool and left:
            pooled = await ctx.memory.with_stored_embeddings(
                state["scope"], [from_record(r) for r in pool])
            ranked = await ctx.memory.rerank(pooled, queries, left, mode=ctx.rerank_mode,
                                             credit=FINAL_CREDIT)
            results += [as_record(r) for r in ranked]
        results = [for_output(r) for r in results]
        stop_reason = state.get("stop_reason") or "done"
        await record_decision(state, stop_reason)
        runtime.stream_writer(as_payload(Final(state.get("route", ""), stop_reason,
                                               list(state.get("queries") or []), len(results))))
        # The pool has served its purpose: the run's last checkpoint keeps the results only.
        return {"results": results, "stop_reason": stop_reason, "pool": Overwrite({}),
                "costs": [node_cost(NODE, started, detail=f"{len(own) + len(pool)} pooled, "
                                    f"{len(queries)} queries, {ctx.rerank_mode}")]}

    return final_rerank
