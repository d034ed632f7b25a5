"""Database faults: killed connections and server restarts lose nothing acknowledged."""

from __future__ import annotations

import asyncio
import os
import random
import time

import pytest
from psycopg import AsyncConnection

from memroute.memory import Episode, Memory, Scope, StoreUnavailableError
from memroute.memory.server import ensure_embedded_server, stop_embedded_server
from memroute.memory.splitter import split_sentences

needs_embedded = pytest.mark.skipif(bool(os.environ.get("MEMROUTE_TEST_DATABASE_URL")),
                                    reason="restarts only the embedded server")

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def batch(tag: str, n: int) -> list[Episode]:
    rng = random.Random(tag)
    return [Episode(uid=f"{tag}-{i}", session_id=tag,
                    content=" ".join(rng.choice(WORDS) for _ in range(8)).capitalize() + ". "
                    + " ".join(rng.choice(WORDS) for _ in range(6)).capitalize() + ".")
            for i in range(n)]


def restart_embedded_server(home) -> str:
    stop_embedded_server(home)
    return ensure_embedded_server(home)


async def kill_backends(url: str) -> int:
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND datname = current_database() "
            "AND backend_type = 'client backend'")
        return (await cur.fetchone())[0]


async def assert_consistent(memory: Memory, scope: Scope, acknowledged: list[Episode]) -> None:
    """Acknowledged episodes are all there, and no episode lacks any of its sentences."""
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT e.uid, e.content, count(s.idx) FROM {memory.schema}.episodes e "
            f"LEFT JOIN {memory.schema}.sentences s ON s.scope_key = e.scope_key "
            "AND s.episode_uid = e.uid WHERE e.scope_key = %s GROUP BY e.uid, e.content",
            [scope.key])
        rows = {uid: (content, n) for uid, content, n in await cur.fetchall()}
    assert {e.uid for e in acknowledged} <= set(rows)
    for content, n in rows.values():
        assert n == len(split_sentences(content))


async def ingest_while_killing(memory: Memory, scope: Scope, url: str, rounds: int) -> list[Episode]:
    acknowledged: list[Episode] = []

    async def writer() -> None:
        for r in range(rounds):
            episodes = batch(f"r{r}", 40)
            try:
                await memory.add(scope, episodes)
                acknowledged.extend(episodes)
            except StoreUnavailableError:
                pass  # not acknowledged: may be absent, never half-written

    async def killer() -> None:
        for _ in range(rounds):
            await asyncio.sleep(random.uniform(0.0, 0.15))
            await kill_backends(url)

    await asyncio.gather(writer(), killer())
    return acknowledged


async def test_killed_connections_during_ingestion_and_search(memory: Memory, scope: Scope,
                                                              pg_url: str) -> None:
    acknowledged = await ingest_while_killing(memory, scope, pg_url, rounds=6)
    await assert_consistent(memory, scope, acknowledged)
    await kill_backends(pg_url)
    hits = await memory.search_scored(scope, "alpha bravo", k=3)  # the pool recovers
    assert hits


@needs_embedded
async def test_server_restart_keeps_data_and_pool_recovers(memory: Memory, scope: Scope,
                                                           pg_home) -> None:
    episodes = batch("restart", 20)
    await memory.add(scope, episodes)
    before = await memory.count(scope)
    await asyncio.to_thread(restart_embedded_server, pg_home)
    assert await memory.count(scope) == before
    assert await memory.search_scored(scope, "charlie delta", k=2)
    await assert_consistent(memory, scope, episodes)


@pytest.mark.stress
async def test_stress_many_kills_and_restarts(memory: Memory, pg_url: str, pg_home) -> None:
    scope = Scope(org_id="stress-db", project_id="faults")
    await memory.delete(scope, all=True)
    acknowledged = await ingest_while_killing(memory, scope, pg_url, rounds=40)
    for i in range(5):
        if not os.environ.get("MEMROUTE_TEST_DATABASE_URL"):
            restart = asyncio.to_thread(restart_embedded_server, pg_home)
            searches = [memory.search_scored(scope, f"{WORDS[i]} echo", k=3) for _ in range(5)]
            results = await asyncio.gather(restart, *searches, return_exceptions=True)
            assert all(not isinstance(r, Exception) or isinstance(r, StoreUnavailableError)
                       for r in results)
        await assert_consistent(memory, scope, acknowledged)
    assert await memory.search_scored(scope, "golf hotel", k=3)
    print(f"acknowledged {len(acknowledged)} episodes through 40 kill rounds and 5 restarts")


