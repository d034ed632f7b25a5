"""`make stress` (benchmarks.big_inputs): the big inputs of issue #16, each in a fresh process.

- ``lexical``: the lexical lane's wall time for the longest query (8,192 characters of random
  words that all occur in the store) and for a short one, on a store of random-word sentences
  (default 100k), written straight into the tables;
- ``one_mb_episode``: one `Memory.add` of a 1 MB episode;
- ``tiny_episodes``: 40,000 tiny episodes through `Memory.add_batches` (bounded transactions
  of ``MAX_EPISODES_PER_CALL``);
- ``long_texts``: the embedder alone on 64 texts of 2,000 characters (each over its 256
  tokens), the worst case of its batches' memory.

Each ingestion case reports its wall time and the process's resident memory (RSS) after
loading the models, at its peak and at the end. Prints a table and one JSON line, and writes
``bench-out/big_inputs.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from benchmarks.memory import load_average, machine_info, write_report
from benchmarks.synthetic import fill_word_store, random_words, vocabulary
from memroute.memory.bounds import ReadBound
from memroute.memory import Episode, Memory, Scope, sql
from memroute.memory.limits import MAX_EPISODES_PER_CALL, MAX_QUERY_CHARS
from memroute.settings import MemrouteSettings

CASES = ("lexical", "one_mb_episode", "tiny_episodes", "long_texts")


def rss_mb() -> float:
    """The current resident set size, in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def open_memory(schema: str) -> Memory:
    settings = MemrouteSettings().model_copy(update={"embed_threads": 1, "db_schema": schema})
    return await Memory.open(settings=settings)


async def lexical_case(sentences: int, queries: int) -> dict:
    memory = await open_memory(f"bench_big_{uuid.uuid4().hex[:6]}")
    scope = Scope(org_id="bench", project_id="lexical")
    try:
        start = time.perf_counter()
        await fill_word_store(memory, scope, sentences)
        fill_s = time.perf_counter() - start
        words = vocabulary(2000)
        timings: dict[str, list[float]] = {"long_query_ms": [], "short_query_ms": []}
        for i in range(queries):  # alternating, so both see the same load
            for label, query in (("long_query_ms", random_words(words, MAX_QUERY_CHARS, i)),
                                 ("short_query_ms", random_words(words, 40, i))):
                async with memory._pool.connection() as conn:
                    start = time.perf_counter()
                    hits = await sql.lexical_lane(conn, memory.schema, scope.key, query, ReadBound(), 60)
                    timings[label].append((time.perf_counter() - start) * 1000)
                    assert hits, f"the lexical lane found nothing for the {label[:-3]}"
        return {"sentences": sentences, "fill_s": round(fill_s, 1), **{
            label: {"p50": round(statistics.median(v), 1), "max": round(max(v), 1), "n": len(v)}
            for label, v in timings.items()}}
    finally:
        async with memory._pool.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {memory.schema} CASCADE")
        await memory.close()


async def ingestion_case(case: str) -> dict:
    memory = await open_memory(f"bench_big_{uuid.uuid4().hex[:6]}")
    scope = Scope(org_id="bench", project_id=case)
    words = vocabulary(2000)
    try:
        await memory.add(scope, [Episode(uid="warm", content="Warm the embedder up.")])
        loaded = rss_mb()
        start = time.perf_counter()
        if case == "one_mb_episode":
            # sentences of 15 words, as prose has; 1,000,000 characters in all
            text = ". ".join(random_words(words, 100, i).capitalize()
                             for i in range(12_000))[:1_000_000]
            await memory.add(scope, [Episode(uid="big", content=text)])
            figures = {"characters": len(text)}
        else:
            episodes = [Episode(uid=f"t{i}", content=f"tiny {words[i % len(words)]} {i}")
                        for i in range(40_000)]
            batches = [episodes[i:i + MAX_EPISODES_PER_CALL]
                       for i in range(0, len(episodes), MAX_EPISODES_PER_CALL)]
            async for _ in memory.add_batches(scope, batches):
                pass
            figures = {"episodes": len(episodes), "transactions": len(batches)}
        wall = time.perf_counter() - start
        counts = await memory.count(scope)
        return {**figures, "wall_s": round(wall, 1), "stored": counts,
                "rss_mb_models_loaded": round(loaded), "rss_mb_peak": round(peak_rss_mb()),
                "rss_mb_end": round(rss_mb())}
    finally:
        async with memory._pool.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {memory.schema} CASCADE")
        await memory.close()


def long_texts_case() -> dict:
    from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder

    embedder = MiniLMOnnxEmbedder(threads=1)
    loaded = rss_mb()
    words = vocabulary(2000)
    texts = [random_words(words, 2000, i) for i in range(64)]
    start = time.perf_counter()
    embedder.encode(texts)
    return {"texts": len(texts), "wall_s": round(time.perf_counter() - start, 1),
            "stored": None, "rss_mb_models_loaded": round(loaded),
            "rss_mb_peak": round(peak_rss_mb()), "rss_mb_end": round(rss_mb())}


def run_case(args: argparse.Namespace) -> dict:
    if args.case == "long_texts":
        return long_texts_case()
    if args.case == "lexical":
        return asyncio.run(lexical_case(args.sentences, args.queries))
    return asyncio.run(ingestion_case(args.case))


def print_report(report: dict) -> None:
    lex = report.get("lexical")
    if lex:
        print(f"lexical lane, {lex['sentences']:,} sentences: 8,192-character query "
              f"p50 {lex['long_query_ms']['p50']} ms (max {lex['long_query_ms']['max']}), "
              f"short query p50 {lex['short_query_ms']['p50']} ms")
    for case in CASES[1:]:
        fig = report.get(case)
        if fig:
            print(f"{case:<15} {fig['wall_s']:7.1f} s  RSS: models {fig['rss_mb_models_loaded']} MB,"
                  f" peak {fig['rss_mb_peak']} MB, end {fig['rss_mb_end']} MB"
                  + (f"  stored {fig['stored']}" if fig["stored"] else ""))
    print(f"load average: start {report['machine']['load_average_start']}, "
          f"end {report['load_average_end']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=CASES, help="run one case in this process")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=10)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args)))
        return
    report: dict = {"machine": machine_info(1)}
    for case in args.cases:  # a fresh process each, so one case's peak RSS is its own
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.big_inputs", "--case", case,
             "--sentences", str(args.sentences), "--queries", str(args.queries)],
            check=True, capture_output=True, text=True).stdout
        report[case] = json.loads(out.strip().splitlines()[-1])
    report["load_average_end"] = load_average()
    write_report(report, "big_inputs", print_report)


if __name__ == "__main__":
    main()
