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
# How the k places are shared among the queries used: ``"fused"`` ranks every pooled hit by
# its best score against any query; ``"rrf"`` fuses the per-query ranks instead;
# ``"per_query:N"`` first keeps each query's own best N hits, then fills by the fused score.
FINAL_ALLOCATION = "fused"


def own_turns_first(pool: list[ResultRecord]) -> tuple[list[ResultRecord], list[ResultRecord]]:
    """The hits of the chain's search of one speaker's turns, in that search's order, and the
    rest of the pool. A question about one speaker is answered from their own turns: fused
    with the question's search, the other speaker's turns that name them ("Wow, Melanie!")
    outrank the evidence (LoCoMo, docs/evaluation.md, "noun-phrase bridges and lists")."""
    own = sorted((r for r in pool if OWN_RANK in r["extra"]), key=lambda r: r["extra"][OWN_RANK])
    return own, [r for r in pool if OWN_RANK not in r["extra"]]


def record_title(record: ResultRecord) -> str | None:
    nucleus = next(e for e in record["episodes"] if e.get("uid") == record["uid"])
    return (nucleus.get("metadata") or {}).get("title")


def capped(ranked: list, k: int, cap: int, title) -> list:
    """The first ``k`` of ``ranked`` with at most ``cap`` per document title (hits without a
    title are not capped); the places left go to the capped hits, in order."""
    count: dict[str, int] = {}
    kept, over = [], []
    for r in ranked:
        t = title(r)
        if t is not None and count.get(t, 0) >= cap:
            over.append(r)
            continue
        if t is not None:
            count[t] = count.get(t, 0) + 1
        kept.append(r)
    return (kept + over)[:k]


def penalised(ranked: list, k: int, free: int, step: float, title, score) -> list:
    """Greedy top ``k``: a hit's score less ``step`` for each hit of its document title
    already kept beyond the first ``free``."""
    left = list(ranked)
    count: dict[str, int] = {}
    kept = []
    while left and len(kept) < k:
        def adjusted(r):
            t = title(r)
            return score(r) - (step * max(0, count.get(t, 0) - free + 1) if t is not None
                               and count.get(t, 0) >= free else 0.0)
        best = max(range(len(left)), key=lambda i: (adjusted(left[i]), -i))
        r = left.pop(best)
        t = title(r)
        if t is not None:
            count[t] = count.get(t, 0) + 1
        kept.append(r)
    return kept


async def allocate(memory, pooled: list, queries: list[str], k: int, mode: str,
                   allocation: str) -> list:
    """The ``k`` pooled hits kept, best first, by ``allocation`` (see `FINAL_ALLOCATION`)."""
    if allocation == "fused":
        return await memory.rerank(pooled, queries, k, mode=mode, credit=FINAL_CREDIT)
    if allocation in ("rrf", "gap", "mean"):
        return await memory.rerank(pooled, queries, k, mode=mode, credit=FINAL_CREDIT,
                                   fusion=allocation)
    name, _, slots = allocation.partition(":")
    if name == "newdoc":
        depth = int(slots or 3)
        title = lambda r: (r.nucleus.metadata or {}).get("title")
        fused = await memory.rerank(pooled, queries, len(pooled), mode=mode, credit=FINAL_CREDIT)
        kept = fused[:k]
        for query in queries:
            titles = [title(r) for r in kept]
            if None in titles:
                break
            best = await memory.rerank(pooled, [query], depth, credit=FINAL_CREDIT)
            new = next((r for r in best if title(r) not in titles), None)
            counts = {t: titles.count(t) for t in titles}
            crowded = [i for i, t in enumerate(titles) if counts[t] > 1]
            if new is None or not crowded:
                continue
            kept = [r for i, r in enumerate(kept) if i != crowded[-1]] + [new]
        return kept
    if name == "penalty":
        free, step = slots.split(":")
        fused = await memory.rerank(pooled, queries, len(pooled), mode=mode, credit=FINAL_CREDIT)
        return penalised(fused, k, int(free), float(step),
                         lambda r: (r.nucleus.metadata or {}).get("title"),
                         lambda r: r.rerank_score)
    if name == "cap":
        fused = await memory.rerank(pooled, queries, len(pooled), mode=mode, credit=FINAL_CREDIT)
        return capped(fused, k, int(slots), lambda r: (r.nucleus.metadata or {}).get("title"))
    if name != "per_query":
        raise ValueError(f"unknown final allocation {allocation!r}")
    fused = await memory.rerank(pooled, queries, len(pooled), mode=mode, credit=FINAL_CREDIT)
    kept: set[str] = set()
    for query in queries:
        best = await memory.rerank(pooled, [query], int(slots or 1), credit=FINAL_CREDIT)
        kept.update(r.uid for r in best)
    kept = {uid for uid in [r.uid for r in fused if r.uid in kept][:k]}
    fill = k - len(kept)
    for r in fused:
        if fill <= 0:
            break
        if r.uid not in kept:
            kept.add(r.uid)
            fill -= 1
    return [r for r in fused if r.uid in kept]


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
            ordered = sorted(pool, key=lambda r: -r["rerank_score"])
            if FINAL_ALLOCATION.startswith("cap:"):
                ordered = capped(ordered, left, int(FINAL_ALLOCATION[4:]), record_title)
            if FINAL_ALLOCATION.startswith("penalty:"):
                _, free, step = FINAL_ALLOCATION.split(":")
                ordered = penalised(ordered, left, int(free), float(step), record_title,
                                    lambda r: r["rerank_score"])
            results += ordered[:left]
        elif pool and left:
            pooled = await ctx.memory.with_stored_embeddings(
                state["scope"], [from_record(r) for r in pool])
            ranked = await allocate(ctx.memory, pooled, queries, left, ctx.rerank_mode,
                                    FINAL_ALLOCATION)
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
