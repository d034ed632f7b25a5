"""A/B of `Memory.search_scored`: a git commit's code against the working tree's, in one
process, on the same bench store, query by query (the order of the two flips every query),
so a change in the machine's load hits both alike.

The commit's ``memroute`` package is extracted with ``git archive`` and imported under another
name (``memroute_base``). The store must exist (built by ``benchmarks.memory`` in the same
``MEMROUTE_HOME``)::

    MEMROUTE_HOME=/tmp/mr-bench OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.search_ab \\
        --base 2cc7340 --size 100000 --queries 200
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numpy as np

from benchmarks.memory import SEARCHES, RoundTrips, load_average, questions
from memroute.memory import Memory, Scope
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.settings import MemrouteSettings

_IMPORT = re.compile(r"\bmemroute(?=[.\s])")


def import_base(commit: str, into: Path):
    """The ``memroute.memory`` module of ``commit``, imported as ``memroute_base.memory``."""
    archive = subprocess.run(["git", "archive", commit, "memroute"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "memroute").rename(into / "memroute_base")
    for path in (into / "memroute_base").rglob("*.py"):
        path.write_text(_IMPORT.sub("memroute_base", path.read_text()))
    sys.path.insert(0, str(into))
    return importlib.import_module("memroute_base.memory")


def differences(base: list, branch: list, tolerance: float = 1e-5) -> str:
    """"identical" when every query's results have the same uids, windows and order, and
    scores within ``tolerance``; else how many queries differ."""
    differ = 0
    for one, other in zip(base, branch, strict=True):
        same = len(one) == len(other) and all(
            a[0] == b[0] and a[3] == b[3] and abs(a[1] - b[1]) <= tolerance
            and abs(a[2] - b[2]) <= tolerance for a, b in zip(one, other))
        differ += not same
    if not differ:
        return "identical"
    shared = np.mean([len({a[0] for a in one} & {b[0] for b in other}) / max(len(one), 1)
                      for one, other in zip(base, branch)])
    first = np.mean([bool(one and other and one[0][0] == other[0][0])
                     for one, other in zip(base, branch)])
    return (f"{differ} of {len(base)} queries differ (results shared {shared:.1%}, "
            f"same first {first:.1%})")


async def run(args: argparse.Namespace) -> None:
    settings = MemrouteSettings().model_copy(update={
        "embed_threads": args.threads, "db_schema": "bench",
        "query_cache_size": 4 * args.queries if args.cached_queries else 0})
    embedder = MiniLMOnnxEmbedder(threads=args.threads, query_model="same")
    # the working tree's searches embed queries with --query-model (the base's: its own)
    branch_embedder = (embedder if args.query_model == "same" else
                       MiniLMOnnxEmbedder(threads=args.threads, query_model=args.query_model))
    schema = args.schema or f"bench_v2_{args.size}"
    scope = Scope(org_id="bench", project_id=args.project or str(args.size))
    with tempfile.TemporaryDirectory() as tmp:
        base_memory = import_base(args.base, Path(tmp))
        memories = {"base": await base_memory.Memory.open(settings=settings, schema=schema,
                                                          embedder=embedder),
                    "branch": await Memory.open(settings=settings, schema=schema,
                                                embedder=branch_embedder)}
        if (await memories["branch"].count(scope))["sentences"] != args.size:
            raise SystemExit(f"no {args.size:,}-sentence bench store in this MEMROUTE_HOME: "
                             "build it with benchmarks.memory first")
        qs = questions(Path(args.data_dir), args.queries + 20)
        # warm-up (with --cached-queries: the timed queries too, so their vectors and parses
        # are kept and the timing is the read, the rerank and the rest of the client)
        for q in qs[args.queries:] + (qs[:args.queries] if args.cached_queries else []):
            for memory in memories.values():
                await memory.search_scored(scope.model_dump(), q, k=10, context=(1, 2))
        times: dict[tuple[str, str], list[float]] = {}
        figures: dict[tuple[str, str], dict[str, list[float]]] = {}
        results: dict[tuple[str, str], list] = {}
        start_load = load_average()
        # a query's keys are kept once either side parsed it: the row with kept keys is the
        # row without them
        searches = {label: c for label, c in SEARCHES.items() if not c.keys_kept}
        with RoundTrips() as counter:
            for n, q in enumerate(qs[:args.queries]):
                for label, config in searches.items():
                    for name in ("base", "branch") if n % 2 == 0 else ("branch", "base"):
                        trips, waited = counter.count, counter.waited_ms
                        cpu, start = time.process_time(), time.perf_counter()
                        hits = await memories[name].search_scored(
                            scope.model_dump(), q, k=10, rerank=config.rerank,
                            context=config.context, entities=config.entities,
                            lexical=config.lexical)
                        total = (time.perf_counter() - start) * 1000
                        times.setdefault((label, name), []).append(total)
                        read = hits.timings.get("read_ms", 0.0)
                        for stage, value in {
                                **hits.timings, "other_ms": total - sum(hits.timings.values()),
                                "round_trips": counter.count - trips,
                                "client_cpu_ms": (time.process_time() - cpu) * 1000,
                                "read_client_ms": read - (counter.waited_ms - waited)}.items():
                            figures.setdefault((label, name), {}).setdefault(stage, []).append(
                                value)
                        results.setdefault((label, name), []).append(
                            [(h.uid, h.rerank_score, h.vector_score,
                              tuple(e.uid for e in h.episodes)) for h in hits])
        print(f"base {args.base} vs working tree, {args.size:,} sentences, {args.queries} "
              f"queries{' (cached)' if args.cached_queries else ''}, threads {args.threads}, load average {start_load} -> {load_average()}")
        for (label, name), values in times.items():
            split = "  ".join(f"{s.removesuffix('_ms')} {np.median(v):.2f}"
                              for s, v in figures[(label, name)].items() if s != "round_trips")
            print(f"{label:<24} {name:<6} p50 {np.median(values):6.1f} ms  "
                  f"p95 {np.percentile(values, 95):6.1f} ms  round trips "
                  f"{np.mean(figures[(label, name)]['round_trips']):.1f}  p50: {split}")
        for label in searches:
            ratio = np.median(times[(label, "branch")]) / np.median(times[(label, "base")])
            cpu = (np.median(figures[(label, "branch")]["client_cpu_ms"])
                   / np.median(figures[(label, "base")]["client_cpu_ms"]))
            print(f"{label:<24} branch/base p50 {ratio:.2f}  client CPU p50 {cpu:.2f}  "
                  f"results: {differences(results[(label, 'base')], results[(label, 'branch')])}")
        for memory in memories.values():
            await memory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the git commit to compare against")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--schema", help="another store than the bench's (bench_v2_SIZE)")
    parser.add_argument("--project", help="its scope's project_id (default: SIZE)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--query-model", default="auto", choices=["auto", "same", "int8-dynamic"],
                        help="the working tree's MiniLM query model")
    parser.add_argument("--cached-queries", action="store_true",
                        help="embed and parse the queries before timing (the client's own share)")
    parser.add_argument("--data-dir", default=os.environ.get("MEMROUTE_DATA_DIR", "../shared/data"))
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
