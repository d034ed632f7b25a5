"""The search statement (vector, context (1, 2), the default with its lanes) on the bench store
against its copy with the layout before schema 5 (`toast_copy`): wall and server time, buffers.

    MEMROUTE_HOME=<bench stores> python -m benchmarks.experiments.toast_ab 150
"""
import asyncio, json, time, sys
import numpy as np
from benchmarks.memory import questions
from memroute.memory import Memory, Scope, entity_sql, sql
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.settings import MemrouteSettings
from pathlib import Path
async def main():
    n = int(sys.argv[1])
    settings = MemrouteSettings().model_copy(update={"db_schema": "bench", "query_cache_size": 0})
    emb = MiniLMOnnxEmbedder(threads=2, query_model="auto")
    mem = await Memory.open(settings=settings, schema="bench_v2_100000", embedder=emb)
    scope = Scope(org_id="bench", project_id="100000")
    qs = questions(Path("../shared/data"), n)
    res = {}
    for i, q in enumerate(qs):
        e = (await mem.embed_queries([q]))[0]
        keys = await entity_sql.query_keys(q, True)
        for schema in (("bench_v2_100000", "bench_toasted_100000") if i % 2 else ("bench_toasted_100000", "bench_v2_100000")):
            lanes = [sql.lexical_lane_sql(schema, scope.key, q, None, 10)]
            if keys:
                lanes.append(entity_sql.entity_lane_sql(schema, scope.key, keys, e, None, 60))
            for label, ls, ctx in (("default", lanes, (0, 0)), ("vector", [], (0, 0)), ("ctx12", [], (1, 2))):
                st, params = sql.search_statement(schema, scope.key, e, None, limit=60, before=ctx[0], after=ctx[1], lanes=ls)
                async with mem._pool.connection() as conn:
                    await conn.execute(*sql.hnsw_settings(60))
                    t = time.perf_counter()
                    cur = await conn.execute(st, params, binary=True); rows = await cur.fetchall()
                    wall = (time.perf_counter() - t) * 1000
                    cur = await conn.execute("EXPLAIN (ANALYZE, TIMING OFF, BUFFERS, FORMAT JSON) " + st, params)
                    plan = (await cur.fetchone())[0][0]
                    await conn.rollback()
                d = res.setdefault((label, schema[:12]), {"wall": [], "server": [], "buffers": []})
                d["wall"].append(wall); d["server"].append(plan["Execution Time"] + plan["Planning Time"])
                d["buffers"].append(plan["Plan"].get("Shared Hit Blocks", 0) + plan["Plan"].get("Shared Read Blocks", 0))
    for (label, schema), d in sorted(res.items()):
        print(f"{label:8} {schema:12} wall p50 {np.median(d['wall']):5.2f} p95 {np.percentile(d['wall'],95):5.2f} | server p50 {np.median(d['server']):5.2f} p95 {np.percentile(d['server'],95):5.2f} | buffers p50 {np.median(d['buffers']):.0f}")
    await mem.close()
asyncio.run(main())
