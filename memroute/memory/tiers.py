"""Each scope's place in the sentences table.

The sentences table is partitioned by scope (schema 8): by the hash of ``scope_key`` into
buckets (``settings.scope_buckets``, fixed when a store is created), each bucket by the
``scope_key`` itself. A scope of ``settings.scope_index_min_sentences`` sentences or more
has a leaf of its own in its bucket, holding its rows together under plain indexes: HNSW of
its vectors, GIN of its full text and its entity keys, its B-trees. The smaller scopes of a
bucket share its default leaf: searched by an exact scan of their rows, the lanes through
the leaf's GIN indexes. Every statement memroute sends names one scope key, so PostgreSQL
prunes it to one leaf while planning: what a statement costs does not grow with the number
of scopes, large or small (docs/scaling.md).

`ScopeTiers` moves a scope between the two in the background, over the store's own pool and
a bounded number at a time: up once a write takes it to the bound, down once deletions take
it under half of it (or at `Memory.index_scopes`). Up: its rows are copied into a table of
its own and indexed there while writes and searches go on; then one short transaction
(``switch``) brings in what was written meanwhile under the bucket's SHARE ROW EXCLUSIVE
lock (its writes wait), then under its ACCESS EXCLUSIVE lock deletes the rows from the shared
leaf and attaches the table. Down: one such transaction copies the rows out and drops the
leaf. Every
statement reaching a bucket locks it before it reads the bucket's partitions: a search or a
write of a scope of that bucket waits for the exclusive part and then sees the scope in its
new place, never half moved (without the lock, a search planned while the attach held the
shared leaf found the scope's rows in neither place). Other buckets are not touched; the
attach also keeps writes of episodes (not reads) waiting while it checks the leaf's foreign
key.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import time

from psycopg import AsyncConnection
from psycopg.errors import DeadlockDetected, LockNotAvailable
from psycopg_pool import AsyncConnectionPool

from memroute._log import get_logger

log = get_logger(__name__)

_SCOPE_KEY = re.compile(r"^[0-9a-f]{32}$")
# the names of the partitions of the sentences table: its buckets, their shared leaves, the
# leaves of large scopes (and, during a move up, the table that becomes one)
PLACE_NAME = re.compile(r"^sentences_(b[0-9]{3}(_shared)?|[0-9a-f]{32})$")
KEPT_PLACED = 10_000  # scopes a process remembers in a leaf of their own
SWITCH_LOCK_TIMEOUT = "250ms"  # a switch waiting longer gives way and is tried again
SWITCH_ATTEMPTS = 8
# the columns a move copies (``tsv`` is generated from ``text``)
COLUMNS = ("scope_key, episode_uid, idx, text, embedding, session_id, producer, produced_at, "
           "metadata, entity_keys, entities")
# a large scope's own indexes: name prefix -> method and columns. The primary key comes
# with the table; the B-tree and the GIN indexes are the partitioned ones of the sentences
# table, which the attach adopts. The HNSW graph is denser than pgvector's default
# (m = 16, ef_construction = 64): recall@10 at 50,000 sentences 0.990 instead of 0.956 at
# the same ef_search, for ~1.8x the probe and ~4x the build time (docs/benchmarks.md)
OWN_INDEXES = {
    "sentences_embedding_":
        "hnsw (embedding vector_cosine_ops) WITH (m = 32, ef_construction = 128)",
    "sentences_tsv_": "gin (tsv)",
    "sentences_entity_keys_": "gin (entity_keys)",
    "sentences_scope_": "btree (scope_key, session_id, produced_at)",
}


def own_table(scope_key: str) -> str:
    """The name of a large scope's leaf."""
    if not _SCOPE_KEY.fullmatch(scope_key):
        raise ValueError(f"not a scope key: {scope_key!r:.40}")
    return f"sentences_{scope_key}"


def bucket_table(bucket: int) -> str:
    return f"sentences_b{bucket:03d}"


def shared_table(bucket: int) -> str:
    """The name of a bucket's shared leaf (its DEFAULT partition)."""
    return f"{bucket_table(bucket)}_shared"


def index_names(scope_key: str) -> list[str]:
    """The names of a large scope's own indexes (the vector index first)."""
    own_table(scope_key)
    return [prefix + scope_key for prefix in OWN_INDEXES]


def index_name(scope_key: str) -> str:
    """The name of a large scope's own vector index."""
    return index_names(scope_key)[0]


def _lock_id(schema: str, scope_key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{schema}.{scope_key}".encode()).digest()[:8],
                          "big", signed=True)


