"""Probe (issue 47): a statement's cost with many large scopes, per layout of `sentences`.

Layouts: ``partial`` (schema 7: one table, each large scope's partial indexes), ``list``
(HASH(scope_key) buckets, each LIST-partitioned: a large scope a leaf of its own with plain
indexes, the small ones in the bucket's DEFAULT leaf), ``hashpartial`` (HASH buckets, a
large scope's partial indexes on its bucket). A store of one 5,000-sentence scope and one of
100 plus K made-up large scopes (empty indexes / leaves); for each K: planning time of the
vector probe and of the default search statement, their execution p50/p95, and a 400-sentence
add to the small scope.

    python -m benchmarks.experiments.tiers_probe --layouts partial list hashpartial --k 0 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from memroute.memory.bounds import ReadBound
from memroute.memory.entity_sql import entity_lane_sql
from memroute.memory.schema import migrate
from memroute.memory.server import ensure_embedded_server
from memroute.memory.sql import TermStats, _probe_cte, hnsw_settings, lexical_lane_sql, search_statement
from memroute.memory.writes import SENTENCE_COPY_TYPES

DIM = 384
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
WORDS = [f"w{i}" for i in range(2000)]
BIG, SMALL = "b" * 32, "a" * 32
OWN = {"embedding": "hnsw (embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128)",
       "tsv": "gin (tsv)", "entity_keys": "gin (entity_keys)"}


def unit(rng, n):
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def columns(s: str) -> str:
    return f"""scope_key text NOT NULL, episode_uid text NOT NULL, idx int NOT NULL,
        text text NOT NULL, embedding vector({DIM}) NOT NULL, session_id text NOT NULL,
        producer text NOT NULL, produced_at timestamptz NOT NULL,
        metadata jsonb NOT NULL DEFAULT '{{}}',
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
        entity_keys text[], entities jsonb,
        PRIMARY KEY (scope_key, episode_uid, idx),
        FOREIGN KEY (scope_key, episode_uid) REFERENCES {s}.episodes (scope_key, uid)
            ON DELETE CASCADE"""


def bucket_of(conn, s: str, key: str, m: int) -> int:
    return conn.execute(
        "SELECT r FROM generate_series(0, %s - 1) r "
        "WHERE satisfies_hash_partition(%s::regclass, %s, r, %s::text)",
        [m, f"{s}.sentences", m, key]).fetchone()[0]


def make_layout(conn, s: str, layout: str, m: int) -> None:
    if layout == "partial":
        return
    conn.execute(f"DROP TABLE {s}.sentences")
    conn.execute(f"CREATE TABLE {s}.sentences ({columns(s)}) PARTITION BY HASH (scope_key)")
    for r in range(m):
        sub = " PARTITION BY LIST (scope_key)" if layout == "list" else \
            " WITH (toast_tuple_target = 8160)"
        conn.execute(f"CREATE TABLE {s}.sentences_h{r} PARTITION OF {s}.sentences "
                     f"FOR VALUES WITH (MODULUS {m}, REMAINDER {r}){sub}")
        if layout == "list":
            conn.execute(f"CREATE TABLE {s}.sentences_h{r}_small PARTITION OF {s}.sentences_h{r} "
                         "DEFAULT WITH (toast_tuple_target = 8160)")
    conn.execute(f"CREATE INDEX sentences_scope ON {s}.sentences (scope_key, session_id, produced_at)")
    conn.execute(f"CREATE INDEX sentences_tsv ON {s}.sentences USING gin (tsv)")
    conn.execute(f"CREATE INDEX sentences_entity_keys ON {s}.sentences USING gin (entity_keys)")


def own_place(conn, s: str, layout: str, m: int, key: str) -> None:
    """Give ``key`` its own indexes (partial) or leaf (list)."""
    if layout == "partial":
        for what, how in OWN.items():
            conn.execute(f"CREATE INDEX sentences_{what}_{key} ON {s}.sentences USING {how} "
                         f"WHERE scope_key = '{key}'")
    elif layout == "hashpartial":
        r = bucket_of(conn, s, key, m)
        for what, how in OWN.items():
            conn.execute(f"CREATE INDEX sentences_{what}_{key} ON {s}.sentences_h{r} USING {how} "
                         f"WHERE scope_key = '{key}'")
    else:
        r = bucket_of(conn, s, key, m)
        conn.execute(f"CREATE TABLE {s}.sentences_{key} PARTITION OF {s}.sentences_h{r} "
                     f"FOR VALUES IN ('{key}') WITH (toast_tuple_target = 8160)")
        conn.execute(f"CREATE INDEX sentences_embedding_{key} ON {s}.sentences_{key} "
                     f"USING {OWN['embedding']}")


def copy_rows(conn, s: str, key: str, n: int, rng, start: int = 0) -> None:
    vectors = unit(rng, n)
    texts = [" ".join(rng.choice(WORDS, 12)) for _ in range(n)]
    with conn.cursor().copy(f"COPY {s}.episodes (scope_key, org_id, project_id, uid, session_id, "
                            "producer, produced_at, content) FROM STDIN") as copy:
        for i in range(n):
            copy.write_row([key, "o", "p", f"e{start + i}", f"s{(start + i) // 10}", "user",
                            T0 + timedelta(minutes=start + i), texts[i]])
    with conn.cursor().copy(f"COPY {s}.sentences (scope_key, episode_uid, idx, text, embedding, "
                            "session_id, producer, produced_at, metadata, entity_keys, entities) "
                            "FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(SENTENCE_COPY_TYPES)
        for i in range(n):
            copy.write_row([key, f"e{start + i}", 0, texts[i], vectors[i], f"s{(start + i) // 10}",
                            "user", T0 + timedelta(minutes=start + i), "{}",
                            [f"k{rng.integers(50)}"], None])


def statements(s: str, key: str, vector, kind: str):
    bound = ReadBound()
    if kind == "lane":
        where, params = bound.sentences("s", ())
        return (f"WITH {_probe_cte(s, where)} SELECT episode_uid, text, distance FROM hits "
                "ORDER BY distance", [vector, key, *params, vector, 60])
    if kind == "probe":
        return search_statement(s, key, vector, bound, limit=60, before=0, after=0)
    lanes = [lexical_lane_sql(s, key, "w1 w2 w3 w500", bound, 10,
                                      TermStats("{w1,w2}", "{0.01,0.01,0.01,0.01}")),
             entity_lane_sql(s, key, ["k1", "k2"], vector, bound, 60)]
    return search_statement(s, key, vector, bound, limit=60, before=1, after=2, lanes=lanes)


def planning_ms(conn, sql, params) -> float:
    rows = conn.execute("EXPLAIN (SUMMARY ON) " + sql, params, prepare=False).fetchall()
    return next(float(r[0].split(":")[1].split()[0]) for r in rows if "Planning Time" in r[0])


def run_ms(conn, sql, params) -> float:
    start = time.perf_counter()
    with conn.transaction():
        conn.execute(*hnsw_settings(60))
        conn.execute(sql, params, prepare=False).fetchall()
    return (time.perf_counter() - start) * 1000


def add_400(conn, s: str, rng, n: int) -> float:
    start = time.perf_counter()
    with conn.transaction():
        copy_rows(conn, s, SMALL, 400, rng, start=10_000 + n * 400)
    elapsed = time.perf_counter() - start
    conn.execute(f"DELETE FROM {s}.episodes WHERE scope_key = %s AND uid ~ '^e[0-9]{{5,}}$'",
                 [SMALL])
    return elapsed * 1000


def p(values, q):
    return round(float(np.percentile(values, q)), 3)


def build(url: str, layout: str, k: int, m: int) -> str:
    s = f"probe_{layout}_{k}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")

    async def mig():
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as c:
            await migrate(c, s, "probe", DIM)
    asyncio.run(mig())
    rng = np.random.default_rng(0)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        make_layout(conn, s, layout, m)
        own_place(conn, s, layout, m, BIG)
        with conn.transaction():
            copy_rows(conn, s, BIG, 5000, rng)
            copy_rows(conn, s, SMALL, 100, rng)
        start = time.perf_counter()
        for i in range(k):
            own_place(conn, s, layout, m, secrets.token_hex(16))
            if i % 1000 == 999:
                print(f"  {s}: {i + 1} own places, {time.perf_counter() - start:.0f} s", flush=True)
        conn.execute(f"VACUUM ANALYZE {s}.sentences")
        conn.execute(f"VACUUM ANALYZE {s}.episodes")
    return s


def measure(url: str, schemas: list[str], n: int) -> dict:
    rng = np.random.default_rng(1)
    out = {s: {} for s in schemas}
    conns = {}
    for s in schemas:
        conns[s] = psycopg.connect(url, autocommit=True)
        # a generic plan of the foreign key's cascade names every leaf (out of shared memory)
        conns[s].execute("SET plan_cache_mode = force_custom_plan")
        conns[s].execute(f"DELETE FROM {s}.episodes WHERE scope_key = %s "
                         "AND uid ~ '^e[0-9]{5,}$'", [SMALL])
        register_vector(conns[s])
    samples = {(s, what): [] for s in schemas for what in
               ("plan_lane_big", "plan_lane_small", "plan_probe_big", "plan_search_big", "plan_probe_small", "plan_search_small",
                "run_probe_big", "run_search_big", "run_search_small", "add_400_small")}
    for i in range(n):
        vector = unit(rng, 1)[0]
        for s in (schemas if i % 2 == 0 else schemas[::-1]):
            c = conns[s]
            for key, who in ((BIG, "big"), (SMALL, "small")):
                for kind in ("lane", "probe", "search"):
                    sql, params = statements(s, key, vector, kind)
                    samples[(s, f"plan_{kind}_{who}")].append(planning_ms(c, sql, params))
                    if kind != "lane" and (kind, who) != ("probe", "small"):
                        samples[(s, f"run_{kind}_{who}")].append(run_ms(c, sql, params))
            if i % 5 == 0:
                samples[(s, "add_400_small")].append(add_400(c, s, rng, i))
    for (s, what), values in samples.items():
        out[s][what] = {"p50": p(values, 50), "p95": p(values, 95)}
    for c in conns.values():
        c.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", default=os.environ.get("MEMROUTE_HOME", "/tmp/i47-home"))
    parser.add_argument("--layouts", nargs="+", default=["partial", "list", "hashpartial"])
    parser.add_argument("--k", type=int, nargs="+", default=[0, 1000])
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    from pathlib import Path
    url = ensure_embedded_server(Path(args.home))
    schemas = []
    for layout in args.layouts:
        for k in args.k:
            s = f"probe_{layout}_{k}"
            if not args.reuse:
                t = time.perf_counter()
                build(url, layout, k, args.buckets)
                print(f"built {s} in {time.perf_counter() - t:.0f} s", flush=True)
            schemas.append(s)
    with psycopg.connect(url) as conn:
        have = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace")}
    result = measure(url, [s for s in schemas if s in have], args.n)
    for s, figures in result.items():
        print(s, json.dumps(figures))
    print("load", os.getloadavg())


if __name__ == "__main__":
    main()
