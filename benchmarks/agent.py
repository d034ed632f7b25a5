"""`make bench`, agent half: LLM tokens per strategy, agent overhead, SplitQuery's wall time.

Runs on the evaluation protocol's pooled HotpotQA store of the first ``--questions``
questions (shuffled with ``--seed``, context expansion off), in its own schema, reused when
already filled. The LLM planner is driven by `ScriptedPlannerChat` (the offline planner's
decisions through the real LLM path); tokens are the graph's tiktoken counts of the prompts
sent. Prints a table and one JSON line, and writes ``bench-out/agent.json``.

- tokens: input/output tokens per node and per strategy, as a share of MemMachine's
  per-question averages (target <= 70% of each);
- overhead: wall time of ``RetrievalAgent.aretrieve`` per strategy with a model of fixed
  latency, minus LLM calls x latency, minus the time during which a memory search was in
  flight (the union of the ``memory_search`` intervals: concurrent searches count once);
- split_ratio: SplitQuery with exactly N sub-queries (the offline split padded to N) over one
  direct search of the same question (target <= 2.0), with a breakdown of where the time
  goes; once with no LLM latency, once with a planner call of ``--split-latency-ms``, whose
  latency is subtracted from the split run's wall time (the original query's search runs
  during that call, so only a planner that takes time can hide it).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from memroute.agent import RetrievalAgent
from benchmarks.memory import load_average, machine_info, percentiles, write_report
from memroute.evals.datasets import load_dataset
from memroute.evals.scripted_llm import ScriptedPlannerChat
from memroute.evals.store import build_store
from memroute.memory import Memory, Scope
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.settings import MemrouteSettings

HOTPOTQA = Path("hotpotqa") / "hotpotqa_dev_distractor_800.jsonl"
# MemMachine's published per-question averages (HotpotQA hard, LLM planner).
MEMMACHINE_INPUT = {"router": 1049, "split": 1229, "chain": 2874}
MEMMACHINE_OUTPUT = {"router": 195, "split": 435, "chain": 1614}
TARGET_SHARE = 0.70
SPLIT_RATIO_TARGET = 2.0
QUERY_CACHE = 8  # query vectors the memory keeps (MEMROUTE_QUERY_CACHE_SIZE)
NODES = ("tool_select", "split_plan", "chain_judge")
COUNTS = ("llm_calls", "input_tokens", "output_tokens")


def interval_union_ms(records: list[dict[str, Any]]) -> float:
    """Milliseconds during which at least one of the records' [started_at, ended_at] ran."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted((r["started_at"], r["ended_at"]) for r in records):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total * 1000


async def open_bench_store(settings: MemrouteSettings, data: Path, n: int,
                           seed: int) -> tuple[Memory, Scope, list[str], dict[str, Any]]:
    """The pooled store of the first ``n`` questions, in a schema of its own."""
    dataset = load_dataset("hotpotqa", data, limit=n)
    embedder = MiniLMOnnxEmbedder(threads=settings.embed_threads)
    key = f"{dataset.store_key}|{seed}|{embedder.name}"
    schema = f"bench_agent_{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    memory = await Memory.open(schema=schema, embedder=embedder, settings=settings)
    store = await build_store(dataset, memory, seed)
    info = {"schema": schema, "questions": len(dataset.questions), "episodes": store.episodes,
            "reused": store.reused, "ingest_s": round(store.ingest_s, 1)}
    return memory, store.scopes[""], [q.question for q in dataset.questions], info


def agent_for(memory: Memory, chat: ScriptedPlannerChat) -> RetrievalAgent:
    return RetrievalAgent(memory, llm=chat, context=(0, 0))


