"""The graph's final rerank: its scorer (composed queries, the question with each rewrite's bridge
words, and the bonus for a hit whose title the best windows of another title name) on the real
embedded PostgreSQL + pgvector and the real MiniLM embedder, and no store read after the
searches: a `Memory` keeps the stored vectors its searches read and reads only the ones it does
not hold."""

from __future__ import annotations

import copy
import dataclasses
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memroute.graph.final_rerank import LINK_BONUS, bridge_words, composed_queries
from memroute.memory import Episode, Memory, Scope, sql
from memroute.memory.rerankers.base import (ContextCandidate, RerankCandidate, RerankQuery,
                                            linked_by_top, rank_by_window, title_name)
from tests.memory_views import query_view


T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
QUESTION = "This high school in Bronzeville was named after a settler who was arrested by whom?"
REWRITE = "Jean Baptiste Point du Sable high school settler arrested"
PASSAGES = [
    "DuSable High School: The school in Bronzeville was named after the settler "
    "Jean Baptiste Point du Sable.",
    "Jean Baptiste Point du Sable: In 1779 the settler was arrested by the British military.",
    "Phillips Academy High School: The high school in Bronzeville was named after "
    "Wendell Phillips, who was never arrested.",
    "Bronzeville: The settlers of the Bronzeville neighborhood built a high school.",
    "Robert Frost: The poet was arrested once in Bronzeville, near a high school.",
    "Chicago Police: Settlers were arrested by the police near the high school in 1850.",
    "South Side: A settler of the South Side was arrested near the high school.",
    "Englewood High School: The South Side high school was named after a settler.",
]
# a rewrite whose bridge missed the settler: only the school's sentence names him
WRONG_BRIDGE = "South Side high school settler arrested"


def test_bridge_words_are_the_rewrites_names_the_question_lacks() -> None:
    assert bridge_words(QUESTION, REWRITE) == ["Jean Baptiste Point du Sable"]
    assert bridge_words(QUESTION, "high school settler arrested") == []  # nothing named
    assert composed_queries([QUESTION, REWRITE]) == [f"{QUESTION} Jean Baptiste Point du Sable"]
    assert composed_queries([QUESTION, "high school named settler"]) == []


def test_title_name_drops_the_disambiguation() -> None:
    assert title_name("Boght Corners, New York") == "Boght Corners"
    assert title_name("Lari White (singer)") == "Lari White"
    assert title_name("Ohio") == "Ohio"
    assert title_name("USA") is None and title_name(None) is None  # too short to link safely


def candidate(uid: str, text: str) -> ContextCandidate:
    return ContextCandidate(uid, RerankCandidate(text, np.zeros((0, 4), np.float32)), (uid,))


def test_a_title_is_linked_only_by_a_best_window_of_another_title() -> None:
    pool = [candidate("a", PASSAGES[0]), candidate("b", PASSAGES[1]),
            candidate("c", "Jean Baptiste Point du Sable: He traded furs."),
            candidate("d", "Wendell Phillips: He was an abolitionist."),
            candidate("e", "Hi Jean Baptiste Point du Sable, how are you? Fine: thanks.")]
    linked = linked_by_top(pool, np.array([0.9, 0.5, 0.4, 0.8, 0.3]), top=2)
    # du Sable is named by the best window (another title): both his sentences; Phillips is
    # named only by a window outside the top 2 (c); a conversation turn has no title
    assert linked.tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert linked_by_top(pool, np.array([0.1, 0.5, 0.4, 0.8, 0.3]), top=1).tolist() == [0.0] * 5


class FixedScores:
    """A reranker whose scores are given (the same for every query)."""

    name = "fixed"

    def __init__(self, scores: list[float]) -> None:
        self.scores = np.array(scores, dtype=np.float32)

    async def score(self, queries, candidates) -> np.ndarray:
        return np.tile(self.scores[:len(candidates)], (len(queries), 1))


async def test_the_bonus_brings_the_linked_paragraph_into_the_top_k() -> None:
    pool = [candidate("school", PASSAGES[0]), candidate("police", PASSAGES[5]),
            candidate("arrest", PASSAGES[1])]
    reranker, query = FixedScores([0.9, 0.62, 0.6]), [RerankQuery(QUESTION, np.zeros(4))]
    assert [i for i, _ in await rank_by_window(reranker, query, pool, 2)] == [0, 1]
    ranked = await rank_by_window(reranker, query, pool, 2, link_bonus=LINK_BONUS)
    assert [i for i, _ in ranked] == [0, 2] and abs(ranked[1][1] - (0.6 + LINK_BONUS)) < 1e-6


async def test_memory_rerank_adds_the_bonus_to_linked_titles_only(memory: Memory) -> None:
    """On stored passages: the arrest sentence's title is named by the school's sentence (a
    best window), so it gains exactly the bonus; the school, named by no other title, keeps
    its score."""
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="tests", user_id="u1")
    await memory.add(scope, [Episode(content=p, session_id=f"p{i}", uid=f"p{i}",
                                     produced_at=T0 + timedelta(minutes=i))
                             for i, p in enumerate(PASSAGES)])
    pool = {}
    for q in (QUESTION, WRONG_BRIDGE):
        for r in await memory.search_scored(scope, q, k=len(PASSAGES)):
            pool.setdefault(r.uid, r)
    pooled = await memory.with_stored_embeddings(scope, list(pool.values()))
    queries = [QUESTION, WRONG_BRIDGE]
    k = len(PASSAGES)
    plain = {r.uid: r.rerank_score for r in await memory.rerank(pooled, queries, k, credit="window")}
    linked = {r.uid: r.rerank_score for r in await memory.rerank(
        pooled, queries, k, credit="window", link_bonus=LINK_BONUS)}
    assert abs(linked["p1"] - plain["p1"] - LINK_BONUS) < 1e-5
    assert linked["p0"] == plain["p0"]


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

    async def route(query, *args, **kwargs):
        in_flight.append(bool(embedded))  # the question's embedding started before
        await asyncio.sleep(0)
        return await real_route(query, *args, **kwargs)

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
