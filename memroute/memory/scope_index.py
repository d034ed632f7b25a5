"""Each large scope's own vector index.

A scope holding at least ``settings.scope_index_min`` sentences is searched through an HNSW
index of its own, a partial index of the sentences table (``WHERE scope_key = '<key>'``); a
smaller scope is searched by an exact scan of its own rows (the planner's choice when no
vector index covers the scope). A search then costs what its scope holds, however many
other tenants share the store, and a small scope's results are exact. Why: docs/benchmarks.md
("Many tenants in one store").

The index of a scope that grows past the bound is built after the write that took it there,
in the background and concurrently (``CREATE INDEX CONCURRENTLY``: writes and searches go
on, and the scope is searched exactly until the index is valid). One process builds it
(an advisory lock per scope); one a crash left invalid is dropped and built again.
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
INDEX_PREFIX = "sentences_embedding_"


def index_name(scope_key: str) -> str:
    """The name of a scope's own vector index."""
    if not _SCOPE_KEY.fullmatch(scope_key):
        raise ValueError(f"not a scope key: {scope_key!r:.40}")
    return INDEX_PREFIX + scope_key


def create_index_sql(schema: str, scope_key: str, *, concurrently: bool) -> str:
    """The statement building a scope's own HNSW index (the parameters of the store's)."""
    return (f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS "
            f"{index_name(scope_key)} ON {schema}.sentences "
            "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64) "
            f"WHERE scope_key = '{scope_key}'")


def _lock_id(schema: str, scope_key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{schema}.{scope_key}".encode()).digest()[:8],
                          "big", signed=True)


# a scope's sentences (counted up to ``min``) and whether its own index is valid (NULL: none)
STATE_SQL = """SELECT (SELECT count(*) FROM (SELECT 1 FROM {schema}.sentences
                                             WHERE scope_key = %(key)s LIMIT %(min)s) t),
                      (SELECT i.indisvalid FROM pg_index i
                       JOIN pg_class c ON c.oid = i.indexrelid
                       JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = %(schema)s AND c.relname = %(name)s)"""


def state_params(schema: str, scope_key: str, min_sentences: int) -> dict:
    return {"key": scope_key, "min": min_sentences, "schema": schema,
            "name": index_name(scope_key)}


class ScopeIndexes:
    """Builds the own index of each scope written past ``min_sentences``."""

    def __init__(self, pool: AsyncConnectionPool, url: str, schema: str,
                 min_sentences: int) -> None:
        self._pool, self._url, self._schema = pool, url, schema
        self.min_sentences = min_sentences
        self._building: dict[str, asyncio.Task[bool]] = {}

    def after_write(self, scope_key: str, sentences: int, valid: bool | None) -> None:
        """After a committed write: build the scope's index in the background when the scope
        (``sentences``, counted up to the bound) has reached the bound without a valid one."""
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
        """Build the scope's index if it holds enough sentences and has no valid one (unless
        another process is building it). Returns whether the scope has a valid index now."""
        async with self._pool.connection() as conn:
            cur = await conn.execute(STATE_SQL.format(schema=self._schema),
                                     state_params(self._schema, scope_key, self.min_sentences))
            sentences, valid = await cur.fetchone()
        if valid or sentences < self.min_sentences:
            return bool(valid)
        # CREATE INDEX CONCURRENTLY runs outside a transaction, on a connection of its own;
        # the session's advisory lock goes with the connection
        async with await AsyncConnection.connect(self._url, autocommit=True) as conn:
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s)",
                                     [_lock_id(self._schema, scope_key)])
            if not (await cur.fetchone())[0]:
                return False  # another process is building it
            if valid is False:  # a build that was stopped left it invalid
                await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS "
                                   f"{self._schema}.{index_name(scope_key)}")
            start = time.perf_counter()
            await conn.execute(create_index_sql(self._schema, scope_key, concurrently=True))
            log.info("memory.scope_index_built", scope=scope_key, schema=self._schema,
                     seconds=round(time.perf_counter() - start, 1))
        return True

    async def ensure_all(self) -> list[str]:
        """Build the missing index of every scope of the store past the bound, one after
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
