"""Memory on the real embedded PostgreSQL + pgvector: isolation, context, add, delete, order."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
import pytest

from memroute.memory.bounds import ReadBound
from memroute.memory import (
    EmbedderMismatchError,
    Episode,
    InvalidInputError,
    Memory,
    ModelUnavailableError,
    Scope,
    SyncMemory,
    flatten,
)
from tests.memory_views import CountingEmbedder, query_view

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)


def turns(session: str, texts: list[str], start: int = 0, **meta) -> list[Episode]:
    return [
        Episode(content=t, session_id=session, producer="user" if i % 2 == 0 else "assistant",
                produced_at=T0 + timedelta(minutes=start + i), uid=f"{session}-{start + i}",
                metadata={"turn": start + i, **meta})
        for i, t in enumerate(texts)
    ]


async def test_add_returns_uids_and_is_idempotent(memory: Memory, scope: Scope) -> None:
    episodes = turns("s1", ["My cat Tom is grey. He sleeps all day.", "Tom sounds lazy."])
    uids = await memory.add(scope, episodes)
    assert uids == ["s1-0", "s1-1"]
    assert await memory.add(scope, episodes) == uids
    assert await memory.count(scope) == {"episodes": 2, "sentences": 3}


async def test_stored_sentences_keep_every_field_exactly(memory: Memory, scope: Scope) -> None:
    """Sentences are copied in binary: each stored vector is the embedder's, bit for bit, and
    metadata stays a JSON object (unicode and nesting included)."""
    meta = {"turn": 7, "tags": ["a", "b"], "note": "Zoë's \"quoted\" text\tand a tab"}
    episode = Episode(content="My cat Tom is grey. He sleeps all day.", session_id="s9",
                      producer="Zoë", produced_at=T0, uid="exact-1", metadata=meta)
    await memory.add(scope, [episode])
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT idx, text, embedding, session_id, producer, produced_at, metadata, "
            f"jsonb_typeof(metadata) FROM {memory.schema}.sentences "
            "WHERE scope_key = %s ORDER BY idx", [scope.key])
        rows = await cur.fetchall()
    texts = ["My cat Tom is grey.", "He sleeps all day."]
    assert [(r[0], r[1], r[3], r[4], r[5], r[6], r[7]) for r in rows] == [
        (i, t, "s9", "Zoë", T0, meta, "object") for i, t in enumerate(texts)]
    expected = await memory.embedder.embed_documents(texts)
    assert np.array_equal(np.stack([r[2].to_numpy() for r in rows]), expected)


async def test_add_generates_uids(memory: Memory, scope: Scope) -> None:
    uids = await memory.add(scope, [Episode(content="A note without a uid.")])
    assert len(uids) == 1 and re.fullmatch(r"ep-[0-9a-f]{32}", uids[0])


async def test_failing_batch_leaves_nothing_behind(memory: Memory, scope: Scope) -> None:
    good = turns("s1", ["The router is in the hallway."])
    with pytest.raises(InvalidInputError, match="episode #1"):
        await memory.add(scope, [*good, {"content": "   "}])
    assert (await memory.count(scope))["episodes"] == 0

    class BrokenEmbedder:
        name, dim = memory.embedder.name, memory.embedder.dim

        def __init__(self, short: bool) -> None:
            self.short = short

        async def embed_documents(self, texts):
            if self.short:  # one vector missing: refused before anything is written
                return np.zeros((len(texts) - 1, self.dim), dtype=np.float32)
            vectors = await memory.embedder.embed_documents(texts)
            vectors[-1, 0] = np.nan  # Postgres rejects this row after the episodes went in
            return vectors

        async def embed_query(self, text):
            return await memory.embedder.embed_query(text)

    for short in (True, False):
        broken = Memory(memory._pool, schema=memory.schema, embedder=BrokenEmbedder(short),
                        reranker=memory.reranker, settings=memory.settings, url=memory.url)
        with pytest.raises((ModelUnavailableError, psycopg.Error)):
            await broken.add(scope, turns("s1", ["First one. Second one.", "Third one."]))
        assert await memory.count(scope) == {"episodes": 0, "sentences": 0}


async def test_scope_isolation(memory: Memory) -> None:
    scopes = [Scope(org_id=f"iso-{uuid.uuid4().hex[:6]}", project_id="p", user_id=u)
              for u in ("a", "b", "c")]
    for s in scopes:
        await memory.add(s, turns("s1", [f"The secret code of user {s.user_id} is blue falcon."]))
    hits = await memory.search_scored(scopes[0], "secret code", k=10)
    assert hits and all(h.nucleus.content.endswith("user a is blue falcon.") for h in hits)
    assert await memory.delete(scopes[0], all=True) == 1
    assert (await memory.count(scopes[0]))["episodes"] == 0
    for s in scopes[1:]:
        assert await memory.count(s) == {"episodes": 1, "sentences": 1}
        assert len(await memory.search_scored(s, "secret code")) == 1


async def test_context_neighbours_respect_order_and_sessions(memory: Memory, scope: Scope) -> None:
    await memory.add(scope, turns("a", ["a0 hello", "a1 weather talk", "a2 I adopted a parrot named Kiwi.",
                                        "a3 nice", "a4 it speaks", "a5 bye"]))
    await memory.add(scope, turns("b", ["b0 the parrot Kiwi bit me", "b1 ouch"], start=100))
    hits = await memory.search_scored(scope, "adopted a parrot named Kiwi", k=5, context=(1, 2))
    top = hits[0]
    assert top.nucleus.uid == "a-2"
    assert [e.uid for e in top.episodes] == ["a-1", "a-2", "a-3", "a-4"]
    other = next(h for h in hits if h.nucleus.session_id == "b")
    assert {e.session_id for e in other.episodes} == {"b"}
    assert [e.uid for e in other.episodes] == ["b-100", "b-101"]
    plain = await memory.search_scored(scope, "adopted a parrot named Kiwi", k=1, context=(0, 0))
    assert [e.uid for e in plain[0].episodes] == ["a-2"]


async def test_flatten_is_chronological_and_deduplicated(memory: Memory, scope: Scope) -> None:
    await memory.add(scope, turns("s", [f"step {i}: the {w} is ready" for i, w in
                                        enumerate(["soup", "bread", "salad", "cake", "tea"])]))
    hits = await memory.search_scored(scope, "the cake is ready", k=3, context=(1, 1))
    flat = flatten(hits)
    assert len({e.uid for e in flat}) == len(flat)
    assert [e.produced_at for e in flat] == sorted(e.produced_at for e in flat)


async def test_results_are_best_first_and_carry_scores(memory: Memory, scope: Scope) -> None:
    await memory.add(scope, turns("s", ["Paris is the capital of France.",
                                        "Bananas are rich in potassium.",
                                        "The Eiffel Tower is in Paris."]))
    hits = await memory.search_scored(scope, "What is the capital of France?", k=3, context=(0, 0))
    assert hits[0].nucleus.content == "Paris is the capital of France."
    assert [h.rerank_score for h in hits] == sorted((h.rerank_score for h in hits), reverse=True)
    assert all(-1.0 <= h.vector_score <= 1.0 for h in hits)
    assert all(h.reranker == memory.reranker_name for h in hits)
    assert hits.reranker == "offline-dense-bm25"
    assert set(hits.timings) >= {"embed_ms", "read_ms", "rerank_ms"}


async def test_multi_query_rerank_lifts_second_subject(memory: Memory, scope: Scope) -> None:
    await memory.add(scope, turns("s", ["Alice was born in Lisbon.", "Bob was born in Oslo.",
                                        "Lisbon has many trams.", "Oslo has a long fjord."]))
    single = await memory.search_scored(scope, "Where was Alice born?", k=1, context=(0, 0))
    assert single[0].nucleus.content == "Alice was born in Lisbon."
    pooled = await memory.search_scored(scope, "Where was Alice born?", k=4, context=(0, 0),
                                        queries=["Where was Bob born?"])
    reranked = await memory.rerank(list(pooled), ["Where was Bob born?"], k=1)
    assert reranked[0].nucleus.content == "Bob was born in Oslo."
    concat = await memory.rerank(list(pooled), ["Where was Alice born?", "Where was Bob born?"],
                                 k=2, mode="concat")
    assert {r.nucleus.content for r in concat} == {"Alice was born in Lisbon.",
                                                    "Bob was born in Oslo."}


async def test_lexical_lane_finds_rare_terms(memory: Memory, scope: Scope) -> None:
    await memory.add(scope, turns("s", ["Order XZ-4471 shipped on Monday.",
                                        "Your parcel left the warehouse yesterday.",
                                        "We love hearing from customers."]))
    hits = await memory.search_scored(scope, "status of XZ-4471", k=3, context=(0, 0),
                                      lexical=True)
    assert hits[0].nucleus.content.startswith("Order XZ-4471")
    assert hits[0].lexical_score is not None and hits[0].lexical_score > 0


async def test_delete_session_and_uids(memory: Memory, scope: Scope) -> None:
    await memory.add(scope, turns("s1", ["one", "two", "three"]))
    await memory.add(scope, turns("s2", ["four", "five"], start=10))
    assert await memory.delete(scope, session_id="s1") == 3
    assert await memory.delete(scope, uids=["s2-10"]) == 1
    assert await memory.count(scope) == {"episodes": 1, "sentences": 1}
    hits = await memory.search_scored(scope, "one two three four five", k=10)
    assert [h.nucleus.uid for h in hits] == ["s2-11"]


@pytest.mark.parametrize("bad", ["", "   ", 42, "x" * 9000, "nul\x00byte"])
async def test_bad_queries_raise_typed_errors(memory: Memory, scope: Scope, bad) -> None:
    with pytest.raises(InvalidInputError):
        await memory.search_scored(scope, bad)


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"k": -1}, {"k": 10**6}, {"k": True},
                                    {"context": (1,)}, {"context": (-1, 0)}])
async def test_bad_parameters_raise_typed_errors(memory: Memory, scope: Scope, kwargs) -> None:
    with pytest.raises(InvalidInputError):
        await memory.search_scored(scope, "hello", **kwargs)


@pytest.mark.parametrize("episode", [
    {"content": "ok", "produced_at": "not a time"},
    {"content": "nul \x00 byte"},
    {"content": 123},
    {"content": "ok", "metadata": {"x": object()}},
    {"content": "ok", "session_id": ""},
])
async def test_bad_episodes_are_rejected_and_nothing_is_stored(memory: Memory, scope: Scope,
                                                               episode) -> None:
    with pytest.raises(InvalidInputError):
        await memory.add(scope, [{"content": "valid"}, episode])
    assert (await memory.count(scope))["episodes"] == 0


@pytest.mark.parametrize("bad_scope", [{"org_id": ""}, {"org_id": "a b"}, {"org_id": "x;drop"},
                                       {"project_id": "p"}, "acme"])
async def test_invalid_scopes_raise(memory: Memory, bad_scope) -> None:
    with pytest.raises(InvalidInputError):
        await memory.add(bad_scope, [{"content": "hello"}])


async def test_store_refuses_another_embedder(settings, memory: Memory) -> None:
    class OtherEmbedder:
        name, dim = "other-model", 8

        async def embed_documents(self, texts):
            return np.ones((len(texts), 8), dtype=np.float32)

        async def embed_query(self, text):
            return np.ones(8, dtype=np.float32)

    with pytest.raises(EmbedderMismatchError, match="other-model"):
        await Memory.open(settings=settings, schema=memory.schema, embedder=OtherEmbedder())


async def test_schema_version_recorded(memory: Memory) -> None:
    async with memory._pool.connection() as conn:
        cur = await conn.execute(f"SELECT max(version) FROM {memory.schema}.schema_version")
        assert (await cur.fetchone())[0] >= 1


async def test_sentence_rows_keep_their_vectors_in_the_row(memory: Memory, scope: Scope) -> None:
    """A sentence row (~2.3 kB) is stored whole: a search reads its vector without a TOAST
    lookup (under PostgreSQL's default 2,032-byte target, the vector was moved out)."""
    long = ("The ferry to Zanzibar leaves at dawn from the old harbour, " * 8).strip()
    await memory.add(scope, [Episode(content=f"{long}. It returns at dusk.", uid="inline-1")])
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT count(*), count(pg_column_toast_chunk_id(embedding)), "
            f"max(pg_column_size(s.*)) FROM {memory.schema}.sentences s "
            "WHERE scope_key = %s AND episode_uid = 'inline-1'", [scope.key])
        sentences, moved_out, widest = await cur.fetchone()
    assert sentences == 2 and widest > 2032 and moved_out == 0


