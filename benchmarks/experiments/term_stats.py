"""The full-text lane with its term statistics read from pg_stats in the statement against
sent as parameters: planning and execution time (EXPLAIN ANALYZE, timing off) and hits.

    MEMROUTE_HOME=<bench stores> python -m benchmarks.experiments.term_stats
"""

import asyncio

import numpy as np

from benchmarks.experiments._store import SCOPE, hotpot_questions, open_bench
from memroute.memory import sql


async def main() -> None:
    memory = await open_bench()
    async with memory._pool.connection() as conn:
        cur = await conn.execute(sql._TERM_STATS, [memory.schema])
        stats = sql.term_stats_of(await cur.fetchone())
    res: dict[str, list[float]] = {}
    same = 0
    for q in hotpot_questions(100):
        out = []
        for name, lane in (("in statement", sql.lexical_lane_sql(memory.schema, SCOPE.key, q,
                                                                 None, 10)),
                           ("parameters", sql.lexical_lane_sql(memory.schema, SCOPE.key, q,
                                                               None, 10, stats))):
            async with memory._pool.connection() as conn:
                cur = await conn.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "
                                         f"WITH {lane.ctes} SELECT * FROM lexical", lane.params)
                plan = (await cur.fetchone())[0][0]
                res.setdefault(f"{name} planning", []).append(plan["Planning Time"])
                res.setdefault(f"{name} execution", []).append(plan["Execution Time"])
                out.append(await sql.lane_hits(conn, lane))
        same += out[0] == out[1]
    for k, v in res.items():
        print(f"{k:24} p50 {np.median(v):5.2f} p95 {np.percentile(v, 95):5.2f} ms")
    print("same hits:", same, "of 100")
    await memory.close()


asyncio.run(main())