async def measure_tokens(memory: Memory, scope: Scope, questions: list[str]) -> dict[str, Any]:
    """Mean LLM calls and tokens per question, per strategy and per node."""
    agent = agent_for(memory, ScriptedPlannerChat(0.0))
    strategies: dict[str, Any] = {}
    for strategy in ("auto", "split", "chain"):
        runs = [await agent.aretrieve(q, scope=scope, k=10, strategy=strategy)
                for q in questions]
        by_node = {}
        for node in NODES:
            used = [run.costs.by_node.get(node) for run in runs]
            if not any(used):
                continue
            means = {key: statistics.mean(u[key] if u else 0 for u in used) for key in COUNTS}
            means["input_tokens_per_call"] = (means["input_tokens"] / means["llm_calls"]
                                              if means["llm_calls"] else 0.0)
            by_node[node] = means
        strategies[strategy] = {
            **{key: statistics.mean(run.costs.totals[key] for run in runs) for key in COUNTS},
            "estimated": any(run.costs.totals["estimated"] for run in runs),
            "routes": dict(Counter(run.route for run in runs)),
            "by_node": by_node,
        }
    ours = {"router": strategies["auto"]["by_node"]["tool_select"],
            "split": strategies["split"], "chain": strategies["chain"]}
    versus = {}
    for name, figures in ours.items():
        versus[name] = {
            "input_tokens": figures["input_tokens"],
            "input_share": figures["input_tokens"] / MEMMACHINE_INPUT[name],
            "output_tokens": figures["output_tokens"],
            "output_share": figures["output_tokens"] / MEMMACHINE_OUTPUT[name],
        }
        versus[name]["input_target_met"] = versus[name]["input_share"] <= TARGET_SHARE
    versus["auto_whole_run"] = {
        "input_tokens": strategies["auto"]["input_tokens"],
        "input_share": strategies["auto"]["input_tokens"] / MEMMACHINE_INPUT["router"],
        "output_tokens": strategies["auto"]["output_tokens"],
        "output_share": strategies["auto"]["output_tokens"] / MEMMACHINE_OUTPUT["router"],
    }
    return {"questions": len(questions), "strategies": strategies, "vs_memmachine": versus,
            "memmachine": {"input": MEMMACHINE_INPUT, "output": MEMMACHINE_OUTPUT},
            "comparison": "router = tool_select node under auto; split and chain = whole "
                          "run of that strategy; auto_whole_run = router + routed strategy",
            "load_average": load_average()}


async def measure_overhead(memory: Memory, scope: Scope, questions: list[str],
                           latency_s: float, warmup: int = 3) -> dict[str, Any]:
    """Wall time per strategy, and what is left after the LLM's and the searches' time."""
    agent = agent_for(memory, ScriptedPlannerChat(latency_s))
    for q in questions[:warmup]:
        await memory.search_scored(scope, q, k=10, context=(0, 0))
    bare = []
    for q in questions:
        start = time.perf_counter()
        await memory.search_scored(scope, q, k=10, context=(0, 0))
        bare.append((time.perf_counter() - start) * 1000)
    figures: dict[str, Any] = {"llm_latency_ms": latency_s * 1000,
                               "bare_search_ms": percentiles(bare), "strategies": {}}
    for strategy in ("direct", "auto", "split", "chain"):
        for q in questions[:warmup]:
            await agent.aretrieve(q, scope=scope, k=10, strategy=strategy)
        walls, calls, searches, search_sums, overheads, reranks, n_searches = ([] for _ in range(7))
        for q in questions:
            start = time.perf_counter()
            run = await agent.aretrieve(q, scope=scope, k=10, strategy=strategy)
            wall = (time.perf_counter() - start) * 1000
            records = [r for r in run.costs.nodes if r["node"] == "memory_search"]
            union = interval_union_ms(records)
            walls.append(wall)
            calls.append(run.costs.llm_calls)
            searches.append(union)
            search_sums.append(sum(r["wall_ms"] for r in records))
            n_searches.append(len(records))
            reranks.append(sum(r["wall_ms"] for r in run.costs.nodes
                               if r["node"] == "final_rerank"))
            overheads.append(wall - run.costs.llm_calls * latency_s * 1000 - union)
        figures["strategies"][strategy] = {
            "wall_ms": percentiles(walls), "llm_calls": statistics.mean(calls),
            "searches": statistics.mean(n_searches),
            "search_in_flight_ms": percentiles(searches),
            "search_sum_ms": percentiles(search_sums),
            "final_rerank_ms": percentiles(reranks),
            "overhead_ms": percentiles(overheads),
        }
    figures["subtracted"] = ("overhead = wall - llm_calls x llm_latency - union of the "
                             "memory_search nodes' [started, ended] intervals (concurrent "
                             "searches counted once); final_rerank stays in the overhead")
    figures["load_average"] = load_average()
    return figures


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


