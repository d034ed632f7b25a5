# python -m benchmarks.experiments.tenants_ef_recall <scope size> <ef_search,...>: recall@10 and probe time by ef_search, alone
import sys, time
from pathlib import Path
import numpy as np, psycopg
from pgvector.psycopg import register_vector
from benchmarks.tenants import tenant
from benchmarks.memory import questions
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.memory.server import embedded_server_status
from memroute.settings import MemrouteSettings
url = embedded_server_status(MemrouteSettings().home)["url"]
emb = MiniLMOnnxEmbedder(threads=1)
qs = questions(Path("../shared/data"), 60)[20:60]
vecs = [emb.encode([q], queries=True)[0] for q in qs]
size = int(sys.argv[1]); schema = f"tenants_v1_alone_{size}"; key = tenant(f"measured-{size}").key
with psycopg.connect(url) as conn:
    register_vector(conn)
    truth = []
    for v in vecs:
        rows = conn.execute(f"SELECT episode_uid FROM (SELECT episode_uid, embedding <=> %s d FROM {schema}.sentences WHERE scope_key=%s OFFSET 0) f ORDER BY d LIMIT 10", [v, key]).fetchall()
        truth.append({r[0] for r in rows})
    for ef in [int(x) for x in sys.argv[2].split(",")]:
        rec, ms = [], []
        for v, t in zip(vecs, truth):
            conn.execute("SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan','relaxed_order', false)", [str(ef)])
            s = time.perf_counter()
            rows = conn.execute(f"SELECT episode_uid FROM {schema}.sentences WHERE scope_key=%s ORDER BY embedding <=> %s LIMIT 60", [key, v], prepare=False).fetchall()
            ms.append((time.perf_counter()-s)*1000)
            rec.append(len(t & {r[0] for r in rows[:10]})/10)
        print(f"size {size} ef_search {ef:>4}: recall@10 {np.mean(rec):.3f}  probe p50 {np.median(ms):.2f} ms", flush=True)
