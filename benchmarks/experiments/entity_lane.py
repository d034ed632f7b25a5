"""The entity lane's statement, variants side by side on the 100k bench store: server time
(EXPLAIN ANALYZE, timing off) and how many questions' lane rows differ from the lane before.

    MEMROUTE_HOME=<bench stores> CAP=1000 python -m benchmarks.experiments.entity_lane

before: a set intersection per matching sentence, every match numbered; count: one
containment test per key; top_n: count, and only the best ``limit`` numbered (the same rows
as before); cap: top_n on at most CAP sentences per key (what the lane does now); nearest:
each key's nearest sentences by an index scan.
"""

import asyncio
import os

import numpy as np

from benchmarks.experiments._store import SCOPE, hotpot_questions, open_bench
from memroute.memory import entity_sql, sql

CAP = int(os.environ.get("CAP", 1000))


def before(schema, keys, embedding, limit):
    return sql.Lane("entity", 2, f"""entity AS (
            SELECT s.episode_uid, s.text, 1 - (s.embedding <=> %s) AS score,
                   row_number() OVER (ORDER BY cardinality(ARRAY(
                       SELECT unnest(s.entity_keys) INTERSECT SELECT unnest(%s::text[]))) DESC,
                       s.embedding <=> %s) - 1 AS rank
            FROM {schema}.sentences s
            WHERE s.scope_key = %s AND s.entity_keys && %s::text[]
            ORDER BY rank LIMIT %s)""", [embedding, keys, embedding, SCOPE.key, keys, limit])


def count(schema, keys, embedding, limit):
    matched = " + ".join(["(s.entity_keys @> ARRAY[%s]::text[])::int"] * len(keys))
    return sql.Lane("entity", 2, f"""entity AS (
            SELECT s.episode_uid, s.text, 1 - (s.embedding <=> %s) AS score,
                   row_number() OVER (ORDER BY {matched} DESC, s.embedding <=> %s) - 1 AS rank
            FROM {schema}.sentences s
            WHERE s.scope_key = %s AND s.entity_keys && %s::text[]
            ORDER BY rank LIMIT %s)""", [embedding, *keys, embedding, SCOPE.key, keys, limit])


def top_n(schema, keys, embedding, limit):
    matched = " + ".join(["(s.entity_keys @> ARRAY[%s]::text[])::int"] * len(keys))
    return sql.Lane("entity", 2, f"""entity AS (
            SELECT episode_uid, text, 1 - distance AS score,
                   row_number() OVER (ORDER BY matched DESC, distance) - 1 AS rank
            FROM (SELECT s.episode_uid, s.text, {matched} AS matched,
                         s.embedding <=> %s AS distance
                  FROM {schema}.sentences s
                  WHERE s.scope_key = %s AND s.entity_keys && %s::text[]
                  ORDER BY matched DESC, distance LIMIT %s) e)""",
                    [*keys, embedding, SCOPE.key, keys, limit])


def cap(schema, keys, embedding, limit):
    old = entity_sql.ENTITY_CANDIDATES_PER_KEY
    entity_sql.ENTITY_CANDIDATES_PER_KEY = CAP
    try:
        return entity_sql.entity_lane_sql(schema, SCOPE.key, keys, embedding, None, limit)
    finally:
        entity_sql.ENTITY_CANDIDATES_PER_KEY = old


def nearest(schema, keys, embedding, limit):
    per_key = " UNION ".join(f"""(SELECT s.episode_uid, s.text, s.entity_keys,
                         s.embedding <=> %s AS distance FROM {schema}.sentences s
                  WHERE s.scope_key = %s AND s.entity_keys @> ARRAY[%s]::text[]
                  ORDER BY s.embedding <=> %s LIMIT %s)""" for _ in keys)
    matched = " + ".join(["(s.entity_keys @> ARRAY[%s]::text[])::int"] * len(keys))
    params = [p for k in keys for p in (embedding, SCOPE.key, k, embedding, limit)]
    return sql.Lane("entity", 2, f"""candidates AS ({per_key}), entity AS (
            SELECT episode_uid, text, 1 - distance AS score,
                   row_number() OVER (ORDER BY matched DESC, distance) - 1 AS rank
            FROM (SELECT s.episode_uid, s.text, {matched} AS matched, s.distance
                  FROM candidates s ORDER BY matched DESC, distance LIMIT %s) e)""",
                    [*params, *keys, limit])


VARIANTS = {"before": before, "count": count, "top_n": top_n, "cap": cap, "nearest": nearest}


async def main() -> None:
    memory = await open_bench()
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    differ = {v: 0 for v in VARIANTS}
    matched_rows, asked = [], 0
    for q in hotpot_questions(200):
        embedding = (await memory.embed_queries([q]))[0]
        keys = await entity_sql.query_keys(q, True)
        if not keys:
            continue
        asked += 1
        rows = {}
        for name, variant in VARIANTS.items():
            lane = variant(memory.schema, keys, embedding, 60)
            async with memory._pool.connection() as conn:
                await conn.execute(*sql.hnsw_settings(60))
                cur = await conn.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "
                                         f"WITH {lane.ctes} SELECT * FROM entity", lane.params)
                plan = (await cur.fetchone())[0][0]
                times[name].append(plan["Execution Time"] + plan["Planning Time"])
                rows[name] = [h.episode_uid for h in await sql.lane_hits(conn, lane)]
                await conn.rollback()
            differ[name] += rows[name] != rows["before"]
        async with memory._pool.connection() as conn:
            cur = await conn.execute(f"SELECT count(*) FROM {memory.schema}.sentences "
                                     "WHERE scope_key = %s AND entity_keys && %s::text[]",
                                     [SCOPE.key, keys])
            matched_rows.append((await cur.fetchone())[0])
    for name, v in times.items():
        print(f"{name:8} p50 {np.median(v):5.2f} p95 {np.percentile(v, 95):5.2f} "
              f"max {max(v):5.1f} ms; lane rows differ from before: {differ[name]} of {asked}")
    print(f"sentences matched per question: p50 {np.median(matched_rows):.0f}, "
          f"p95 {np.percentile(matched_rows, 95):.0f}, max {max(matched_rows)}")
    await memory.close()


asyncio.run(main())
