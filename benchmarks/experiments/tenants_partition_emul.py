"""Hash partitioning by scope, emulated: an HNSW index over one 64th of the store (the scopes
whose key hashes to the measured scope's bucket), as that scope's partition would have; the
probe filtered to the scope through it, against the scope's own index (EXPLAIN ANALYZE)."""
import sys, time
from pathlib import Path
import numpy as np, psycopg
from pgvector.psycopg import register_vector
from benchmarks.tenants import tenant
from benchmarks.memory import questions
from memroute.memory import sql
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.memory.server import embedded_server_status
from memroute.settings import MemrouteSettings
url = embedded_server_status(MemrouteSettings().home)["url"]
emb = MiniLMOnnxEmbedder(threads=1)
qs = questions(Path("../shared/data"), 40)
vecs = [emb.encode([q], queries=True)[0] for q in qs]
P = int(sys.argv[2]) if len(sys.argv) > 2 else 64
B = f"(('x' || substr(scope_key, 1, 8))::bit(32)::int & {P - 1})"
with psycopg.connect(url, autocommit=True) as conn:
    register_vector(conn)
    conn.execute("SET maintenance_work_mem = '2GB'")
    for size in [int(x) for x in sys.argv[1].split(",")]:
        key = tenant(f"measured-{size}").key
        bucket = conn.execute(f"SELECT {B} FROM (SELECT %s::text AS scope_key) t", [key]).fetchone()[0]
        rows = conn.execute(f"SELECT count(*) FROM tenants_v1.sentences WHERE {B} = %s", [bucket]).fetchone()[0]
        name = f"emul_part_{P}_{bucket}"
        t = time.perf_counter()
        conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON tenants_v1.sentences USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE {B} = {bucket}")
        print(f"scope {size}: bucket {bucket} of {P} holds {rows:,} sentences ({size / rows:.0%} the scope's); index {time.perf_counter() - t:.0f} s", flush=True)
        for label, q in (("partition", f"SELECT episode_uid FROM tenants_v1.sentences WHERE scope_key = %s AND {B} = {bucket} ORDER BY embedding <=> %s LIMIT 60"),
                         ("own index", "SELECT episode_uid FROM tenants_v1.sentences WHERE scope_key = %s ORDER BY embedding <=> %s LIMIT 60")):
            times, plans = [], set()
            for v in vecs:
                with conn.transaction():
                    conn.execute(*sql.hnsw_settings(60))
                    plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + q, [key, v], prepare=False).fetchone()[0][0]
                times.append(plan["Execution Time"])
                def idx(n):
                    yield n.get("Index Name", n["Node Type"])
                    for c in n.get("Plans", []): yield from idx(c)
                plans.add(",".join(idx(plan["Plan"]))[:90])
            print(f"  {label:<10} p50 {np.median(times):7.2f} p95 {np.percentile(times, 95):7.2f} ms {plans}", flush=True)
        conn.execute(f"DROP INDEX tenants_v1.{name}")
