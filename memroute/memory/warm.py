"""Reading a store's relations into memory, so the first searches after a cold start do not
run past the statement timeout.

A search on a store whose pages are on disk only (a server just started, a machine just
booted) reads its HNSW index and heap page by page at random, which on a large store takes
seconds per search. Warming reads them sequentially first, the HNSW index first: with the
``pg_prewarm`` extension where the server has it (installed, or installable by this role),
else, when the data directory is on this machine (the embedded server), by reading the
relations' files, which fills the OS page cache the server reads through. Only the relations
of the store's own schema are read; nothing is written.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from psycopg import AsyncConnection
from psycopg.errors import Error as PsycopgError
from psycopg_pool import AsyncConnectionPool

from memroute._log import get_logger

log = get_logger(__name__)

CHUNK_BYTES = 4 << 20

# the schema's tables, indexes and TOAST tables; the vector indexes first, then the other
# indexes the search reads, then the heaps (largest first)
RELATIONS_SQL = """
WITH own AS (
    SELECT c.oid, c.relname, c.relkind, c.reltoastrelid
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relkind IN ('r', 'i', 'm')
)
SELECT oid::regclass::text, pg_relation_filepath(oid), pg_relation_size(oid)
FROM (SELECT oid, relname, relkind FROM own
      UNION ALL SELECT reltoastrelid, '', 't' FROM own WHERE reltoastrelid <> 0) rels
ORDER BY starts_with(relname, 'sentences_embedding') DESC, relkind = 'i' DESC, pg_relation_size(oid) DESC
"""


@dataclass(frozen=True)
class Relation:
    name: str
    path: str | None  # relative to the data directory
    size: int


@dataclass(frozen=True)
class WarmReport:
    """What `warm_schema` read: how (``pg_prewarm``, ``files`` or ``none`` with the reason),
    how many relations and bytes, in how many seconds."""

    method: str
    relations: int
    bytes: int
    seconds: float
    reason: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"method": self.method, "relations": self.relations, "bytes": self.bytes,
                "seconds": round(self.seconds, 3), "reason": self.reason}


async def schema_relations(conn: AsyncConnection, schema: str) -> list[Relation]:
    cur = await conn.execute(RELATIONS_SQL, (schema,))
    return [Relation(*row) for row in await cur.fetchall()]


async def _has_pg_prewarm(conn: AsyncConnection) -> bool:
    """Whether ``pg_prewarm`` is installed, or can be installed by this role now."""
    cur = await conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm'")
    if await cur.fetchone():
        return True
    cur = await conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'")
    if not await cur.fetchone():
        return False
    try:
        async with conn.transaction():
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    except PsycopgError as exc:  # no privilege to create it: read the files or nothing
        log.info("memory.warm.no_pg_prewarm", error=str(exc).splitlines()[0])
        return False
    return True


async def _local_data_directory(conn: AsyncConnection, known: Path | None) -> Path | None:
    if known is not None:
        return known
    try:
        async with conn.transaction():
            cur = await conn.execute("SELECT current_setting('data_directory')")
            path = Path((await cur.fetchone())[0])
    except PsycopgError:  # needs pg_read_all_settings: not ours to read
        return None
    return path if path.is_dir() and os.access(path, os.R_OK) else None


def segment_paths(data_directory: Path, relative: str) -> list[Path]:
    """The files of one relation's main fork: ``relfilenode``, ``relfilenode.1``, ..."""
    first = data_directory / relative
    paths: list[Path] = []
    while True:
        path = first.with_name(f"{first.name}.{len(paths)}") if paths else first
        if not path.exists():
            return paths
        paths.append(path)


def read_files(paths: list[Path], stop: threading.Event | None = None) -> int:
    """Read ``paths`` sequentially into the OS page cache; returns the bytes read. Stops
    between chunks once ``stop`` is set."""
    buffer = bytearray(CHUNK_BYTES)
    total = 0
    for path in paths:
        try:
            with open(path, "rb", buffering=0) as handle:
                while not (stop and stop.is_set()):
                    n = handle.readinto(buffer)
                    if not n:
                        break
                    total += n
        except FileNotFoundError:  # rewritten since it was listed (VACUUM FULL, REINDEX)
            continue
        if stop and stop.is_set():
            break
    return total


async def warm_schema(pool: AsyncConnectionPool, schema: str, *,
                      data_directory: Path | None = None,
                      stop: threading.Event | None = None) -> WarmReport:
    """Read the relations of ``schema`` into memory (see the module docstring). A connection
    is held per statement only: files are read with none held."""
    start = time.perf_counter()
    async with pool.connection() as conn:
        relations = await schema_relations(conn, schema)
        prewarm = await _has_pg_prewarm(conn)
        directory = None if prewarm else await _local_data_directory(conn, data_directory)
    if prewarm:
        total = 0
        for relation in relations:
            if stop and stop.is_set():
                break
            async with pool.connection() as conn:
                await conn.execute("SELECT pg_prewarm(%s::regclass, 'read')", (relation.name,))
            total += relation.size
        return WarmReport("pg_prewarm", len(relations), total, time.perf_counter() - start)
    if directory is None:
        return WarmReport("none", 0, 0, time.perf_counter() - start,
                          "the server has no pg_prewarm and its data directory is not on "
                          "this machine")
    paths = [p for r in relations if r.path for p in segment_paths(directory, r.path)]
    total = await asyncio.to_thread(read_files, paths, stop)
    return WarmReport("files", len(relations), total, time.perf_counter() - start)
