"""The REST search overhead in process through the ASGI app (no socket): a direct search
against the same search through `create_app`, with a key cache of ARG1 seconds.

    MEMROUTE_HOME=<service bench home> python -m benchmarks.experiments.rest_overhead 0
"""
import asyncio, sys, time, json
import httpx, numpy as np
from memroute.service.app import create_app
from memroute.service.keys import KeyStore
from memroute.settings import MemrouteSettings
from memroute.memory import Scope, entity_sql
from benchmarks.agent import HOTPOTQA, open_bench_store
from pathlib import Path
async def main():
    settings = MemrouteSettings().model_copy(update={"query_cache_size": 0})
    memory, scope, questions, store = await open_bench_store(settings, Path("../shared/data") / HOTPOTQA, 20, 0)
    keys = await KeyStore.open(memory.url, memory.schema, max_size=1)
    token, record = await keys.create(scope.org_id, project_ids=[scope.project_id], name="prof")
    s2 = settings.model_copy(update={"db_schema": memory.schema})
    app = create_app(s2, key_cache_seconds=float(sys.argv[1]))
    qs = [json.loads(l)["question"] for l in open("../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl")][:300]
    async with app.router.lifespan_context(app):
        svc = app.state.service
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {token}"}) as client:
            for q in qs[:10]:
                r = await client.post("/v1/search", json={"scope": scope.model_dump(), "query": q, "k": 10}); r.raise_for_status()
            a = []; b = []
            for i, q in enumerate(qs[10:160]):
                entity_sql.forget_query_keys()
                t = time.perf_counter(); await svc.memory.search_scored(scope, q, k=10); a.append(time.perf_counter() - t)
                entity_sql.forget_query_keys()
                t = time.perf_counter(); r = await client.post("/v1/search", json={"scope": scope.model_dump(), "query": q, "k": 10}); b.append(time.perf_counter() - t)
                r.raise_for_status()
            print("direct p50", 1000*np.median(a), "asgi p50", 1000*np.median(b), "diff", 1000*np.median(np.array(b)-np.array(a)))
    await keys.revoke(record.key_id); await keys.close(); await memory.close()
asyncio.run(main())
