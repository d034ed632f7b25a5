"""The search lanes: the full-text lane searches a query's rarest terms (frequencies from
``pg_stats``), and the lanes ride in the one search statement, also when the vector probe has to
be widened; the full-text lane's database time is bounded whatever the query (terms cap,
bounded candidate set, statement timeout), and heavy full-text queries cannot hold the pool away
from a normal search (on a real store of 20k random-word sentences, where an 8,192-character
query matches every sentence)."""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from psycopg.errors import QueryCanceled

from benchmarks.synthetic import fill_word_store, random_words, vocabulary
from memroute.memory.bounds import ReadBound
from memroute.errors import StatementTimeoutError
from memroute.memory import Episode, Memory, Scope, sql
from memroute.memory.limits import MAX_LEXICAL_TERMS, MAX_QUERY_CHARS
from memroute.memory.retry import with_retry


ZANZIBAR = ["The Zanzibar ferry left at dawn.", "Weather in Zanzibar was mild."]


@pytest.fixture(scope="module")
async def analyzed(settings, embedder) -> AsyncIterator[tuple[Memory, Scope]]:
    """A store of its own (``pg_stats`` are per table) where "weather" and "report" are in
    every sentence but two, and "Zanzibar" in two; analyzed, as autovacuum would."""
    memory = await Memory.open(settings=settings, embedder=embedder,
                               schema=f"lanes_{uuid.uuid4().hex[:8]}")
    scope = Scope(org_id="lanes", project_id="rare-terms")
    await memory.add(scope, [Episode(content=f"Note {i}: the weather report was filed.")
                             for i in range(300)] + [Episode(content=c) for c in ZANZIBAR])
    async with memory._pool.connection() as conn:
        await conn.execute(f"ANALYZE {memory.schema}.sentences")
    yield memory, scope
    await memory.close()


async def test_common_terms_are_not_searched_when_a_rare_one_is(analyzed) -> None:
    memory, scope = analyzed
    async with memory._pool.connection() as conn:
        hits = await sql.lexical_lane(conn, memory.schema, scope.key,
                                      "weather report from Zanzibar", ReadBound(), 10)
    # "weather" and "report" match 300 sentences each (over 1%): only "zanzibar" is searched
    assert sorted(h.text for h in hits) == sorted(ZANZIBAR)


async def test_a_query_of_common_terms_still_searches_its_rarest(analyzed) -> None:
    memory, scope = analyzed
    async with memory._pool.connection() as conn:
        hits = await sql.lexical_lane(conn, memory.schema, scope.key, "weather report", ReadBound(),
                                      10)
    assert len(hits) == 10 and all("eather" in h.text for h in hits)


