"""Read replicas against a real streaming standby of the test server (`benchmarks.standby`):
reads go to the replica, a Memory's own writes are never missed and its deletes never served
however far the replica lags, and a replica that dies or lags past the bound is left out
and taken back."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from benchmarks.served import ServedProcess, free_port, service_env
from benchmarks.standby import Standby
from memroute.errors import InvalidInputError
from memroute.langgraph_store import MemrouteStore, item_uid
from memroute.memory import Episode, Memory, Scope
from memroute.service.keys import KeyStore
from memroute.settings import MemrouteSettings

pytestmark = pytest.mark.skipif(bool(os.environ.get("MEMROUTE_TEST_DATABASE_URL")),
                                reason="copies the embedded server with its own binaries")


@pytest.fixture(scope="module")
def standby(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standby]:
    server = Standby(pg_url, tmp_path_factory.mktemp("standby")).create()
    yield server
    server.remove()


@pytest.fixture(scope="module")
def schema() -> str:
    return f"r_{uuid.uuid4().hex[:10]}"


async def open_replicated(settings: MemrouteSettings, embedder, schema: str, urls: str,
                          **options) -> Memory:
    return await Memory.open(settings=settings.model_copy(update={
        "read_database_url": urls, **options}), embedder=embedder, schema=schema)


@pytest.fixture(scope="module")
async def replicated(settings, embedder, standby: Standby, schema: str
                     ) -> AsyncIterator[Memory]:
    memory = await open_replicated(settings, embedder, schema, standby.url)
    yield memory
    await memory.close()


def reads(memory: Memory) -> Counter[str]:
    return Counter(memory.read_routing()["reads"])


def replica_up(memory: Memory) -> bool:
    return memory.read_routing()["replicas"][0]["up"]


async def until(condition, timeout_s: float) -> float:
    """Seconds until ``condition()`` holds (AssertionError after ``timeout_s``)."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, f"not within {timeout_s}s"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


def on_standby(standby: Standby, schema: str, scope: Scope) -> set[str]:
    """The uids the standby itself holds in ``scope``."""
    with psycopg.connect(standby.url) as conn:
        rows = conn.execute(f"SELECT uid FROM {schema}.episodes WHERE scope_key = %s",
                            [scope.key]).fetchall()
    return {uid for uid, in rows}


async def uids_found(memory: Memory, scope: Scope, query: str) -> list[str]:
    return [r.uid for r in await memory.search_scored(scope, query, k=5, context=(0, 0))]


async def test_reads_go_to_a_replica_that_has_the_writes(replicated: Memory, standby: Standby,
                                                         scope: Scope) -> None:
    await replicated.add(scope, [Episode(uid="otter", content="The otter sleeps by the weir.")])
    standby.caught_up()
    before = reads(replicated)
    assert await uids_found(replicated, scope, "where does the otter sleep") == ["otter"]
    assert await replicated.count(scope) == {"episodes": 1, "sentences": 1}
    after = reads(replicated)
    assert after["replica"] - before["replica"] == 2
    assert after["primary"] == before["primary"]
    assert standby.execute("SELECT pg_is_in_recovery()") is True


async def test_a_paused_replica_never_hides_a_write_nor_serves_a_deleted_episode(
        replicated: Memory, standby: Standby, schema: str, scope: Scope) -> None:
    other = Scope(org_id=scope.org_id, project_id="untouched")
    await replicated.add(scope, [Episode(uid="old", content="The lighthouse lamp is green.")])
    await replicated.add(other, [Episode(uid="calm", content="The pond is calm at dawn.")])
    standby.caught_up()
    standby.pause_replay()
    try:
        await replicated.add(scope, [Episode(uid="new", content="The ferry leaves at noon.")])
        assert (await uids_found(replicated, scope, "when does the ferry leave"))[:1] == ["new"]
        assert [e.episode.uid for e in await replicated.get(scope, ["new"])] == ["new"]
        assert await replicated.count(scope) == {"episodes": 2, "sentences": 2}
        assert [e.episode.uid for e in await replicated.recent(scope, limit=1)] == ["new"]
        fresh = Scope(org_id=scope.org_id, project_id="fresh")
        await replicated.add(fresh, [Episode(uid="f", content="A fresh scope appears.")])
        assert fresh in await replicated.list_scopes([scope.org_id])

        await replicated.delete(scope, uids=["old"])
        assert "old" not in await uids_found(replicated, scope, "what colour is the lamp")
        assert await replicated.get(scope, ["old"]) == []
        # the replica really lags: it still holds the deleted episode and not the new one
        assert on_standby(standby, schema, scope) == {"old"}
        # a scope this memory has not written since goes on reading from the replica
        before = reads(replicated)
        assert await uids_found(replicated, other, "is the pond calm") == ["calm"]
        assert reads(replicated)["replica"] == before["replica"] + 1
    finally:
        standby.resume_replay()
    standby.caught_up()
    assert on_standby(standby, schema, scope) == {"new"}


