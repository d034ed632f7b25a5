"""`make bench`, service part: REST search throughput and latency of `memroute serve`.

Runs on the agent benchmark's pooled HotpotQA store of the first ``--questions`` questions
(the same schema, reused when filled), with the questions as queries. A real server process
on 127.0.0.1 answers ``POST /v1/search`` (k = 10) from 1, 8 and 32 concurrent clients
(httpx, one connection each); requests/s and latency percentiles are measured at the client.
The overhead of the service is measured paired: each query is searched in process
(`Memory.search_scored`, same settings), over REST, and in process again, one after the
other; the overhead is REST minus the mean of the two in-process runs, and the difference of
the two in-process runs is reported beside it as the noise floor (target: p95 overhead
<= 5 ms at 1 client). The query-vector
cache is off on both sides, so every request embeds its query. Prints a table and one JSON
line, and writes ``bench-out/service.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.agent import HOTPOTQA, open_bench_store
from benchmarks.memory import load_average, machine_info, percentiles, write_report
from benchmarks.served import ServedProcess, service_env
from memroute.memory import Memory, Scope
from memroute.service.keys import KeyStore
from memroute.settings import MemrouteSettings

OVERHEAD_TARGET_MS = 5.0
K = 10


async def rest_search(client: httpx.AsyncClient, scope: Scope, query: str) -> float:
    """One REST search; its latency in ms (a non-200 answer is an error)."""
    start = time.perf_counter()
    response = await client.post("/v1/search", json={"scope": scope.model_dump(),
                                                      "query": query, "k": K})
    elapsed = (time.perf_counter() - start) * 1000
    response.raise_for_status()
    return elapsed


async def in_process_search(memory: Memory, scope: Scope, query: str) -> float:
    start = time.perf_counter()
    await memory.search_scored(scope, query, k=K)
    return (time.perf_counter() - start) * 1000


async def measure_overhead(memory: Memory, client: httpx.AsyncClient, scope: Scope,
                           queries: list[str]) -> dict[str, Any]:
    """Per query: in process, over REST, in process again. Overhead = REST minus the mean of
    the two in-process runs; noise = the second in-process run minus the first (what a
    difference of two identical searches looks like on this machine now)."""
    before, remote, after = [], [], []
    for query in queries:
        before.append(await in_process_search(memory, scope, query))
        remote.append(await rest_search(client, scope, query))
        after.append(await in_process_search(memory, scope, query))
    local = np.array([before, after])
    overhead = np.array(remote) - local.mean(axis=0)
    return {"queries": len(queries), "in_process_ms": percentiles(list(local.ravel())),
            "rest_ms": percentiles(remote), "paired_overhead_ms": percentiles(list(overhead)),
            "noise_ms": percentiles(list(local[1] - local[0])),
            "p95_overhead_ms": percentiles(remote)["p95"] - percentiles(list(local.ravel()))["p95"],
            "target_p95_ms": OVERHEAD_TARGET_MS, "load_average": load_average()}


async def measure_throughput(url: str, token: str, scope: Scope, queries: list[str],
                             clients: int, requests: int) -> dict[str, Any]:
    """``requests`` searches from ``clients`` concurrent clients: requests/s and latency."""
    latencies: list[float] = []
    errors = 0
    next_query = iter(range(requests))

    async def client_loop() -> None:
        nonlocal errors
        async with httpx.AsyncClient(base_url=url, timeout=120,
                                     headers={"Authorization": f"Bearer {token}"}) as client:
            for n in next_query:
                try:
                    latencies.append(await rest_search(client, scope, queries[n % len(queries)]))
                except httpx.HTTPError:
                    errors += 1

    start = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    wall = time.perf_counter() - start
    return {"clients": clients, "requests": requests, "errors": errors,
            "requests_per_s": len(latencies) / wall, "latency_ms": percentiles(latencies),
            "load_average": load_average()}


async def measure(memory: Memory, scope: Scope, queries: list[str], *, clients: list[int],
                  requests: int, paired: int, threads: int, log: Path) -> dict[str, Any]:
    """Start a server on ``memory``'s schema, key it to ``scope``, and time it."""
    keys = await KeyStore.open(memory.url, memory.schema, max_size=1)
    token, record = await keys.create(scope.org_id, project_ids=[scope.project_id],
                                      name="benchmarks.service")
    env = service_env(memory.url, memory.schema, memory.settings.home,
                      MEMROUTE_EMBED_THREADS=str(threads), MEMROUTE_QUERY_CACHE_SIZE="0")
    server = await asyncio.to_thread(ServedProcess(env, log).start)
    report: dict[str, Any] = {"pool_max_size": memory.settings.pool_max_size}
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120,
                                     headers={"Authorization": f"Bearer {token}"}) as client:
            for query in queries[:5]:  # warm both sides (model sessions, connections)
                await memory.search_scored(scope, query, k=K)
                await rest_search(client, scope, query)
            report["overhead"] = await measure_overhead(
                memory, client, scope, [queries[n % len(queries)] for n in range(paired)])
        report["throughput"] = [await measure_throughput(server.url, token, scope, queries, c,
                                                         requests) for c in clients]
    finally:
        await asyncio.to_thread(server.stop)
        await keys.revoke(record.key_id)
        await keys.close()
    return report


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = MemrouteSettings().model_copy(update={"embed_threads": args.threads,
                                                     "query_cache_size": 0})
    memory, scope, questions, store = await open_bench_store(
        settings, Path(args.data_dir) / HOTPOTQA, args.questions, args.seed)
    report: dict[str, Any] = {"machine": machine_info(args.threads), "store": store,
                              "embedder": memory.embedder.name,
                              "reranker": memory.reranker_name, "k": K}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            report.update(await measure(memory, scope, questions, clients=args.clients,
                                        requests=args.requests, paired=args.paired,
                                        threads=args.threads, log=Path(tmp) / "serve.log"))
    finally:
        await memory.close()
    report["machine"]["load_average_end"] = load_average()
    return report


