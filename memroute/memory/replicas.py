"""Read replicas: a `Memory`'s reads on streaming standbys, its writes on the primary, and
its own writes always visible to its reads.

After each write a `Memory` notes the primary's WAL position (`ReadRouter.wrote`), per scope.
A read of that scope goes to a replica only once the replica has replayed that position:
checked on the connection that serves the read, in one round trip, only when the
connection has not shown that position already; a replica still behind after
`CATCH_UP_WAIT_S` leaves the read to the primary. A probe every `PROBE_INTERVAL_S` leaves
out a replica that does not answer, is not a standby, or lags more than
``read_max_lag_s`` behind the primary, and takes it back once it is well again; a read that
fails on a replica leaves it out at once and is retried on the primary.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import weakref
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from psycopg import AsyncConnection, OperationalError
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.errors import QueryCanceled
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from memroute._log import get_logger
from memroute.memory.retry import with_retry

log = get_logger(__name__)

PROBE_INTERVAL_S = 1.0  # between probes of the primary's position and each replica's state
PROBE_TIMEOUT_S = 2.0  # a replica whose probe takes longer is left out
LEND_TIMEOUT_S = 0.5  # of waiting for a replica's connection before reading on the primary
# of waiting for a replica to replay this Memory's write: a read right after a write found
# the replica there in 29 % and 77 % of two rounds of 150 reads without waiting, in 97 %
# waiting up to 20 ms (docs/research.md, "Read replicas: wait, or read from the primary?")
CATCH_UP_WAIT_S = 0.02
MAX_TRACKED_SCOPES = 10_000  # scopes whose last write position is kept (older: a floor)

# the primary's WAL insert position, as a byte count; a page's header is taken off when the
# position is just past one (the last record ended on the page boundary, where a standby's
# replay position stops)
PRIMARY_POSITION = (
    "SELECT (pg_current_wal_insert_lsn() - '0/0')::int8, "
    "current_setting('wal_block_size')::int8, pg_size_bytes(current_setting('wal_segment_size'))")
# a standby's replay position; NULL from a server not in recovery (a promoted standby keeps
# returning its last replayed position, so recovery is asked too)
REPLAYED = ("SELECT CASE WHEN pg_is_in_recovery() "
            "THEN (pg_last_wal_replay_lsn() - '0/0')::int8 END")
SHORT_PAGE_HEADER, LONG_PAGE_HEADER = 24, 40  # SizeOfXLogShortPHD, SizeOfXLogLongPHD


def record_end(position: int, block_size: int, segment_size: int) -> int:
    """``pg_current_wal_insert_lsn()`` as the end of the last record: on a page boundary the
    insert position points past the next page's header, which a standby never replays."""
    if position % segment_size == LONG_PAGE_HEADER:
        return position - LONG_PAGE_HEADER
    if position % block_size == SHORT_PAGE_HEADER:
        return position - SHORT_PAGE_HEADER
    return position


def safe_url(url: str) -> str:
    """``url`` without its password, for logs and status."""
    try:
        params = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - an unparsable URL is reported as such
        return "<unparsable URL>"
    params.pop("password", None)
    return make_conninfo(**params)


async def _query_one(conn: AsyncConnection, statement: str) -> tuple:
    """One statement in one round trip, the connection left idle (no BEGIN, no COMMIT)."""
    autocommit = conn.autocommit
    await conn.set_autocommit(True)
    try:
        cur = await conn.execute(statement)
        return await cur.fetchone()
    finally:
        await conn.set_autocommit(autocommit)


@dataclass
class Replica:
    """One standby: its pool, whether reads may go to it, and why not."""

    url: str
    pool: AsyncConnectionPool
    up: bool = False
    reason: str = "not probed yet"
    replayed: int = 0  # at the last probe
    lag_s: float = 0.0
    reads: int = 0
    probe_conn: AsyncConnection | None = field(default=None, repr=False)
    probing: asyncio.Task[None] | None = field(default=None, repr=False)
    probe_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)


