"""EXPLAIN ANALYZE of the vector probe of each measured scope, in the tenants store and alone:
the plan the planner picks, and an exact scan of the scope's rows. Plain psycopg: opens no
Memory (no migration)."""
import asyncio, sys, json
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
qs = questions(Path("../shared/data"), int(sys.argv[2]) if len(sys.argv) > 2 else 20)
vecs = [emb.encode([q], queries=True)[0] for q in qs]
schema0 = sys.argv[3] if len(sys.argv) > 3 else "tenants_v1"

def nodes(n):
    yield n["Node Type"] + ("(" + n["Index Name"][:28] + ")" if "Index Name" in n else "")
    for c in n.get("Plans", []): yield from nodes(c)

for size in [int(x) for x in sys.argv[1].split(",")]:
    key = tenant(f"measured-{size}").key
    for schema in (schema0, f"{schema0}_alone_{size}"):
        with psycopg.connect(url) as conn:
            register_vector(conn)
            for label, q in (("planner", f"SELECT episode_uid, embedding <=> %s AS d FROM {schema}.sentences s WHERE scope_key = %s ORDER BY embedding <=> %s LIMIT 60"),
                             ("exact", f"SELECT * FROM (SELECT episode_uid, embedding <=> %s AS d FROM {schema}.sentences s WHERE scope_key = %s OFFSET 0) f ORDER BY d LIMIT 60")):
                times, plans, rows, bufs = [], set(), [], []
                for v in vecs:
                    conn.execute(*sql.hnsw_settings(60))
                    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + q, [v, key, v] if label == "planner" else [v, key], prepare=False).fetchone()[0][0]
                    times.append(plan["Execution Time"]); plans.add(" > ".join(nodes(plan["Plan"])))
                    rows.append(plan["Plan"]["Actual Rows"]); bufs.append(plan["Plan"].get("Shared Hit Blocks", 0) + plan["Plan"].get("Shared Read Blocks", 0))
                    conn.rollback()
                print(f"{size:>6} {schema:<26} {label:<8} p50 {np.median(times):7.2f} p95 {np.percentile(times,95):7.2f} ms  rows {np.median(rows):.0f} buffers {np.median(bufs):.0f}  {plans}", flush=True)
