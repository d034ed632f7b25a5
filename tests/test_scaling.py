"""What a Citus cluster needs of memroute's tables and statements (docs/scaling.md), checked
on a real migrated store: every unique index, foreign key and partition key of a data table
holds the distribution column, every statement memroute sends to the data tables reaches one
scope, or is one of the few multi-scope operations the doc lists, or moves a scope between
tiers (memroute.memory.tiers, Citus's tenant isolation); and PostgreSQL plans every
statement on the sentences table against one of its leaves, however many scopes it holds."""

from __future__ import annotations

import copy
import json
import re
import uuid
from pathlib import Path

import pytest
from psycopg import AsyncConnection
from statement_routes import (
    MULTI_SCOPE,
    NO_DATA,
    ONE_SCOPE,
    PER_ROW,
    PLACEMENT,
    SCHEMA_CHANGE,
    SESSION_LOG,
    StatementLog,
    route,
)

from memroute.langgraph_store import MemrouteStore
from memroute.memory import Episode, Memory, Scope
from memroute.memory.schema import DISTRIBUTION_COLUMN, REFERENCE_TABLES
from memroute.memory.tiers import PLACE_NAME

SCALING_DOC = Path(__file__).parents[1] / "docs" / "scaling.md"
# The memroute functions that may send a statement reaching several scopes (in a Citus
# cluster: every shard), and the operation docs/scaling.md lists them under.
MULTI_SCOPE_CALLERS = {
    "memroute.memory.lookup:scopes": "`Memory.list_scopes`",
    "memroute.memory.store:Memory.delete": "`Memory.delete(..., all=True, sub_scopes=True)`",
    "memroute.memory.entity_sql:backfill": "`Memory.backfill_entities`",
    "memroute.memory.entity_sql:_backfill_days": "`Memory.backfill_entities`",
    "memroute.memory.schema:migrate": "Migration 6",
    # maintenance of the whole table, as LangGraph's PostgresStore sweeps: it finds the
    # tenants holding expired items; each tenant's delete then reaches its scope only
    "memroute.memory.items:StoreItems.sweep": "`MemrouteStore.sweep_ttl`",
}
# The module that may send placements (statements naming a partition), and what
# docs/scaling.md says Citus does in its stead.
PLACEMENT_MODULE = "memroute.memory.tiers"
PLACEMENT_ON_CITUS = "isolate_tenant_to_new_shard"


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
    # table is not (Citus refuses it). A partition's are its table's (conparentid).
    cur = await conn.execute(
        "SELECT c.conname, s.relname, r.relname, "
        "  array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o) "
        "        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o), "
        "  array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, o) "
        "        JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o) "
        "FROM pg_constraint c JOIN pg_class s ON s.oid = c.conrelid "
        "JOIN pg_class r ON r.oid = c.confrelid JOIN pg_namespace n ON n.oid = s.relnamespace "
        "WHERE n.nspname = %s AND c.contype = 'f' AND c.conparentid = 0", [schema])
    for name, source, target, columns, referenced in await cur.fetchall():
        if source in tables and target in tables:
            if (DISTRIBUTION_COLUMN, DISTRIBUTION_COLUMN) not in zip(columns, referenced):
                problems.append(f"foreign key {name} of {source} does not pair "
                                f"{DISTRIBUTION_COLUMN} with {target}'s")
        elif source not in tables and target in tables:
            problems.append(f"reference table {source} has a foreign key {name} onto {target}")
    # a partitioned table is partitioned by the distribution column at every level: each
    # partition is a set of scopes (a shard, or one tenant isolated in a shard of its own)
    cur = await conn.execute(
        "SELECT c.relname, array(SELECT a.attname FROM unnest(p.partattrs::int2[]) k "
        "  JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k), "
        "  p.partexprs IS NOT NULL "
        "FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s", [schema])
    problems += [f"{table} is partitioned by {columns}{' and expressions' if exprs else ''}"
                 for table, columns, exprs in await cur.fetchall()
                 if columns != [DISTRIBUTION_COLUMN] or exprs]
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
                CREATE TABLE {schema}.parts (scope_key text, id text,
                                             PRIMARY KEY (scope_key, id)) PARTITION BY HASH (id);
                ALTER TABLE {schema}.api_keys ADD COLUMN scope_key text, ADD COLUMN item text,
                    ADD FOREIGN KEY (scope_key, item) REFERENCES {schema}.items;""")
            problems = await distribution_problems(conn, schema)
        finally:
            await conn.rollback()
    assert len(problems) == 6, problems
    assert any("items_id_key" in p for p in problems)
    assert any("notes" in p and "does not pair" in p for p in problems)
    assert any("loose has no scope_key" in p for p in problems)
    assert any("loose_pkey" in p for p in problems)
    assert any("reference table api_keys" in p for p in problems)
    assert any("parts is partitioned by ['id']" in p for p in problems)


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
    own = "s.sentences_" + "0" * 32
    placements = [f"INSERT INTO {own} (scope_key) SELECT scope_key FROM s.sentences "
                  "WHERE scope_key = %s",
                  "SELECT scope_key FROM s.sentences_b003_shared GROUP BY scope_key",
                  f"ALTER TABLE s.sentences_b003 ATTACH PARTITION {own} FOR VALUES IN ('x')",
                  "LOCK TABLE s.sentences_b003 IN ACCESS EXCLUSIVE MODE",
                  f"DROP TABLE {own}"]
    assert [route(q, tables) for q in placements] == [PLACEMENT] * len(placements)


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
    statement from a caller `MULTI_SCOPE_CALLERS` does not list, or a placement from
    outside `PLACEMENT_MODULE`."""
    routes: dict[str, set[str]] = {}
    unlisted = []
    for (query, caller), _ in log.sent.items():
        found = route(query, tables)
        routes.setdefault(found, set()).add(caller)
        if (found == MULTI_SCOPE and caller not in MULTI_SCOPE_CALLERS
                or found == PLACEMENT and not caller.startswith(PLACEMENT_MODULE + ":")):
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
    assert "memroute.memory.tiers:ScopeTiers.place_all" in routes[PLACEMENT]
    doc = SCALING_DOC.read_text()
    assert [name for name in MULTI_SCOPE_CALLERS.values() if name not in doc] == []
    assert PLACEMENT_ON_CITUS in doc


