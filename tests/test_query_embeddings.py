"""Query embeddings shared while in flight, and the final rerank's composed queries embedded
during the searches that make them known (docs/research.md, "The composed queries off the
critical path")."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest

from memroute import RetrievalAgent, Scope
from memroute.graph import final_rerank
from memroute.memory.store import Memory
from memroute.planners.offline.planner import OfflinePlanner
from tests.memory_views import CountingEmbedder, query_view

TURNS = ["Clara moved to Lisbon in 2023.", "Clara loves grilled sardines.",
         "People in Lisbon love to eat custard tarts.", "Tom adopted a dog named Biscuit.",
         "Tom works as a ferry captain."]
# resolved from the first search ("Tom"), then asked: a chain of two searches
QUESTION = "What does the person who adopted Biscuit do for a living?"


async def test_a_text_in_flight_is_awaited_not_embedded_again(memory: Memory) -> None:
    counting = CountingEmbedder(memory.embedder, delay=0.05)
    view = query_view(memory, counting)
    first, second = await asyncio.gather(view.embed_queries(["ferry times", "dog"]),
                                         view.embed_queries(["dog", "ferry times"]))
    assert sorted(counting.queries) == ["dog", "ferry times"]
    np.testing.assert_array_equal(first[0], second[1])
    np.testing.assert_array_equal(first[1], second[0])
    assert not view._embedding


async def test_a_cancelled_embedding_leaves_its_waiter_a_vector(memory: Memory) -> None:
    gate = asyncio.Event()
    counting = CountingEmbedder(memory.embedder, gate=gate)
    view = query_view(memory, counting)
    owner = asyncio.ensure_future(view.embed_queries(["ferry times"]))
    await asyncio.sleep(0.01)
    waiter = asyncio.ensure_future(view.embed_queries(["ferry times"]))
    await asyncio.sleep(0.01)
    owner.cancel()
    await asyncio.sleep(0.01)
    gate.set()
    [vector] = await waiter
    np.testing.assert_allclose(vector, (await memory.embed_queries(["ferry times"]))[0],
                               rtol=1e-6)
    assert counting.queries == ["ferry times"] * 2 and not view._embedding


async def test_a_failed_embedding_fails_each_caller_and_is_not_kept(memory: Memory) -> None:
    failing = CountingEmbedder(memory.embedder, delay=0.02, fail=True)
    view = query_view(memory, failing)
    view.prefetch_queries(["ferry times"])
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="embedder down"):
        await view.embed_queries(["ferry times"])
    await asyncio.sleep(0.05)
    assert not view._embedding and not view._prefetching and not view._query_vectors


async def test_prefetch_embeds_after_the_search_query_and_is_found_kept(memory: Memory) -> None:
    counting = CountingEmbedder(memory.embedder)
    view = query_view(memory, counting)
    view.prefetch_queries(["the composed one"], after="the search's query")
    await asyncio.gather(*view._prefetching)
    assert counting.queries == ["the search's query", "the composed one"]
    await view.embed_queries(["the composed one", "the search's query"])
    assert len(counting.queries) == 2
    off = query_view(memory, CountingEmbedder(memory.embedder))
    off.settings = memory.settings.model_copy(update={"query_cache_size": 0})
    off.prefetch_queries(["the composed one"])
    assert not off._prefetching


async def run_auto(memory: Memory, scope: Scope, prefetch: bool):
    """An auto run of QUESTION on a fresh view of ``memory``; the texts embedded, with a
    marker where the final rerank starts."""
    counting = CountingEmbedder(memory.embedder)
    view = query_view(memory, counting)
    if not prefetch:
        view.prefetch_queries = lambda texts, after=None: None
    real_rerank = view.rerank

    async def rerank(*args, **kwargs):
        counting.queries.append("<final rerank>")
        return await real_rerank(*args, **kwargs)

    view.rerank = rerank
    result = await RetrievalAgent(view, planner=OfflinePlanner(use_nlp=True),
                                  context=(0, 0)).aretrieve(QUESTION, scope=scope, k=3,
                                                            strategy="auto")
    return result, counting.queries


async def test_the_composed_query_is_embedded_before_the_final_rerank(memory: Memory) -> None:
    """The same results and scores with and without the prefetch; with it, every composed
    query was embedded by the searches, each text once."""
    scope = Scope(org_id=f"pf-{uuid.uuid4().hex[:8]}", project_id="p", user_id="u")
    await memory.add(scope, [{"content": t, "session_id": "s"} for t in TURNS])
    with_prefetch, embedded = await run_auto(memory, scope, prefetch=True)
    without, embedded_late = await run_auto(memory, scope, prefetch=False)
    queries = list(dict.fromkeys(with_prefetch.queries))
    composed = final_rerank.composed_queries(queries)
    assert len(queries) > 1 and composed  # a chain with a bridge
    assert queries == list(dict.fromkeys(without.queries))
    assert ([(r.uid, r.rerank_score) for r in with_prefetch.results]
            == [(r.uid, r.rerank_score) for r in without.results])
    before_rerank = embedded[:embedded.index("<final rerank>")]
    assert set(composed) <= set(before_rerank)
    assert sorted(t for t in embedded if t != "<final rerank>") == sorted(queries + composed)
    # without it the final rerank embeds them itself
    assert not set(composed) & set(embedded_late[:embedded_late.index("<final rerank>")])


def test_a_sync_memory_prefetch_is_found_kept(sync_memory) -> None:
    """`SyncMemory.prefetch_queries` starts the embeddings on the memory's loop."""
    sync_memory.prefetch_queries(["where the ferry leaves"], after="ferry times")
    memory = sync_memory.memory

    async def prefetched() -> None:  # on the memory's loop, where the prefetch runs
        await asyncio.gather(*memory._prefetching)

    sync_memory.loop.run_as_sync(prefetched())
    name = memory.embedder.query_name
    assert {(name, "ferry times"), (name, "where the ferry leaves")} <= set(memory._query_vectors)
