"""`make bench`: many tenants in one store.

One store of ~1.2M sentences over ~5,000 scopes (most of 50-500 sentences, a few of 10k-100k,
written interleaved in sessions of 10, as tenants write over time), and beside it, for each
measured scope (200, 5,000 and 50,000 sentences), the same rows in a store of their own. Per
scope size: search p50/p95 alone and among the tenants (the two taking turns query by
query), and the vector lane's recall@10 against an exact scan of the scope. Then ingestion
from 16 tenants at once against the embedder alone on the same texts (``--ingest-only``: that
alone, into a store of its own). Then many large scopes (``--large``): stores holding the
measured scopes of 200 and 5,000 sentences beside 1,000 and 10,000 scopes in leaves of their
own (made-up keys, their indexes empty: what a statement's planning and a write pay for them
does not depend on their rows), against each scope alone: planning time of the search
statement and of the vector probe, search p50/p95, and a 400-sentence add against an empty
store. Prints a table and one JSON line, and writes ``bench-out/tenants.json``.

Rows are synthetic neighbours of the real sentences' vectors (`benchmarks.memory`); each
scope's rows are a function of its name, so the store is rebuilt only when the layout
changes (kept under ``MEMROUTE_HOME``, schema ``tenants_v1``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from benchmarks.memory import (
    OUT,
    PrecomputedEmbedder,
    cached_embeddings,
    indexes_rebuilt_after,
    load_average,
    machine_info,
    percentiles,
    questions,
    shared_sentences,
    write_report,
)
from memroute.memory import Memory, Scope, entity_sql, sql
from memroute.memory.bounds import ReadBound
from memroute.memory.splitter import split_sentences
from memroute.memory.tiers import ScopeTiers, own_table
from memroute.memory.embedders.base import l2_normalize
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.memory.writes import SENTENCE_COPY_TYPES
from memroute.nlp import extract_entities
from memroute.settings import MemrouteSettings

MEASURED = (200, 5_000, 50_000)
LARGE = (100_000, 30_000, 20_000, 10_000)
SESSION = 10  # sentences written together (one episode each)
SCHEMA = "tenants_v1"
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def scope_sizes(small: int, seed: int = 0) -> dict[str, int]:
    """Scope name -> sentences: the measured scopes, a few large ones, and ``small`` scopes
    of 50-500 sentences (log-uniform)."""
    rng = np.random.default_rng(seed)
    sizes = {f"measured-{n}": n for n in MEASURED}
    sizes |= {f"large-{i}": n for i, n in enumerate(LARGE)}
    drawn = np.exp(rng.uniform(np.log(50), np.log(501), small)).astype(int)
    return sizes | {f"small-{i}": int(n) for i, n in enumerate(drawn)}


def tenant(name: str) -> Scope:
    return Scope(org_id="tenants", project_id="bench", user_id=name)


class Corpus:
    """The real sentences, their vectors and entity keys; a scope's rows are drawn from
    them, session by session, by a generator seeded with the scope's name and session."""

    def __init__(self, texts: list[str], vectors: np.ndarray, keys: list[list[str]]) -> None:
        self.texts, self.vectors, self.keys = texts, vectors, keys

    def session(self, name: str, number: int, size: int) -> tuple[list[str], np.ndarray,
                                                                  list[list[str]]]:
        """Session ``number`` of scope ``name`` (of ``size`` sentences): texts, unit vectors
        (each mixes two real vectors plus noise) and the first source's entity keys."""
        n = min(SESSION, size - number * SESSION)
        seed = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
        rng = np.random.default_rng([seed, number])
        first, second = rng.integers(len(self.texts), size=(2, n))
        weight = rng.uniform(0.5, 0.8, size=(n, 1)).astype(np.float32)
        mixed = weight * self.vectors[first] + (1 - weight) * self.vectors[second]
        mixed += rng.normal(0, 0.02, size=mixed.shape).astype(np.float32)
        texts = [f"{name} {number * SESSION + j}: {self.texts[i]}" for j, i in enumerate(first)]
        return texts, l2_normalize(mixed), [self.keys[i] for i in first]

    def scope_vectors(self, name: str, size: int) -> np.ndarray:
        return np.vstack([self.session(name, s, size)[1]
                          for s in range((size + SESSION - 1) // SESSION)])


async def cached_entity_keys(texts: list[str]) -> list[list[str]]:
    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = OUT / f"entity-keys-{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    found = await asyncio.to_thread(extract_entities, texts)
    keys = [sorted({e.key for e in entities}) for entities in found]
    OUT.mkdir(exist_ok=True)
    path.write_text(json.dumps(keys))
    return keys


async def write_sessions(memory: Memory, corpus: Corpus, sessions: list[tuple[str, int]],
                         sizes: dict[str, int]) -> None:
    """COPY the given (scope, session) rows, in that order, in one transaction."""
    s = memory.schema
    async with memory._pool.connection() as conn, conn.transaction():
        rows = []
        for name, number in sessions:
            texts, vectors, keys = corpus.session(name, number, sizes[name])
            rows.append((tenant(name), name, number, texts, vectors, keys))
        async with conn.cursor().copy(
                f"COPY {s}.episodes (scope_key, org_id, project_id, user_id, agent_id, uid, "
                "session_id, producer, produced_at, content) FROM STDIN") as copy:
            for scope, name, number, texts, _, _ in rows:
                for j, text in enumerate(texts):
                    i = number * SESSION + j
                    await copy.write_row([scope.key, scope.org_id, scope.project_id,
                                          scope.user_id, None, f"e{i}", f"s{number}", "user",
                                          T0 + timedelta(minutes=i), text])
        async with conn.cursor().copy(
                f"COPY {s}.sentences (scope_key, episode_uid, idx, text, embedding, session_id, "
                "producer, produced_at, metadata, entity_keys, entities) FROM STDIN "
                "(FORMAT BINARY)") as copy:
            copy.set_types(SENTENCE_COPY_TYPES)
            for scope, name, number, texts, vectors, keys in rows:
                for j, (text, vector, found) in enumerate(zip(texts, vectors, keys)):
                    i = number * SESSION + j
                    await copy.write_row([scope.key, f"e{i}", 0, text, vector, f"s{number}",
                                          "user", T0 + timedelta(minutes=i), "{}", found, None])


async def build(settings: MemrouteSettings, embedder: MiniLMOnnxEmbedder, schema: str,
                corpus: Corpus, sizes: dict[str, int], interleave: bool) -> Memory:
    """The store of ``sizes`` in ``schema``, built unless a store of that layout is there:
    rows written with the secondary indexes dropped (sessions in random order across scopes
    when ``interleave``), then the indexes built from their own definitions, the tables
    analyzed and the large scopes' own indexes built."""
    signature = hashlib.sha256(json.dumps([sizes, interleave, len(corpus.texts)])
                               .encode()).hexdigest()[:16]
    opening = time.perf_counter()
    memory = await Memory.open(settings=settings, schema=schema, embedder=embedder)
    opened = time.perf_counter() - opening
    async with memory._pool.connection() as conn:
        cur = await conn.execute(f"SELECT value FROM {schema}.store_info WHERE key = 'layout'")
        if (row := await cur.fetchone()) and row[0] == signature:
            cur = await conn.execute(
                f"SELECT array_agg(version ORDER BY version) FROM {schema}.schema_version "
                "WHERE applied_at > now() - %s * interval '1 second'", [opened + 1])
            if migrated := (await cur.fetchone())[0]:
                MIGRATIONS[schema] = await migration_report(memory, sizes, migrated, opened)
                print(f"opening {schema} migrated it: {MIGRATIONS[schema]}", file=sys.stderr,
                      flush=True)
            return memory
        await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        await conn.commit()
    await memory.close()
    memory = await Memory.open(settings=settings, schema=schema, embedder=embedder)
    start = time.perf_counter()
    sessions = [(name, n) for name, size in sizes.items()
                for n in range((size + SESSION - 1) // SESSION)]
    if interleave:
        random.Random(0).shuffle(sessions)
    total = sum(sizes.values())
    async with indexes_rebuilt_after(memory):
        for i in range(0, len(sessions), 2000):
            await write_sessions(memory, corpus, sessions[i:i + 2000], sizes)
            print(f"  {schema}: {min(i + 2000, len(sessions)) * SESSION:,} of ~{total:,} rows",
                  file=sys.stderr, flush=True)
    async with memory._pool.connection() as conn:
        await conn.execute(f"INSERT INTO {schema}.store_info VALUES ('layout', %s)",
                           [signature])
        await conn.commit()
    print(f"built {schema} ({total:,} sentences) in {time.perf_counter() - start:.0f} s",
          file=sys.stderr, flush=True)
    return memory


MIGRATIONS: dict[str, dict] = {}  # schema -> what opening it migrated (`migration_report`)


async def migration_report(memory: Memory, sizes: dict[str, int], versions: list[int],
                           seconds: float) -> dict:
    """A store migrated by this run's opening: the versions, the time, and whether every
    scope kept its sentences and every large one has its leaf."""
    s = memory.schema
    async with memory._pool.connection() as conn:
        cur = await conn.execute(f"SELECT scope_key, count(*) FROM {s}.sentences GROUP BY 1")
        counts = dict(await cur.fetchall())
        cur = await conn.execute(
            "SELECT count(*) FROM pg_class c WHERE c.relnamespace = %s::regnamespace "
            "AND c.relispartition AND c.relname ~ '^sentences_[0-9a-f]{32}$'", [s])
        leaves = (await cur.fetchone())[0]
    bound = memory.settings.scope_index_min_sentences
    return {"versions": versions, "seconds": round(seconds, 1),
            "every_scope_kept": counts == {tenant(n).key: size for n, size in sizes.items()},
            "large_scopes": sum(size >= bound for size in sizes.values()),
            "own_leaves": leaves}


SEARCHES = {  # label -> search_scored options
    "vector": {"context": (0, 0), "lexical": False, "entities": False},
    "default": {},
}


async def measure_scope(stores: dict[str, Memory], scope: Scope, exact: np.ndarray,
                        queries: list[str]) -> dict:
    """Latency of each search in `SEARCHES` in each store, taking turns query by query
    (order rotated), and recall@10 of the vector lane (no rerank, context off) against the
    exact nearest of ``exact`` (the scope's vectors, row i = episode ``e{i}``)."""
    runs = [(label, store) for label in SEARCHES for store in stores]
    times: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    stages: dict[tuple[str, str], dict[str, list[float]]] = {run: {} for run in runs}
    recall: dict[str, list[float]] = {store: [] for store in stores}
    some = next(iter(stores.values()))
    for n, q in enumerate(queries):
        for label, store in runs[n % len(runs):] + runs[:n % len(runs)]:
            start = time.perf_counter()
            hits = await stores[store].search_scored(scope, q, k=10, **SEARCHES[label])
            times[(label, store)].append((time.perf_counter() - start) * 1000)
            for stage, ms in hits.timings.items():
                stages[(label, store)].setdefault(stage, []).append(ms)
        vector = await some.embedder.embed_query(q)
        truth = {f"e{i}" for i in np.argsort(-(exact @ vector))[:10]}
        for store, memory in stores.items():
            hits = await memory.search_scored(scope, q, k=10, rerank=False, **SEARCHES["vector"])
            recall[store].append(len(truth & {h.uid for h in hits}) / 10)
    return {label: {store: {"latency_ms": percentiles(times[(label, store)]),
                            "stages_ms_p50": {s: float(np.median(v))
                                              for s, v in stages[(label, store)].items()},
                            "widened": sum(1 for v in stages[(label, store)].get("widen_ms", []))
                            / len(queries)}
                    for store in stores}
            for label in SEARCHES} | {"recall_at_10": {s: float(np.mean(v))
                                                       for s, v in recall.items()}}


async def planning_ms(stores: dict[str, Memory], scope: Scope, queries: list[str]) -> dict:
    """Planning time (``EXPLAIN (SUMMARY)``) of the default search's statement and of the
    vector probe for ``scope`` in each store, taking turns query by query: p50 / p95 ms."""
    some = next(iter(stores.values()))
    times: dict[tuple[str, str], list[float]] = {}
    for n, q in enumerate(queries):
        vector = (await some.embed_queries([q]))[0]
        keys = await entity_sql.query_keys(q, True)
        for store in list(stores)[n % len(stores):] + list(stores)[:n % len(stores)]:
            memory, bound = stores[store], ReadBound()
            lanes = memory._search_lanes(scope.key, q, vector, keys, bound, (), k=10,
                                         limit=60, lexical=True)
            where, params = bound.sentences("s", ())
            statements = {
                "search": sql.search_statement(memory.schema, scope.key, vector, bound,
                                               limit=60, before=1, after=2, lanes=lanes),
                "probe": (f"WITH {sql._probe_cte(memory.schema, where)} SELECT episode_uid, "
                          "text, distance FROM hits ORDER BY distance",
                          [vector, scope.key, *params, vector, 60])}
            async with memory._pool.connection() as conn:
                for kind, (statement, args) in statements.items():
                    cur = await conn.execute("EXPLAIN (SUMMARY) " + statement, args,
                                             prepare=False)
                    line = next(r[0] for r in await cur.fetchall() if "Planning Time" in r[0])
                    times.setdefault((kind, store), []).append(float(line.split()[2]))
    return {kind: {store: percentiles(times[(kind, store)]) for store in stores}
            for kind in ("search", "probe")}


async def measure_adds(schemas: dict[str, str], settings: MemrouteSettings,
                       embedder: MiniLMOnnxEmbedder, corpus: Corpus, rounds: int,
                       sentences: int = 400) -> dict:
    """Seconds to add ``sentences`` one-sentence episodes (one `add`, vectors precomputed,
    no entity extraction) to a new scope of each store, taking turns round by round; the
    scope is deleted after each."""
    whole = [i for i, t in enumerate(corpus.texts)  # a sentence a row, as stored
             if len(t) < 300 and split_sentences(t) == [t]][:sentences]
    texts = [corpus.texts[i] for i in whole]
    plain = settings.model_copy(update={"extract_entities": False})
    fast = PrecomputedEmbedder(embedder, texts, corpus.vectors[whole])
    stores = {name: await Memory.open(settings=plain, schema=schema, embedder=fast)
              for name, schema in schemas.items()}
    times: dict[str, list[float]] = {name: [] for name in stores}
    try:
        for r in range(rounds):
            for name in list(stores)[r % len(stores):] + list(stores)[:r % len(stores)]:
                scope = Scope(org_id="tenants", project_id="adds", user_id=f"r{r}")
                start = time.perf_counter()
                await stores[name].add(scope, [
                    {"content": t, "session_id": f"s{i // SESSION}", "uid": f"a{i}",
                     "produced_at": T0 + timedelta(seconds=i)} for i, t in enumerate(texts)])
                times[name].append(time.perf_counter() - start)
                await stores[name].delete(scope, all=True)
    finally:
        for memory in stores.values():
            await memory.close()
    return {name: percentiles(values) for name, values in times.items()}


async def measure_moves(memory: Memory, name: str, sizes: dict[str, int], queries: list[str],
                        moves: int = 3, baseline_s: float = 20.0) -> dict:
    """The large scope ``name`` moved back to its bucket and up again ``moves`` times while
    three loops search small scopes of the same bucket (and for ``baseline_s`` before): each
    switch's time (the bucket's lock held), each move up's, and those searches' latency
    during the moves against before them."""
    scope, bound = tenant(name), memory.settings.scope_index_min_sentences
    tiers = ScopeTiers(memory._pool, memory.schema, bound)
    async with memory._pool.connection() as conn:
        bucket = await tiers.bucket(conn, scope.key)
        neighbours = []
        for other, size in sizes.items():
            if size < bound and await tiers.bucket(conn, tenant(other).key) == bucket:
                neighbours.append(other)
                if len(neighbours) == 3:
                    break
    switches: list[tuple[str, float, float]] = []  # (move, writes waited, searches waited)
    switch = tiers._switch

    async def timed(*args) -> tuple[float, float]:
        waited = await switch(*args)
        switches.append(("up" if "ATTACH" in args[3][-1][0] else "down", *waited))
        return waited

    tiers._switch = timed
    latency: dict[str, list[float]] = {"before": [], "during": []}
    phase, ups = "before", []

    async def search(neighbour: str) -> None:
        n = 0
        while phase != "done":
            at, start = phase, time.perf_counter()
            await memory.search_scored(tenant(neighbour), queries[n % len(queries)], k=10,
                                       **SEARCHES["vector"])
            latency[at].append((time.perf_counter() - start) * 1000)
            n += 1

    loops = [asyncio.create_task(search(n)) for n in neighbours]
    try:
        await asyncio.sleep(baseline_s)
        phase, start = "during", time.perf_counter()
        async with memory._pool.connection() as conn:
            await conn.set_autocommit(True)
            for _ in range(moves):
                await tiers._move_down(conn, scope.key)
                up = time.perf_counter()
                await tiers.move_up(conn, scope.key)
                ups.append(time.perf_counter() - up)
        moving = time.perf_counter() - start
    finally:
        phase = "done"
        await asyncio.gather(*loops)
    return {"scope_sentences": sizes[name], "neighbours": len(neighbours),
            "switch_ms": [{"move": move, "writes_waited": round(w, 1),
                           "searches_waited": round(r, 1)} for move, w, r in switches],
            "move_up_s": [round(u, 1) for u in ups],
            "moving_s": round(moving, 1),
            "search_ms": {p: {**percentiles(v), "max": max(v), "n": len(v)}
                          for p, v in latency.items()}}


def made_up_key(n: int) -> str:
    return hashlib.sha256(f"made-up large scope {n}".encode()).hexdigest()[:32]


async def with_large_scopes(memory: Memory, count: int) -> None:
    """Give ``count`` made-up scopes a leaf of their own in ``memory``'s store (unless
    there), as a move does, their indexes empty."""
    tiers = ScopeTiers(memory._pool, memory.schema, memory.settings.scope_index_min_sentences)
    async with memory._pool.connection() as conn:
        await conn.set_autocommit(True)
        cur = await conn.execute(
            "SELECT substr(relname, 11) FROM pg_class WHERE relnamespace = %s::regnamespace "
            "AND relispartition AND relname ~ '^sentences_[0-9a-f]{32}$'", [memory.schema])
        there = {row[0] for row in await cur.fetchall()}
        start = time.perf_counter()
        missing = [k for k in map(made_up_key, range(count)) if k not in there]
        for n, key in enumerate(missing):
            await tiers.move_up(conn, key)
            if n % 500 == 499 or n == len(missing) - 1:
                print(f"  {memory.schema}: {n + 1:,} of {len(missing):,} made-up large scopes "
                      f"in leaves of their own, {time.perf_counter() - start:.0f} s",
                      file=sys.stderr, flush=True)


async def measure_large(settings: MemrouteSettings, embedder: MiniLMOnnxEmbedder,
                        corpus: Corpus, count: int, alone: dict[int, Memory],
                        queries: list[str], warmup: list[str], rounds: int) -> dict:
    """The measured scopes of 200 and 5,000 sentences among ``count`` large scopes, each
    against itself alone: planning, search latency and recall, a 400-sentence add."""
    sizes = {f"measured-{n}": n for n in (200, 5_000)}
    memory = await build(settings, embedder, f"{SCHEMA}_large_{count}", corpus, sizes,
                         interleave=False)
    report: dict = {"large_scopes": count, "planning_ms": {}, "search": {}}
    try:
        await with_large_scopes(memory, count)
        for size, name in ((n, f"measured-{n}") for n in (200, 5_000)):
            stores = {"alone": alone[size], "large": memory}
            for store in stores.values():
                await store.warm()
                for q in warmup:
                    await store.search_scored(tenant(name), q, k=10)
            report["planning_ms"][str(size)] = await planning_ms(stores, tenant(name),
                                                                 queries)
            report["search"][str(size)] = await measure_scope(
                stores, tenant(name), corpus.scope_vectors(name, size), queries)
    finally:
        await memory.close()
    empty = await Memory.open(settings=settings, schema=f"{SCHEMA}_empty", embedder=embedder)
    await empty.close()
    report["adds_s"] = await measure_adds({"empty": f"{SCHEMA}_empty",
                                           "large": f"{SCHEMA}_large_{count}"},
                                          settings, embedder, corpus, rounds)
    report["load_average"] = load_average()
    return report


async def measure_ingestion(memory: Memory, texts: list[str], tenants: int, per_tenant: int,
                            rounds: int) -> dict:
    """Sentences/s of ``tenants`` tenants adding at once (each its own scope, sessions of
    `SESSION` one-sentence episodes per `add`) into ``memory``'s store, with and without
    entity extraction, against the embedder alone on the same texts in batches of 500;
    alternating rounds, ratios within each round. The tenants' scopes are deleted after."""
    texts = texts[:tenants * per_tenant]
    chunks = [texts[i:i + SESSION] for i in range(0, len(texts), SESSION)]
    plain = memory.settings.model_copy(update={"extract_entities": False})
    with_entities = memory.settings.model_copy(update={"extract_entities": True})

    async def embedder() -> float:
        start = time.perf_counter()
        for i in range(0, len(texts), 500):
            await memory.embedder.embed_documents(texts[i:i + 500])
        return len(texts) / (time.perf_counter() - start)

    async def at_once(settings: MemrouteSettings, round_: int) -> float:
        memory.settings = settings
        scopes = [Scope(org_id="tenants", project_id=f"ingest-{round_}", user_id=f"t{t}")
                  for t in range(tenants)]

        async def one(t: int) -> None:
            for n, chunk in enumerate(chunks[t::tenants]):
                await memory.add(scopes[t], [
                    {"content": text, "session_id": f"s{n}", "uid": f"{n}-{j}",
                     "produced_at": T0 + timedelta(seconds=j)} for j, text in enumerate(chunk)])

        start = time.perf_counter()
        await asyncio.gather(*(one(t) for t in range(tenants)))
        rate = len(texts) / (time.perf_counter() - start)
        for scope in scopes:
            await memory.delete(scope, all=True)
        return rate

    await memory.embedder.embed_documents(texts[:SESSION])  # the models load before timing
    await asyncio.to_thread(extract_entities, texts[:SESSION])
    kinds = {"embedder": lambda r: embedder(), "tenants": lambda r: at_once(plain, r),
             "tenants_with_entities": lambda r: at_once(with_entities, r)}
    per_round = []
    settings = memory.settings
    try:
        for r in range(rounds):
            order = list(kinds) if r % 2 == 0 else list(kinds)[::-1]
            per_round.append({kind: await kinds[kind](r) for kind in order})
    finally:
        memory.settings = settings
    ratios = {kind: [r[kind] / r["embedder"] for r in per_round] for kind in kinds
              if kind != "embedder"}
    return {"tenants": tenants, "sentences": len(texts), "rounds": per_round,
            "ratio_to_embedder": {k: {"median": float(np.median(v)), "min": min(v),
                                      "max": max(v)} for k, v in ratios.items()},
            "load_average": load_average()}


async def run(args: argparse.Namespace) -> dict:
    settings = MemrouteSettings().model_copy(update={
        "embed_threads": args.threads, "query_cache_size": 0,
        "search_statement_timeout_ms": 30_000})
    embedder = MiniLMOnnxEmbedder(threads=args.threads)
    texts = shared_sentences(Path(args.data_dir))
    random.Random(0).shuffle(texts)
    texts = texts[:100_000]  # as benchmarks.memory: its cached embeddings serve both
    if args.ingest_only:
        memory = await Memory.open(settings=settings, schema=f"{SCHEMA}_ingestion",
                                   embedder=embedder)
        try:
            return {"machine": machine_info(args.threads), "store": {"sentences": 0, "scopes": 0},
                    "search": {}, "ingestion": await measure_ingestion(
                        memory, texts, args.tenants, args.ingest_per_tenant, args.ingest_rounds)}
        finally:
            await memory.close()
    vectors = await cached_embeddings(embedder, texts)
    corpus = Corpus(texts, vectors, await cached_entity_keys(texts))
    sizes = scope_sizes(args.small)
    report: dict = {"machine": machine_info(args.threads),
                    "store": {"sentences": sum(sizes.values()), "scopes": len(sizes)},
                    "search": {}}
    shared = await build(settings, embedder, SCHEMA, corpus, sizes, interleave=True)
    qs = questions(Path(args.data_dir), args.queries + 50)
    alones: dict[int, Memory] = {}
    for size in sorted({*args.sizes, *((200, 5_000) if args.large else ())}):
        name = f"measured-{size}"
        alones[size] = await build(settings, embedder, f"{SCHEMA}_alone_{size}", corpus,
                                   {name: size}, interleave=False)
        if size not in args.sizes:
            continue
        stores = {"alone": alones[size], "tenants": shared}
        for memory in stores.values():
            await memory.warm()
            for q in qs[args.queries:]:
                await memory.search_scored(tenant(name), q, k=10)
        report["search"][str(size)] = await measure_scope(
            stores, tenant(name), corpus.scope_vectors(name, size), qs[:args.queries])
        report["search"][str(size)]["planning_ms"] = await planning_ms(
            stores, tenant(name), qs[:args.queries])
        report["search"][str(size)]["load_average"] = load_average()
    checkpoint(report)
    if args.moves:
        report["moves"] = await measure_moves(shared, "measured-5000", sizes,
                                              qs[:args.queries], args.moves)
    if args.ingest_per_tenant:
        report["ingestion"] = await measure_ingestion(
            shared, texts, args.tenants, args.ingest_per_tenant, args.ingest_rounds)
    await shared.close()
    report["large"] = {}
    for count in args.large:
        report["large"][str(count)] = await measure_large(
            settings, embedder, corpus, count, alones, qs[:args.queries], qs[args.queries:],
            args.add_rounds)
        checkpoint(report)
    for memory in alones.values():
        await memory.close()
    report["migrations"] = MIGRATIONS
    return report


def checkpoint(report: dict) -> None:
    """The report so far, in ``bench-out/tenants-partial.json`` (a long run that stops keeps
    what it measured)."""
    OUT.mkdir(exist_ok=True)
    (OUT / "tenants-partial.json").write_text(json.dumps(report | {"migrations": MIGRATIONS},
                                                         indent=2))


def print_report(report: dict) -> None:
    print(f"threads: {report['machine']['threads']}; store: {report['store']['sentences']:,} "
          f"sentences in {report['store']['scopes']:,} scopes")
    for size, fig in report["search"].items():
        for label in SEARCHES:
            alone, among = (fig[label][s]["latency_ms"] for s in ("alone", "tenants"))
            print(f"scope of {int(size):>6,} sentences, {label:<8} search p50/p95 ms: alone "
                  f"{alone['p50']:6.1f} / {alone['p95']:6.1f}, among tenants "
                  f"{among['p50']:6.1f} / {among['p95']:6.1f}  (p95 x{among['p95'] / alone['p95']:.2f};"
                  f" widened {fig[label]['tenants']['widened']:.0%})")
        r = fig["recall_at_10"]
        print(f"    vector lane recall@10 vs exact: alone {r['alone']:.3f}, among tenants "
              f"{r['tenants']:.3f}  (load {fig['load_average']})")
    for size, fig in report["search"].items():
        if "planning_ms" in fig:
            plan = fig["planning_ms"]["search"]
            print(f"scope of {int(size):>6,} sentences, search statement planning p50 ms: "
                  f"alone {plan['alone']['p50']:.3f}, among tenants "
                  f"{plan['tenants']['p50']:.3f}")
    for count, fig in report.get("large", {}).items():
        print(f"among {int(count):,} large scopes (load {fig['load_average']}):")
        for size, plan in fig["planning_ms"].items():
            search, probe = plan["search"], plan["probe"]
            print(f"  scope of {int(size):>5,} sentences, planning p50 ms: search statement "
                  f"alone {search['alone']['p50']:.3f} / among {search['large']['p50']:.3f}, "
                  f"vector probe alone {probe['alone']['p50']:.3f} / among "
                  f"{probe['large']['p50']:.3f}")
            for label in SEARCHES:
                alone, among = (fig["search"][size][label][s]["latency_ms"]
                                for s in ("alone", "large"))
                print(f"  scope of {int(size):>5,} sentences, {label:<8} search p50/p95 ms: "
                      f"alone {alone['p50']:6.1f} / {alone['p95']:6.1f}, among "
                      f"{among['p50']:6.1f} / {among['p95']:6.1f}  "
                      f"(p95 x{among['p95'] / alone['p95']:.2f})")
            r = fig["search"][size]["recall_at_10"]
            print(f"    vector lane recall@10 vs exact: alone {r['alone']:.3f}, among "
                  f"{r['large']:.3f}")
        adds = fig["adds_s"]
        print(f"  a 400-sentence add p50: empty store {adds['empty']['p50']:.3f} s, among "
              f"{adds['large']['p50']:.3f} s (x{adds['large']['p50'] / adds['empty']['p50']:.2f})")
    if "moves" in report:
        m = report["moves"]
        before, during = m["search_ms"]["before"], m["search_ms"]["during"]

        def waits(move: str, who: str) -> str:
            ms = [w[who] for w in m["switch_ms"] if w["move"] == move]
            return f"{min(ms):.0f}-{max(ms):.0f}"

        print(f"moving a {m['scope_sentences']:,}-sentence scope down and up "
              f"{len(m['move_up_s'])} times: its bucket's writes waited {waits('up', 'writes_waited')}"
              f" ms per move up ({waits('down', 'writes_waited')} down), its searches "
              f"{waits('up', 'searches_waited')} ms ({waits('down', 'searches_waited')}); moves up "
              f"{min(m['move_up_s']):.1f}-{max(m['move_up_s']):.1f} s; searches of "
              f"{m['neighbours']} small scopes of its bucket p50/p95/max ms: before "
              f"{before['p50']:.1f} / {before['p95']:.1f} / {before['max']:.1f}, during "
              f"{during['p50']:.1f} / {during['p95']:.1f} / {during['max']:.1f}")
    for schema, fig in report.get("migrations", {}).items():
        print(f"opening {schema} migrated it to {fig['versions']} in {fig['seconds']} s: every "
              f"scope's sentences kept: {fig['every_scope_kept']}; {fig['own_leaves']} leaves "
              f"of their own for {fig['large_scopes']} large scopes")
    if "ingestion" in report:
        ing = report["ingestion"]
        for kind, ratio in ing["ratio_to_embedder"].items():
            print(f"ingestion, {ing['tenants']} {kind.replace('_', ' ')} at once: "
                  f"{ratio['median']:.0%} of the embedder (rounds {ratio['min']:.0%}-"
                  f"{ratio['max']:.0%}); embedder "
                  f"{np.median([r['embedder'] for r in ing['rounds']]):.1f} sentences/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("MEMROUTE_DATA_DIR", "../shared/data"))
    parser.add_argument("--small", type=int, default=5_000, help="scopes of 50-500 sentences")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(MEASURED),
                        choices=MEASURED, help="the scopes measured")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--tenants", type=int, default=16)
    parser.add_argument("--ingest-per-tenant", type=int, default=60,
                        help="sentences each tenant adds (0: no ingestion)")
    parser.add_argument("--ingest-rounds", type=int, default=3)
    parser.add_argument("--ingest-only", action="store_true",
                        help="only the ingestion from many tenants, into a store of its own")
    parser.add_argument("--large", type=int, nargs="*", default=[1_000, 10_000],
                        help="stores of this many large scopes beside the measured ones")
    parser.add_argument("--moves", type=int, default=3,
                        help="moves of the 5,000-sentence scope down and up again (0: none)")
    parser.add_argument("--add-rounds", type=int, default=10,
                        help="400-sentence adds per store among large scopes")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    write_report(asyncio.run(run(args)), "tenants", print_report)


if __name__ == "__main__":
    main()
