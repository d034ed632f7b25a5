"""`make bench`: ingestion throughput and search latency of the memory on this machine.

Prints a table and one JSON line, and writes ``bench-out/memory.json``. Sentences come from
the shared benchmark data (``--data-dir``); their real embeddings are cached in
``bench-out/`` so later runs skip the embedding. Stores larger than the number of real
sentences are filled with synthetic neighbours of real vectors (noise added, renormalized);
the output says how many.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import platform
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import psutil

from memroute.memory.bounds import ReadBound
from memroute.memory import Episode, Memory, Scope, entity_sql
from memroute.memory.embedders.base import l2_normalize
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.memory.server import embedded_server_status
from memroute.settings import MemrouteSettings

OUT = Path("bench-out")


def shared_sentences(data_dir: Path) -> list[str]:
    """Unique "title: sentence" texts from the shared HotpotQA, 2Wiki and MuSiQue files."""
    from memroute.memory.splitter import split_sentences

    seen: dict[str, None] = {}
    hotpot = data_dir / "hotpotqa" / "hotpotqa_dev_distractor_800.jsonl"
    for line in hotpot.open():
        row = json.loads(line)
        for title, sents in zip(row["context"]["title"], row["context"]["sentences"]):
            for s in sents:
                if s.strip():
                    seen.setdefault(f"{title}: {s.strip()}")
    for row in json.loads((data_dir / "2wikimultihopqa" / "2wikimultihopqa_dev_334.json").read_text()):
        for title, sents in row["context"]:
            for s in sents:
                if s.strip():
                    seen.setdefault(f"{title}: {s.strip()}")
    for line in (data_dir / "musique" / "musique_ans_dev_200.jsonl").open():
        for p in json.loads(line)["paragraphs"]:
            for s in split_sentences(p["paragraph_text"]):
                seen.setdefault(f"{p['title']}: {s}")
    return list(seen)


def questions(data_dir: Path, n: int) -> list[str]:
    hotpot = data_dir / "hotpotqa" / "hotpotqa_dev_distractor_800.jsonl"
    return [json.loads(line)["question"] for line in hotpot.open()][:n]


async def cached_embeddings(embedder: MiniLMOnnxEmbedder, texts: list[str]) -> np.ndarray:
    key = hashlib.sha256(("\n".join(texts) + embedder.name).encode()).hexdigest()[:16]
    path = OUT / f"embeddings-{key}.npy"
    if path.exists():
        return np.load(path)
    vectors = await embedder.embed_documents(texts)
    OUT.mkdir(exist_ok=True)
    np.save(path, vectors)
    return vectors


class PrecomputedEmbedder:
    """Serves known vectors for stored texts (to time ingestion without embedding)."""

    def __init__(self, real: MiniLMOnnxEmbedder, texts: list[str], vectors: np.ndarray) -> None:
        self.name, self.dim, self._real = real.name, real.dim, real
        self._row = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors

    async def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._vectors[[self._row[t] for t in texts]]

    async def embed_query(self, text: str) -> np.ndarray:
        return await self._real.embed_query(text)


def episodes_for(texts: list[str], offset: int = 0) -> list[Episode]:
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    return [Episode(content=t, uid=f"b{offset + i}", session_id="bench", producer="system",
                    produced_at=t0 + timedelta(seconds=offset + i)) for i, t in enumerate(texts)]


async def drop_schema(memory: Memory) -> None:
    async with memory._pool.connection() as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {memory.schema} CASCADE")


def percentiles(values: list[float]) -> dict[str, float]:
    return {"p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95)),
            "mean": float(np.mean(values))}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine_info(threads: int) -> dict:
    """What a timing depends on: cores, Python, thread settings, load at the start."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "threads": {"embedder_intra_op": threads,
                        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")},
            "load_average_start": load_average()}


def write_report(report: dict, name: str, print_table) -> None:
    """``bench-out/<name>.json``, the table, then the report as the last line (one JSON)."""
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2))
    print_table(report)
    print(json.dumps(report))


INGEST_BATCH = 500  # episodes per `add` / per batch of `add_batches`


