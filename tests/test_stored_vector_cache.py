"""The final rerank of the graph reads no store after its searches: a `Memory` keeps the
stored vectors its searches read, and reads only the ones it does not hold."""

from __future__ import annotations

import copy
import dataclasses
import uuid

import numpy as np
import pytest

from memroute import Scope
from memroute.memory import sql
from tests.memory_views import query_view

TURNS = ["Clara moved to Lisbon in 2023.", "Clara loves grilled sardines.",
         "People in Lisbon love to eat custard tarts.", "Tom adopted a dog named Biscuit."]


@pytest.fixture
async def searched(memory):
    scope = Scope(org_id=f"vc-{uuid.uuid4().hex[:8]}", project_id="p", user_id="u")
    await memory.add(scope, [{"content": t, "session_id": "s"} for t in TURNS])
    results = await memory.search_scored(scope, "What does Clara love to eat?", k=3,
                                         context=(1, 1))
    bare = [dataclasses.replace(r, sentence_embeddings=None) for r in results]
    return scope, results, bare


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    reads: list[list[str]] = []
    real = sql.fetch_sentence_embeddings

    async def counting(conn, schema, scope_key, uids):
        reads.append(list(uids))
        return await real(conn, schema, scope_key, uids)

    monkeypatch.setattr(sql, "fetch_sentence_embeddings", counting)
    return reads


async def test_vectors_a_search_read_are_not_read_again(memory, searched, monkeypatch) -> None:
    scope, results, bare = searched
    reads = count_reads(monkeypatch)
    restored = await memory.with_stored_embeddings(scope, bare)
    assert reads == []
    for got, want in zip(restored, results, strict=True):
        np.testing.assert_array_equal(got.sentence_embeddings, want.sentence_embeddings)


async def test_without_kept_vectors_they_are_read_once(memory, searched, monkeypatch) -> None:
    scope, results, bare = searched
    cold = copy.copy(memory)  # another process's Memory: nothing kept
    cold._stored_vectors = type(memory._stored_vectors)()
    reads = count_reads(monkeypatch)
    restored = await cold.with_stored_embeddings(scope, bare)
    assert len(reads) == 1 and set(reads[0]) == {e.uid for r in results for e in r.episodes}
    for got, want in zip(restored, results, strict=True):
        np.testing.assert_array_equal(got.sentence_embeddings, want.sentence_embeddings)


async def test_a_delete_forgets_the_kept_vectors(memory, searched, monkeypatch) -> None:
    scope, results, bare = searched
    await memory.delete(scope, uids=[results[0].uid])
    reads = count_reads(monkeypatch)
    await memory.with_stored_embeddings(scope, bare[:1])
    assert reads and results[0].uid in reads[0]


async def test_restored_results_know_their_nucleus_rows(memory, searched) -> None:
    scope, results, bare = searched
    bare = [dataclasses.replace(r, nucleus_rows=None) for r in bare]
    restored = await memory.with_stored_embeddings(scope, bare)
    assert [r.nucleus_rows for r in restored] == [r.nucleus_rows for r in results]


async def test_an_auto_question_is_embedded_once_while_the_planner_decides(memory):
    """The router starts the question's embedding before the planner decides, and the first
    search finds the vector kept: each query of the run is embedded once."""
    import asyncio

    from memroute import RetrievalAgent
    from memroute.graph.final_rerank import composed_queries
    from memroute.planners.offline.planner import OfflinePlanner

    scope = Scope(org_id=f"vc-{uuid.uuid4().hex[:8]}", project_id="p", user_id="u")
    await memory.add(scope, [{"content": t, "session_id": "s"} for t in TURNS])
    view = query_view(memory, copy.copy(memory.embedder))
    embedded: list[str] = []
    planner = OfflinePlanner(use_nlp=True)
    real_embed, real_route = memory.embedder.embed_query, planner.route

    async def embed_query(text):
        embedded.append(text)
        return await real_embed(text)

    async def route(query):
        in_flight.append(bool(embedded))  # the question's embedding started before
        await asyncio.sleep(0)
        return await real_route(query)

    in_flight: list[bool] = []
    view.embedder.embed_query = embed_query
    planner.route = route
    question = "What does the person who moved to Lisbon love to eat?"
    result = await RetrievalAgent(view, planner=planner, context=(0, 0)).aretrieve(
        question, scope=scope, k=3, strategy="auto")
    assert in_flight == [True]
    assert embedded[0] == question
    queries = list(dict.fromkeys(result.queries))
    # each once, with the final rerank's composed queries (the question and a bridge)
    assert sorted(embedded) == sorted(queries + composed_queries(queries))


@pytest.mark.parametrize("rerank", [True, False])
@pytest.mark.parametrize("context", [(0, 0), (1, 1)])
async def test_each_result_carries_its_windows_stored_vectors(memory, rerank, context) -> None:
    """With or without the rerank (which stacks only the results' windows), a window of one
    episode or several: each result's vectors are its window's stored sentence vectors in
    window order, and its nucleus rows are its nucleus's."""
    scope = Scope(org_id=f"vc-{uuid.uuid4().hex[:8]}", project_id="p", user_id="u")
    await memory.add(scope, [{"content": t, "session_id": "s"} for t in TURNS])
    results = await memory.search_scored(scope, "What does Clara love to eat?", k=3,
                                         context=context, rerank=rerank)
    assert len(results) == 3
    async with memory._pool.connection() as conn:
        stored = await sql.fetch_sentence_embeddings(
            conn, memory.schema, scope.key, [e.uid for r in results for e in r.episodes])
    for result in results:
        np.testing.assert_array_equal(result.sentence_embeddings,
                                      np.vstack([stored[e.uid] for e in result.episodes]))
        np.testing.assert_array_equal(result.nucleus_embeddings(), stored[result.uid])
