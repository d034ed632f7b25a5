"""Each large scope's own indexes.

A scope holding at least ``settings.scope_index_min_sentences`` sentences is searched
through indexes of its own, partial indexes of the sentences table (``WHERE scope_key =
'<key>'``): an HNSW index of its vectors, and GIN indexes of its full-text column and its
entity keys for the two lanes. A smaller scope is searched by an exact scan of its own rows
(the planner's choice when no vector index covers the scope; its lanes use the indexes over
all scopes). A search then costs what its scope holds, however many other tenants share the
store, and a small scope's results are exact. Why: docs/benchmarks.md ("Many tenants in one
store").

The indexes of a scope that grows past the bound are built after the write that took it
there, in the background and concurrently (``CREATE INDEX CONCURRENTLY``: writes and searches
go on, and the scope is searched exactly until they are valid). One process builds them (an
advisory lock per scope); one a stopped build left invalid is dropped and built again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import time

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from memroute._log import get_logger

log = get_logger(__name__)

_SCOPE_KEY = re.compile(r"^[0-9a-f]{32}$")
KEPT_VALID = 10_000  # scopes a process remembers as indexed
# a scope's own indexes: name prefix -> method and column(s). The HNSW graph is denser than
# pgvector's default (m = 16, ef_construction = 64): recall@10 at 50,000 sentences 0.990
# instead of 0.956 at the same ef_search, for ~1.8x the probe and ~4x the build time
# (docs/benchmarks.md)
OWN_INDEXES = {
    "sentences_embedding_":
        "hnsw (embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128)",
    "sentences_tsv_": "gin (tsv)",
    "sentences_entity_keys_": "gin (entity_keys)",
}


def index_names(scope_key: str) -> list[str]:
    """The names of a scope's own indexes (the vector index first)."""
    if not _SCOPE_KEY.fullmatch(scope_key):
        raise ValueError(f"not a scope key: {scope_key!r:.40}")
    return [prefix + scope_key for prefix in OWN_INDEXES]


def index_name(scope_key: str) -> str:
    """The name of a scope's own vector index."""
    return index_names(scope_key)[0]


def create_index_sql(schema: str, scope_key: str, *, concurrently: bool) -> list[str]:
    """The statements building a scope's own indexes."""
    return [f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS "
            f"{name} ON {schema}.sentences USING {how} WHERE scope_key = '{scope_key}'"
            for name, how in zip(index_names(scope_key), OWN_INDEXES.values())]


def _lock_id(schema: str, scope_key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{schema}.{scope_key}".encode()).digest()[:8],
                          "big", signed=True)


# a scope's sentences (counted up to ``min``) and whether its own indexes are all there and
# valid (NULL: it has none; false: some are missing or invalid)
STATE_SQL = """SELECT (SELECT count(*) FROM (SELECT 1 FROM {schema}.sentences
                                             WHERE scope_key = %(key)s LIMIT %(min)s) t),
                      (SELECT CASE WHEN count(*) = 0 THEN NULL
                                   ELSE count(*) = cardinality(%(names)s::text[])
                                        AND bool_and(i.indisvalid) END
                       FROM pg_index i
                       JOIN pg_class c ON c.oid = i.indexrelid
                       JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = %(schema)s AND c.relname = ANY(%(names)s::text[]))"""


def state_params(schema: str, scope_key: str, min_sentences: int) -> dict:
    return {"key": scope_key, "min": min_sentences, "schema": schema,
            "names": index_names(scope_key)}


class ScopeIndexes:
    """Builds the own indexes of each scope written past ``min_sentences``."""

    def __init__(self, pool: AsyncConnectionPool, url: str, schema: str,
                 min_sentences: int) -> None:
        self._pool, self._url, self._schema = pool, url, schema
        self.min_sentences = min_sentences
        self._building: dict[str, asyncio.Task[bool]] = {}
        self._valid: set[str] = set()  # scopes seen with their indexes valid (bounded)

    def known_valid(self, scope_key: str) -> bool:
        """Whether the scope's indexes were seen valid by this process (a write to it need
        not look at them again)."""
        return scope_key in self._valid

    def _seen_valid(self, scope_key: str) -> None:
        if len(self._valid) >= KEPT_VALID:
            self._valid.clear()
        self._valid.add(scope_key)

    def after_write(self, scope_key: str, sentences: int, valid: bool | None) -> None:
        """After a committed write: build the scope's indexes in the background when the scope
        (``sentences``, counted up to the bound) has reached the bound without them valid."""
        if valid:
            self._seen_valid(scope_key)
        if valid or sentences < self.min_sentences or scope_key in self._building:
            return
        task = asyncio.ensure_future(self.ensure(scope_key))
        self._building[scope_key] = task
        task.add_done_callback(lambda done: self._settled(scope_key, done))

    def _settled(self, scope_key: str, task: asyncio.Task[bool]) -> None:
        self._building.pop(scope_key, None)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.warning("memory.scope_index_failed", scope=scope_key, error=str(error))

    async def ensure(self, scope_key: str) -> bool:
        """Build the scope's own indexes if it holds enough sentences and lacks a valid one
        (unless another process is building them). Returns whether they are all valid now."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(STATE_SQL.format(schema=self._schema),
                                     state_params(self._schema, scope_key, self.min_sentences))
            sentences, valid = await cur.fetchone()
        if valid:
            self._seen_valid(scope_key)
        if valid or sentences < self.min_sentences:
            return bool(valid)
        # CREATE INDEX CONCURRENTLY runs outside a transaction, on a connection of its own;
        # the session's advisory lock goes with the connection
        async with await AsyncConnection.connect(self._url, autocommit=True) as conn:
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s)",
                                     [_lock_id(self._schema, scope_key)])
            if not (await cur.fetchone())[0]:
                return False  # another process is building it
            if valid is False:  # a build that was stopped left one invalid
                cur = await conn.execute(
                    "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                    "AND c.relname = ANY(%s) AND NOT i.indisvalid",
                    [self._schema, index_names(scope_key)])
                for (name,) in await cur.fetchall():
                    await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {self._schema}.{name}")
            start = time.perf_counter()
            for statement in create_index_sql(self._schema, scope_key, concurrently=True):
                await conn.execute(statement)
            log.info("memory.scope_index_built", scope=scope_key, schema=self._schema,
                     seconds=round(time.perf_counter() - start, 1))
        self._seen_valid(scope_key)
        return True

    async def ensure_all(self) -> list[str]:
        """Build the missing indexes of every scope of the store past the bound, one after
        another; returns the keys of the scopes indexed now (already or by this call)."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT scope_key FROM {self._schema}.sentences GROUP BY scope_key "
                "HAVING count(*) >= %s ORDER BY scope_key", [self.min_sentences])
            keys = [row[0] for row in await cur.fetchall()]
        return [key for key in keys if await self.ensure(key)]

    async def close(self) -> None:
        """Stop the builds in flight (an index left invalid is built again later)."""
        for task in list(self._building.values()):
            task.cancel()
        for task in list(self._building.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