async def _fresh_ingest_memory(settings: MemrouteSettings, embedder: Any) -> Memory:
    memory = await Memory.open(settings=settings, schema="bench_ingest", embedder=embedder)
    await drop_schema(memory)
    await memory.close()
    return await Memory.open(settings=settings, schema="bench_ingest", embedder=embedder)


def server_cpu_seconds(settings: MemrouteSettings) -> float:
    """CPU seconds the embedded server under the settings' home has used so far (0 when none
    runs there; an external server is not measured): `process_tree_cpu_seconds`."""
    return process_tree_cpu_seconds(embedded_server_status(settings.home)["pid"])


def process_tree_cpu_seconds(pid: int | None) -> float:
    """CPU seconds process ``pid`` has used so far: itself, its live children and the
    children it has reaped (0 for None)."""
    if pid is None:
        return 0.0
    server = psutil.Process(pid)
    times = server.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in server.children():
        with contextlib.suppress(psutil.NoSuchProcess):
            child_times = child.cpu_times()
            total += child_times.user + child_times.system
    return total


class Timed:
    """Wall time and CPU time (this process's threads plus the embedded server's) of a
    block; `rate` and `cpu_ms` per sentence after it."""

    def __init__(self, settings: MemrouteSettings, sentences: int) -> None:
        self.settings, self.sentences = settings, sentences

    def __enter__(self) -> Timed:
        self._cpu = time.process_time() + server_cpu_seconds(self.settings)
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._wall
        cpu = time.process_time() + server_cpu_seconds(self.settings) - self._cpu
        self.figures = {"rate": self.sentences / wall, "cpu_ms": 1000 * cpu / self.sentences}


async def _ingest_rate(settings: MemrouteSettings, embedder: Any, texts: list[str],
                       pipelined: bool) -> dict[str, float]:
    """Sentences/s and CPU ms per sentence of storing ``texts`` in batches into an empty
    schema."""
    scope = Scope(org_id="bench", project_id="ingest")
    memory = await _fresh_ingest_memory(settings, embedder)
    batches = [episodes_for(texts[i:i + INGEST_BATCH], i)
               for i in range(0, len(texts), INGEST_BATCH)]
    try:
        with Timed(settings, len(texts)) as timed:
            if pipelined:
                async for _ in memory.add_batches(scope, batches):
                    pass
            else:
                for batch in batches:
                    await memory.add(scope, batch)
        return timed.figures
    finally:
        await memory.close()


async def _embedder_rate(settings: MemrouteSettings, embedder: MiniLMOnnxEmbedder,
                         texts: list[str]) -> dict[str, float]:
    """Sentences/s and CPU ms per sentence of the embedder alone on the batches ingestion
    embeds."""
    with Timed(settings, len(texts)) as timed:
        for i in range(0, len(texts), INGEST_BATCH):
            await embedder.embed_documents(texts[i:i + INGEST_BATCH])
    return timed.figures


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": float(np.median(values)), "min": float(min(values)),
            "max": float(max(values))}