def test_sync_facade(settings, embedder, scope: Scope) -> None:
    with SyncMemory.open(settings=settings, embedder=embedder, schema="t_sync") as mem:
        mem.add(scope, [Episode(content="The meeting moved to Thursday.", uid="m1")])
        hits = mem.search_scored(scope, "When is the meeting?", k=1)
        assert hits[0].nucleus.uid == "m1"
        assert mem.delete(scope, all=True) == 1


async def test_real_embedder_semantics(embedder) -> None:
    vectors = await embedder.embed_documents(["A dog runs in the park.", "A puppy is running outside.",
                                              "Quarterly tax filing deadlines."])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    query = await embedder.embed_query("A dog runs in the park.")
    assert float(query @ vectors[0]) > 0.99


async def test_query_vectors_are_reused_by_later_searches_and_the_rerank(
        memory: Memory, scope: Scope) -> None:
    counting = CountingEmbedder(memory.embedder)
    mem = query_view(memory, counting)
    await mem.add(scope, [{"content": "Biscuit the dog sleeps by the fire."},
                          {"content": "The fire brigade came at noon."}])
    first = await mem.search_scored(scope, "Where does the dog sleep?", k=2)
    again = await mem.search_scored(scope, "Where does the dog sleep?", k=2)
    await mem.rerank([*first, *again], ["Where does the dog sleep?", "Who came at noon?"], k=2)
    assert counting.queries == ["Where does the dog sleep?", "Who came at noon?"]
    assert [r.uid for r in first] == [r.uid for r in again]
    cold = await memory.embed_queries(["Where does the dog sleep?"])
    np.testing.assert_allclose(cold[0], (await mem.embed_queries(["Where does the dog sleep?"]))[0],
                               rtol=1e-6)


