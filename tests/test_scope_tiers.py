"""Each scope's place in the sentences table (memroute.memory.tiers), on the real store: a
write past the bound moves the scope to a leaf of its own with its own indexes, and small
scopes stay in their bucket, searched exactly; movers take turns and a stopped move is
redone; a scope is searched the same before and after a move up and back, and a search
during moves sees it whole; scopes crossing the bound at once are moved over the pool's
connections."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np

from memroute.memory import Episode, Memory, Scope
from memroute.memory.embedders.base import l2_normalize
from memroute.memory.tiers import ScopeTiers, index_name, index_names, own_table
from memroute.memory.writes import SENTENCE_COPY_TYPES

TOPICS = ["parrot Kiwi sings", "sister in Trondheim", "dentist on Monday", "laptop repair",
          "garden after rain", "piano lessons", "ferry to Bergen", "invoice from the bakery"]


def turns(n: int, prefix: str = "t") -> list[Episode]:
    return [Episode(content=f"Note {i}: {TOPICS[i % 8]} and {TOPICS[i * 3 % 7]}.",
                    session_id=f"s{i // 20}", uid=f"{prefix}{i}") for i in range(n)]


async def open_memory(settings, embedder, min_sentences: int, **more) -> Memory:
    return await Memory.open(
        settings=settings.model_copy(update={"scope_index_min_sentences": min_sentences,
                                             **more}),
        embedder=embedder, schema=f"tiers_{uuid.uuid4().hex[:10]}")


async def place_of(memory: Memory, scope: Scope) -> str | None:
    """The leaf holding the scope's sentences (None: it holds none)."""
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT tableoid::regclass::text FROM {memory.schema}.sentences "
            "WHERE scope_key = %s LIMIT 1", [scope.key])
        row = await cur.fetchone()
    return row and row[0].split(".")[-1]


async def probe_plan(memory: Memory, scope: Scope, vector: np.ndarray) -> str:
    """The plan of the vector probe, explicit sorts off (so that a small test scope's own
    index is used as a big one's would be, when it has one)."""
    async with memory._pool.connection() as conn:
        await conn.execute("SET LOCAL enable_sort = off")
        cur = await conn.execute(
            f"EXPLAIN SELECT episode_uid FROM {memory.schema}.sentences s "
            "WHERE s.scope_key = %s ORDER BY s.embedding <=> %s LIMIT 60",
            [scope.key, vector], prepare=False)
        return " ".join(row[0] for row in await cur.fetchall())


async def own_indexes(memory: Memory) -> dict[str, bool]:
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND c.relname ~ '^sentences_(embedding|tsv|entity_keys|scope)_[0-9a-f]{32}$'",
            [memory.schema])
        return dict(await cur.fetchall())


async def wait_for_leaf(memory: Memory, scope: Scope, seconds: float = 60) -> None:
    for _ in range(int(seconds * 10)):
        if await place_of(memory, scope) == own_table(scope.key):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{scope.key} has no leaf of its own after {seconds} s")