async def measure_ingestion(settings: MemrouteSettings, embedder: MiniLMOnnxEmbedder,
                            texts: list[str], vectors: np.ndarray, rounds: int = 3) -> dict:
    """Sentences/s in ``rounds`` alternating rounds, each timing the embedder alone on the
    batches ingestion embeds, pipelined ingestion (`Memory.add_batches`) without and with
    entity extraction, and one `Memory.add` after another (the order reversed every other
    round, so a change in the machine's speed hits them alike). The ratios to the embedder
    are taken within each round; medians and spread over the rounds. Then once: ingestion
    without embedding.

    Each kind's CPU ms per sentence (this process and the embedded server) is reported too,
    and ``cpu_ratio_to_embedder``, the embedder's CPU over the kind's: the share of the
    embedder's rate the kind keeps when it is CPU-bound on all cores, which other processes
    on a busy machine change less than the wall-time ratio."""
    plain = settings.model_copy(update={"extract_entities": False})
    with_entities = settings.model_copy(update={"extract_entities": True})
    kinds = {"embedder": lambda: _embedder_rate(settings, embedder, texts),
             "pipelined": lambda: _ingest_rate(plain, embedder, texts, True),
             "one_add_at_a_time": lambda: _ingest_rate(plain, embedder, texts, False),
             "pipelined_with_entities": lambda: _ingest_rate(with_entities, embedder, texts,
                                                             True)}
    per_round: list[dict[str, float]] = []
    cpu_per_round: list[dict[str, float]] = []
    for n in range(rounds):
        order = list(kinds) if n % 2 == 0 else list(kinds)[::-1]
        measured = {kind: await kinds[kind]() for kind in order}
        per_round.append({kind: measured[kind]["rate"] for kind in kinds})
        cpu_per_round.append({kind: measured[kind]["cpu_ms"] for kind in kinds})
    others = [kind for kind in kinds if kind != "embedder"]
    ratios = {kind: [r[kind] / r["embedder"] for r in per_round] for kind in others}
    cpu_ratios = {kind: [r["embedder"] / r[kind] for r in cpu_per_round] for kind in others}
    figures: dict[str, Any] = {
        "sentences": len(texts), "batch": INGEST_BATCH, "rounds": per_round,
        "cpu_per_round": cpu_per_round,
        "sentences_per_s": {kind: _spread([r[kind] for r in per_round]) for kind in kinds},
        "ratio_to_embedder": {kind: _spread(v) for kind, v in ratios.items()},
        "cpu_ms_per_sentence": {kind: _spread([r[kind] for r in cpu_per_round])
                                for kind in kinds},
        "cpu_ratio_to_embedder": {kind: _spread(v) for kind, v in cpu_ratios.items()},
        "load_average": load_average(),
    }
    figures["without_embedding_sentences_per_s"] = (await _ingest_rate(
        plain, PrecomputedEmbedder(embedder, texts, vectors), texts, True))["rate"]
    return figures


def measure_batch_sizes(texts: list[str], sizes: list[int], threads: int,
                        chunk: int = 250) -> dict[str, float]:
    """The embedder's sentences/s at each batch size, the sizes taking turns chunk by chunk
    (order reversed every other chunk) so a change in the machine's speed hits them alike."""
    embedders = {size: MiniLMOnnxEmbedder(threads=threads, batch_size=size) for size in sizes}
    seconds = dict.fromkeys(sizes, 0.0)
    for n, i in enumerate(range(0, len(texts), chunk)):
        for size in (sizes if n % 2 == 0 else sizes[::-1]):
            start = time.perf_counter()
            embedders[size].encode(texts[i:i + chunk])
            seconds[size] += time.perf_counter() - start
    return {str(size): len(texts) / seconds[size] for size in sizes}


def synthetic_corpus(texts: list[str], vectors: np.ndarray,
                     n: int) -> tuple[list[str], np.ndarray]:
    """``n`` synthetic sentences near the real ones: each vector mixes two real vectors
    (weights 0.5-0.8 / rest) plus a little noise, renormalized, so they crowd the same regions
    of the space as real data and compete with it in every search."""
    rng = np.random.default_rng(0)
    first = rng.integers(len(texts), size=n)
    second = rng.integers(len(texts), size=n)
    weight = rng.uniform(0.5, 0.8, size=(n, 1)).astype(np.float32)
    mixed = weight * vectors[first] + (1 - weight) * vectors[second]
    mixed += rng.normal(0, 0.02, size=mixed.shape).astype(np.float32)
    names = [f"synthetic {j} of {texts[i]}" for j, i in enumerate(first)]
    return names, l2_normalize(mixed)


