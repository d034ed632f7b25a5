"""Where a question's time goes, per graph node, with timers around each node function
(entry to exit, wall and main-thread CPU): unlike the nodes' cost records, they include a
node's work outside its recorded step (the router's wait for the question's embedding),
and what is left is the time between nodes (LangGraph's supersteps). Direct and auto of
each question in a shuffled order, one process (docs/evaluation.md, "Where the time goes
between the searches")::

    MEMROUTE_HOME=<stores> OMP_NUM_THREADS=1 python -m benchmarks.node_times musique \\
        ../shared/data/musique/musique_ans_dev_200.jsonl 0 60   # store limit (0: all), questions
"""

from __future__ import annotations

import asyncio
import functools
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import memroute
import memroute.graph.builder as B
from memroute.evals.datasets import load_dataset
from memroute.evals.store import open_store
from memroute.graph import chain_judge, split_plan, tool_select
from memroute.memory.embedders import make_embedder
from memroute.planners.offline.planner import OfflinePlanner
from memroute.settings import get_settings

REC: list = []  # (node, start, end, main-thread CPU s) of the current run

def wrap(name, fn):
    @functools.wraps(fn)
    async def inner(*a, **k):
        s, c = time.perf_counter(), time.thread_time()
        try:
            return await fn(*a, **k)
        finally:
            REC.append((name, s, time.perf_counter(), time.thread_time() - c))
    return inner

def wrap_maker(mod, attr, name):
    orig = getattr(mod, attr)
    def maker(*a, **k):
        return wrap(name, orig(*a, **k))
    setattr(mod, attr, maker)

wrap_maker(tool_select, "make_tool_select", "tool_select")
wrap_maker(chain_judge, "make_chain_judge", "chain_judge")
wrap_maker(split_plan, "make_split_plan", "split_plan")
wrap_maker(B, "make_memory_search", "memory_search")
wrap_maker(B, "make_final_rerank", "final_rerank")

async def main(ds, data, limit, n):
    settings = get_settings()
    dataset = load_dataset(ds, Path(data), limit)
    embedder = make_embedder(settings.embedder, threads=1, batch_size=settings.embed_batch_size)
    store = await open_store(dataset, seed=0, embedder=embedder, reranker=settings.reranker, settings=settings)
    context = (1, 2) if dataset.is_conversational else (0, 0)
    agent = memroute.RetrievalAgent(memory=store.memory, planner=OfflinePlanner(use_nlp=settings.offline_parse), context=context)
    qs = dataset.questions[:n + 5]
    for q in qs[n:]:
        for s in ("direct", "auto"):
            await agent.aretrieve(q.question, scope=store.scope_for(q).model_dump(), k=10, strategy=s)
    agg = {s: defaultdict(list) for s in ("direct", "auto")}
    rnd = random.Random(0)
    for q in qs[:n]:
        for s in rnd.sample(["direct", "auto"], 2):
            store.memory._query_vectors.clear()
            REC.clear()
            t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
            await agent.aretrieve(q.question, scope=store.scope_for(q).model_dump(), k=10, strategy=s)
            t1, c1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
            a = agg[s]
            a["total"].append((t1 - t0) * 1000); a["main cpu"].append((c1 - c0) * 1000); a["proc cpu"].append((p1-p0)*1000)
            node_w = defaultdict(float); node_c = defaultdict(float)
            for name, st, en, cpu in REC:
                node_w[name] += (en - st) * 1000; node_c[name] += cpu * 1000
            for name in ("tool_select", "memory_search", "chain_judge", "split_plan", "final_rerank"):
                a[f"{name} wall"].append(node_w.get(name, 0.0)); a[f"{name} cpu"].append(node_c.get(name, 0.0))
            # covered time (union of node intervals)
            iv = sorted((st, en) for _, st, en, _ in REC)
            cov, cur_s, cur_e = 0.0, None, None
            for st, en in iv:
                if cur_e is None or st > cur_e:
                    if cur_e is not None: cov += cur_e - cur_s
                    cur_s, cur_e = st, en
                else:
                    cur_e = max(cur_e, en)
            if cur_e is not None: cov += cur_e - cur_s
            a["outside nodes wall"].append((t1 - t0) * 1000 - cov * 1000)
            a["outside nodes main cpu"].append((c1 - c0) * 1000 - sum(node_c.values()))
            a["supersteps~"].append(len(REC))
    for s in ("direct", "auto"):
        a = agg[s]
        print(f"{s}: p50 {statistics.median(a['total']):.1f} ms; " + ", ".join(f"{k} {statistics.mean(v):.1f}" for k, v in a.items()))
    await store.memory.close()

if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) or None, int(sys.argv[4])))
