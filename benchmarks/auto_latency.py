"""auto p50 over direct p50 on a store `memroute eval` built, in one process: per question,
direct and auto (offline planner, the eval's settings) in a shuffled order, so a change in
the machine's load hits both alike; with ``--base COMMIT`` that commit's code runs the same
two beside this tree's (four runs per question, shuffled), for a before/after in one run.

Prints the p50s, their ratio, p90s, CPU time per question (this process, all threads; the
database server's is not counted), and where a question's time goes: per node (the graph's
own cost records), the searches' stages (`SearchResults.timings`) and what is left (graph
overhead, checkpointing). Query vectors are not kept from one run to the next: each run
embeds its question, as a first retrieval of it would. ``--profile FILE`` also writes a cProfile of this tree's auto runs.
Contended figures are only relative::

    MEMROUTE_HOME=/tmp/mr-latency OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.auto_latency \\
        hotpotqa ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl --limit 300 \\
        --questions 100 --base b9550e0
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import random
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.memory import load_average
from memroute.evals.datasets import load_dataset
from memroute.evals.store import open_store
from memroute.settings import get_settings

STRATEGIES = ("direct", "auto")


def _agent(package: Any, memory: Any, context: tuple[int, int]) -> Any:
    """``package``'s retrieval agent with the offline planner, as `memroute eval` makes it."""
    planner = package.planners.offline.planner.OfflinePlanner(
        use_nlp=get_settings().offline_parse)
    return package.RetrievalAgent(memory=memory, planner=planner, context=context)


