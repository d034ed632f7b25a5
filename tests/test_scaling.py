"""What a Citus cluster needs of memroute's tables and statements (docs/scaling.md), checked
on a real migrated store: every unique index and foreign key of a data table holds the
distribution column, and every statement memroute sends to the data tables reaches one
scope, or is one of the few multi-scope operations the doc lists."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import pytest
from psycopg import AsyncConnection
from statement_routes import (
    MULTI_SCOPE,
    NO_DATA,
    ONE_SCOPE,
    PER_ROW,
    SCHEMA_CHANGE,
    SESSION_LOG,
    StatementLog,
    route,
)

from memroute.langgraph_store import MemrouteStore
from memroute.memory import Episode, Memory, Scope
from memroute.memory.schema import DISTRIBUTION_COLUMN, REFERENCE_TABLES

SCALING_DOC = Path(__file__).parents[1] / "docs" / "scaling.md"
# The memroute functions that may send a statement reaching several scopes (in a Citus
# cluster: every shard), and the operation docs/scaling.md lists them under.
MULTI_SCOPE_CALLERS = {
    "memroute.memory.lookup:scopes": "`Memory.list_scopes`",
    "memroute.memory.store:Memory.delete": "`Memory.delete(..., all=True, sub_scopes=True)`",
    "memroute.memory.entity_sql:backfill": "`Memory.backfill_entities`",
    "memroute.memory.entity_sql:_backfill_days": "`Memory.backfill_entities`",
    "memroute.memory.scope_index:ScopeIndexes.ensure_all": "`Memory.index_scopes`",
    "memroute.memory.schema:migrate": "Migration 6",
    # maintenance of the whole table, as LangGraph's PostgresStore sweeps: it finds the
    # tenants holding expired items; each tenant's delete then reaches its scope only
    "memroute.memory.items:StoreItems.sweep": "`MemrouteStore.sweep_ttl`",
}


async def data_tables(conn: AsyncConnection, schema: str) -> set[str]:
    """The store's tables that are not reference tables (partitions count as their table)."""
    cur = await conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition", [schema])
    tables = {row[0] for row in await cur.fetchall()}
    assert set(REFERENCE_TABLES) <= tables, "a listed reference table is not in the store"
    return tables - set(REFERENCE_TABLES)


async def distribution_problems(conn: AsyncConnection, schema: str) -> list[str]:
    """What keeps the store's data tables from being distributed by `DISTRIBUTION_COLUMN`."""
    tables = await data_tables(conn, schema)
    problems = []
    cur = await conn.execute(
        "SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND a.attname = %s AND NOT a.attisdropped",
        [schema, DISTRIBUTION_COLUMN])
    problems += [f"{t} has no {DISTRIBUTION_COLUMN}"
                 for t in tables - {row[0] for row in await cur.fetchall()}]
    # unique indexes (primary keys included) and exclusion constraints: their key columns
    cur = await conn.execute(
        "SELECT t.relname, x.relname, array(SELECT a.attname FROM unnest(i.indkey[0:i.indnkeyatts - 1]) k "
        "  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k) "
        "FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = t.relnamespace "
        "WHERE n.nspname = %s AND (i.indisunique OR i.indisexclusion)", [schema])
    problems += [f"unique index {index} of {table} is on {columns}"
                 for table, index, columns in await cur.fetchall()
                 if table in tables and DISTRIBUTION_COLUMN not in columns]
    # foreign keys: a data table's onto a data table pairs the distribution columns (a join
    # within one shard); onto a reference table is fine; a reference table's onto a data
    # table is not (Citus refuses it)
    cur = await conn.execute(
        "SELECT c.conname, s.relname, r.relname, "
        "  array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o) "
        "        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o), "
        "  array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, o) "
        "        JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o) "
        "FROM pg_constraint c JOIN pg_class s ON s.oid = c.conrelid "
        "JOIN pg_class r ON r.oid = c.confrelid JOIN pg_namespace n ON n.oid = s.relnamespace "
        "WHERE n.nspname = %s AND c.contype = 'f'", [schema])
    for name, source, target, columns, referenced in await cur.fetchall():
        if source in tables and target in tables:
            if (DISTRIBUTION_COLUMN, DISTRIBUTION_COLUMN) not in zip(columns, referenced):
                problems.append(f"foreign key {name} of {source} does not pair "
                                f"{DISTRIBUTION_COLUMN} with {target}'s")
        elif source not in tables and target in tables:
            problems.append(f"reference table {source} has a foreign key {name} onto {target}")
    return problems