async def test_query_cache_off_embeds_every_time(memory: Memory, scope: Scope) -> None:
    counting = CountingEmbedder(memory.embedder)
    mem = query_view(memory, counting)
    mem.settings = memory.settings.model_copy(update={"query_cache_size": 0})
    await mem.add(scope, [{"content": "Biscuit the dog sleeps by the fire."}])
    for _ in range(2):
        await mem.search_scored(scope, "Where does the dog sleep?", k=1)
    assert counting.queries == ["Where does the dog sleep?"] * 2 and not mem._query_vectors


async def test_add_batches_stores_each_batch_in_order_and_stops_at_a_bad_one(
        memory: Memory, scope: Scope) -> None:
    batches = [turns("s1", [f"Turn {i}. It has two sentences." for i in range(j, j + 3)], start=j)
               for j in (0, 3, 6)]
    stored = [uids async for uids in memory.add_batches(scope, iter(batches))]
    assert stored == [[e.uid for e in batch] for batch in batches]
    assert await memory.count(scope) == {"episodes": 9, "sentences": 18}
    hits = await memory.search_scored(scope, "Turn 7", k=1, context=(1, 1))
    assert [e.content for e in hits[0].episodes] == [f"Turn {i}. It has two sentences."
                                                     for i in (6, 7, 8)]

    other = Scope(org_id=scope.org_id, project_id="batches-bad")
    bad = [turns("s2", ["A fine turn."]), [{"content": "   "}],
           turns("s2", ["Never stored."], start=1)]
    seen = []
    with pytest.raises(InvalidInputError, match="episode #0"):
        async for uids in memory.add_batches(other, bad):
            seen.append(uids)
    assert len(seen) == 1 and (await memory.count(other))["episodes"] == 1
    assert [uids async for uids in memory.add_batches(other, [])] == []


async def test_a_failed_search_read_leaves_its_connection_as_it_found_it(memory: Memory) -> None:
    """The one-round-trip read runs BEGIN ... COMMIT in autocommit mode; when its statement
    fails, the connection goes back to the pool idle and not in autocommit."""
    from psycopg.pq import TransactionStatus

    from memroute.memory import sql

    vector = np.zeros(memory.embedder.dim, dtype=np.float32)
    vector[0] = 1.0
    async with memory._pool.connection() as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            await sql.read_search(conn, "no_such_schema", "s", vector, ReadBound(), limit=5,
                                  before=1, after=1, timeout_ms=2000)
        assert conn.info.transaction_status == TransactionStatus.IDLE
        assert conn.autocommit is False
        cur = await conn.execute("SELECT current_setting('hnsw.ef_search', true)")
        assert (await cur.fetchone())[0] in (None, "", "40")  # the failed read's setting rolled back
