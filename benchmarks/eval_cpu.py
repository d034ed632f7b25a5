"""What `memroute eval`'s p50 ratio measures, and the CPU each strategy's question costs.

`memroute eval --strategy direct,auto` runs its jobs (each question's direct, then its auto,
k = 10 first) from one queue with ``--concurrency`` (4) workers in one event loop, so about
four questions are in flight at once on this process's main thread, the embedder's thread
and the embedded Postgres server's backends. Two passes, on a store the eval built:

- ``eval``: the eval's own job order and workers (k = 10 only); p50 per strategy and ratio.
- ``cpu``: each strategy alone over the same questions, same workers; CPU per question of
  this process (main thread and the other threads apart: embedder, spaCy's executor) and of
  the database server (the postmaster and its backends, `benchmarks.memory.process_tree_cpu_seconds`), so what a question costs is
  counted wherever it runs.

With ``--base COMMIT`` that commit's code runs the same passes beside this tree's, in
alternating blocks of ``--block`` questions, so a before/after shares the machine's load.
CPU per question is steadier than wall time on a shared machine; compare within a run::

    MEMROUTE_HOME=/tmp/mr-hopcpu OMP_NUM_THREADS=1 python -m benchmarks.eval_cpu hotpotqa \\
        ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl --limit 300 --questions 200 \\
        --base d996667
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil

from benchmarks.auto_latency import _agent, _import
from benchmarks.memory import load_average, process_tree_cpu_seconds
from memroute.evals.datasets import load_dataset
from memroute.evals.store import open_store
from memroute.memory.server import embedded_server_status
from memroute.settings import get_settings

STRATEGIES = ("direct", "auto")
def process_cpu_s() -> tuple[float, float]:
    """CPU seconds of this process: (main thread, every other thread)."""
    main = threading.main_thread().native_id
    own = other = 0.0
    for thread in psutil.Process().threads():
        if thread.id == main:
            own += thread.user_time + thread.system_time
        else:
            other += thread.user_time + thread.system_time
    return own, other


async def run_jobs(agent: Any, store: Any, jobs: list[tuple[Any, str]], concurrency: int
                   ) -> dict[str, list[float]]:
    """The eval's workers over ``jobs`` (question, strategy): wall ms per strategy."""
    queue: asyncio.Queue = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    wall: dict[str, list[float]] = defaultdict(list)

    async def worker() -> None:
        while not queue.empty():
            q, strategy = queue.get_nowait()
            start = time.perf_counter()
            await agent.aretrieve(q.question, scope=store.scope_for(q).model_dump(), k=10,
                                  strategy=strategy)
            wall[strategy].append((time.perf_counter() - start) * 1000)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(jobs)))))
    return wall


def clear_caches(memories: list[Any]) -> None:
    """Each pass embeds and parses its questions and rewrites afresh, as the eval's first
    pass over them does (query vectors, stored vectors, parses, the planner's readings)."""
    for memory in memories:
        memory._query_vectors.clear()
        memory._stored_vectors.clear()
    for package in ("memroute", "memroute_base"):
        for module, name in (("nlp", "parse"), ("planners.offline.question_parse", "read_question")):
            cached = getattr(sys.modules.get(f"{package}.{module}"), name, None)
            if hasattr(cached, "cache_clear"):
                cached.cache_clear()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memroute.memory.embedders import make_embedder

    settings = get_settings()
    dataset = load_dataset(args.dataset, Path(args.data), args.limit)
    embedder = make_embedder(settings.embedder, threads=settings.embed_threads,
                             batch_size=settings.embed_batch_size)
    store = await open_store(dataset, seed=0, embedder=embedder, reranker=settings.reranker,
                             settings=settings)
    context = (1, 2) if dataset.is_conversational else (0, 0)
    agents = {"tree": (_agent(_import("memroute"), store.memory, context), store.memory)}
    tmp = tempfile.TemporaryDirectory()
    if args.base:
        from benchmarks.search_ab import import_base

        import_base(args.base, Path(tmp.name))
        base = _import("memroute_base")
        base_memory = await base.memory.Memory.open(schema=store.schema, embedder=embedder)
        agents["base"] = (_agent(base, base_memory, context), base_memory)
    memories = [m for _, m in agents.values()]
    postmaster = embedded_server_status(settings.home)["pid"]
    warm = dataset.questions[-args.warm_up:]
    for agent, _ in agents.values():
        await run_jobs(agent, store, [(q, s) for q in warm for s in STRATEGIES], args.concurrency)
    questions = dataset.questions[:args.questions]
    blocks = [questions[i:i + args.block] for i in range(0, len(questions), args.block)]
    wall: dict[tuple[str, str], list[float]] = defaultdict(list)
    cpu: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    start_load = load_average()
    for i, block in enumerate(blocks):
        order = list(agents) if i % 2 == 0 else list(reversed(agents))
        for name in order:
            agent, _ = agents[name]
            clear_caches(memories)
            got = await run_jobs(agent, store, [(q, s) for q in block for s in STRATEGIES],
                                 args.concurrency)
            for strategy, values in got.items():
                wall[(name, strategy)].extend(values)
            for strategy in STRATEGIES:
                clear_caches(memories)
                before = (*process_cpu_s(), process_tree_cpu_seconds(postmaster))
                await run_jobs(agent, store, [(q, strategy) for q in block], args.concurrency)
                after = (*process_cpu_s(), process_tree_cpu_seconds(postmaster))
                for part, b, a in zip(("main thread", "other threads", "server"), before, after):
                    cpu[(name, strategy)][part] += (a - b) * 1000
    end_load = load_average()
    n = len(questions)
    print(f"{n} questions of {args.data} (store of {args.limit or 'all'}), concurrency "
          f"{args.concurrency}, blocks of {args.block}; load average {start_load} -> {end_load}")
    report: dict[str, Any] = {"load_average": [start_load, end_load], "questions": n}
    for name in agents:
        p50 = {s: statistics.median(wall[(name, s)]) for s in STRATEGIES}
        per_q = {s: {part: v / n for part, v in cpu[(name, s)].items()} for s in STRATEGIES}
        total = {s: sum(per_q[s].values()) for s in STRATEGIES}
        report[name] = {"p50_ms": p50, "ratio": p50["auto"] / p50["direct"], "cpu_ms": per_q,
                        "cpu_ratio": total["auto"] / total["direct"]}
        print(f"{name:<5} eval order: direct p50 {p50['direct']:6.1f} ms, auto p50 "
              f"{p50['auto']:6.1f} ms, ratio {p50['auto'] / p50['direct']:.2f}x")
        for s in STRATEGIES:
            parts = ", ".join(f"{part} {v:5.1f}" for part, v in per_q[s].items())
            print(f"      {s:<6} CPU ms per question {total[s]:6.1f} ({parts})")
        print(f"      CPU ratio auto/direct {total['auto'] / total['direct']:.2f}x")
    for memory in memories[1:]:
        await memory.close()
    await store.memory.close()
    tmp.cleanup()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["hotpotqa", "2wiki", "musique", "locomo"])
    parser.add_argument("data")
    parser.add_argument("--limit", type=int, default=None, help="the store's slice, as eval's")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--warm-up", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4, help="as `memroute eval`'s")
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument("--base", help="also run this git commit's code, in alternate blocks")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