class ReadRouter:
    """Lends a connection for a read (a replica's when one may serve it, else the primary's)
    and keeps the positions of this `Memory`'s writes. Without replicas, every read is the
    primary's and nothing is tracked."""

    def __init__(self, primary: AsyncConnectionPool, replicas: Iterable[Replica] = (),
                 *, max_lag_s: float = 5.0) -> None:
        self.primary = primary
        self.replicas = list(replicas)
        self.max_lag_s = max_lag_s
        self.counts: Counter[str] = Counter()
        self._turn = itertools.count()
        self._scopes: OrderedDict[str, int] = OrderedDict()  # scope key -> its write position
        self._floor = 0  # every read needs this much: the open, evicted scopes, whole-store writes
        self._newest = 0  # the newest write position: reads across scopes need it
        self._wal_sizes = (8192, 16 * 2**20)
        self._shown: weakref.WeakKeyDictionary[AsyncConnection, int] = (
            weakref.WeakKeyDictionary())  # replica connection -> the position it has shown
        self._samples: deque[tuple[float, int]] = deque()  # (monotonic s, primary position)
        self._probing: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Note the primary's position (the schema a read needs is there), probe the replicas
        once (waiting up to `PROBE_TIMEOUT_S` for those that answer to replay that
        position, so that their pools' connections find the schema's types), open their
        pools, and keep probing them in the background."""
        if not self.replicas:
            return
        position, block, segment = await self._primary_position()
        self._wal_sizes = (block, segment)
        self._floor = self._newest = record_end(position, block, segment)
        self._samples.append((time.monotonic(), self._floor))
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        while True:
            await self.probe()
            if time.monotonic() > deadline or all(
                    r.replayed >= self._floor for r in self.replicas if r.up):
                break
            await asyncio.sleep(0.01)
        for replica in self.replicas:
            await replica.pool.open(wait=False)
        self._probing = asyncio.ensure_future(self._probe_forever())

    async def close(self) -> None:
        if self._probing is not None:
            self._probing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probing
        for replica in self.replicas:
            if replica.probing is not None:
                replica.probing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await replica.probing
            if replica.probe_conn is not None:
                await replica.probe_conn.close()
            await replica.pool.close()

    # -- writes -----------------------------------------------------------------------------

    async def wrote(self, scope_keys: Iterable[str] | None) -> None:
        """Note the primary's position after a write that has committed: reads of
        ``scope_keys`` (None: of every scope) wait for a replica to replay it."""
        if not self.replicas:
            return

        position = record_end((await self._primary_position())[0], *self._wal_sizes)
        self._newest = max(self._newest, position)
        if scope_keys is None:
            self._floor = max(self._floor, position)
            self._scopes.clear()
            return
        for key in scope_keys:
            self._scopes[key] = max(self._scopes.get(key, 0), position)
            self._scopes.move_to_end(key)
        while len(self._scopes) > MAX_TRACKED_SCOPES:
            self._floor = max(self._floor, self._scopes.popitem(last=False)[1])

    async def _primary_position(self) -> tuple[int, int, int]:
        """The primary's WAL insert position, WAL block size and segment size."""
        async def read() -> tuple:
            async with self.primary.connection() as conn:
                return await _query_one(conn, PRIMARY_POSITION)

        return await with_retry(read, "the primary's WAL position")

    def _needed(self, scope_key: str | None) -> int:
        if scope_key is None:
            return self._newest
        return max(self._floor, self._scopes.get(scope_key, 0))

    # -- reads ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def connection(self, scope_key: str | None = None) -> AsyncIterator[AsyncConnection]:
        """A connection for a read of ``scope_key`` (None: a read across scopes) that sees
        every write this router was told of (`wrote`)."""
        lent = await self._replica_connection(self._needed(scope_key)) if self.replicas else None
        if lent is None:
            self.counts["primary"] += 1
            async with self.primary.connection() as conn:
                yield conn
            return
        replica, conn = lent
        replica.reads += 1
        self.counts["replica"] += 1
        try:
            async with conn:  # commit or roll back as the pool's own context does
                yield conn
        except OperationalError as exc:
            if not isinstance(exc, QueryCanceled):  # a statement timeout is not the replica's
                self._leave_out(replica, f"a read failed: {exc}")
                self.counts["failed"] += 1
            raise  # `with_retry` runs the read again, now on another server
        finally:
            await replica.pool.putconn(conn)

    async def _replica_connection(self, needed: int
                                  ) -> tuple[Replica, AsyncConnection] | None:
        """A replica's connection that has replayed ``needed``, or None."""
        up = [r for r in self.replicas if r.up]
        if not up:
            return None
        replica = up[next(self._turn) % len(up)]
        try:
            conn = await replica.pool.getconn(timeout=LEND_TIMEOUT_S)
        except PoolTimeout:  # busy, or dead: this read goes to the primary, a probe tells which
            self.counts["busy"] += 1
            self._probe_soon(replica)
            return None
        try:
            # a replica that kept up at its last probe is worth a short wait; one that did
            # not would only make the read later
            wait_s = CATCH_UP_WAIT_S if replica.lag_s < PROBE_INTERVAL_S else 0.0
            if self._shown.get(conn, -1) >= needed or await self._catch_up(conn, needed, wait_s):
                return replica, conn
            self.counts["behind"] += 1
        except OperationalError as exc:
            self._leave_out(replica, f"its position could not be read: {exc}")
        except BaseException:  # cancelled: the connection goes back all the same
            await replica.pool.putconn(conn)
            raise
        await replica.pool.putconn(conn)
        return None

    async def _catch_up(self, conn: AsyncConnection, needed: int, wait_s: float) -> bool:
        """Whether ``conn``'s server has replayed ``needed``, waiting up to ``wait_s`` for
        it. Replay only moves forward while a server runs, and a connection does not outlive
        its server, so what a connection has shown holds for its later reads."""
        deadline = time.monotonic() + wait_s
        delay = 0.001
        while True:
            self.counts["checks"] += 1
            (replayed,) = await _query_one(conn, REPLAYED)
            if replayed is None:  # promoted: no longer a copy of the primary (the probe says so)
                return False
            self._shown[conn] = replayed
            if replayed >= needed:
                return True
            if time.monotonic() + delay > deadline:
                return False
            await asyncio.sleep(delay)
            delay = min(2 * delay, 0.008)

    # -- health -----------------------------------------------------------------------------

    def _leave_out(self, replica: Replica, reason: str) -> None:
        reason = " ".join(reason.split())
        if replica.up:
            log.warning("replica.left_out", replica=safe_url(replica.url), reason=reason)
        replica.up, replica.reason = False, reason

    def _take_back(self, replica: Replica) -> None:
        if not replica.up:
            log.info("replica.taken_back", replica=safe_url(replica.url),
                     lag_s=round(replica.lag_s, 3))
        replica.up, replica.reason = True, ""

    def _probe_soon(self, replica: Replica) -> None:
        """Probe ``replica`` now, in the background (once at a time)."""
        if replica.probing is None or replica.probing.done():
            replica.probing = asyncio.ensure_future(self._probe(replica, time.monotonic()))

    async def _probe_forever(self) -> None:
        while True:
            await asyncio.sleep(PROBE_INTERVAL_S)
            try:
                await self.probe()
            except Exception as exc:  # noqa: BLE001 - the probing goes on
                log.warning("replica.probe_failed", error=str(exc))

    async def probe(self) -> None:
        """Sample the primary's position, then each replica's state: up when it answers, is
        a standby and lags at most ``max_lag_s``."""
        now = time.monotonic()
        try:
            async with self.primary.connection(timeout=PROBE_TIMEOUT_S) as conn:
                position = record_end((await _query_one(conn, PRIMARY_POSITION))[0],
                                      *self._wal_sizes)
            self._samples.append((now, position))
        except OperationalError:
            pass  # the primary's own failures are the reads' and writes' to report
        while len(self._samples) > 1 and self._samples[1][0] < now - self.max_lag_s - 1:
            self._samples.popleft()  # the oldest kept is past the bound: it decides alone
        await asyncio.gather(*(self._probe(r, now) for r in self.replicas))

    async def _probe(self, replica: Replica, now: float) -> None:
        async with replica.probe_lock:
            await self._probe_alone(replica, now)

    async def _probe_alone(self, replica: Replica, now: float) -> None:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                if replica.probe_conn is None or replica.probe_conn.closed:
                    replica.probe_conn = await AsyncConnection.connect(
                        replica.url, autocommit=True, connect_timeout=int(PROBE_TIMEOUT_S))
                (replayed,) = await _query_one(replica.probe_conn, REPLAYED)
        except (OperationalError, TimeoutError) as exc:
            if replica.probe_conn is not None:
                await replica.probe_conn.close()
                replica.probe_conn = None
            self._leave_out(replica, f"does not answer: {exc or 'the probe timed out'}")
            return
        if replayed is None:
            self._leave_out(replica, "is not a standby (pg_is_in_recovery() is false)")
            return
        replica.replayed = replayed
        # how long ago the primary held a position the replica has not replayed
        replica.lag_s = next((now - t for t, p in self._samples if p > replayed), 0.0)
        if replica.lag_s > self.max_lag_s:
            self._leave_out(replica, f"lags {replica.lag_s:.1f}s behind the primary "
                                     f"(MEMROUTE_READ_MAX_LAG_S={self.max_lag_s:g})")
        else:
            self._take_back(replica)

    def status(self) -> dict:
        """Each replica (URL without password), whether it serves reads, why not, its lag
        and reads; and the reads by where they went."""
        return {"replicas": [{"url": safe_url(r.url), "up": r.up, "reason": r.reason,
                              "lag_s": round(r.lag_s, 3), "reads": r.reads}
                             for r in self.replicas],
                "reads": dict(self.counts)}
