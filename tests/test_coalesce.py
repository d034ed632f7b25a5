"""Concurrent calls coalesced into one batch: `memroute.memory.coalesce` and the write path
that uses it (document embeddings and entity extraction of concurrent adds)."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timezone

import numpy as np
import pytest

from memroute.memory import Memory, Scope
from memroute.memory import entity_sql
from memroute.memory.coalesce import Coalescer
from memroute.memory.embedders.coalescing import CoalescingEmbedder

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


class Doubler:
    """A batch function that records its batches and takes ``delay`` seconds in a thread."""

    def __init__(self, delay: float = 0.02) -> None:
        self.batches: list[list[int]] = []
        self.delay = delay

    async def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        if any(i < 0 for i in items):
            raise ValueError(f"negative item in {items}")
        await asyncio.to_thread(threading.Event().wait, self.delay)
        return [2 * i for i in items]


async def test_concurrent_calls_run_as_one_batch_and_each_gets_its_own_results() -> None:
    run = Doubler()
    coalesce = Coalescer(run, max_wait_s=0.01)
    calls = [list(range(10 * c, 10 * c + 10)) for c in range(16)]
    results = await asyncio.gather(*(coalesce(items) for items in calls))
    assert results == [[2 * i for i in items] for items in calls]
    assert run.batches == [[i for items in calls for i in items]]


async def test_calls_made_while_a_batch_runs_go_in_the_next_batch() -> None:
    run = Doubler(delay=0.2)
    coalesce = Coalescer(run, max_wait_s=0.0)
    first = asyncio.ensure_future(coalesce([1]))
    while not run.batches:  # the first batch is running
        await asyncio.sleep(0.005)
    later = await asyncio.gather(*(coalesce([n]) for n in (2, 3, 4)))
    assert await first == [2] and later == [[4], [6], [8]]
    assert run.batches == [[1], [2, 3, 4]]


async def test_a_failing_call_fails_alone() -> None:
    run = Doubler()
    coalesce = Coalescer(run, max_wait_s=0.01)
    results = await asyncio.gather(coalesce([1, 2]), coalesce([3, -1]), coalesce([5]),
                                   return_exceptions=True)
    assert results[0] == [2, 4] and results[2] == [10]
    assert isinstance(results[1], ValueError) and "-1" in str(results[1])
    # the batch of all three failed; then each call ran alone
    assert run.batches == [[1, 2, 3, -1, 5], [1, 2], [3, -1], [5]]


async def test_a_cancelled_call_is_left_out_and_the_others_complete() -> None:
    run = Doubler(delay=0.2)
    coalesce = Coalescer(run, max_wait_s=0.0)
    first = asyncio.ensure_future(coalesce([1]))
    while not run.batches:
        await asyncio.sleep(0.005)
    dropped = asyncio.ensure_future(coalesce([7]))
    kept = asyncio.ensure_future(coalesce([8]))
    await asyncio.sleep(0.01)
    dropped.cancel()
    assert await first == [2] and await kept == [16]
    assert dropped.cancelled()
    assert run.batches == [[1], [8]]


async def test_batches_hold_at_most_max_items_and_a_larger_call_runs_alone() -> None:
    run = Doubler()
    coalesce = Coalescer(run, max_items=5, max_wait_s=0.01)
    results = await asyncio.gather(coalesce([1, 2, 3]), coalesce([4, 5]), coalesce([6, 7]),
                                   coalesce(list(range(10, 18))))
    assert results[3] == [2 * i for i in range(10, 18)]
    assert run.batches == [[1, 2, 3, 4, 5], [6, 7], list(range(10, 18))]


def test_each_event_loop_coalesces_its_own_calls() -> None:
    run = Doubler()
    coalesce = Coalescer(run, max_wait_s=0.01)
    out: dict[int, list] = {}

    def in_own_loop(t: int) -> None:
        async def calls() -> list:
            return await asyncio.gather(*(coalesce([t * 100 + n]) for n in range(4)))
        out[t] = asyncio.run(calls())

    threads = [threading.Thread(target=in_own_loop, args=(t,)) for t in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert out == {t: [[2 * (t * 100 + n)] for n in range(4)] for t in range(3)}
    assert sorted(map(sorted, run.batches)) == [[t * 100 + n for n in range(4)]
                                                 for t in range(3)]


async def test_concurrent_adds_embed_and_extract_entities_in_few_batches(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sixteen tenants adding at once: fewer embedding and spaCy batches than adds, and
    every sentence stored with its own vector and entities."""
    assert memory.settings.extract_entities
    embedded: list[int] = []
    extracted: list[int] = []

    class Counting:
        name, dim = memory.embedder.name, memory.embedder.dim
        token_windows = getattr(memory.embedder, "token_windows", None)

        async def embed_documents(self, texts: list[str]) -> np.ndarray:
            embedded.append(len(texts))
            return await real.embed_documents(texts)

        async def embed_query(self, text: str) -> np.ndarray:
            return await real.embed_query(text)

    real = memory.embedder
    original_extract = entity_sql.extract_entities

    def counting_extract(texts: list[str]):
        extracted.append(len(texts))
        return original_extract(texts)

    monkeypatch.setattr(entity_sql, "extract_entities", counting_extract)
    monkeypatch.setattr(memory, "embedder", Counting())
    scopes = [Scope(org_id="coalesce", project_id="p", user_id=f"t{t}") for t in range(16)]
    texts = {t: [f"Tenant {t} met Alice Moreau in Lisbon on day {j}." for j in range(5)]
             for t in range(16)}
    try:
        await asyncio.gather(*(memory.add(scopes[t], [
            {"content": text, "uid": f"u{j}", "produced_at": T0} for j, text in
            enumerate(texts[t])]) for t in range(16)))
        assert sum(embedded) == sum(extracted) == 80
        assert len(embedded) < 16 and len(extracted) < 16
        expected = await real.embed_documents([x for t in range(16) for x in texts[t]])
        keys = [sorted({e.key for e in found}) for found in
                original_extract([x for t in range(16) for x in texts[t]])]
        async with memory._pool.connection() as conn:
            for t in range(16):
                cur = await conn.execute(
                    f"SELECT embedding, entity_keys FROM {memory.schema}.sentences "
                    "WHERE scope_key = %s ORDER BY episode_uid", [scopes[t].key])
                rows = await cur.fetchall()
                assert len(rows) == 5
                for j, (vector, stored_keys) in enumerate(rows):
                    assert np.allclose(vector.to_numpy(), expected[5 * t + j], atol=1e-6)
                    assert set(keys[5 * t + j]) == set(stored_keys) != set()
    finally:
        for scope in scopes:
            await memory.delete(scope, all=True)


async def test_coalescing_embedder_passes_the_rest_through(embedder) -> None:
    coalescing = CoalescingEmbedder(embedder)
    assert (coalescing.name, coalescing.dim) == (embedder.name, embedder.dim)
    assert coalescing.token_windows is embedder.token_windows
    one, two = await asyncio.gather(coalescing.embed_documents(["A grey cat."]),
                                    coalescing.embed_documents(["A red car.", "Rain."]))
    assert one.shape == (1, embedder.dim) and two.shape == (2, embedder.dim)
    assert np.allclose(np.vstack([one, two]),
                       await embedder.embed_documents(["A grey cat.", "A red car.", "Rain."]),
                       atol=1e-6)
    assert np.array_equal(await coalescing.embed_query("cat"), await embedder.embed_query("cat"))