async def test_every_unique_index_and_foreign_key_of_the_data_tables_holds_the_scope_key(
        memory: Memory) -> None:
    async with memory._pool.connection() as conn:
        assert {"episodes", "sentences"} <= await data_tables(conn, memory.schema)
        assert await distribution_problems(conn, memory.schema) == []


async def test_the_catalog_check_finds_a_key_without_the_scope_key(memory: Memory) -> None:
    schema = f"bad_{uuid.uuid4().hex[:8]}"
    async with memory._pool.connection() as conn:
        try:
            await conn.execute(f"""
                CREATE SCHEMA {schema};
                CREATE TABLE {schema}.schema_version (version int PRIMARY KEY);
                CREATE TABLE {schema}.store_info (key text PRIMARY KEY);
                CREATE TABLE {schema}.api_keys (key_id text PRIMARY KEY);
                CREATE TABLE {schema}.items (scope_key text, id text, PRIMARY KEY (scope_key, id),
                                             UNIQUE (id));
                CREATE TABLE {schema}.notes (scope_key text, item text,
                                             FOREIGN KEY (item) REFERENCES {schema}.items (id));
                CREATE TABLE {schema}.loose (id text PRIMARY KEY);
                ALTER TABLE {schema}.api_keys ADD COLUMN scope_key text, ADD COLUMN item text,
                    ADD FOREIGN KEY (scope_key, item) REFERENCES {schema}.items;""")
            problems = await distribution_problems(conn, schema)
        finally:
            await conn.rollback()
    assert len(problems) == 5, problems
    assert any("items_id_key" in p for p in problems)
    assert any("notes" in p and "does not pair" in p for p in problems)
    assert any("loose has no scope_key" in p for p in problems)
    assert any("loose_pkey" in p for p in problems)
    assert any("reference table api_keys" in p for p in problems)


def test_a_statement_reaches_one_scope_only_through_an_equality_on_every_data_table() -> None:
    tables = {"episodes", "sentences"}
    one = [
        "SELECT uid FROM s.episodes WHERE scope_key = %s AND uid = ANY(%s::text[])",
        "SELECT * FROM s.episodes x JOIN s.sentences y ON y.scope_key = x.scope_key "
        "WHERE x.scope_key = %(scope)s",
        "SELECT * FROM s.episodes x CROSS JOIN LATERAL (SELECT * FROM s.episodes b "
        "WHERE b.scope_key = x.scope_key LIMIT 1) b WHERE x.scope_key = %s",
        "INSERT INTO s.episodes (scope_key, uid) SELECT %s, uid FROM t RETURNING uid",
        "WITH gone AS (DELETE FROM s.episodes WHERE scope_key = %s RETURNING 1) "
        "SELECT count(*) FROM gone",
    ]
    multi = [
        "SELECT DISTINCT org_id FROM s.episodes WHERE org_id = %s",
        "SELECT * FROM s.episodes WHERE scope_key = %s OR uid = %s",
        "SELECT * FROM s.episodes x JOIN s.sentences y ON y.episode_uid = x.uid "
        "WHERE x.scope_key = %s",
        "SELECT * FROM s.episodes WHERE scope_key = %s AND uid IN "
        "(SELECT episode_uid FROM s.sentences WHERE text = %s)",
        "INSERT INTO s.episodes (scope_key, uid) SELECT scope_key, uid FROM t",
        "UPDATE s.sentences SET text = %s WHERE entity_keys IS NULL",
    ]
    assert [route(q, tables) for q in one] == [ONE_SCOPE] * len(one)
    assert [route(q, tables) for q in multi] == [MULTI_SCOPE] * len(multi)
    assert route("COPY s.sentences (scope_key, text) FROM STDIN", tables) == PER_ROW
    assert route("CREATE INDEX i ON s.sentences (text)", tables) == SCHEMA_CHANGE
    assert route("SELECT * FROM s.api_keys WHERE key_id = %s", tables) == NO_DATA