def _time_stages(memory: Any) -> dict[str, float]:
    """Wrap ``memory``'s reads so each run's search stages add up (ms) in the dict returned:
    `SearchResults.timings` of every search, the whole search, and the stored-entities read."""
    stages: dict[str, float] = defaultdict(float)
    search, entities = memory.search_scored, getattr(memory, "stored_entities", None)

    async def timed_search(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        found = await search(*args, **kwargs)
        stages["search_scored"] += (time.perf_counter() - start) * 1000
        for stage, value in getattr(found, "timings", {}).items():
            stages[stage] += value
        return found

    async def timed_entities(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        found = await entities(*args, **kwargs)
        stages["stored_entities"] += (time.perf_counter() - start) * 1000
        return found

    memory.search_scored = timed_search
    if entities is not None:
        memory.stored_entities = timed_entities
    return stages


def _import(name: str) -> Any:
    import importlib

    package = importlib.import_module(name)
    importlib.import_module(f"{name}.planners.offline.planner")
    return package


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import memroute
    from memroute.memory.embedders import make_embedder

    settings = get_settings()
    dataset = load_dataset(args.dataset, Path(args.data), args.limit)
    embedder = make_embedder(settings.embedder, threads=args.threads,
                             batch_size=settings.embed_batch_size)
    store = await open_store(dataset, seed=0, embedder=embedder, reranker=settings.reranker,
                             settings=settings)
    context = (1, 2) if dataset.is_conversational else (0, 0)
    agents = {"tree": _agent(_import("memroute"), store.memory, context)}
    stages = _time_stages(store.memory)
    base_memory = None
    tmp = tempfile.TemporaryDirectory()
    if args.base:
        from benchmarks.search_ab import import_base

        import_base(args.base, Path(tmp.name))
        base = _import("memroute_base")
        base_memory = await base.memory.Memory.open(schema=store.schema, embedder=embedder)
        agents["base"] = _agent(base, base_memory, context)
    questions = dataset.questions[:args.questions + args.warm_up]
    for q in questions[args.questions:]:  # warm-up: models, caches, connections
        for agent in agents.values():
            for strategy in STRATEGIES:
                await agent.aretrieve(q.question, scope=store.scope_for(q).model_dump(), k=10,
                                      strategy=strategy)
    runs = [(name, strategy) for name in agents for strategy in STRATEGIES]
    wall: dict[tuple[str, str], list[float]] = defaultdict(list)
    cpu: dict[tuple[str, str], list[float]] = defaultdict(list)  # this process, all threads
    nodes: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    profile = cProfile.Profile() if args.profile else None
    order = random.Random(0)
    start_load = load_average()
    for q in questions[:args.questions]:
        for name, strategy in order.sample(runs, len(runs)):
            profiling = profile is not None and name == "tree" and strategy == "auto"
            if profiling:
                profile.enable()
            stages.clear()
            for memory in filter(None, (base_memory, store.memory)):
                memory._query_vectors.clear()  # each run embeds its question itself
            start, cpu_start = time.perf_counter(), time.process_time()
            got = await agents[name].aretrieve(q.question, scope=store.scope_for(q).model_dump(), k=10,
                                               strategy=strategy)
            ms = (time.perf_counter() - start) * 1000
            cpu[(name, strategy)].append((time.process_time() - cpu_start) * 1000)
            if profiling:
                profile.disable()
            wall[(name, strategy)].append(ms)
            by_node = {n: c.get("wall_ms", 0.0) for n, c in got.costs.by_node.items()}
            kept = nodes[name if strategy == "auto" else f"{name} direct"]
            for node, value in by_node.items():
                kept[node].append(value)
            kept["(outside nodes)"].append(ms - sum(by_node.values()))
            kept["(searches)"].append(float(len(got.queries)))
            if strategy == "auto":
                if name == "tree":
                    for stage, value in stages.items():
                        nodes["tree stages"][stage].append(value)
    end_load = load_average()
    if profile is not None:
        profile.dump_stats(args.profile)
    report = {"dataset": args.dataset, "questions": args.questions,
              "load_average": [start_load, end_load], "p50_ms": {}, "p90_ms": {},
              "cpu_ms_mean": {}, "ratio": {}, "nodes": {}}
    print(f"{args.questions} questions of {args.data} (store of {args.limit or 'all'}), "
          f"schema {store.schema}; load average {start_load} -> {end_load}")
    for name in agents:
        p50 = {s: statistics.median(wall[(name, s)]) for s in STRATEGIES}
        p90 = {s: statistics.quantiles(wall[(name, s)], n=10)[-1] for s in STRATEGIES}
        cpu_ms = {s: statistics.mean(cpu[(name, s)]) for s in STRATEGIES}
        report["p50_ms"][name], report["p90_ms"][name] = p50, p90
        report["cpu_ms_mean"][name] = cpu_ms
        report["ratio"][name] = p50["auto"] / p50["direct"]
        print(f"{name:<5} direct p50 {p50['direct']:6.1f} ms  auto p50 {p50['auto']:6.1f} ms  "
              f"auto/direct {p50['auto'] / p50['direct']:.2f}x;  p90 {p90['direct']:6.1f} / "
              f"{p90['auto']:6.1f} ms;  CPU mean {cpu_ms['direct']:6.1f} / {cpu_ms['auto']:6.1f} ms")
        for label, key in (("auto", name), ("direct", f"{name} direct")):
            means = {node: statistics.mean(v) for node, v in nodes[key].items()}
            report["nodes"][key] = means
            print(f"      {label}, mean per question: " + ", ".join(
                f"{node} {value:.1f}" for node, value in sorted(means.items())))
    means = {stage: statistics.mean(v) for stage, v in nodes["tree stages"].items()}
    report["nodes"]["tree stages"] = means
    print("tree  auto's reads, mean ms per question: " + ", ".join(
        f"{stage} {value:.1f}" for stage, value in sorted(means.items())))
    for memory in filter(None, (base_memory, store.memory)):
        await memory.close()
    tmp.cleanup()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["hotpotqa", "2wiki", "musique", "locomo"])
    parser.add_argument("data")
    parser.add_argument("--limit", type=int, default=None, help="the store's slice, as eval's")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--warm-up", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--base", help="also run this git commit's code, alternating")
    parser.add_argument("--profile", help="write a cProfile of this tree's auto runs here")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
