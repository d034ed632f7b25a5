"""Schema migration 6: the items an earlier `MemrouteStore` kept as episodes of the scope their
namespace named move to the default tenant's tables, their vectors with them."""

from __future__ import annotations

import time
import uuid

from psycopg import AsyncConnection

from memroute.langgraph_store import DEFAULT_TENANT, MemrouteStore, item_uid
from memroute.memory import Episode, Memory, Scope
from memroute.memory.schema import migrate


async def sentence_vectors(memory: Memory, scope: Scope, uid: str) -> list[tuple[str, str]]:
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT text, embedding::text FROM {memory.schema}.sentences "
            "WHERE scope_key = %s AND episode_uid = %s ORDER BY idx", [scope.key, uid])
        return await cur.fetchall()


def old_item(uid: str, content: str, value: dict, **metadata) -> Episode:
    """An item as MemrouteStore wrote it before schema version 6."""
    return Episode(uid=uid, content=content, producer="langgraph-store", session_id="store",
                   metadata={"store_value": value, **metadata})


async def test_old_items_move_to_the_default_tenant_without_embedding(settings, embedder) -> None:
    memory = await Memory.open(settings=settings, embedder=embedder,
                               schema=f"mig_{uuid.uuid4().hex[:10]}")
    try:
        org = f"old-{uuid.uuid4().hex[:6]}"
        old_scope, ns = Scope(org_id=org, project_id="notes", user_id="maya"), (org, "notes",
                                                                                "maya")
        dog = {"text": "Biscuit eats salmon kibble. He naps after lunch.", "kind": "pet"}
        # the old store wrote them as episodes with its own metadata keys (store_items)
        await memory._writer.commit(await memory._writer.prepare(old_scope, [
            old_item("dog", dog["text"], dog),
            old_item("raw", '{"text": "a note never searched"}',
                     {"text": "a note never searched"}, store_unindexed=True),
            old_item("gone", "An expired note.", {"text": "An expired note."},
                     store_expires_at=time.time() - 60, store_ttl_minutes=1.0),
            old_item("kept", "A note with a ttl.", {"text": "A note with a ttl."},
                     store_expires_at=time.time() + 3600, store_ttl_minutes=60.0),
        ], replace=True, store_items=True))
        await memory.add(old_scope, [{"uid": "turn", "content": "An ordinary turn."}])
        before = await sentence_vectors(memory, old_scope, "dog")
        async with memory._pool.connection() as conn:  # back to schema version 5
            await conn.execute(f"DROP TABLE {memory.schema}.store_vectors, "
                               f"{memory.schema}.store_items")
            await conn.execute(f"DELETE FROM {memory.schema}.schema_version WHERE version >= 6")
        async with await AsyncConnection.connect(memory.url, autocommit=True) as conn:
            assert await migrate(conn, memory.schema, embedder.name, embedder.dim) == 7

        store = MemrouteStore(memory, strategy="direct")  # no tenant: where they went
        assert (await store.aget(ns, "dog")).value == dog
        assert await store.alist_namespaces() == [ns]
        assert await sentence_vectors(memory, DEFAULT_TENANT, item_uid(ns, "dog")) == before
        hits = await store.asearch((org,), query="What does Biscuit eat?", limit=10)
        assert [(h.key, h.score is None) for h in hits] == [
            ("dog", False), ("kept", False), ("raw", True)]
        assert await store.aget(ns, "gone") is None  # expired
        assert (await store.aget(ns, "kept")).value == {"text": "A note with a ttl."}
        # the old scope keeps the other face's episode, and no item's
        assert [s.episode.uid for s in await memory.get(old_scope, ["dog", "raw", "turn"])] == \
            ["turn"]
        assert (await memory.count(DEFAULT_TENANT))["episodes"] == 3  # raw has no episode
    finally:
        await memory.close()
