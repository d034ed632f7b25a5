"""Each large scope's own indexes (memroute.memory.scope_index), on the real store: a
small scope is searched exactly among other tenants, a write past the bound builds the
scope's index in the background, one builder at a time, a broken build is redone, and the
migration gives an existing store's large scopes their indexes."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np

from benchmarks.synthetic import fill_word_store
from memroute.memory import Episode, Memory, Scope
from memroute.memory.schema import migrate
from memroute.memory.scope_index import ScopeIndexes, index_name, index_names

TOPICS = ["parrot Kiwi sings", "sister in Trondheim", "dentist on Monday", "laptop repair",
          "garden after rain", "piano lessons", "ferry to Bergen", "invoice from the bakery"]


def turns(n: int, prefix: str = "t") -> list[Episode]:
    return [Episode(content=f"Note {i}: {TOPICS[i % 8]} and {TOPICS[i * 3 % 7]}.",
                    session_id=f"s{i // 20}", uid=f"{prefix}{i}") for i in range(n)]


async def open_memory(settings, embedder, min_sentences: int) -> Memory:
    return await Memory.open(
        settings=settings.model_copy(update={"scope_index_min_sentences": min_sentences}),
        embedder=embedder, schema=f"si_{uuid.uuid4().hex[:10]}")


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
            "AND c.relname ~ '^sentences_(embedding|tsv|entity_keys)_[0-9a-f]{32}$'",
            [memory.schema])
        return dict(await cur.fetchall())


async def wait_for_index(memory: Memory, scope: Scope, seconds: float = 60) -> None:
    for _ in range(int(seconds * 10)):
        found = await own_indexes(memory)
        if all(found.get(name) for name in index_names(scope.key)):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no valid index for {scope.key} after {seconds} s")


async def test_a_write_past_the_bound_gives_the_scope_its_own_index_and_small_ones_stay_exact(
        settings, embedder) -> None:
    memory = await open_memory(settings, embedder, 60)
    big, small = Scope(org_id="big", project_id="p"), Scope(org_id="small", project_id="p")
    try:
        await memory.add(small, turns(40, "s"))
        await memory.add(big, turns(50))
        assert await own_indexes(memory) == {}  # the store has no index over all scopes
        await memory.add(big, turns(70)[50:])  # 70 sentences: past the bound
        await wait_for_index(memory, big)
        assert await own_indexes(memory) == dict.fromkeys(index_names(big.key), True)
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
        # its searches use the index, and writes to it find it valid (no build is started)
        assert len(await memory.search_scored(big, query, k=5)) == 5
        await memory.add(big, turns(75)[70:])
        assert not memory._scope_indexes._building
    finally:
        await memory.close()


async def test_store_items_past_the_bound_give_the_scope_its_own_index(settings,
                                                                       embedder) -> None:
    """Items put through LangGraph's store face are episodes of the tenant's scope: a put
    that takes the scope past the bound builds its indexes, as `Memory.add` does."""
    from langgraph.store.base import PutOp

    from memroute.langgraph_store import MemrouteStore

    memory = await open_memory(settings, embedder, 60)
    store = MemrouteStore(memory, tenant=Scope(org_id="items", project_id="p"))
    try:
        await store.abatch([PutOp(("notes",), f"n{i}", {"text": turns(50)[i].content})
                            for i in range(50)])
        assert await own_indexes(memory) == {} and not memory._scope_indexes._building
        await store.abatch([PutOp(("notes",), f"n{i}", {"text": turns(70)[i].content})
                            for i in range(50, 70)])
        await wait_for_index(memory, store.tenant)
        assert await own_indexes(memory) == dict.fromkeys(index_names(store.tenant.key), True)
    finally:
        await memory.close()


async def test_builders_of_one_scope_take_turns_and_a_broken_build_is_redone(
        settings, embedder) -> None:
    writer = await open_memory(settings, embedder, 10**6)  # writes without building
    scope = Scope(org_id="race", project_id="p")
    try:
        await writer.add(scope, turns(40))
        builders = [ScopeIndexes(writer._pool, writer.url, writer.schema, 30) for _ in range(3)]
        built = await asyncio.gather(*(b.ensure(scope.key) for b in builders))
        assert True in built  # the others found it built, or another one building it
        assert await own_indexes(writer) == dict.fromkeys(index_names(scope.key), True)
        vector, full_text, entities = index_names(scope.key)
        async with writer._pool.connection() as conn:  # as a build stopped half way leaves it
            await conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = "
                               "%s::regclass", [f"{writer.schema}.{full_text}"])
            await conn.execute(f"DROP INDEX {writer.schema}.{entities}")
        assert await own_indexes(writer) == {vector: True, full_text: False}
        reader = await Memory.open(settings=settings.model_copy(
            update={"scope_index_min_sentences": 30}), embedder=embedder, schema=writer.schema)
        try:
            assert await reader.index_scopes() == 1
        finally:
            await reader.close()
        assert await own_indexes(writer) == dict.fromkeys(index_names(scope.key), True)
    finally:
        await writer.close()


async def test_the_migration_indexes_an_existing_stores_large_scopes(settings, embedder) -> None:
    """A store of version 6 (one HNSW index over all scopes): version 7 builds the index of
    each scope of 5,000 sentences or more and drops the one over all scopes."""
    memory = await open_memory(settings, embedder, 10**6)
    large, small = Scope(org_id="large", project_id="p"), Scope(org_id="small", project_id="p")
    s = memory.schema
    try:
        await fill_word_store(memory, large, 5_000)
        await memory.add(small, turns(30))
        async with memory._pool.connection() as conn:
            await conn.execute(
                f"DELETE FROM {s}.schema_version WHERE version = 7; "
                f"CREATE INDEX sentences_embedding "
                f"ON {s}.sentences USING hnsw (embedding vector_cosine_ops)")
            await conn.commit()
            await conn.set_autocommit(True)
            assert await migrate(conn, s, embedder.name, embedder.dim) == 7
        assert await own_indexes(memory) == dict.fromkeys(index_names(large.key), True)
    finally:
        await memory.close()


def test_an_index_name_is_only_made_of_a_scope_key() -> None:
    scope = Scope(org_id="acme", project_id="p")
    assert index_names(scope.key) == [f"sentences_{what}_{scope.key}"
                                      for what in ("embedding", "tsv", "entity_keys")]
    for bad in ("x'; DROP TABLE t; --", scope.key.upper(), scope.key[:-1]):
        try:
            index_name(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