def citus_conversion_sql(schema: str) -> str:
    """The statements docs/scaling.md runs on one server before distributing a store (the
    sentences table made plain), for ``schema``."""
    doc = SCALING_DOC.read_text()
    block = doc[doc.index("### Distributing an existing store"):]
    block = block[block.index("```sql") + 6:block.index("CREATE EXTENSION")]
    return block.replace("memroute.", f"{schema}.").replace("'memroute'", f"'{schema}'")


async def test_a_store_made_plain_for_citus_keeps_working_without_moves(
        settings, embedder) -> None:
    """The doc's conversion before distributing, on a store with a large scope in a leaf of
    its own: the large scopes are listed, every row stays, searches find the same, the
    catalog checks hold, and a write past the bound moves nothing (Citus places scopes)."""
    tuned = settings.model_copy(update={"scope_index_min_sentences": 20})
    memory = await Memory.open(settings=tuned, embedder=embedder,
                               schema=f"plain_{uuid.uuid4().hex[:8]}")
    large, small = Scope(org_id="large", project_id="p"), Scope(org_id="small", project_id="p")
    query = "Where did Maya's trip go?"
    try:
        await memory.add(large, [Episode(content=f"Maya's trip {i} went to Lisbon.")
                                 for i in range(30)])
        await memory.add(small, [Episode(content=f"Priya's note {i}.") for i in range(5)])
        assert await memory.index_scopes() == 1
        found = {s.key: [r.uid for r in await memory.search_scored(s, query)]
                 for s in (large, small)}
        async with memory._pool.connection() as conn:
            await conn.set_autocommit(True)
            await conn.execute(citus_conversion_sql(memory.schema))
            cur = await conn.execute(f"SELECT scope_key FROM {memory.schema}.large_scopes")
            assert await cur.fetchall() == [(large.key,)]
            await conn.execute(f"DROP TABLE {memory.schema}.large_scopes")
            assert await distribution_problems(conn, memory.schema) == []
    finally:
        await memory.close()
    memory = await Memory.open(settings=tuned, embedder=embedder, schema=memory.schema)
    try:
        assert {s.key: [r.uid for r in await memory.search_scored(s, query)]
                for s in (large, small)} == found
        await memory.add(small, [Episode(content=f"Priya's note {i}.") for i in range(5, 25)])
        assert await memory.index_scopes() == 0
        assert (await memory.count(small))["sentences"] == 25
    finally:
        await memory.close()