async def split_breakdown(memory: Memory, scope: Scope,
                          sets: list[list[str]]) -> dict[str, Any]:
    """A split run's parts timed on the memory directly, on query sets (a question and its
    sub-queries), with the query cache off so every search embeds its query:

    embedding a set one query at a time concurrently vs as one batch; one search vs the
    set's concurrent searches (wall, this process's CPU time, summed stage times); and two
    candidate savings: the sub-queries alone (the original query searched while the
    planner runs) and the set without each search's own rerank (the final rerank reorders
    the pool anyway).
    """
    embedder, limit = memory.embedder, asyncio.Semaphore(4)  # the agent's search_concurrency
    rows: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        rows.setdefault(name, []).append(value)

    async def searches(queries: list[str], rerank: bool = True):
        async def one(q: str):
            async with limit:
                return await memory.search_scored(scope, q, k=10, context=(0, 0), rerank=rerank)
        return await asyncio.gather(*(one(q) for q in queries))

    async def timed(name: str, make) -> Any:
        start, cpu = time.perf_counter(), time.process_time()
        out = await make()
        add(name, _ms(start))
        add(f"{name}.process_cpu", (time.process_time() - cpu) * 1000)
        return out

    settings = memory.settings
    memory.settings = settings.model_copy(update={"query_cache_size": 0})
    try:
        for queries in sets:
            await timed("embed_one", lambda: embedder.embed_query(queries[0]))
            await timed("embed_set_concurrently",
                        lambda: asyncio.gather(*(embedder.embed_query(q) for q in queries)))
            await timed("embed_set_as_one_batch", lambda: embedder.embed_documents(queries))
            (one,) = await timed("search_one", lambda: searches(queries[:1]))
            for stage, ms in one.timings.items():
                add(f"search_one.{stage}", ms)
            hits = await timed("search_set_concurrently", lambda: searches(queries))
            for stage in hits[0].timings:
                add(f"search_set.sum_of_{stage}", sum(h.timings.get(stage, 0.0) for h in hits))
            await timed("search_sub_queries_only", lambda: searches(queries[1:]))
            await timed("search_set_without_per_search_rerank",
                        lambda: searches(queries, rerank=False))
    finally:
        memory.settings = settings
    return {"sets": len(sets), "queries_per_set": statistics.mean(len(s) for s in sets),
            "query_cache": "off", "p50_ms": {name: float(np.median(v))
                                             for name, v in rows.items()}}