async def test_a_write_past_the_bound_moves_the_scope_to_its_own_leaf_and_small_ones_stay_exact(
        settings, embedder) -> None:
    memory = await open_memory(settings, embedder, 60)
    big, small = Scope(org_id="big", project_id="p"), Scope(org_id="small", project_id="p")
    try:
        await memory.add(small, turns(40, "s"))
        await memory.add(big, turns(50))
        assert await own_indexes(memory) == {}  # the store has no vector index over scopes
        assert (await place_of(memory, big)).endswith("_shared")
        await memory.add(big, turns(70)[50:])  # 70 sentences: past the bound
        await wait_for_leaf(memory, big)
        assert await own_indexes(memory) == dict.fromkeys(index_names(big.key), True)
        assert (await memory.count(big))["sentences"] == 70
        async with memory._pool.connection() as conn:
            await conn.execute(f"ANALYZE {memory.schema}.sentences")
        query = "Who sings, the parrot?"
        vector = (await memory.embed_queries([query]))[0]
        assert index_name(big.key) in await probe_plan(memory, big, vector)
        assert "sentences_embedding" not in await probe_plan(memory, small, vector)
        # the small scope's vector lane is the exact nearest of its own sentences
        hits = await memory.search_scored(small, query, k=10, rerank=False, context=(0, 0),
                                          lexical=False, entities=False)
        stored = await memory.with_stored_embeddings(small, list(hits))
        scores = [float(h.sentence_embeddings[0] @ vector) for h in stored]
        async with memory._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT 1 - (embedding <=> %s) FROM {memory.schema}.sentences "
                "WHERE scope_key = %s", [vector, small.key])
            every = sorted((row[0] for row in await cur.fetchall()), reverse=True)
        np.testing.assert_allclose(scores, every[:10], rtol=1e-5)
        # its searches use its leaf, and writes to it find it there (no move is started)
        assert len(await memory.search_scored(big, query, k=5)) == 5
        await memory.add(big, turns(75)[70:])
        assert not memory._scope_tiers._moving
    finally:
        await memory.close()


async def test_store_items_past_the_bound_move_the_scope_to_its_own_leaf(settings,
                                                                       embedder) -> None:
    """Items put through LangGraph's store face are episodes of the tenant's scope: a put
    that takes the scope past the bound moves it, as `Memory.add` does."""
    from langgraph.store.base import PutOp

    from memroute.langgraph_store import MemrouteStore

    memory = await open_memory(settings, embedder, 60)
    store = MemrouteStore(memory, tenant=Scope(org_id="items", project_id="p"))
    try:
        await store.abatch([PutOp(("notes",), f"n{i}", {"text": turns(50)[i].content})
                            for i in range(50)])
        assert await own_indexes(memory) == {} and not memory._scope_tiers._moving
        await store.abatch([PutOp(("notes",), f"n{i}", {"text": turns(70)[i].content})
                            for i in range(50, 70)])
        await wait_for_leaf(memory, store.tenant)
        assert await own_indexes(memory) == dict.fromkeys(index_names(store.tenant.key), True)
    finally:
        await memory.close()


async def test_movers_of_one_scope_take_turns_and_a_stopped_move_is_redone(
        settings, embedder) -> None:
    writer = await open_memory(settings, embedder, 10**6)  # writes without moving
    scope = Scope(org_id="race", project_id="p")
    s = writer.schema
    try:
        await writer.add(scope, turns(40))
        movers = [ScopeTiers(writer._pool, s, 30) for _ in range(3)]
        moved = await asyncio.gather(*(m.place(scope.key) for m in movers))
        assert True in moved  # the others found it moved, or another one moving it
        assert await place_of(writer, scope) == own_table(scope.key)
        assert await own_indexes(writer) == dict.fromkeys(index_names(scope.key), True)
        # back to its bucket (40 sentences, under half of 100), then a move up stopped
        # before its switch: the table it was filling, with rows not the scope's
        assert await ScopeTiers(writer._pool, s, 100).place(scope.key) is False
        assert (await place_of(writer, scope)).endswith("_shared")
        async with writer._pool.connection() as conn:
            await conn.execute(f"CREATE TABLE {s}.{own_table(scope.key)} "
                               f"(LIKE {s}.sentences INCLUDING DEFAULTS INCLUDING GENERATED)")
            await conn.execute(f"INSERT INTO {s}.{own_table(scope.key)} (scope_key, "
                               "episode_uid, idx, text, embedding, session_id, producer, "
                               "produced_at) SELECT scope_key, 'stale', idx, text, embedding, "
                               f"session_id, producer, produced_at FROM {s}.sentences LIMIT 3")
        reader = await Memory.open(settings=settings.model_copy(
            update={"scope_index_min_sentences": 30}), embedder=embedder, schema=s)
        try:
            assert await reader.index_scopes() == 1
        finally:
            await reader.close()
        assert await place_of(writer, scope) == own_table(scope.key)
        assert (await writer.count(scope))["sentences"] == 40
        assert await own_indexes(writer) == dict.fromkeys(index_names(scope.key), True)
    finally:
        await writer.close()