def plan_relations(plan: object) -> list[str]:
    """The relation names of a JSON plan's nodes."""
    if isinstance(plan, dict):
        return ([plan["Relation Name"]] if "Relation Name" in plan else []) + [
            name for value in plan.values() for name in plan_relations(value)]
    if isinstance(plan, list):
        return [name for item in plan for name in plan_relations(item)]
    return []


async def test_every_statement_on_the_sentences_table_is_planned_on_one_leaf(
        settings, embedder) -> None:
    """Every operation on a store whose scopes sit in shared leaves and in leaves of their own
    (the bound lowered to 6 sentences; the operations' scopes cross it), then each statement
    memroute sent to the sentences table for one scope planned again with its parameters:
    the plan reads one leaf. The planner pruned the others before looking at their indexes, so a
    statement's plan is the same however many scopes, large or small, the store holds."""
    log = StatementLog(keep_params=2)
    memory = await Memory.open(
        settings=settings.model_copy(update={"scope_index_min_sentences": 6}),
        embedder=embedder, schema=f"leaves_{uuid.uuid4().hex[:8]}")
    sentences = re.compile(rf"\b{memory.schema}\.sentences\b(?!_)")
    try:
        for n in range(3):  # other large scopes, each in a leaf of its own
            await memory.add(Scope(org_id=f"large-{n}", project_id="p"),
                             [Episode(content=f"Fact {i} about scope {n}.") for i in range(8)])
        assert await memory.index_scopes() == 3
        log.install()
        try:
            await every_operation(memory)
        finally:
            log.uninstall()
        planned: dict[str, set[str]] = {}
        async with memory._pool.connection() as conn:
            tables = await data_tables(conn, memory.schema)
            for (query, caller), kept in log.params.items():
                if not sentences.search(query) or route(query, tables) != ONE_SCOPE:
                    continue  # per row (COPY), placements, the listed multi-scope ones
                for params in kept or [None]:
                    try:
                        cur = await conn.execute("EXPLAIN (FORMAT JSON) " + query, params)
                    except Exception:  # a temporary table of its transaction, gone now
                        await conn.rollback()
                        continue
                    plan = (await cur.fetchone())[0]
                    plan = json.loads(plan) if isinstance(plan, str) else plan
                    leaves = {r for r in plan_relations(plan) if PLACE_NAME.match(r)}
                    assert len(leaves) == 1, (caller, leaves, " ".join(query.split())[:300])
                    planned.setdefault(caller, set()).update(leaves)
            await conn.rollback()
    finally:
        await memory.close()
    assert {"memroute.memory.sql:read_search", "memroute.memory.sql:exact_lane",
            "memroute.memory.writes:EpisodeWriter.write_in"} <= set(planned)
    every = set().union(*planned.values())
    assert any(leaf.endswith("_shared") for leaf in every)  # both kinds of leaf were planned
    assert any(not leaf.endswith("_shared") for leaf in every)


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