async def test_term_statistics_are_read_with_a_search_once_a_minute(
        analyzed, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Memory reads the full-text column's statistics in the round trip of its first
    search, searches with them (the lane finds what it finds reading them in its own
    statement), and reads them again once they are older than the maximum age."""
    memory, scope = analyzed
    memory = copy.copy(memory)
    memory._term_stats = None
    asked: list[bool] = []
    read_search = sql.read_search

    async def spying(*args, **kwargs):
        asked.append(kwargs.get("read_term_stats", False))
        return await read_search(*args, **kwargs)

    monkeypatch.setattr(sql, "read_search", spying)
    for _ in range(3):
        await memory.search_scored(scope, "weather report from Zanzibar", k=2, lexical=True)
    assert asked == [True, False, False]
    stats = memory._term_stats[1]
    async with memory._pool.connection() as conn:
        cur = await conn.execute("SELECT %s::text[], %s::float4[]", stats)
        terms, freqs = await cur.fetchone()
        assert "weather" in terms and "zanzibar" in terms and len(freqs) == len(terms) + 2
        for query in ["weather report from Zanzibar", "weather report", "Zanzibar ferry"]:
            assert await sql.lane_hits(conn, sql.lexical_lane_sql(
                memory.schema, scope.key, query, ReadBound(), 10, stats)) == \
                await sql.lane_hits(conn, sql.lexical_lane_sql(
                    memory.schema, scope.key, query, ReadBound(), 10))
    monkeypatch.setattr(sql, "TERM_STATS_MAX_AGE_S", 0.0)
    await memory.search_scored(scope, "weather report from Zanzibar", k=2, lexical=True)
    assert asked[-1] is True
    assert sql.term_stats_of(None) == sql.TermStats("{}", "{}")  # a table never analyzed


async def test_a_widened_probe_keeps_the_full_text_hits(memory: Memory, scope: Scope) -> None:
    """Three episodes and k = 5: the vector probe comes back short and is widened; the
    full-text lane's hits of the one statement are fused into the widened nuclei."""
    await memory.add(scope, [Episode(content="Our ferry crossed to the island at dawn."),
                             Episode(content="Kiwanuka fixed the boat's engine."),
                             Episode(content="Lunch was grilled fish by the harbour.")])
    found = await memory.search_scored(scope, "Kiwanuka: who repaired the engine?", k=5,
                                       lexical=True, entities=False, rerank=False)
    assert len(found) == 3
    lexical = {r.nucleus.content: r.lexical_score for r in found}
    assert lexical["Kiwanuka fixed the boat's engine."] > 0
    assert lexical["Lunch was grilled fish by the harbour."] is None
    assert "widen_ms" in found.timings


async def test_a_search_whose_full_text_lane_times_out_goes_on_without_it(
        memory: Memory, scope: Scope, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue-16 backstop with the lane inside the one statement: past the statement
    timeout, the statement runs again without the full-text lane."""
    await memory.add(scope, [Episode(content="The lighthouse keeper logs every storm.")])

    def slow_lane(*args, **kwargs) -> sql.Lane:
        return sql.Lane("lexical", sql.LEXICAL_ORDER, """lexical AS (
            SELECT NULL::text AS episode_uid, NULL::text AS text, 0.0::float8 AS score,
                   0::bigint AS rank FROM pg_sleep(5))""", [])

    monkeypatch.setattr(sql, "lexical_lane_sql", slow_lane)
    quick = copy.copy(memory)
    quick.settings = memory.settings.model_copy(update={"search_statement_timeout_ms": 300})
    start = time.perf_counter()
    found = await quick.search_scored(scope, "who logs storms?", k=1, lexical=True)
    assert [r.nucleus.content for r in found] == ["The lighthouse keeper logs every storm."]
    assert found[0].lexical_score is None and time.perf_counter() - start < 4


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
        hits = await sql.lexical_lane(conn, memory.schema, scope.key, query, ReadBound(), 10)
    assert [h.episode_uid for h in hits] == ["first"]


async def test_lexical_lane_past_its_timeout_is_dropped_and_the_search_goes_on(
        memory: Memory, word_scope: Scope) -> None:
    async with memory._pool.connection() as conn, conn.transaction():
        await conn.execute("SET LOCAL statement_timeout = 1")
        hits = await sql.lexical_lane(conn, memory.schema, word_scope.key, long_query(), ReadBound(),
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
    lanes = [sql.lexical_lane_sql(memory.schema, word_scope.key, long_query(), ReadBound(), 10)]
    outcomes = []
    async with memory._pool.connection() as conn:
        for run in range(12):
            timeout_ms = 1 if run in (4, 5, 6) else 30_000
            try:
                found = await sql.read_search(conn, memory.schema, word_scope.key, embedding,
                                              ReadBound(), limit=30, before=1, after=2,
                                              timeout_ms=timeout_ms, lanes=lanes)
                outcomes.append(len(found.nuclei))
            except QueryCanceled:
                outcomes.append("timeout")
    assert outcomes[4:7].count("timeout") >= 1
    assert all(isinstance(n, int) and n > 0 for n in outcomes[7:])
    assert outcomes[7:] == [outcomes[0]] * 5


async def test_a_querys_entity_keys_are_kept_for_its_next_search(monkeypatch) -> None:
    """The second search of a query gets its entity keys without parsing (or a worker
    thread) again; a caller changing the list it got changes nothing kept."""
    from memroute.memory import entity_sql
    from memroute.nlp import query_entity_keys

    parsed: list[str] = []

    def counting(text: str) -> list[str]:
        parsed.append(text)
        return query_entity_keys(text)

    monkeypatch.setattr(entity_sql, "query_entity_keys", counting)
    query = "Where did Caroline meet Melanie in Lisbon last spring?"
    first = await entity_sql.query_keys(query, True)
    assert first and parsed == [query]
    first.append("not a key")
    assert await entity_sql.query_keys(query, True) == first[:-1]
    assert parsed == [query]
    assert await entity_sql.query_keys(query, False) == []