def kill_postmaster(home) -> None:
    """SIGKILL the embedded server's postmaster (its backends follow), as a crash would."""
    import signal

    from memroute.memory.server import embedded_server_status

    pid = embedded_server_status(home)["pid"]
    assert pid, "the embedded server is not running"
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):
        if not embedded_server_status(home)["running"]:
            return
        time.sleep(0.05)
    raise AssertionError("the postmaster survived SIGKILL")


async def test_a_dead_embedded_server_is_restarted_once_then_fails_fast(tmp_path, embedder):
    """Issue #16 item 7: an owned server killed under an open Memory is restarted (the call
    succeeds); killed again at once, the next call fails within seconds, typed; the first
    call after the cooldown restarts it again."""
    from memroute.memory.pool import RESTART_COOLDOWN_S
    from memroute.settings import MemrouteSettings

    home = tmp_path / "owned"
    settings = MemrouteSettings(home=home, database_url=None, embed_threads=1, pool_max_size=2,
                                pool_timeout_s=30.0)
    memory = await Memory.open(settings=settings, embedder=embedder, reranker=None,
                               schema="faults")
    scope = Scope(org_id="dead", project_id="server")
    try:
        await memory.add(scope, batch("before", 5))
        kill_postmaster(home)
        started = time.perf_counter()
        hits = await memory.search_scored(scope, "alpha bravo", k=3)
        restarted_in = time.perf_counter() - started
        assert hits and memory._pool.guard.restarts == 1
        assert restarted_in < 20, restarted_in

        kill_postmaster(home)
        started = time.perf_counter()
        with pytest.raises(StoreUnavailableError, match="died again"):
            await memory.count(scope)
        failed_in = time.perf_counter() - started
        assert failed_in < 6, failed_in
        print(f"\nrestart path {restarted_in:.1f}s, fail path {failed_in:.1f}s")

        # once the window has passed (docs/serving.md), the next call restarts it again
        memory._pool.guard._restarted_at -= RESTART_COOLDOWN_S
        assert (await memory.count(scope))["episodes"] == 5
        assert memory._pool.guard.restarts == 2
    finally:
        await memory.close()
        stop_embedded_server(home)


async def test_an_unreachable_external_database_fails_fast(memory: Memory, scope: Scope) -> None:
    """A Memory on a DSN it does not own: a server that stops answering is a typed error in
    seconds, not the pool's 30 s timeout times the retries."""
    from memroute.memory.pool import ServerGuard

    guard = memory._pool.guard
    memory._pool.guard = ServerGuard("postgresql://nobody@127.0.0.1:9/none", None)
    conns = [await memory._pool.getconn() for _ in range(memory._pool.max_size)]  # exhausted
    try:
        started = time.perf_counter()
        with pytest.raises(StoreUnavailableError, match="does not answer"):
            await memory.count(scope)
        assert time.perf_counter() - started < 6
    finally:
        for conn in conns:
            await memory._pool.putconn(conn)
        memory._pool.guard = guard


async def test_the_pools_check_lends_a_quiet_connection_without_a_round_trip(
        memory: Memory, pg_url: str) -> None:
    """A live idle connection is lent at once (no query sent); one whose backend was
    terminated is found by the check and replaced, so the search after the kill succeeds
    on its first try."""
    from psycopg import OperationalError

    from benchmarks.memory import RoundTrips
    from memroute.memory.pool import check_idle_connection

    async with memory._pool.connection() as conn:
        with RoundTrips() as trips:
            await check_idle_connection(conn)
        assert trips.count == 0
        await conn.execute("SELECT 1")  # still usable
    conn = await AsyncConnection.connect(pg_url, autocommit=True)
    try:
        await kill_backends(pg_url)
        for _ in range(100):  # the terminated backend's message reaches the socket
            import select
            if select.select([conn.fileno()], [], [], 0)[0]:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(OperationalError):
            await check_idle_connection(conn)
    finally:
        await conn.close()
    with pytest.raises(OperationalError):
        await check_idle_connection(conn)  # closed