@contextlib.asynccontextmanager
async def indexes_rebuilt_after(memory: Memory, table: str | None = None):
    """A bulk load with the secondary indexes (of ``table``, else of every table) dropped;
    after it, the indexes built from their own definitions, the tables analyzed (so that
    autovacuum does not analyze them during the timing: a 10k store without statistics was
    searched by a sequential scan, 10x slower) and the large scopes moved to leaves of their
    own."""
    schema = memory.schema
    async with memory._pool.connection() as conn:
        # the tables' own indexes (a partitioned table's cover its partitions)
        cur = await conn.execute(
            "SELECT i.indexname, replace(i.indexdef, ' ON ONLY ', ' ON ') FROM pg_indexes i "
            "JOIN pg_class c ON c.relname = i.tablename AND c.relnamespace = %s::regnamespace "
            "WHERE i.schemaname = %s AND NOT c.relispartition "
            "AND i.indexname NOT LIKE '%%_pkey' AND (%s::text IS NULL OR i.tablename = %s)",
            [schema, schema, table, table])
        indexes = await cur.fetchall()
        for name, _ in indexes:
            await conn.execute(f"DROP INDEX {schema}.{name}")
        await conn.commit()
    yield
    async with memory._pool.connection() as conn:
        await conn.set_autocommit(True)
        try:
            await conn.execute("SET maintenance_work_mem = '4GB'")
            for _, definition in indexes:
                start = time.perf_counter()
                await conn.execute(definition)
                print(f"  {definition[:70]}... {time.perf_counter() - start:.0f} s",
                      file=sys.stderr, flush=True)
            await conn.execute(f"VACUUM (ANALYZE) {schema}.episodes, {schema}.sentences")
        finally:
            await conn.set_autocommit(False)
    await memory.index_scopes()


async def bulk_load(memory: Memory, scope: Scope, texts: list[str], batch: int = 5000) -> None:
    """Load through `Memory.add` with the sentence table's secondary indexes dropped, then
    rebuild them (how any large Postgres load is done)."""
    async with indexes_rebuilt_after(memory, "sentences"):
        for i in range(0, len(texts), batch):
            await memory.add(scope, episodes_for(texts[i:i + batch], i))
            print(f"  loaded {i + batch:,} of {len(texts):,}", file=sys.stderr, flush=True)


