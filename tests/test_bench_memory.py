"""The memory benchmark's store building: synthetic sentences and the bulk load."""

from __future__ import annotations

import asyncio
import copy
import re
from pathlib import Path

import numpy as np

from benchmarks import memory as bench
from memroute.memory import Scope, entity_sql


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
    after = await _indexes(memory)
    # the same, and the own indexes of any scope the tests left past the bound unindexed
    assert before.items() <= after.items()
    assert all(re.fullmatch(r"sentences_(embedding|tsv|entity_keys)_[0-9a-f]{32}", name)
               for name in after.keys() - before.keys())
    assert (await memory.count(scope))["sentences"] == 40
    hits = await memory.search_scored(scope, "Sentence number 12", k=3, context=(0, 0))
    assert "Sentence number 12 is about topic 5." in [r.nucleus.content for r in hits]


async def test_search_figures_show_stages_and_one_round_trip_for_the_read(memory, embedder):
    """Each configuration reports its stages; a search costs the pool's connection check and
    one round trip for probe, lanes, nuclei, neighbours and vectors, with the full-text and
    entity lanes too; the statement's split adds up."""
    texts = [f"Turn {i}: Caroline talked about topic {i % 5} and the weather in Lisbon."
             for i in range(30)]
    scope = Scope(org_id="bench-test", project_id="search")
    await memory.add(scope, bench.episodes_for(texts))
    queries = ["What did Caroline say about topic 3 in Lisbon?", "turn 7 weather"]
    assert await entity_sql.query_keys(queries[0], True)  # the entity lane has work to do
    figures = await bench.measure_search(memory, scope, queries, ["warm up topic"])
    for label in bench.SEARCHES:
        # at most the pool's check and the read (a wait the server had already answered, or
        # one on read-and-write in the pipeline, is not counted: a search may count 0)
        assert figures[label]["round_trips"] <= 2, label
        stages = figures[label]["stages_ms_p50"]
        assert {"embed_ms", "read_ms", "rerank_ms", "other_ms"} <= set(stages)
        assert stages["read_ms"] > 0
    assert max(figures[label]["round_trips"] for label in bench.SEARCHES) >= 0.5  # counted
    for split in figures["statement_ms_p50"].values():
        assert split["probe_ms"] > 0 and split["server_total_ms"] >= split["probe_ms"]


def test_search_ab_imports_a_commits_memory_beside_this_one(tmp_path) -> None:
    """The A/B's base: the commit's own package, under another name, not this tree's."""
    from benchmarks import search_ab
    from memroute.memory import Memory

    base = search_ab.import_base("HEAD", tmp_path)
    assert base.__name__ == "memroute_base.memory" and base.Memory is not Memory
    assert Path(base.__file__).is_relative_to(tmp_path)


def test_plan_stages_count_a_cte_once_under_its_own_subplan() -> None:
    """A CTE scan that drives a CTE includes the CTE's time; it goes to the CTE alone."""
    def node(kind, ms, children=(), name=None):
        return {"Node Type": kind, "Actual Total Time": ms, "Actual Loops": 1,
                "Plans": list(children), **({"Subplan Name": name} if name else {})}

    probe = node("Limit", 4.0, [node("Index Scan", 3.5)], name="CTE hits")
    join = node("Hash Join", 10.0, [node("CTE Scan", 4.5), node("Seq Scan", 2.0)])
    parts = bench.plan_stages({"Plan": node("Sort", 11.0, [probe, join])})
    assert parts == {"hits": 4.0, "main": 11.0 - 10.0 + (10.0 - 4.5 - 2.0) + 2.0}


async def test_ingestion_rounds_alternate_and_report_median_and_spread(settings, embedder,
                                                                      monkeypatch) -> None:
    texts = [f"Ingestion sentence {i} talks about item {i % 5}." for i in range(12)]
    vectors = await embedder.embed_documents(texts)
    monkeypatch.setattr(bench, "INGEST_BATCH", 5)  # 3 batches of the 12 texts
    order: list[str] = []
    rate = bench._ingest_rate

    async def recorded(run_settings, emb, run_texts, pipelined):
        kind = "pipelined" if pipelined else "one_add_at_a_time"
        order.append(kind + ("_with_entities" if run_settings.extract_entities else ""))
        return await rate(run_settings, emb, run_texts, pipelined)

    monkeypatch.setattr(bench, "_ingest_rate", recorded)
    figures = await bench.measure_ingestion(settings, embedder, texts, vectors, rounds=3)
    assert len(figures["rounds"]) == 3
    # the second round runs the kinds in reverse; then entities and precomputed vectors once
    kinds = ["pipelined", "one_add_at_a_time", "pipelined_with_entities"]
    assert order == kinds + kinds[::-1] + kinds + ["pipelined"]
    for kind in kinds:
        per_round = [r[kind] / r["embedder"] for r in figures["rounds"]]
        spread = figures["ratio_to_embedder"][kind]
        assert spread["median"] == sorted(per_round)[1]
        assert spread["min"] == min(per_round) and spread["max"] == max(per_round)
    assert figures["sentences_per_s"]["embedder"]["median"] > 0
    for kind in kinds:
        cpu_ratio = [r["embedder"] / r[kind] for r in figures["cpu_per_round"]]
        assert figures["cpu_ratio_to_embedder"][kind]["median"] == sorted(cpu_ratio)[1]
        assert figures["cpu_ms_per_sentence"][kind]["median"] > 0
    memory = await bench._fresh_ingest_memory(settings, embedder)
    try:
        assert (await memory.count(Scope(org_id="bench", project_id="ingest")))["episodes"] == 0
    finally:
        await memory.close()


async def test_timed_cpu_includes_the_embedded_servers_work(settings, memory) -> None:
    """A statement the server spends CPU on counts, though this process only waits."""
    with bench.Timed(settings, 1) as waiting:
        await asyncio.sleep(0.3)
    with bench.Timed(settings, 1) as server_work:
        async with memory._pool.connection() as conn:
            await conn.execute("SELECT count(*) FROM generate_series(1, 3000000)")
    assert waiting.figures["cpu_ms"] < 50
    assert server_work.figures["cpu_ms"] > 100 + waiting.figures["cpu_ms"]
