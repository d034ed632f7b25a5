"""Issue #16 item 5: the lexical lane's database time is bounded whatever the query (terms
cap, bounded candidate set, statement timeout), and heavy lexical queries cannot hold the
pool away from a normal search. On a real store of 20k random-word sentences, where an
8,192-character query matches every sentence."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from psycopg.errors import QueryCanceled

from benchmarks.synthetic import fill_word_store, random_words, vocabulary
from memroute.errors import StatementTimeoutError
from memroute.memory import Episode, Memory, Scope, sql
from memroute.memory.limits import MAX_LEXICAL_TERMS, MAX_QUERY_CHARS
from memroute.memory.retry import with_retry

SENTENCES = 20_000


@pytest.fixture(scope="module")
async def word_scope(memory: Memory) -> Scope:
    scope = Scope(org_id=f"words-{uuid.uuid4().hex[:6]}", project_id="lexical")
    await fill_word_store(memory, scope, SENTENCES)
    return scope


def long_query(seed: int = 1) -> str:
    return random_words(vocabulary(2000), MAX_QUERY_CHARS, seed)


async def test_longest_query_ranks_lexical_hits_within_the_bound(memory: Memory,
                                                                 word_scope: Scope) -> None:
    query = long_query()
    assert len(query) > MAX_QUERY_CHARS - 12
    start = time.perf_counter()
    results = await memory.search_scored(word_scope, query, k=10, lexical=True, rerank=False)
    elapsed = time.perf_counter() - start
    # Ranked, not dropped by the statement timeout: the words store is only reachable
    # through the lexical lane (its vectors are zero, outside the HNSW index).
    assert len(results) == 10 and all(r.lexical_score for r in results)
    assert elapsed < 5, f"{elapsed:.1f} s"


async def test_heavy_lexical_queries_do_not_starve_a_normal_search(memory: Memory,
                                                                   word_scope: Scope,
                                                                   scope: Scope) -> None:
    await memory.add(scope, [Episode(content="The lighthouse keeper logs every storm.")])
    heavy = [asyncio.ensure_future(memory.search_scored(word_scope, long_query(seed), k=10,
                                                        lexical=True, rerank=False))
             for seed in range(3 * memory.settings.pool_max_size)]
    await asyncio.sleep(0.05)  # the heavy queries hold the pool first
    start = time.perf_counter()
    normal = await memory.search_scored(scope, "who logs storms?", k=1)
    waited = time.perf_counter() - start
    assert [r.nucleus.content for r in normal] == ["The lighthouse keeper logs every storm."]
    assert all(len(r) == 10 for r in await asyncio.gather(*heavy))
    assert waited < 10, f"a normal search waited {waited:.1f} s behind heavy lexical ones"


async def test_only_the_first_distinct_terms_of_a_query_count(memory: Memory,
                                                              scope: Scope) -> None:
    words = vocabulary(MAX_LEXICAL_TERMS + 1, seed=7)
    await memory.add(scope, [Episode(uid="first", content=f"Note {words[0]}."),
                             Episode(uid="last", content=f"Note {words[-1]}.")])
    query = " ".join(words + [words[0]])  # a repeated term counts once
    async with memory._pool.connection() as conn:
        hits = await sql.lexical_lane(conn, memory.schema, scope.key, query, None, 10)
    assert [h.episode_uid for h in hits] == ["first"]


async def test_lexical_lane_past_its_timeout_is_dropped_and_the_search_goes_on(
        memory: Memory, word_scope: Scope) -> None:
    async with memory._pool.connection() as conn, conn.transaction():
        await conn.execute("SET LOCAL statement_timeout = 1")
        hits = await sql.lexical_lane(conn, memory.schema, word_scope.key, long_query(), None,
                                      10)
        await conn.execute("SET LOCAL statement_timeout = 0")
        count = await (await conn.execute(
            f"SELECT count(*) FROM {memory.schema}.episodes WHERE scope_key = %s",
            [word_scope.key])).fetchone()
    assert hits is None
    assert count == (SENTENCES,)


async def test_a_cancelled_statement_is_a_typed_error_and_not_retried(memory: Memory) -> None:
    calls = 0

    async def slow() -> None:
        nonlocal calls
        calls += 1
        async with memory._pool.connection() as conn, conn.transaction():
            await conn.execute("SET LOCAL statement_timeout = 50")
            await conn.execute("SELECT pg_sleep(5)")

    start = time.perf_counter()
    with pytest.raises(StatementTimeoutError, match="search"):
        await with_retry(slow, "search")
    assert calls == 1 and time.perf_counter() - start < 3


async def test_a_timed_out_search_statement_leaves_its_connection_usable(
        memory: Memory, word_scope: Scope) -> None:
    """Searches that time out on a connection whose statements psycopg would prepare (after
    5 runs) must not poison it: the next searches on it succeed (they failed with
    "prepared statement _pg3_N does not exist" before)."""
    embedding = (await memory.embed_queries(["ferry timetable"]))[0]
    lanes = [sql.lexical_lane_sql(memory.schema, word_scope.key, long_query(), None, 10)]
    outcomes = []
    async with memory._pool.connection() as conn:
        for run in range(12):
            timeout_ms = 1 if run in (4, 5, 6) else 30_000
            try:
                found = await sql.read_search(conn, memory.schema, word_scope.key, embedding,
                                              None, limit=30, before=1, after=2,
                                              timeout_ms=timeout_ms, lanes=lanes)
                outcomes.append(len(found.nuclei))
            except QueryCanceled:
                outcomes.append("timeout")
    assert outcomes[4:7].count("timeout") >= 1
    assert all(isinstance(n, int) and n > 0 for n in outcomes[7:])
    assert outcomes[7:] == [outcomes[0]] * 5