# a scope's sentences (counted up to ``min``) and whether it has a leaf of its own (NULL:
# none; false: a move up is under way)
STATE_SQL = """SELECT (SELECT count(*) FROM (SELECT 1 FROM {schema}.sentences
                                             WHERE scope_key = %(key)s LIMIT %(min)s) t),
                      (SELECT c.relispartition FROM pg_class c
                       WHERE c.oid = to_regclass(%(own)s))"""


def state_params(schema: str, scope_key: str, min_sentences: int) -> dict:
    return {"key": scope_key, "min": min_sentences, "own": f"{schema}.{own_table(scope_key)}"}


class ScopeTiers:
    """Moves scopes between the buckets' shared leaves and leaves of their own, at most
    ``at_once`` at a time, each over one connection of ``pool``."""

    def __init__(self, pool: AsyncConnectionPool, schema: str, min_sentences: int,
                 at_once: int = 1) -> None:
        self._pool, self._schema = pool, schema
        self.min_sentences = min_sentences
        self._slots = asyncio.Semaphore(at_once)
        self._moving: dict[str, asyncio.Task[bool]] = {}
        self._placed: set[str] = set()  # scopes seen in a leaf of their own (bounded)
        self._buckets: int | None = None

    @property
    def below(self) -> int:
        """A scope in a leaf of its own under this many sentences goes back to its bucket's
        shared leaf (half the bound: a scope at the bound does not go back and forth)."""
        return max(self.min_sentences // 2, 1)

    def known_placed(self, scope_key: str) -> bool:
        """Whether this process saw the scope in a leaf of its own (a write to it need not
        look again)."""
        return scope_key in self._placed

    def _seen_placed(self, scope_key: str, placed: bool) -> None:
        if not placed:
            self._placed.discard(scope_key)
            return
        if len(self._placed) >= KEPT_PLACED:
            self._placed.clear()
        self._placed.add(scope_key)

    def after_write(self, scope_key: str, sentences: int, placed: bool | None) -> None:
        """After a committed write or delete: move the scope in the background when its
        sentences (counted up to the bound) say it belongs in the other tier."""
        self._seen_placed(scope_key, bool(placed))
        if placed is None and sentences < self.min_sentences:
            return
        if placed and sentences >= self.below:
            return
        self.schedule(scope_key)

    def schedule(self, scope_key: str) -> asyncio.Task[bool]:
        """`place` the scope in the background (once, however often asked meanwhile)."""
        task = self._moving.get(scope_key)
        if task is None:
            task = asyncio.ensure_future(self.place(scope_key))
            self._moving[scope_key] = task
            task.add_done_callback(lambda done: self._settled(scope_key, done))
        return task

    def _settled(self, scope_key: str, task: asyncio.Task[bool]) -> None:
        self._moving.pop(scope_key, None)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.warning("memory.scope_move_failed", scope=scope_key, error=str(error))

    async def place(self, scope_key: str) -> bool:
        """Move the scope to the tier its sentences say (unless another process is moving
        it); returns whether it is in a leaf of its own now."""
        async with self._slots, self._pool.connection() as conn:
            autocommit = conn.autocommit
            await conn.set_autocommit(True)
            try:
                cur = await conn.execute("SELECT pg_try_advisory_lock(%s)",
                                         [_lock_id(self._schema, scope_key)])
                if not (await cur.fetchone())[0]:
                    return False  # another process is moving it
                try:
                    placed = await self._place(conn, scope_key)
                finally:
                    await conn.execute("SELECT pg_advisory_unlock(%s)",
                                       [_lock_id(self._schema, scope_key)])
            finally:
                await conn.set_autocommit(autocommit)
        self._seen_placed(scope_key, placed)
        return placed

    async def partitioned(self, conn: AsyncConnection) -> bool:
        """Whether the sentences table is partitioned here (a Citus cluster distributes a
        plain one and isolates large scopes in shards itself: docs/scaling.md); reads how
        many buckets it has."""
        if self._buckets is None:
            cur = await conn.execute(
                "SELECT c.relkind = 'p', (SELECT count(*) FROM pg_inherits i "
                "WHERE i.inhparent = c.oid) FROM pg_class c WHERE c.oid = to_regclass(%s)",
                [f"{self._schema}.sentences"])
            partitioned, buckets = await cur.fetchone()
            self._buckets = buckets if partitioned else 0
            if not partitioned:
                log.info("memory.scope_tiers_off", schema=self._schema,
                         reason="the sentences table is not partitioned")
        return self._buckets > 0

    async def _place(self, conn: AsyncConnection, scope_key: str) -> bool:
        if not await self.partitioned(conn):
            return False
        cur = await conn.execute(STATE_SQL.format(schema=self._schema),
                                 state_params(self._schema, scope_key, self.min_sentences))
        sentences, placed = await cur.fetchone()
        if placed and sentences < self.below:
            await self._move_down(conn, scope_key)
            return False
        if placed:
            return True
        if placed is False:  # a move up that stopped left its table
            await conn.execute(f"DROP TABLE {self._schema}.{own_table(scope_key)}")
        if sentences < self.min_sentences:
            return False
        await self.move_up(conn, scope_key)
        return True

    async def bucket(self, conn: AsyncConnection, scope_key: str) -> int:
        """The bucket holding the scope."""
        await self.partitioned(conn)
        cur = await conn.execute(
            "SELECT r FROM generate_series(0, %s - 1) r "
            "WHERE satisfies_hash_partition(to_regclass(%s), %s, r, %s::text)",
            [self._buckets, f"{self._schema}.sentences", self._buckets, scope_key])
        return (await cur.fetchone())[0]

    async def move_up(self, conn: AsyncConnection, scope_key: str) -> None:
        """Give the scope a leaf of its own (``conn`` in autocommit mode): its rows copied
        and indexed in a table of its own, then the switch."""
        s, own = self._schema, own_table(scope_key)
        bucket = await self.bucket(conn, scope_key)
        start = time.perf_counter()
        await conn.execute(
            f"CREATE TABLE {s}.{own} (LIKE {s}.sentences INCLUDING DEFAULTS INCLUDING GENERATED "
            "INCLUDING STORAGE INCLUDING COMPRESSION, "
            f"CONSTRAINT {own}_pkey PRIMARY KEY (scope_key, episode_uid, idx)"
            ") WITH (toast_tuple_target = 8160)")
        # the rows and, in the same snapshot, the version (xmin) of each: a row written
        # since has another
        await conn.execute("DROP TABLE IF EXISTS pg_temp._memroute_copied")
        await conn.execute("CREATE TEMP TABLE _memroute_copied "
                           "(episode_uid text, idx int, version xid)")
        async with conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            await conn.execute(
                f"INSERT INTO {s}.{own} ({COLUMNS}) SELECT {COLUMNS} FROM {s}.sentences "
                "WHERE scope_key = %s ORDER BY episode_uid, idx", [scope_key])
            await conn.execute(
                "INSERT INTO _memroute_copied SELECT episode_uid, idx, xmin "
                f"FROM {s}.sentences WHERE scope_key = %s", [scope_key])
        for name, how in zip(index_names(scope_key), OWN_INDEXES.values()):
            await conn.execute(f"CREATE INDEX {name} ON {s}.{own} USING {how}")
        await conn.execute(f"ANALYZE {s}.{own}")  # planned well from its first search
        copied = time.perf_counter()
        waited = await self._switch(conn, bucket, [
            # what was written to the scope since it was copied: the copies of rows changed
            # or deleted go, the rows missing come
            (f"DELETE FROM {s}.{own} o USING _memroute_copied c "
             "WHERE o.episode_uid = c.episode_uid AND o.idx = c.idx AND NOT EXISTS ("
             f"SELECT 1 FROM {s}.sentences d WHERE d.scope_key = %s "
             "AND d.episode_uid = c.episode_uid AND d.idx = c.idx AND d.xmin = c.version)",
             [scope_key]),
            (f"INSERT INTO {s}.{own} ({COLUMNS}) SELECT {COLUMNS} FROM {s}.sentences d "
             "WHERE d.scope_key = %s AND NOT EXISTS (SELECT 1 FROM "
             f"{s}.{own} o WHERE o.episode_uid = d.episode_uid AND o.idx = d.idx)",
             [scope_key]),
        ], [
            (f"DELETE FROM {s}.sentences WHERE scope_key = %s", [scope_key]),
            # reads the table (its hash bound cannot be proven by a check constraint), the
            # shared leaf (none of its rows may be the scope's) and checks the foreign key
            (f"ALTER TABLE {s}.{bucket_table(bucket)} ATTACH PARTITION {s}.{own} "
             f"FOR VALUES IN ('{scope_key}')", None),
        ])
        await conn.execute("DROP TABLE pg_temp._memroute_copied")
        log.info("memory.scope_moved_up", scope=scope_key, schema=s,
                 seconds=round(copied - start, 2), writes_waited_ms=round(waited[0], 1),
                 searches_waited_ms=round(waited[1], 1))

    async def _move_down(self, conn: AsyncConnection, scope_key: str) -> None:
        """Put the scope's rows back in its bucket's shared leaf and drop its own."""
        s, own = self._schema, own_table(scope_key)
        bucket = await self.bucket(conn, scope_key)
        waited = await self._switch(conn, bucket, [
            (f"CREATE TEMP TABLE _memroute_moving (LIKE {s}.sentences) ON COMMIT DROP", None),
            (f"INSERT INTO _memroute_moving SELECT * FROM {s}.sentences WHERE scope_key = %s",
             [scope_key]),
        ], [
            (f"DROP TABLE {s}.{own}", None),
            (f"INSERT INTO {s}.sentences ({COLUMNS}) SELECT %s, "
             f"{COLUMNS.split(', ', 1)[1]} FROM _memroute_moving", [scope_key]),
        ])
        log.info("memory.scope_moved_down", scope=scope_key, schema=s,
                 writes_waited_ms=round(waited[0], 1), searches_waited_ms=round(waited[1], 1))

    async def _switch(self, conn: AsyncConnection, bucket: int,
                      shared: list[tuple[str, list | None]],
                      exclusive: list[tuple[str, list | None]]) -> tuple[float, float]:
        """Run ``shared`` then ``exclusive`` in one transaction: the first under the bucket's
        SHARE ROW EXCLUSIVE lock (its writers and other switches wait, its searches go on),
        the others under its ACCESS EXCLUSIVE lock (see the module docstring). A lock not
        granted within `SWITCH_LOCK_TIMEOUT` gives way to the statements waiting behind it,
        and the switch is tried again, as one a deadlock ended (a writer holding episodes
        and waiting for the bucket, while the attach waits for episodes). Returns how long the bucket's writers and its
        searches were kept waiting, in ms."""
        bucket_name = f"{self._schema}.{bucket_table(bucket)}"
        for attempt in range(SWITCH_ATTEMPTS):
            try:
                async with conn.transaction():
                    await conn.execute(f"SET LOCAL lock_timeout = '{SWITCH_LOCK_TIMEOUT}'")
                    await conn.execute(f"LOCK TABLE {bucket_name} IN SHARE ROW EXCLUSIVE MODE")
                    start = time.perf_counter()
                    for statement, params in shared:
                        await conn.execute(statement, params)
                    await conn.execute(f"LOCK TABLE {bucket_name} IN ACCESS EXCLUSIVE MODE")
                    exclusive_start = time.perf_counter()
                    for statement, params in exclusive:
                        await conn.execute(statement, params)
                done = time.perf_counter()
                return (done - start) * 1000, (done - exclusive_start) * 1000
            except (LockNotAvailable, DeadlockDetected):
                if attempt == SWITCH_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.05 * 2 ** attempt)

    async def place_all(self) -> list[str]:
        """`place` every scope that belongs in the other tier (a store loaded or restored by
        other means, deletions): the scopes of the shared leaves holding the bound, the own
        leaves under half of it, the tables of moves that stopped. Returns the keys of the
        scopes in a leaf of their own now."""
        s = self._schema
        async with self._pool.connection() as conn:
            if not await self.partitioned(conn):
                return []
            up: list[str] = []
            for bucket in range(self._buckets or 0):  # each shared leaf on its own
                cur = await conn.execute(
                    f"SELECT scope_key FROM {s}.{shared_table(bucket)} GROUP BY scope_key "
                    "HAVING count(*) >= %s", [self.min_sentences])
                up += [row[0] for row in await cur.fetchall()]
            # the leaves of large scopes (and tables of moves that stopped): those that may
            # hold fewer than half the bound are counted
            cur = await conn.execute(
                "SELECT substr(c.relname, 11), c.relispartition, c.reltuples FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                "AND c.relkind = 'r' AND c.relname ~ '^sentences_[0-9a-f]{32}$'", [s])
            own = await cur.fetchall()
        check = [key for key, attached, rows in own
                 if not attached or rows < self.min_sentences]
        placed = {key for key, attached, _ in own if attached}
        done = await asyncio.gather(*(self.schedule(key) for key in sorted(set(up + check))),
                                    return_exceptions=True)
        for key, result in zip(sorted(set(up + check)), done):
            if isinstance(result, BaseException):
                log.warning("memory.scope_move_failed", scope=key, error=str(result))
            elif result:
                placed.add(key)
            else:
                placed.discard(key)
        return sorted(placed)

    async def close(self) -> None:
        """Stop the moves in flight (a move up stopped before its switch is redone later)."""
        for task in list(self._moving.values()):
            task.cancel()
        for task in list(self._moving.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
