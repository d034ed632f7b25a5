"""Schema migrations on stores of older versions, made by running the migrations of that
version: 6 moves the items an earlier `MemrouteStore` kept as episodes of the scope their
namespace named to the default tenant's tables, their vectors with them; 8 partitions the
sentences table by scope, every scope's rows and indexes kept."""

from __future__ import annotations

import time
import uuid

import pytest
from psycopg import AsyncConnection
from test_scaling import distribution_problems

from memroute.langgraph_store import DEFAULT_TENANT, MemrouteStore, item_uid
from memroute.memory import Episode, Memory, Scope, schema
from memroute.memory.tiers import COLUMNS, index_names, own_table


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


async def store_at(url: str, name: str, embedder, version: int,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A store at schema ``version``, as memroute made it then: the migrations up to it."""
    every = schema._migrations
    with monkeypatch.context() as patch:
        patch.setattr(schema, "_migrations", lambda s, dim, buckets: every(s, dim, buckets)[
            :version])
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            assert await schema.migrate(conn, name, embedder.name, embedder.dim,
                                        buckets=4) == version


async def copy_rows(url: str, source: str, target: str) -> None:
    """The episodes and sentences of schema ``source`` into ``target`` (of any version)."""
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f"INSERT INTO {target}.episodes SELECT * FROM {source}.episodes")
        await conn.execute(f"INSERT INTO {target}.sentences ({COLUMNS}) "
                           f"SELECT {COLUMNS} FROM {source}.sentences")


async def migrate_to_current(url: str, name: str, embedder) -> int:
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        return await schema.migrate(conn, name, embedder.name, embedder.dim, buckets=4)


async def test_old_items_move_to_the_default_tenant_without_embedding(
        settings, embedder, monkeypatch) -> None:
    writer = await Memory.open(settings=settings, embedder=embedder,
                               schema=f"mig_{uuid.uuid4().hex[:10]}")
    old = f"mig_{uuid.uuid4().hex[:10]}"
    org = f"old-{uuid.uuid4().hex[:6]}"
    old_scope, ns = Scope(org_id=org, project_id="notes", user_id="maya"), (org, "notes", "maya")
    dog = {"text": "Biscuit eats salmon kibble. He naps after lunch.", "kind": "pet"}
    try:  # the items as an earlier MemrouteStore wrote them, in a store of version 5
        # the old store wrote them as episodes with its own metadata keys (store_items)
        await writer._writer.commit(await writer._writer.prepare(old_scope, [
            old_item("dog", dog["text"], dog),
            old_item("raw", '{"text": "a note never searched"}',
                     {"text": "a note never searched"}, store_unindexed=True),
            old_item("gone", "An expired note.", {"text": "An expired note."},
                     store_expires_at=time.time() - 60, store_ttl_minutes=1.0),
            old_item("kept", "A note with a ttl.", {"text": "A note with a ttl."},
                     store_expires_at=time.time() + 3600, store_ttl_minutes=60.0),
        ], replace=True, store_items=True))
        await writer.add(old_scope, [{"uid": "turn", "content": "An ordinary turn."}])
        before = await sentence_vectors(writer, old_scope, "dog")
        await store_at(writer.url, old, embedder, 5, monkeypatch)
        await copy_rows(writer.url, writer.schema, old)
    finally:
        await writer.close()
    assert await migrate_to_current(writer.url, old, embedder) == 8
    memory = await Memory.open(settings=settings, embedder=embedder, schema=old)
    try:
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


async def sentence_rows(url: str, name: str) -> list[tuple]:
    async with await AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            f"SELECT {COLUMNS.replace('embedding', 'embedding::text')}, tsv::text "
            f"FROM {name}.sentences ORDER BY scope_key, episode_uid, idx")
        return await cur.fetchall()


async def test_partitioning_keeps_every_scopes_rows_and_a_large_scopes_indexes(
        settings, embedder, monkeypatch) -> None:
    """A store of version 7 (one sentences table; a large scope's own partial indexes) with
    three scopes: version 8 puts the large one in a leaf of its own with its indexes, the
    others in their buckets' shared leaves, every row as it was; searches find the same."""
    writer = await Memory.open(settings=settings, embedder=embedder,
                               schema=f"mig_{uuid.uuid4().hex[:10]}")
    old = f"mig_{uuid.uuid4().hex[:10]}"
    large, scopes = Scope(org_id="large", project_id="p"), [
        Scope(org_id=f"small-{n}", project_id="p") for n in range(2)]
    topics = ["Maya flew to Lisbon", "the parrot Kiwi sings", "a dentist on Monday",
              "Priya fixed the laptop", "rain in the garden", "piano lessons at five"]
    queries = ["Who went to Lisbon?", "Where does the parrot sing?", "piano"]
    try:
        for n, scope in enumerate([large, *scopes]):
            await writer.add(scope, [Episode(content=f"Note {i}: {topics[(i + n) % 6]}.",
                                             session_id=f"s{i // 10}", uid=f"e{i}")
                                     for i in range(60 if scope is large else 25)])
        expected = {(s.key, q): [r.uid for r in await writer.search_scored(s, q, k=5)]
                    for s in (large, *scopes) for q in queries}
        await store_at(writer.url, old, embedder, 7, monkeypatch)
        await copy_rows(writer.url, writer.schema, old)
    finally:
        await writer.close()
    async with await AsyncConnection.connect(writer.url, autocommit=True) as conn:
        for name, how in (  # as version 7 built a large scope's own indexes
                (f"sentences_embedding_{large.key}", "hnsw (embedding vector_cosine_ops) "
                 "WITH (m = 32, ef_construction = 128)"),
                (f"sentences_tsv_{large.key}", "gin (tsv)"),
                (f"sentences_entity_keys_{large.key}", "gin (entity_keys)")):
            await conn.execute(f"CREATE INDEX {name} ON {old}.sentences USING {how} "
                               f"WHERE scope_key = '{large.key}'")
    rows = await sentence_rows(writer.url, old)
    assert await migrate_to_current(writer.url, old, embedder) == 8
    assert await sentence_rows(writer.url, old) == rows
    memory = await Memory.open(settings=settings, embedder=embedder, schema=old)
    try:
        async with memory._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT DISTINCT scope_key, tableoid::regclass::text FROM {old}.sentences")
            places = dict(await cur.fetchall())
            cur = await conn.execute(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                f"WHERE i.indrelid = '{old}.{own_table(large.key)}'::regclass AND i.indisvalid")
            indexes = {row[0] for row in await cur.fetchall()}
            assert await distribution_problems(conn, old) == []
        assert places[large.key] == f"{old}.{own_table(large.key)}"
        assert all(places[s.key].endswith("_shared") for s in scopes)
        assert indexes == {*index_names(large.key), f"{own_table(large.key)}_pkey"}
        assert {(s.key, q): [r.uid for r in await memory.search_scored(s, q, k=5)]
                for s in (large, *scopes) for q in queries} == expected
    finally:
        await memory.close()