async def build_store(settings: MemrouteSettings, embedder: MiniLMOnnxEmbedder, size: int,
                      texts: list[str], vectors: np.ndarray) -> tuple[Memory, Scope, int]:
    """A store of ``size`` sentences: real ones first, then synthetic ones."""
    synthetic = max(0, size - len(texts))
    all_texts, all_vectors = list(texts[:size]), vectors[:size]
    if synthetic:
        names, mixed = synthetic_corpus(texts, vectors, synthetic)
        all_texts, all_vectors = all_texts + names, np.vstack([all_vectors, mixed])
    schema = f"bench_v2_{size}"
    loader = PrecomputedEmbedder(embedder, all_texts, all_vectors)
    memory = await Memory.open(settings=settings, schema=schema, embedder=loader)
    scope = Scope(org_id="bench", project_id=str(size))
    if (await memory.count(scope))["sentences"] != size:
        await drop_schema(memory)
        await memory.close()
        memory = await Memory.open(settings=settings, schema=schema, embedder=loader)
        start = time.perf_counter()
        await bulk_load(memory, scope, all_texts)
        print(f"built the {size:,}-sentence store in {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)
    memory.embedder = embedder  # queries are embedded for real
    return memory, scope, synthetic


class RoundTrips:
    """Counts the client's round trips to the server: the calls of psycopg's ``wait_async``
    whose generator waited for the server's answer (a pipeline's queued statements and their
    one sync count once), and the milliseconds the client spent waiting for the server's
    bytes (``waited_ms``: the server's work, the socket and the scheduler; the rest of a
    read is the client's share). Installed around the search timing only; costs a generator
    per call."""

    def __init__(self) -> None:
        self.count = 0
        self.waited_ms = 0.0
        self._original = None

    def __enter__(self) -> RoundTrips:
        import psycopg.waiting as waiting

        self._original = original = waiting.wait_async

        async def counting(gen, fileno, *args, **kwargs):
            def watched():
                waited = False
                try:
                    state = next(gen)
                    while True:
                        if state == waiting.WAIT_R and not waited:
                            waited = True
                            self.count += 1
                        start = time.perf_counter()
                        ready = yield state
                        if state & waiting.WAIT_R:  # a pipeline waits to read and write at once
                            self.waited_ms += (time.perf_counter() - start) * 1000
                        state = gen.send(ready)
                except StopIteration as stop:
                    return stop.value

            return await original(watched(), fileno, *args, **kwargs)

        waiting.wait_async = counting
        return self

    def __exit__(self, *exc: object) -> None:
        import psycopg.waiting as waiting

        waiting.wait_async = self._original


class SearchConfig(NamedTuple):
    rerank: bool
    context: tuple[int, int]
    entities: bool  # the entity lane: the query's entities parsed (spaCy), matched in a lane
    lexical: bool  # the full-text lane
    # the query's entity keys already known (a planner parsed the question): else every timed
    # search parses its query, as a search from a face without a planner does
    keys_kept: bool = False


SEARCHES = {
    "no_rerank": SearchConfig(False, (0, 0), False, False),
    "rerank": SearchConfig(True, (0, 0), False, False),
    "no_rerank_context_1_2": SearchConfig(False, (1, 2), False, False),
    "rerank_context_1_2": SearchConfig(True, (1, 2), False, False),
    "rerank_entity_lane": SearchConfig(True, (0, 0), True, False),
    "rerank_lexical": SearchConfig(True, (0, 0), False, True),
    "rerank_entity_lexical": SearchConfig(True, (0, 0), True, True),
    "rerank_entity_lexical_keys_kept": SearchConfig(True, (0, 0), True, True, keys_kept=True),
}


def plan_stages(plan: dict) -> dict[str, float]:
    """Exclusive time (ms) per part of an ``EXPLAIN (ANALYZE, FORMAT JSON)`` plan of the
    search statement: the nodes under each materialized CTE (``hits`` = the HNSW probe,
    ``nuclei``, ``members`` = the neighbours) and the rest (``main``: the vectors and the
    final join). A CTE's evaluation is counted once, under its own subplan: the CTE scans that
    pull from it count nothing, and a parent does not subtract a CTE subplan."""
    stages: dict[str, float] = {}

    def total(node: dict) -> float:
        return node["Actual Total Time"] * node["Actual Loops"]

    def walk(node: dict, stage: str) -> None:
        name = node.get("Subplan Name", "")
        stage = name[4:] if name.startswith("CTE ") else stage
        children = node.get("Plans", [])
        own = 0.0 if node["Node Type"] == "CTE Scan" else total(node) - sum(
            total(c) for c in children if not c.get("Subplan Name", "").startswith("CTE "))
        stages[stage] = stages.get(stage, 0.0) + max(own, 0.0)
        for child in children:
            walk(child, stage)

    walk(plan["Plan"], "main")
    return stages


async def statement_stages(memory: Memory, scope: Scope, queries: list[str],
                           context: tuple[int, int], k: int = 10,
                           lanes: bool = False) -> dict[str, float]:
    """Server-side split of the one search statement (`sql.search_statement`), p50 over
    ``queries``, from EXPLAIN ANALYZE (whose own timing overhead inflates it; see
    `plan_stages`). ``lanes``: with the full-text and entity lanes as the default search
    sends them (their time is under ``nuclei``, where they are read)."""
    from memroute.memory import sql

    limit = max(memory.settings.candidates, 3 * k)
    stages: dict[str, list[float]] = {}
    for q in queries:
        embedding = (await memory.embed_queries([q]))[0]
        extra = memory._search_lanes(scope.key, q, embedding,
                                    await entity_sql.query_keys(q, lanes), ReadBound(), (),
                                    k=k,
                                    limit=limit, lexical=lanes)
        statement, params = sql.search_statement(memory.schema, scope.key, embedding, ReadBound(),
                                                 limit=limit, before=context[0],
                                                 after=context[1], lanes=extra)
        async with memory._pool.connection() as conn:
            await conn.execute(*sql.hnsw_settings(limit))
            cur = await conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
            plan = (await cur.fetchone())[0][0]
            await conn.rollback()
        parts = plan_stages(plan)
        split = {"probe": parts.get("hits", 0.0), "nuclei": parts.get("nuclei", 0.0),
                 "neighbours": parts.get("members", 0.0),
                 "vectors_and_join": parts.get("main", 0.0),
                 "server_total": plan["Execution Time"], "planning": plan["Planning Time"]}
        for stage, ms in split.items():
            stages.setdefault(stage, []).append(ms)
    return {f"{stage}_ms": float(np.median(v)) for stage, v in stages.items()}


async def measure_search(memory: Memory, scope: Scope, queries: list[str],
                         warm_up: list[str]) -> dict:
    """Latency, stage timings and round trips of each search configuration (`SEARCHES`),
    after `Memory.warm` (the store's relations read into memory, as `memroute db warm` does
    after a restart) and a warm-up on other questions. The configurations take turns query by
    query (order rotated), so a change in the machine's load hits them alike."""
    await memory.warm()
    for q in warm_up:
        await memory.search_scored(scope, q, k=10, context=(1, 2))
    times: dict[str, list[float]] = {label: [] for label in SEARCHES}
    stages: dict[str, dict[str, list[float]]] = {label: {} for label in SEARCHES}
    trips: dict[str, list[int]] = {label: [] for label in SEARCHES}
    client: dict[str, list[float]] = {label: [] for label in SEARCHES}
    labels = list(SEARCHES)
    with RoundTrips() as counter:
        for n, q in enumerate(queries):
            for label in labels[n % len(labels):] + labels[:n % len(labels)]:
                config = SEARCHES[label]
                if config.keys_kept:
                    await entity_sql.query_keys(q, True)
                else:
                    entity_sql.forget_query_keys()
                before, waited = counter.count, counter.waited_ms
                start = time.perf_counter()
                hits = await memory.search_scored(scope, q, k=10, rerank=config.rerank,
                                                  context=config.context,
                                                  entities=config.entities,
                                                  lexical=config.lexical)
                total = (time.perf_counter() - start) * 1000
                times[label].append(total)
                trips[label].append(counter.count - before)
                client[label].append(hits.timings["read_ms"] - (counter.waited_ms - waited))
                for stage, ms in {**hits.timings,
                                  "other_ms": total - sum(hits.timings.values())}.items():
                    stages[label].setdefault(stage, []).append(ms)
    figures = {label: {"latency_ms": percentiles(times[label]),
                       "stages_ms_p50": {s: float(np.median(v)) for s, v in stages[label].items()},
                       "round_trips": float(np.mean(trips[label])),
                       "client_share_ms": percentiles(client[label])}
               for label in SEARCHES}
    sample = queries[:60]
    figures["statement_ms_p50"] = {
        "context_0_0": await statement_stages(memory, scope, sample, (0, 0)),
        "context_1_2": await statement_stages(memory, scope, sample, (1, 2)),
        "default": await statement_stages(memory, scope, sample, (0, 0), lanes=True)}
    return figures


async def run(args: argparse.Namespace) -> dict:
    base = MemrouteSettings()
    # query_cache_size=0: every timed search embeds its query
    settings = base.model_copy(update={"embed_threads": args.threads, "db_schema": "bench",
                                       "query_cache_size": 0})
    embedder = MiniLMOnnxEmbedder(threads=args.threads, query_model=args.query_model)
    texts = shared_sentences(Path(args.data_dir))
    random.Random(0).shuffle(texts)
    texts = texts[: args.max_real]
    vectors = await cached_embeddings(embedder, texts)
    # Keep the texts the splitter leaves whole, so each episode is one known sentence.
    from memroute.memory.splitter import split_sentences

    whole = [i for i, t in enumerate(texts) if split_sentences(t) == [t]]
    texts, vectors = [texts[i] for i in whole], vectors[whole]
    report: dict = {"machine": machine_info(args.threads), "query_embedder": embedder.query_name,
                    "search": {}}
    if not args.skip_ingestion:
        report["ingestion"] = await measure_ingestion(
            settings, embedder, texts[: args.ingest_n], vectors[: args.ingest_n],
            args.ingest_rounds)
    if args.batch_sizes:
        report["embedder_sentences_per_s_by_batch_size"] = measure_batch_sizes(
            texts[: args.ingest_n], args.batch_sizes, args.threads)
    qs = questions(Path(args.data_dir), 2 * args.queries)
    qs, warm_up = qs[: args.queries], qs[args.queries:]
    for size in args.sizes:
        memory, scope, synthetic = await build_store(settings, embedder, size, texts, vectors)
        report["search"][str(size)] = {"synthetic_sentences": synthetic,
                                       **await measure_search(memory, scope, qs, warm_up)}
        await memory.close()
    return report


def print_report(report: dict) -> None:
    print(f"threads: {report['machine']['threads']}")
    if "ingestion" in report:
        print_ingestion(report["ingestion"])
    for size, rate in report.get("embedder_sentences_per_s_by_batch_size", {}).items():
        print(f"embedder, batch size {size:>3}:  {rate:8.1f} sentences/s")
    print_search(report)


def print_ingestion(ing: dict) -> None:
    print(f"ingestion of {ing['sentences']:,} sentences in batches of {ing['batch']}, "
          f"{len(ing['rounds'])} alternating rounds (load {ing['load_average']}):")
    labels = {"embedder": "embedder alone", "pipelined": "ingestion, pipelined",
              "one_add_at_a_time": "ingestion, one add at a time",
              "pipelined_with_entities": "ingestion + entities, pipelined"}
    for kind, label in labels.items():
        rate = ing["sentences_per_s"][kind]
        line = (f"  {label:<30} median {rate['median']:7.1f} sentences/s "
                f"(rounds {rate['min']:.1f}-{rate['max']:.1f})")
        if kind in ing["ratio_to_embedder"]:
            ratio = ing["ratio_to_embedder"][kind]
            line += (f"  {ratio['median']:.0%} of the embedder "
                     f"(rounds {ratio['min']:.0%}-{ratio['max']:.0%})")
        cpu = ing["cpu_ms_per_sentence"][kind]["median"]
        line += f"  | CPU {cpu:.2f} ms/sentence ({cpu * rate['median'] / 1000:.1f} cores busy)"
        if kind in ing["cpu_ratio_to_embedder"]:
            cpu_ratio = ing["cpu_ratio_to_embedder"][kind]
            line += (f", CPU-bound share {cpu_ratio['median']:.0%} "
                     f"({cpu_ratio['min']:.0%}-{cpu_ratio['max']:.0%})")
        print(line)
    print(f"  without embedding:             {ing['without_embedding_sentences_per_s']:7.1f} "
          "sentences/s (once)")


def print_search(report: dict) -> None:
    for size, fig in report["search"].items():
        for label in SEARCHES:
            lat, stages = fig[label]["latency_ms"], fig[label]["stages_ms_p50"]
            print(f"search {int(size):>7,} sentences {label:<24} p50 {lat['p50']:6.1f} ms  "
                  f"p95 {lat['p95']:6.1f} ms  (synthetic {fig['synthetic_sentences']})")
            print(" " * 8 + "stages p50: " + "  ".join(
                f"{s.removesuffix('_ms')} {ms:.1f}" for s, ms in stages.items())
                  + f"  | round trips per search {fig[label]['round_trips']:.1f}"
                  + "  | client's share of the read p50 "
                  + f"{fig[label]['client_share_ms']['p50']:.2f}")
        for context, split in fig["statement_ms_p50"].items():
            print(f"        the search statement, {context}, server side (EXPLAIN ANALYZE) p50: "
                  + "  ".join(f"{s.removesuffix('_ms')} {ms:.2f}" for s, ms in split.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("MEMROUTE_DATA_DIR", "../shared/data"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--max-real", type=int, default=100_000)
    parser.add_argument("--ingest-n", type=int, default=3000)
    parser.add_argument("--ingest-rounds", type=int, default=3,
                        help="alternating rounds of the embedder alone and the ingestion kinds")
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[],
                        help="also time the embedder at these batch sizes (e.g. 8 16 32 64)")
    parser.add_argument("--skip-ingestion", action="store_true",
                        help="time search only (the stores of --sizes are reused when present)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--query-model", default="auto", choices=["auto", "same", "int8-dynamic"],
                        help="the model queries are embedded with (MEMROUTE_QUERY_MODEL)")
    args = parser.parse_args()
    write_report(asyncio.run(run(args)), "memory", print_report)


if __name__ == "__main__":
    main()
