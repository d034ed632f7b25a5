"""The full-text lane searches a query's rarest terms (frequencies from ``pg_stats``), and the
lanes ride in the one search statement, also when the vector probe has to be widened."""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from memroute.memory import Episode, Memory, Scope, sql

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
                                      "weather report from Zanzibar", None, 10)
    # "weather" and "report" match 300 sentences each (over 1%): only "zanzibar" is searched
    assert sorted(h.text for h in hits) == sorted(ZANZIBAR)


async def test_a_query_of_common_terms_still_searches_its_rarest(analyzed) -> None:
    memory, scope = analyzed
    async with memory._pool.connection() as conn:
        hits = await sql.lexical_lane(conn, memory.schema, scope.key, "weather report", None,
                                      10)
    assert len(hits) == 10 and all("eather" in h.text for h in hits)


async def test_a_widened_probe_keeps_the_full_text_hits(memory: Memory, scope: Scope) -> None:
    """Three episodes and k = 5: the vector probe comes back short and is widened; the
    full-text lane's hits of the one statement are fused into the widened nuclei."""
    await memory.add(scope, [Episode(content="Our ferry crossed to the island at dawn."),
                             Episode(content="Kiwanuka fixed the boat's engine."),
                             Episode(content="Lunch was grilled fish by the harbour.")])
    found = await memory.search_scored(scope, "who repaired the engine, Kiwanuka?", k=5,
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