async def test_a_stores_writes_are_never_missed_on_a_paused_replica(
        settings, embedder, standby: Standby, schema: str) -> None:
    """`MemrouteStore` writes (puts, deletes, the ttl refresh of a read, the sweep) note
    their position as `Memory.add` does: its searches, and the memory's, read them at once
    however far the replica lags."""
    memory = await open_replicated(settings, embedder, schema, standby.url, read_max_lag_s=60)
    org = f"st-{uuid.uuid4().hex[:8]}"
    put, refreshed, swept = (Scope(org_id=org, project_id=p) for p in ("put", "read", "swept"))
    store = MemrouteStore(memory, tenant=put, index={"fields": ["text"]}, strategy="direct")
    reader = MemrouteStore(memory, tenant=refreshed, index={"fields": ["text"]},
                           strategy="direct", ttl={"refresh_on_read": True})
    sweeper = MemrouteStore(memory, tenant=swept, index={"fields": ["text"]},
                            ttl={"omit_expired": False})
    ns = ("notes",)
    try:
        await store.aput(ns, "old", {"text": "The lighthouse lamp is green."})
        await sweeper.aput(ns, "gone", {"text": "The old pier is closed."}, ttl=1 / 60)
        standby.caught_up()
        assert await uids_found(memory, put, "what colour is the lamp") == [item_uid(ns, "old")]
        await reader.aput(ns, "lamp", {"text": "The harbour lamp is red."}, ttl=4 / 60)
        lamp_put = time.monotonic()
        standby.caught_up()
        standby.pause_replay()
        try:
            # read 2 s after its put, the lamp's 4 s ttl restarts: at 5 s it is live on the
            # primary only
            await asyncio.sleep(max(0.0, lamp_put + 2 - time.monotonic()))
            assert (await reader.aget(ns, "lamp")).value["text"] == "The harbour lamp is red."
            await store.aput(ns, "new", {"text": "The ferry leaves at noon."})
            hits = await store.asearch(ns, query="When does the ferry leave?", limit=1)
            assert [h.key for h in hits] == ["new"]
            await store.adelete(ns, "old")
            assert await uids_found(memory, put, "what colour is the lamp") == \
                [item_uid(ns, "new")]
            await asyncio.sleep(max(0.0, lamp_put + 5 - time.monotonic()))
            found = await reader.asearch(ns, query="What colour is the harbour lamp?",
                                         refresh_ttl=False)
            assert [h.key for h in found] == ["lamp"]
            assert await sweeper.asweep_ttl() >= 1
            assert await memory.search_scored(swept, "Is the pier closed?", k=3,
                                              expired_items=True) == []
            # the replica really lags: it still holds the deleted and swept episodes
            assert on_standby(standby, schema, put) == {item_uid(ns, "old")}
            assert on_standby(standby, schema, swept) == {item_uid(ns, "gone")}
        finally:
            standby.resume_replay()
        standby.caught_up()
        assert on_standby(standby, schema, put) == {item_uid(ns, "new")}
    finally:
        await memory.close()


async def test_a_killed_replica_is_left_out_and_taken_back(replicated: Memory, standby: Standby,
                                                           scope: Scope) -> None:
    await replicated.add(scope, [Episode(uid="k", content="The kiln is fired on Fridays.")])
    standby.caught_up()
    standby.kill()
    try:
        slowest = 0.0
        started = time.monotonic()
        while replica_up(replicated):  # searches answer, right, while the replica is lost
            assert time.monotonic() - started < 5, "the dead replica was not left out"
            t0 = time.monotonic()
            assert await uids_found(replicated, scope, "when is the kiln fired") == ["k"]
            slowest = max(slowest, time.monotonic() - t0)
        left_out = time.monotonic() - started
        assert "does not answer" in replicated.read_routing()["replicas"][0]["reason"]
        assert await uids_found(replicated, scope, "when is the kiln fired") == ["k"]
    finally:
        standby.start()
    taken_back = await until(lambda: replica_up(replicated), 10)
    before = reads(replicated)
    assert await uids_found(replicated, scope, "when is the kiln fired") == ["k"]
    assert reads(replicated)["replica"] == before["replica"] + 1
    print(f"\nleft out after {left_out:.2f}s (slowest search {slowest:.2f}s), "
          f"taken back {taken_back:.2f}s after its restart")


