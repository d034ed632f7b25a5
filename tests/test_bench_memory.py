"""The memory benchmark's store building: synthetic sentences and the bulk load."""

from __future__ import annotations

import copy

import numpy as np

from benchmarks import memory as bench
from memroute.memory import Scope


async def _indexes(memory) -> dict[str, str]:
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
            "AND tablename = 'sentences'", [memory.schema])
        return dict(await cur.fetchall())


def test_synthetic_sentences_are_unit_vectors_near_their_first_source() -> None:
    rng = np.random.default_rng(1)
    real = rng.normal(size=(50, 16)).astype(np.float32)
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    texts = [f"real {i}" for i in range(50)]
    names, vectors = bench.synthetic_corpus(texts, real, 200)
    assert len(names) == len(set(names)) == 200 and vectors.shape == (200, 16)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    sources = [texts.index(n.split(" of ", 1)[1]) for n in names]
    similarity = np.einsum("ij,ij->i", vectors, real[sources])
    assert similarity.min() > 0.4  # weight >= 0.5 on the named source (random pairs: ~0)


async def test_bulk_load_rebuilds_the_same_indexes_and_the_store_searches(memory, embedder):
    texts = [f"Sentence number {i} is about topic {i % 7}." for i in range(40)]
    vectors = await embedder.embed_documents(texts)
    scope = Scope(org_id="bench-test", project_id="bulk")
    mem = copy.copy(memory)  # the same store, loading through precomputed vectors
    mem.embedder = bench.PrecomputedEmbedder(embedder, texts, vectors)
    before = await _indexes(memory)
    await bench.bulk_load(mem, scope, texts, batch=15)
    assert await _indexes(memory) == before
    assert (await memory.count(scope))["sentences"] == 40
    hits = await memory.search_scored(scope, "Sentence number 12", k=3, context=(0, 0))
    assert "Sentence number 12 is about topic 5." in [r.nucleus.content for r in hits]


async def test_ingestion_rounds_alternate_and_report_median_and_spread(settings, embedder,
                                                                      monkeypatch) -> None:
    texts = [f"Ingestion sentence {i} talks about item {i % 5}." for i in range(12)]
    vectors = await embedder.embed_documents(texts)
    monkeypatch.setattr(bench, "INGEST_BATCH", 5)  # 3 batches of the 12 texts
    order: list[str] = []
    rate = bench._ingest_rate

    async def recorded(run_settings, emb, run_texts, pipelined):
        order.append("pipelined" if pipelined else "one_add_at_a_time")
        return await rate(run_settings, emb, run_texts, pipelined)

    monkeypatch.setattr(bench, "_ingest_rate", recorded)
    figures = await bench.measure_ingestion(settings, embedder, texts, vectors, rounds=3)
    assert len(figures["rounds"]) == 3
    # the second round runs the kinds in reverse; then entities and precomputed vectors once
    assert order == ["pipelined", "one_add_at_a_time", "one_add_at_a_time", "pipelined",
                     "pipelined", "one_add_at_a_time", "pipelined", "pipelined"]
    for kind in ("pipelined", "one_add_at_a_time"):
        per_round = [r[kind] / r["embedder"] for r in figures["rounds"]]
        spread = figures["ratio_to_embedder"][kind]
        assert spread["median"] == sorted(per_round)[1]
        assert spread["min"] == min(per_round) and spread["max"] == max(per_round)
    assert figures["sentences_per_s"]["embedder"]["median"] > 0
    memory = await bench._fresh_ingest_memory(settings, embedder)
    try:
        assert (await memory.count(Scope(org_id="bench", project_id="ingest")))["episodes"] == 0
    finally:
        await memory.close()