async def every_operation(memory: Memory) -> None:
    """Each operation of `Memory` that reads or writes the data tables, once or more, and
    of the LangGraph store over it (`Memory.items`)."""
    org = f"org-{uuid.uuid4().hex[:8]}"
    user = Scope(org_id=org, project_id="p", user_id="u")
    agent = Scope(org_id=org, project_id="p", user_id="u", agent_id="a")
    turns = [Episode(content=f"Maya told Priya about trip {i} to Lisbon.", session_id=f"s{i % 2}",
                     uid=f"t{i}", metadata={"n": i}) for i in range(12)]
    await memory.add(user, turns[:8])
    async for _ in memory.add_batches(agent, [turns[:4], turns[4:]]):
        pass
    await memory.upsert(user, [Episode(content="Priya moved to Porto.", uid="t1")])
    await memory.merge_metadata(user, {"t2": {"seen": True}})
    await memory.get(user, ["t1", "t2"])
    await memory.recent(user, filters={"n": {"$gte": 2}}, limit=3)
    await memory.list_scopes([org])
    await memory.count(user)
    await memory.speakers(user)
    await memory.stored_entities(user, ["t3"])
    await memory.backfill_entities()
    await memory.index_scopes()
    for options in ({}, {"context": (0, 0), "lexical": False, "entities": False},
                    {"filters": {"n": 5}, "k": 3}, {"with_entities": True, "k": 20}):
        hits = await memory.search_scored(user, "Where did Maya's trip go?", **options)
    cold = copy.copy(memory)
    cold.settings = memory.settings.model_copy(update={"stored_vector_cache_size": 0})
    cold._stored_vectors = type(memory._stored_vectors)()
    await cold.with_stored_embeddings(user, list(hits))
    await memory.delete(user, uids=["t0"])
    await memory.delete(user, session_id="s1")
    store = MemrouteStore(memory, tenant=user, strategy="direct")
    await store.aput(("notes",), "trip", {"text": "Maya went to Lisbon."}, ttl=1e-6)
    await store.aput(("notes",), "home", {"text": "Maya lives in Porto."}, ttl=5)
    await store.asearch(("notes",), query="Where did Maya go?")
    await store.asearch(("notes",), filter={"text": {"$exists": True}})
    await store.alist_namespaces(prefix=("notes",))
    assert await store.asweep_ttl() >= 1
    await memory.delete(agent, all=True)
    await memory.delete(user, all=True, sub_scopes=True)


def check_statements(log: StatementLog, tables: set[str]) -> dict[str, set[str]]:
    """The callers of each route among the logged statements; raises on a multi-scope
    statement from a caller `MULTI_SCOPE_CALLERS` does not list."""
    routes: dict[str, set[str]] = {}
    unlisted = []
    for (query, caller), _ in log.sent.items():
        found = route(query, tables)
        routes.setdefault(found, set()).add(caller)
        if found == MULTI_SCOPE and caller not in MULTI_SCOPE_CALLERS:
            unlisted.append(f"{caller}: {' '.join(query.split())[:300]}")
    assert not unlisted, "multi-scope statements from unlisted callers:\n" + "\n".join(unlisted)
    return routes


async def test_every_statement_of_the_memory_operations_reaches_one_scope_or_is_listed(
        settings, embedder) -> None:
    log = StatementLog()
    log.install()
    try:
        memory = await Memory.open(settings=settings, embedder=embedder,
                                   schema=f"routes_{uuid.uuid4().hex[:8]}")
        try:
            await every_operation(memory)
            async with memory._pool.connection() as conn:
                tables = await data_tables(conn, memory.schema)
        finally:
            await memory.close()
    finally:
        log.uninstall()
    routes = check_statements(log, tables)
    assert routes[MULTI_SCOPE] == set(MULTI_SCOPE_CALLERS)  # each listed one is real
    assert "memroute.memory.sql:read_search" in routes[ONE_SCOPE]
    assert "memroute.memory.sql:exact_lane" in routes[ONE_SCOPE]  # the filtered search's
    assert "memroute.memory.writes:EpisodeWriter.write_in" in routes[PER_ROW]
    assert "memroute.memory.schema:migrate" in routes[SCHEMA_CHANGE]
    doc = SCALING_DOC.read_text()
    assert [name for name in MULTI_SCOPE_CALLERS.values() if name not in doc] == []


@pytest.mark.last
async def test_every_statement_memroute_sent_during_the_suite_reaches_one_scope_or_is_listed(
        memory: Memory) -> None:
    """Runs after every other test (conftest orders it last): what the whole suite made
    memroute send, in this process."""
    async with memory._pool.connection() as conn:
        tables = await data_tables(conn, memory.schema)
    await every_operation(memory)
    routes = check_statements(SESSION_LOG, tables)
    assert routes[ONE_SCOPE] and routes[PER_ROW]