SEARCH = {"k": 8, "context": (0, 0), "rerank": False, "entities": False}


async def results(memory: Memory, scope: Scope, query: str) -> list[tuple[str, float]]:
    found = await memory.search_scored(scope, query, **SEARCH)
    return [(r.uid, round(r.vector_score, 5)) for r in found]


async def test_a_scope_moved_up_and_back_is_searched_the_same(settings, embedder) -> None:
    memory = await open_memory(settings, embedder, 10**6)  # moved by hand below
    scope = Scope(org_id="moved", project_id="p")
    queries = ["Who sings, the parrot?", "When is the dentist?", "the ferry to Bergen"]
    try:
        await memory.add(scope, turns(40))
        await memory.add(Scope(org_id="neighbour", project_id="p"), turns(30, "n"))
        before = [await results(memory, scope, q) for q in queries]
        assert await ScopeTiers(memory._pool, memory.schema, 30).place(scope.key)
        assert await place_of(memory, scope) == own_table(scope.key)
        assert [await results(memory, scope, q) for q in queries] == before
        # deletions take it under half the bound: back to its bucket, searched exactly
        await memory.delete(scope, uids=[f"t{i}" for i in range(25)])
        left = [await results(memory, scope, q) for q in queries]
        assert await ScopeTiers(memory._pool, memory.schema, 40).place(scope.key) is False
        assert (await place_of(memory, scope)).endswith("_shared")
        assert [await results(memory, scope, q) for q in queries] == left
        assert (await memory.count(scope))["sentences"] == 15
    finally:
        await memory.close()


async def fill_random(memory: Memory, scope: Scope, n: int, seed: int = 0) -> None:
    """``n`` one-sentence episodes of random words and random unit vectors, by COPY."""
    rng = np.random.default_rng(seed)
    words = [w for topic in TOPICS for w in topic.split()]
    vectors = l2_normalize(rng.normal(size=(n, memory.embedder.dim)).astype(np.float32))
    texts = [" ".join(rng.choice(words, 6)) for _ in range(n)]
    t0, s = datetime(2024, 1, 1, tzinfo=timezone.utc), memory.schema
    async with memory._pool.connection() as conn, conn.transaction():
        async with conn.cursor().copy(
                f"COPY {s}.episodes (scope_key, org_id, project_id, uid, session_id, producer, "
                "produced_at, content) FROM STDIN") as copy:
            for i in range(n):
                await copy.write_row([scope.key, scope.org_id, scope.project_id, f"r{i}",
                                      "s", "user", t0 + timedelta(minutes=i), texts[i]])
        async with conn.cursor().copy(
                f"COPY {s}.sentences (scope_key, episode_uid, idx, text, embedding, session_id, "
                "producer, produced_at, metadata, entity_keys, entities) FROM STDIN "
                "(FORMAT BINARY)") as copy:
            copy.set_types(SENTENCE_COPY_TYPES)
            for i in range(n):
                await copy.write_row([scope.key, f"r{i}", 0, texts[i], vectors[i], "s", "user",
                                      t0 + timedelta(minutes=i), "{}", None, None])


