"""The default search's floor, stage by stage: where a search's time goes beyond one query
embedding and the statement on the server.

Times, per query on the store `benchmarks.memory` built (``bench_v2_<size>``, reused), the
default search (both lanes, offline rerank, context off, the query's entity keys parsed in
the search) and the same question through the agent's direct path, each stage wrapped by
``time.perf_counter``: the query embedding and the entity-key parse (each alone, and the
two side by side as the search runs them), the lanes' SQL built, the pool's connection, the
statement's round trip (the server's share is the client's wait for its bytes), decoding,
the rerank, what is left, and around the search the agent's nodes. Then, once per query,
the statement's planning and execution on the server (``EXPLAIN ANALYZE``). The floor is
the query embedding's p50 plus the statement's execution p50.

Writes ``bench-out/floor.json``; a one-off tool, not part of ``make bench`` (its figures
come from `benchmarks.memory`'s stages).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import time
from pathlib import Path
from typing import Any

from benchmarks.memory import (
    RoundTrips,
    build_store,
    cached_embeddings,
    machine_info,
    percentiles,
    questions,
    shared_sentences,
    statement_stages,
    write_report,
)
from memroute.memory import entity_sql, sql
from memroute.memory import store as store_module
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.settings import MemrouteSettings


class Stages:
    """Wall ms of the wrapped calls made during one search."""

    def __init__(self) -> None:
        self.now: dict[str, float] = {}

    def add(self, stage: str, ms: float) -> None:
        self.now[stage] = self.now.get(stage, 0.0) + ms

    def wrap_async(self, owner: Any, name: str, stage: str) -> None:
        original = getattr(owner, name)

        async def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                self.add(stage, (time.perf_counter() - start) * 1000)

        setattr(owner, name, timed)

    def wrap_sync(self, owner: Any, name: str, stage: str) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(stage, (time.perf_counter() - start) * 1000)

        setattr(owner, name, timed)

    def wrap_acquire(self, pool: Any) -> None:
        original = pool.connection

        @contextlib.asynccontextmanager
        async def timed(*args, **kwargs):
            start = time.perf_counter()
            async with original(*args, **kwargs) as conn:
                self.add("acquire", (time.perf_counter() - start) * 1000)
                yield conn

        pool.connection = timed


async def run(args: argparse.Namespace) -> dict:
    settings = MemrouteSettings().model_copy(update={
        "embed_threads": args.threads, "db_schema": "bench", "query_cache_size": 0})
    embedder = MiniLMOnnxEmbedder(threads=args.threads)
    texts = shared_sentences(Path(args.data_dir))
    random.Random(0).shuffle(texts)
    vectors = await cached_embeddings(embedder, texts)
    from memroute.memory.splitter import split_sentences

    whole = [i for i, t in enumerate(texts) if split_sentences(t) == [t]]
    texts, vectors = [texts[i] for i in whole], vectors[whole]
    memory, scope, _ = await build_store(settings, embedder, args.size, texts, vectors)
    qs = questions(Path(args.data_dir), 2 * args.queries)
    qs, warm_up = qs[:args.queries], qs[args.queries:]
    from memroute.agent import RetrievalAgent

    agent = RetrievalAgent(memory, context=(0, 0))
    await memory.warm()
    for q in warm_up:
        await memory.search_scored(scope, q, k=10, context=(0, 0))
        await agent.aretrieve(q, scope=scope, k=10, strategy="direct")

    stages = Stages()
    # each alone first (the same question, the caches off)
    alone: dict[str, list[float]] = {"embedding alone": [], "entity keys alone": []}
    for q in qs:
        start = time.perf_counter()
        await memory.embed_queries([q])
        alone["embedding alone"].append((time.perf_counter() - start) * 1000)
        entity_sql.forget_query_keys()
        start = time.perf_counter()
        await entity_sql.query_keys(q, True)
        alone["entity keys alone"].append((time.perf_counter() - start) * 1000)

    stages.wrap_async(memory, "embed_queries", "embedding")
    stages.wrap_async(store_module.entity_sql, "query_keys", "entity keys")
    stages.wrap_sync(memory, "_search_lanes", "lanes built")
    stages.wrap_sync(sql, "search_statement", "statement built")
    stages.wrap_async(sql, "read_search", "read (round trip, decode)")
    stages.wrap_async(store_module, "rank_in_context", "rerank")
    stages.wrap_acquire(memory._reads)
    per_stage: dict[str, list[float]] = {}
    agent_figures: dict[str, list[float]] = {}
    with RoundTrips() as trips:
        for n, q in enumerate(qs):
            for path in (("search", "agent") if n % 2 == 0 else ("agent", "search")):
                entity_sql.forget_query_keys()
                stages.now = {}
                waited = trips.waited_ms
                start = time.perf_counter()
                if path == "search":
                    await memory.search_scored(scope, q, k=10, context=(0, 0))
                else:
                    run_ = await agent.aretrieve(q, scope=scope, k=10, strategy="direct")
                total = (time.perf_counter() - start) * 1000
                wait = trips.waited_ms - waited
                if path == "agent":
                    nodes: dict[str, float] = {}
                    for record in run_.costs.nodes:
                        nodes[record["node"]] = nodes.get(record["node"], 0.0) + record["wall_ms"]
                    for node, ms in nodes.items():
                        agent_figures.setdefault(f"node {node}", []).append(ms)
                    agent_figures.setdefault("agent total", []).append(total)
                    agent_figures.setdefault("agent minus its search", []).append(
                        total - nodes.get("memory_search", 0.0))
                    continue
                now = dict(stages.now)
                now["statement server wait"] = wait
                now["read: client's share"] = now["read (round trip, decode)"] - wait
                now["embedding and keys side by side"] = max(now.get("embedding", 0.0),
                                                             now.get("entity keys", 0.0))
                now["search total"] = total
                now["rest"] = total - now["embedding and keys side by side"] - sum(
                    now.get(s, 0.0) for s in ("lanes built", "acquire",
                                              "read (round trip, decode)", "rerank"))
                for stage, ms in now.items():
                    per_stage.setdefault(stage, []).append(ms)
    statement = await statement_stages(memory, scope, qs[:args.explain], (0, 0), lanes=True)
    await memory.close()
    figures = {stage: percentiles(v) for stage, v in {**alone, **per_stage,
                                                       **agent_figures}.items()}
    floor = figures["embedding alone"]["p50"] + statement["server_total_ms"]
    return {"machine": machine_info(args.threads), "size": args.size, "queries": len(qs),
            "stages_ms": figures, "statement_server_ms_p50": statement,
            "floor_ms": floor,
            "search_p95_over_floor": figures["search total"]["p95"] / floor,
            "load_average_end": [round(x, 2) for x in os.getloadavg()]}


def print_report(report: dict) -> None:
    print(f"{report['size']:,} sentences, {report['queries']} queries; stage ms p50 / p95")
    for stage, p in report["stages_ms"].items():
        print(f"  {stage:<36} {p['p50']:7.2f} {p['p95']:7.2f}")
    print("  statement on the server (EXPLAIN ANALYZE, p50): " + "  ".join(
        f"{s.removesuffix('_ms')} {ms:.2f}" for s, ms in report["statement_server_ms_p50"].items()))
    print(f"floor (embedding p50 + statement execution p50) {report['floor_ms']:.2f} ms; "
          f"search p95 / floor {report['search_p95_over_floor']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("MEMROUTE_DATA_DIR", "../shared/data"))
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--explain", type=int, default=60)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    report = asyncio.run(run(args))
    write_report(report, "floor", print_report)


if __name__ == "__main__":
    main()