async def test_a_replica_lagging_past_the_bound_is_left_out_until_it_catches_up(
        settings, embedder, standby: Standby, schema: str, scope: Scope) -> None:
    memory = await open_replicated(settings, embedder, schema, standby.url, read_max_lag_s=1.0)
    try:
        assert replica_up(memory)
        standby.pause_replay()
        try:
            await memory.add(scope, [Episode(uid="lag", content="The tide turns at six.")])
            await until(lambda: not replica_up(memory), 10)
            assert "lags" in memory.read_routing()["replicas"][0]["reason"]
            before = reads(memory)
            assert await uids_found(memory, Scope(org_id="nobody", project_id="p"), "tide") == []
            assert reads(memory)["primary"] == before["primary"] + 1
        finally:
            standby.resume_replay()
        await until(lambda: replica_up(memory), 10)
    finally:
        await memory.close()


async def test_replicas_that_cannot_serve_are_left_out_and_a_malformed_url_refused(
        settings, embedder, pg_url: str, schema: str, scope: Scope, tmp_path: Path) -> None:
    for urls in (f"{pg_url} host=replica port=5432", "postgresql://[::1"):
        with pytest.raises(InvalidInputError, match="MEMROUTE_READ_DATABASE_URL: item"):
            await (await open_replicated(settings, embedder, schema, urls)).close()
    promoted = Standby(pg_url, tmp_path / "promoted").create()  # a failover's old standby
    promoted.promote()
    nobody = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    memory = await open_replicated(settings, embedder, schema,
                                   f"{nobody} {promoted.url} {pg_url}")
    try:
        dead, *primaries = memory.read_routing()["replicas"]
        assert not dead["up"] and "does not answer" in dead["reason"]
        assert all(not p["up"] and "not a standby" in p["reason"] for p in primaries)
        await memory.add(scope, [Episode(uid="p", content="Only the primary answers.")])
        assert await uids_found(memory, scope, "who answers") == ["p"]
        assert set(reads(memory)) == {"primary"}
    finally:
        await memory.close()
        promoted.remove()


async def test_served_reads_see_the_process_own_writes_and_keys_on_a_paused_replica(
        pg_url: str, pg_home: Path, standby: Standby, tmp_path: Path) -> None:
    schema = f"rs_{uuid.uuid4().hex[:8]}"
    env = service_env(pg_url, schema, pg_home, MEMROUTE_READ_DATABASE_URL=standby.url)
    server = ServedProcess(env, tmp_path / "serve.log").start()
    try:
        standby.caught_up()
        standby.pause_replay()
        keys = await KeyStore.open(pg_url, schema)
        try:  # a key made while the replica lags: checked on the primary
            token, _ = await keys.create("acme", project_ids=["p"])
        finally:
            await keys.close()
        scope = {"org_id": "acme", "project_id": "p"}
        async with httpx.AsyncClient(base_url=server.url, timeout=30, headers={
                "Authorization": f"Bearer {token}"}) as client:
            added = await client.post("/v1/episodes", json={"scope": scope, "episodes": [
                {"uid": "w", "content": "The well is behind the barn."}]})
            assert added.status_code == 200, added.text
            search = {"scope": scope, "query": "where is the well", "k": 3}
            found = await client.post("/v1/search", json=search)
            assert [r["uid"] for r in found.json()["results"]] == ["w"], found.text
            gone = await client.delete("/v1/episodes", params={**scope, "uid": "w"})
            assert gone.json()["deleted"] == 1, gone.text
            assert (await client.post("/v1/search", json=search)).json()["results"] == []
    finally:
        standby.resume_replay()
        server.stop()


@pytest.mark.stress
@pytest.mark.timeout(3600)
def test_stress_read_your_writes_on_a_lagging_replica_and_a_killed_one() -> None:
    """`benchmarks.replicas`: 1,000 add-then-search and 1,000 delete-then-search pairs on a
    paused replica and as many on a replaying one, 0 misses; searches go on answering, each
    within 2 s, while the replica is killed and started again."""
    out = subprocess.run([sys.executable, "-m", "benchmarks.replicas"], check=True,
                         stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1]).stdout
    print(out)
    report = json.loads(out.strip().splitlines()[-1])
    for phase in ("paused", "replaying"):
        figures = report[phase]
        assert figures["pairs"] >= 1000
        assert figures["misses"] == 0 and figures["stale"] == 0, figures["examples"]
        assert figures["reads"]["replica"] > 0  # the replica served the unwritten scope
    assert report["paused"]["reads"]["behind"] > 0  # and the written ones went elsewhere
    killed = report["killed"]
    assert killed["errors"] == 0, killed["error_examples"]
    assert killed["slowest_ms"] < 2000
    assert killed["reads_after_taken_back"]["replica"] > 0
