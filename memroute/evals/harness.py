"""A stand-in for the retrieval graph while it is being built (to be removed when it lands).

Simulates the three routes with `Memory.search_scored`, `Memory.rerank` and a planner only.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from memroute.memory import Memory, Scope, ScoredResult
from memroute.strategies.base import Planner

MAX_HOPS = 3
SUFFICIENT = 0.8


@dataclass
class Outcome:
    results: list[ScoredResult]
    route: str
    queries: list[str]
    costs: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = ""


def _pool(pool: dict[str, ScoredResult], results: list[ScoredResult]) -> None:
    for r in results:
        best = pool.get(r.uid)
        if best is None or r.rerank_score > best.rerank_score:
            pool[r.uid] = r


async def simulate(memory: Memory, planner: Planner, scope: Scope, question: str, strategy: str,
                   k: int, *, context: tuple[int, int] = (0, 0), lexical: bool | None = None,
                   rerank_mode: str = "fused", hop_k: int | None = None,
                   evidence_mode: str = "hop") -> Outcome:
    start = time.perf_counter()
    hop_k = hop_k or k

    async def search(q: str, n: int) -> list[ScoredResult]:
        return list(await memory.search_scored(scope, q, k=n, context=context, lexical=lexical))

    route = strategy
    if strategy == "auto":
        decision = await planner.route(question)
        route = decision.value.route if decision.value else "direct"
    if route == "direct":
        results = await search(question, k)
        return Outcome(results, "direct", [question], stop_reason="done")
    pool: dict[str, ScoredResult] = {}
    if route == "split":
        plan = await planner.split(question)
        subs = [s for s in (plan.value.sub_queries if plan.value else []) if s.strip()]
        queries = list(dict.fromkeys([question, *subs]))
        for results in await asyncio.gather(*(search(q, hop_k) for q in queries)):
            _pool(pool, results)
        final = await memory.rerank(list(pool.values()), queries, k, mode=rerank_mode)
        return Outcome(final, "split", queries, stop_reason="done")
    queries = [question]
    current = question
    stop = "hop_limit"
    accumulated: list[ScoredResult] = []
    for hop in range(1, MAX_HOPS + 1):
        results = await search(current, hop_k)
        _pool(pool, results)
        accumulated.extend(r for r in results if r.uid not in {a.uid for a in accumulated})
        shown = accumulated if evidence_mode == "all" else results
        judgment = await planner.judge(question, [r.text for r in shown], list(queries), hop)
        j = judgment.value
        if j is None:
            stop = "judge_failed"
            break
        if j.is_sufficient and j.confidence >= SUFFICIENT:
            stop = "sufficient"
            break
        nxt = j.new_query.strip()
        if not nxt or nxt in queries:
            stop = "no_new_query"
            break
        if hop == MAX_HOPS:
            break
        queries.append(nxt)
        current = nxt
    final = await memory.rerank(list(pool.values()), queries, k, mode=rerank_mode)
    return Outcome(final, "chain", queries, stop_reason=stop,
                   costs={"wall_ms": (time.perf_counter() - start) * 1000})
