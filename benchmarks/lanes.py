"""What the full-text lane costs a retrieval: direct and auto (offline planner) with the lane
on and off, in one process, question by question (the order of the four shuffled per
question), on a store `memroute eval` built (its schema in the same ``MEMROUTE_HOME``).

Each setting has its own `Memory` (so its own query-vector cache); the entity lane follows
the settings. ``--base COMMIT`` also times one search (`Memory.search_scored`, k = 10, query
vectors cached, entity lane off) of that commit's code and of this tree, lane off and on.
Contended figures are only relative::

    MEMROUTE_HOME=/tmp/mr-eval OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.lanes \\
        --schema ev_hotpotqa_dfe6cf051f76da4c --project hotpotqa \\
        --data ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl --queries 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path

import numpy as np

from benchmarks.memory import load_average
from memroute import RetrievalAgent
from memroute.memory import Memory, Scope
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.planners.offline.planner import OfflinePlanner
from memroute.settings import get_settings


def load_questions(path: Path, n: int) -> list[str]:
    """The first ``n`` questions of a HotpotQA/MuSiQue (JSON lines) or 2Wiki (JSON) file."""
    text = path.read_text()
    rows = json.loads(text) if text.lstrip().startswith("[") else [
        json.loads(line) for line in text.splitlines() if line.strip()]
    return [row["question"] for row in rows[:n]]


async def run(args: argparse.Namespace) -> None:
    embedder = MiniLMOnnxEmbedder(threads=args.threads)
    settings = get_settings()
    scope = Scope(org_id="memroute-eval", project_id=args.project, user_id="pooled")
    agents = {}
    for lexical in (False, True):
        memory = await Memory.open(schema=args.schema, embedder=embedder,
                                   settings=settings.model_copy(update={"lexical": lexical}))
        agents[lexical] = RetrievalAgent(memory=memory, planner=OfflinePlanner(use_nlp=True),
                                         context=(0, 0))
    if (await agents[False].memory.count(scope))["sentences"] == 0:
        raise SystemExit(f"no {args.project} store in schema {args.schema}: run memroute eval")
    questions = load_questions(Path(args.data), args.queries + args.warm_up)
    for q in questions[args.queries:]:
        for agent in agents.values():
            await agent.aretrieve(q, scope=scope, k=10, strategy="auto")
    runs = [(strategy, lexical) for strategy in ("direct", "auto") for lexical in (False, True)]
    times: dict[tuple[str, bool], list[float]] = {run: [] for run in runs}
    order = random.Random(0)
    start_load = load_average()
    for q in questions[:args.queries]:
        for strategy, lexical in order.sample(runs, len(runs)):
            start = time.perf_counter()
            await agents[lexical].aretrieve(q, scope=scope, k=10, strategy=strategy)
            times[(strategy, lexical)].append((time.perf_counter() - start) * 1000)
    print(f"{args.queries} questions of {args.data}, schema {args.schema}; "
          f"load average {start_load} -> {load_average()}")
    for strategy in ("direct", "auto"):
        off, on = (np.median(times[(strategy, lexical)]) for lexical in (False, True))
        for lexical in (False, True):
            values = times[(strategy, lexical)]
            print(f"{strategy:<6} lexical {'on ' if lexical else 'off'}  p50 "
                  f"{np.median(values):6.1f} ms  p95 {np.percentile(values, 95):6.1f} ms")
        print(f"{strategy:<6} the lane's cost: {on / off - 1:+.0%} p50")
    if args.base:
        await compare_searches(args, scope, questions[:args.queries], embedder)
    for agent in agents.values():
        await agent.memory.close()


async def compare_searches(args: argparse.Namespace, scope: Scope, questions: list[str],
                           embedder: MiniLMOnnxEmbedder) -> None:
    """One search of ``args.base``'s code and of this tree, lane off and on, alternating."""
    import tempfile

    from benchmarks.search_ab import import_base

    with tempfile.TemporaryDirectory() as tmp:
        base = import_base(args.base, Path(tmp))
        memories = {"base": await base.Memory.open(schema=args.schema, embedder=embedder),
                    "tree": await Memory.open(schema=args.schema, embedder=embedder)}
        for memory in memories.values():
            await memory.embed_queries(questions)
        runs = [(name, lexical) for name in memories for lexical in (False, True)]
        times: dict[tuple[str, bool], list[float]] = {run: [] for run in runs}
        order = random.Random(1)
        start_load = load_average()
        for q in questions:
            for name, lexical in order.sample(runs, len(runs)):
                start = time.perf_counter()
                await memories[name].search_scored(scope.model_dump(), q, k=10,
                                                   lexical=lexical, entities=False)
                times[(name, lexical)].append((time.perf_counter() - start) * 1000)
        print(f"one search, {args.base} (base) and this tree; load average {start_load} -> "
              f"{load_average()}")
        for name in memories:
            off, on = (np.median(times[(name, lexical)]) for lexical in (False, True))
            print(f"{name:<5} lexical off p50 {off:6.1f} ms  on p50 {on:6.1f} ms  "
                  f"the lane's cost: {on / off - 1:+.0%}")
        for memory in memories.values():
            await memory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema", required=True, help="the eval store's schema")
    parser.add_argument("--project", required=True,
                        help="the eval scope's project: the set's name, or passages")
    parser.add_argument("--data", required=True, help="the questions' file")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--warm-up", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--base", help="also time one search of this git commit's code")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