async def measure_split_ratio(memory: Memory, scope: Scope, questions: list[str],
                              sub_queries: int, warmup: int = 3, breakdown_sets: int = 30,
                              planner_latency_s: float = 0.0) -> dict[str, Any]:
    """SplitQuery with ``sub_queries`` sub-queries over direct search, on the same questions.

    Pairs alternate a direct run and a split run of the question half the list away, so a
    query vector kept by the memory's small query cache is never the other run's. With a
    ``planner_latency_s``, that latency is taken off each split run's wall time.
    """
    agent = agent_for(memory, ScriptedPlannerChat(planner_latency_s, split_into=sub_queries))
    for q in questions[-warmup:]:
        for strategy in ("direct", "split"):
            await agent.aretrieve(q, scope=scope, k=10, strategy=strategy)
    n, offset = len(questions), max(1, len(questions) // 2)
    walls: dict[str, list[float]] = {"direct": [0.0] * n, "split": [0.0] * n}
    parts: dict[str, list[float]] = {"split_plan": [], "search_in_flight": [],
                                     "final_rerank": []}
    sets: list[list[str]] = [[] for _ in range(n)]
    for i in range(n):
        pair = (("direct", i), ("split", (i + offset) % n))
        for strategy, j in (pair if i % 2 == 0 else pair[::-1]):
            start = time.perf_counter()
            run = await agent.aretrieve(questions[j], scope=scope, k=10, strategy=strategy)
            walls[strategy][j] = (time.perf_counter() - start) * 1000
            if strategy == "split":
                walls[strategy][j] -= planner_latency_s * 1000
                sets[j] = [questions[j], *run.sub_queries]
                nodes = run.costs.nodes
                parts["split_plan"].append(sum(r["wall_ms"] for r in nodes
                                               if r["node"] == "split_plan"))
                parts["search_in_flight"].append(interval_union_ms(
                    [r for r in nodes if r["node"] == "memory_search"]))
                parts["final_rerank"].append(sum(r["wall_ms"] for r in nodes
                                                 if r["node"] == "final_rerank"))
    direct, split = percentiles(walls["direct"]), percentiles(walls["split"])
    ratios = [s / d for s, d in zip(walls["split"], walls["direct"])]
    return {
        "target": SPLIT_RATIO_TARGET,
        "sub_queries_source": "the offline planner's split padded to N (one per named "
                              "phrase, then slices of the key terms), served by the model",
        "sub_queries": sub_queries,
        "sub_queries_mean": statistics.mean(len(s) - 1 for s in sets),
        "searches_per_split_run": sub_queries + 1,
        "planner_latency_ms": planner_latency_s * 1000,
        "split_wall": "split run wall time minus planner_latency_ms",
        "direct_wall_ms": direct, "split_wall_ms": split,
        "ratio_p50": split["p50"] / direct["p50"], "ratio_mean": split["mean"] / direct["mean"],
        "ratio_per_question_p50": float(np.median(ratios)),
        "split_parts_ms_p50": {k: float(np.median(v)) for k, v in parts.items()},
        "breakdown": (await split_breakdown(memory, scope, sets[:breakdown_sets])
                      if breakdown_sets else None),
        "load_average": load_average(),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    # A query cache big enough for one request's queries, too small to keep the previous
    # questions': every timed run embeds its queries, as a new question would.
    settings = MemrouteSettings().model_copy(update={"embed_threads": args.threads,
                                                     "query_cache_size": QUERY_CACHE})
    memory, scope, questions, store = await open_bench_store(
        settings, Path(args.data_dir) / HOTPOTQA, args.questions, args.seed)
    report: dict[str, Any] = {
        "machine": machine_info(args.threads),
        "store": store, "embedder": memory.embedder.name, "reranker": memory.reranker_name,
    }
    try:
        report["tokens"] = await measure_tokens(memory, scope, questions)
        timed = questions[: args.timed_questions]
        report["overhead"] = await measure_overhead(memory, scope, timed,
                                                    args.llm_latency_ms / 1000)
        report["split_ratio"] = await measure_split_ratio(memory, scope, timed, args.sub_queries)
        report["split_ratio_planner_latency"] = await measure_split_ratio(
            memory, scope, timed, args.sub_queries, breakdown_sets=0,
            planner_latency_s=args.split_latency_ms / 1000)
    finally:
        await memory.close()
    return report


def print_report(report: dict[str, Any]) -> None:
    store, tokens = report["store"], report["tokens"]
    print(f"store: {store['episodes']:,} episodes of {store['questions']} HotpotQA questions "
          f"(pooled, seed 0, context off; {'reused' if store['reused'] else 'built'})")
    print(f"\ntokens per question, {tokens['questions']} questions (tiktoken o200k_base of the "
          f"prompts sent; load {tokens['load_average']})")
    print(f"{'strategy':<8} {'node':<12} {'calls':>6} {'input':>8} {'output':>7}")
    for strategy, fig in tokens["strategies"].items():
        for node, n in fig["by_node"].items():
            print(f"{strategy:<8} {node:<12} {n['llm_calls']:6.2f} {n['input_tokens']:8.1f} "
                  f"{n['output_tokens']:7.1f}")
        print(f"{strategy:<8} {'(total)':<12} {fig['llm_calls']:6.2f} "
              f"{fig['input_tokens']:8.1f} {fig['output_tokens']:7.1f}   routes {fig['routes']}")
    print(f"\n{'vs MemMachine':<15} {'input':>8} {'share':>7} {'output':>8} {'share':>7}")
    for name, v in tokens["vs_memmachine"].items():
        print(f"{name:<15} {v['input_tokens']:8.1f} {v['input_share']:7.1%} "
              f"{v['output_tokens']:8.1f} {v['output_share']:7.1%}")
    over = report["overhead"]
    print(f"\nagent overhead, LLM latency {over['llm_latency_ms']:.0f} ms "
          f"(load {over['load_average']}); bare search p50 {over['bare_search_ms']['p50']:.1f} "
          f"ms p95 {over['bare_search_ms']['p95']:.1f} ms")
    print(f"{'strategy':<8} {'wall p50':>9} {'p95':>8} {'calls':>6} {'searches':>8} "
          f"{'search':>7} {'rerank':>7} {'overhead p50':>13} {'p95':>7}")
    for strategy, fig in over["strategies"].items():
        print(f"{strategy:<8} {fig['wall_ms']['p50']:9.1f} {fig['wall_ms']['p95']:8.1f} "
              f"{fig['llm_calls']:6.2f} {fig['searches']:8.2f} "
              f"{fig['search_in_flight_ms']['p50']:7.1f} {fig['final_rerank_ms']['p50']:7.1f} "
              f"{fig['overhead_ms']['p50']:13.1f} {fig['overhead_ms']['p95']:7.1f}")
    for split in (report["split_ratio"], report["split_ratio_planner_latency"]):
        print(f"\nSplitQuery, {split['sub_queries']} sub-queries, vs direct, planner latency "
              f"{split['planner_latency_ms']:.0f} ms (subtracted; load {split['load_average']}): "
              f"direct p50 {split['direct_wall_ms']['p50']:.1f} ms, split p50 "
              f"{split['split_wall_ms']['p50']:.1f} ms -> ratio p50 {split['ratio_p50']:.2f}, "
              f"mean {split['ratio_mean']:.2f} (target <= {split['target']})")
        print("split run parts p50 (ms): " + ", ".join(
            f"{k} {v:.1f}" for k, v in split["split_parts_ms_p50"].items()))
    split = report["split_ratio"]
    print("where the time goes, p50 (ms):")
    for name, ms in split["breakdown"]["p50_ms"].items():
        print(f"  {name:<50} {ms:7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("MEMROUTE_DATA_DIR", "../shared/data"))
    parser.add_argument("--questions", type=int, default=100,
                        help="first N HotpotQA questions: the store and the token measure")
    parser.add_argument("--timed-questions", type=int, default=100,
                        help="of those, how many the timing measures run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--llm-latency-ms", type=float, default=200.0)
    parser.add_argument("--sub-queries", type=int, default=4)
    parser.add_argument("--split-latency-ms", type=float, default=50.0,
                        help="the split planner call's latency in the second split measure")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    write_report(asyncio.run(run(args)), "agent", print_report)


if __name__ == "__main__":
    main()