def print_report(report: dict[str, Any]) -> None:
    store, over = report["store"], report["overhead"]
    print(f"store: {store['episodes']:,} episodes of {store['questions']} HotpotQA questions; "
          f"k = {report['k']}, query cache off, server pool {report['pool_max_size']}; "
          f"load at start {report['machine']['load_average_start']}, "
          f"end {report['machine']['load_average_end']}")
    print(f"\npaired, 1 client, {over['queries']} queries (load {over['load_average']}):")
    print(f"{'':<22} {'p50':>7} {'p95':>7} {'mean':>7}")
    for label, key in (("in process (ms)", "in_process_ms"), ("REST (ms)", "rest_ms"),
                       ("overhead, paired (ms)", "paired_overhead_ms"),
                       ("noise, paired (ms)", "noise_ms")):
        fig = over[key]
        print(f"{label:<22} {fig['p50']:7.2f} {fig['p95']:7.2f} {fig['mean']:7.2f}")
    print(f"p95 REST - p95 in process: {over['p95_overhead_ms']:.2f} ms "
          f"(target <= {over['target_p95_ms']:.0f} ms)")
    print(f"\n{'clients':>7} {'requests':>8} {'errors':>6} {'req/s':>7} {'p50 ms':>7} "
          f"{'p95 ms':>7}  load")
    for fig in report["throughput"]:
        print(f"{fig['clients']:7d} {fig['requests']:8d} {fig['errors']:6d} "
              f"{fig['requests_per_s']:7.1f} {fig['latency_ms']['p50']:7.1f} "
              f"{fig['latency_ms']['p95']:7.1f}  {fig['load_average']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("MEMROUTE_DATA_DIR", "../shared/data"))
    parser.add_argument("--questions", type=int, default=100,
                        help="first N HotpotQA questions: the store and the queries")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=300,
                        help="REST searches per concurrency level")
    parser.add_argument("--paired", type=int, default=100,
                        help="queries of the paired in-process/REST overhead measure")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    write_report(asyncio.run(run(args)), "service", print_report)


if __name__ == "__main__":
    main()
