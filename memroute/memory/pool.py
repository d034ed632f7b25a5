"""The store's connection pool, which notices a dead server within seconds.

A plain pool waits its whole timeout (30 s by default) for a connection to a server that
is gone (`with_retry` does not wait it again: a `PoolTimeout` is not retried).
`GuardedPool` waits `PROBE_AFTER_S`, then tries one direct connection: a server that
answers is only busy, and the wait goes on; an embedded server this process opened and that
no longer answers is restarted, once per `RESTART_COOLDOWN_S`, after `RESTART_BACKOFF_S`;
anything else is `StoreUnavailableError`.
"""

from __future__ import annotations

import asyncio
import select
import time
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection, OperationalError
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from memroute._log import get_logger
from memroute.errors import StoreUnavailableError
from memroute.memory.server import ensure_embedded_server

log = get_logger(__name__)

PROBE_AFTER_S = 2.0  # of waiting for a connection before asking whether the server lives
PROBE_TIMEOUT_S = 2  # connect_timeout of that probe (whole seconds, libpq's unit)
RESTART_BACKOFF_S = 0.5  # before restarting: another process may be restarting it already
RESTART_COOLDOWN_S = 60.0  # a server that dies again this soon is not restarted again
CONNECT_TIMEOUT_S = 5  # of a pool's connections, unless the URL sets connect_timeout
RECONNECT_MAX_DELAY_S = 1.0  # between a pool's attempts to replace a lost connection


class _ReconnectAttempt(AttemptWithBackoff):
    """psycopg_pool's reconnection backoff (1 s, doubling) with its delay capped at
    `RECONNECT_MAX_DELAY_S`: a restarted server is reconnected to within a second, not at
    the next power of two (a server back after 4.5 s was reached after 7 s, after 7.5 s
    only after 15 s). An attempt on a server that is down costs one refused connection."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_MAX_DELAY_S)


async def check_idle_connection(conn: AsyncConnection) -> None:
    """The pool's check of a connection before lending it, without a round trip when it can:
    an idle connection to a live server has nothing to read, so a readable socket (a
    terminated backend's last message, a closed server's end of file) is checked with a query
    (`AsyncConnectionPool.check_connection`, which raises for a dead one) and a quiet one is
    lent at once. A connection that dies after the check fails its statement, which
    `memroute.memory.retry.with_retry` runs again on another."""
    if conn.closed or conn.broken:
        raise OperationalError("the connection is closed")
    poller = select.poll()  # not select.select: a busy server's sockets pass fd 1024
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        await AsyncConnectionPool.check_connection(conn)


class ServerGuard:
    """Whether the server behind ``url`` answers; restarts the embedded server under
    ``home`` (None: not ours to restart) once per cooldown."""

    def __init__(self, url: str, home: Path | None) -> None:
        self.url = url
        self.home = home
        self.restarts = 0
        self._restarted_at: float | None = None
        self._lock = asyncio.Lock()

    async def answers(self) -> bool:
        try:
            conn = await AsyncConnection.connect(self.url, connect_timeout=PROBE_TIMEOUT_S)
        except OperationalError:
            return False
        await conn.close()
        return True

    async def recover(self) -> None:
        """Return once the server answers (restarting it if it is ours and may be
        restarted), else raise `StoreUnavailableError`."""
        async with self._lock:  # one restart, however many calls noticed the death
            if await self.answers():
                return
            if self.home is None:
                raise StoreUnavailableError("the database does not answer (connection "
                                            "refused or timed out); check that it is running")
            recent = self._restarted_at is not None and (
                time.monotonic() - self._restarted_at < RESTART_COOLDOWN_S)
            if recent:
                raise StoreUnavailableError(
                    f"the embedded server under {self.home} died again within "
                    f"{RESTART_COOLDOWN_S:g}s of a restart; see its log in pgdata/log (the "
                    "first call after that restarts it, as does `memroute db start`)")
            await asyncio.sleep(RESTART_BACKOFF_S)
            if await self.answers():
                return
            log.warning("embedded_server.restart", home=str(self.home))
            self._restarted_at = time.monotonic()
            self.restarts += 1
            await asyncio.to_thread(ensure_embedded_server, self.home)


class GuardedPool(AsyncConnectionPool):
    """An `AsyncConnectionPool` whose `getconn` asks its `ServerGuard` after `PROBE_AFTER_S`,
    and whose connections are opened with a `CONNECT_TIMEOUT_S`. Pools may share a guard:
    after a restart another pool noticed, the next `getconn` drops this pool's dead
    connections at once instead of waiting to notice it too."""

    def __init__(self, conninfo: str = "", *, guard: ServerGuard,
                 kwargs: dict[str, Any] | None = None, **options: Any) -> None:
        if "connect_timeout" not in conninfo_to_dict(conninfo):
            kwargs = {"connect_timeout": CONNECT_TIMEOUT_S, **(kwargs or {})}
        super().__init__(conninfo, kwargs=kwargs, **options)
        self.guard = guard
        self._restarts_seen = guard.restarts

    async def _add_connection(self, attempt: AttemptWithBackoff | None,
                              growing: bool = False) -> None:
        # psycopg_pool's own (private) step; only the backoff it starts with is changed
        attempt = attempt or _ReconnectAttempt(timeout=self.reconnect_timeout)
        await super()._add_connection(attempt, growing)

    async def getconn(self, timeout: float | None = None) -> Any:
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        if self.guard.restarts != self._restarts_seen:
            self._restarts_seen = self.guard.restarts
            await self.check()
        try:
            return await super().getconn(min(timeout, PROBE_AFTER_S))
        except PoolTimeout:
            if timeout <= PROBE_AFTER_S:
                raise
        await self.guard.recover()
        if self.guard.restarts:
            self._restarts_seen = self.guard.restarts
            await self.check()  # drop the dead connections now, refill from the new server
        return await super().getconn(max(deadline - time.monotonic(), 0.1))
