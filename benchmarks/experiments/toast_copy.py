"""A copy of the 100k bench store whose sentence rows have their vectors moved out (toast_tuple_target
2032, the layout before schema 5), for `toast_ab` (run this first).

    MEMROUTE_HOME=<bench stores> python -m benchmarks.experiments.toast_copy
"""
import asyncio,sys,time
from memroute.memory import Memory
from memroute.settings import MemrouteSettings
SRC="bench_v2_100000"; DST = "bench_toasted_100000"  # the layout before schema 5 (PostgreSQL's default target)
async def main():
    mem = await Memory.open(settings=MemrouteSettings(), schema=SRC)
    async with mem._pool.connection() as conn:
        await conn.set_autocommit(True)
        for q in [f"DROP SCHEMA IF EXISTS {DST} CASCADE", f"CREATE SCHEMA {DST}",
                  f"CREATE TABLE {DST}.episodes (LIKE {SRC}.episodes INCLUDING DEFAULTS INCLUDING GENERATED)",
                  f"INSERT INTO {DST}.episodes SELECT * FROM {SRC}.episodes",
                  f"CREATE TABLE {DST}.sentences (LIKE {SRC}.sentences INCLUDING DEFAULTS INCLUDING GENERATED) WITH (toast_tuple_target = 2032)",
                  f"INSERT INTO {DST}.sentences (scope_key, episode_uid, idx, text, embedding, session_id, producer, produced_at, metadata, entity_keys, entities) SELECT scope_key, episode_uid, idx, text, embedding, session_id, producer, produced_at, metadata, entity_keys, entities FROM {SRC}.sentences",
                  f"ALTER TABLE {DST}.episodes ADD PRIMARY KEY (scope_key, uid)",
                  f"ALTER TABLE {DST}.sentences ADD PRIMARY KEY (scope_key, episode_uid, idx)",
                  f"CREATE INDEX ON {DST}.episodes (scope_key, session_id, produced_at, seq)",
                  f"CREATE INDEX ON {DST}.sentences (scope_key, session_id, produced_at)",
                  f"CREATE INDEX ON {DST}.sentences USING gin (tsv)",
                  f"CREATE INDEX ON {DST}.sentences USING gin (entity_keys)",
                  "SET maintenance_work_mem = '2GB'",
                  f"CREATE INDEX ON {DST}.sentences USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
                  f"VACUUM ANALYZE {DST}.episodes", f"VACUUM ANALYZE {DST}.sentences",
                  f"select pg_size_pretty(pg_relation_size('{DST}.sentences')), pg_size_pretty(pg_relation_size(reltoastrelid)) from pg_class where oid='{DST}.sentences'::regclass"]:
            t=time.time(); cur = await conn.execute(q); print(q[:60], round(time.time()-t,1), flush=True)
            if q.startswith("select"): print(await cur.fetchall())
    await mem.close()
asyncio.run(main())