async def test_a_search_during_moves_sees_the_scope_before_or_after_never_half_moved(
        settings, embedder) -> None:
    """Four searching loops on a scope of 2,000 sentences and on a small scope of its bucket
    (beside 20,000 sentences of another, which the attach of a leaf reads through) while
    the scope moves up and back four times: every result is the one of the scope in its
    bucket or in its own leaf (they may differ: an HNSW scan is approximate), never a scope
    half moved or missing."""
    memory = await open_memory(settings, embedder, 10**6)
    up, down = (ScopeTiers(memory._pool, memory.schema, n) for n in (1000, 10**6))
    scope = Scope(org_id="moving", project_id="p")
    async with memory._pool.connection() as conn:
        bucket = await up.bucket(conn, scope.key)
        same = [s for n in range(64) if await up.bucket(
            conn, (s := Scope(org_id=f"stays-{n}", project_id="p")).key) == bucket]
    small, filler = same[:2]
    queries = ["parrot sings in the garden", "invoice repair Monday", "ferry lessons"]
    try:
        await fill_random(memory, scope, 2000)
        await fill_random(memory, small, 50, seed=1)
        await fill_random(memory, filler, 20_000, seed=2)
        expected = {q: {tuple(await results(memory, scope, q))} for q in queries}
        small_expected = {q: await results(memory, small, q) for q in queries}
        await up.place(scope.key)
        for q in queries:
            expected[q].add(tuple(await results(memory, scope, q)))
        await down.place(scope.key)
        seen: list[tuple[str, tuple, tuple]] = []
        counted: list[int] = []
        widened: list[str] = []  # a probe that found too few: the scope looked half empty
        moving = True

        async def search() -> None:
            n = 0
            while moving:
                q = queries[n % 3]
                n += 1
                found = await memory.search_scored(scope, q, **SEARCH)
                widened.extend(q for _ in ("widen_ms",) if "widen_ms" in found.timings)
                seen.append((q, tuple((r.uid, round(r.vector_score, 5)) for r in found),
                             tuple(await results(memory, small, q))))
                counted.append((await memory.count(scope))["sentences"])

        loops = [asyncio.create_task(search()) for _ in range(4)]
        try:
            for _ in range(4):
                assert await up.place(scope.key) is True
                assert await down.place(scope.key) is False
        finally:
            moving = False
            await asyncio.gather(*loops)
        assert len(seen) >= 10
        assert set(counted) == {2000} and widened == []
        assert [(q, r) for q, r, _ in seen if r not in expected[q]] == []
        assert [(q, r) for q, _, r in seen if list(r) != small_expected[q]] == []
    finally:
        await memory.close()


async def test_scopes_crossing_the_bound_at_once_are_moved_over_the_pools_connections(
        settings, embedder, pg_url) -> None:
    """Forty scopes crossing the bound at once (as a bulk import takes thousands): moved two
    at a time over the Memory's pool of three connections; the server never sees more."""
    from psycopg import AsyncConnection

    async with await AsyncConnection.connect(pg_url, autocommit=True) as probe:
        async def clients() -> int:
            cur = await probe.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend'")
            return (await cur.fetchone())[0]

        baseline = await clients()
        memory = await open_memory(settings, embedder, 8, pool_max_size=3, pool_min_size=1,
                                   scope_moves_at_once=2)
        scopes = [Scope(org_id=f"bulk-{n}", project_id="p") for n in range(40)]
        most, adding = 0, True

        async def sample() -> None:
            nonlocal most
            while adding or memory._scope_tiers._moving:
                most = max(most, await clients())
                await asyncio.sleep(0.02)

        sampler = asyncio.create_task(sample())
        try:
            start = time.perf_counter()
            await asyncio.gather(*(memory.add(s, turns(10, f"b{n}"))
                                   for n, s in enumerate(scopes)))
            adding = False
            assert await memory.index_scopes() == 40
            await sampler
            assert time.perf_counter() - start < 300
            assert most <= baseline + 3, (baseline, most)
            assert [await place_of(memory, s) for s in scopes] == [own_table(s.key)
                                                                   for s in scopes]
        finally:
            adding = False
            await sampler
            await memory.close()


def test_an_own_name_is_only_made_of_a_scope_key() -> None:
    scope = Scope(org_id="acme", project_id="p")
    assert own_table(scope.key) == f"sentences_{scope.key}"
    assert index_names(scope.key) == [f"sentences_{what}_{scope.key}"
                                      for what in ("embedding", "tsv", "entity_keys", "scope")]
    for bad in ("x'; DROP TABLE t; --", scope.key.upper(), scope.key[:-1]):
        try:
            own_table(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
