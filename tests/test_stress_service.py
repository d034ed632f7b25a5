"""`make stress`: a real `memroute serve` under mixed load over 32 connections, ingestion
running, and its embedded postmaster killed (SIGKILL) in the middle. No request fails
untyped (500), none loses its connection, none waits past the configured timeout, and every
acknowledged write is stored."""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from psycopg import AsyncConnection
from test_db_faults import kill_postmaster
from test_service_faults import SCHEMA, SCOPE, new_key, owned_env

from benchmarks.served import ServedProcess
from memroute.memory.server import embedded_server_status, stop_embedded_server

pytestmark = pytest.mark.stress

CONNECTIONS = 32
REQUESTS = 256  # by the 32 clients, besides the ingestion
POOL_TIMEOUT_S = 10  # MEMROUTE_POOL_TIMEOUT_S of the server: no request may wait longer
SLACK_S = 5.0  # a restart of the embedded server, on 2 busy cores
MIX = ["search", "search", "retrieve", "stream", "stats", "search", "add", "retrieve"]
WORDS = "harbor lantern copper meadow violet glacier orchard summit canyon ember".split()


@dataclass
class Outcome:
    kind: str
    status: int | None  # None: the connection was lost or timed out
    seconds: float
    detail: str = ""


def note(n: int) -> str:
    return (f"Note {n}: the {WORDS[n % 10]} team met near the {WORDS[(n * 3) % 10]} "
            f"office to plan the {WORDS[(n * 7) % 10]} launch.")


async def test_serve_under_load_survives_a_postmaster_kill(tmp_path_factory) -> None:
    home = tmp_path_factory.mktemp("stress-home")
    log = home / "serve.log"
    server = ServedProcess(owned_env(home, MEMROUTE_POOL_TIMEOUT_S=str(POOL_TIMEOUT_S)), log,
                           "--key-cache-seconds", "0").start(timeout=180)
    outcomes: list[Outcome] = []
    acknowledged: list[str] = []
    uids = itertools.count()
    try:
        token = await new_key(home)
        limits = httpx.Limits(max_connections=CONNECTIONS + 2,
                              max_keepalive_connections=CONNECTIONS + 2)
        async with httpx.AsyncClient(base_url=server.url, limits=limits,
                                     timeout=POOL_TIMEOUT_S + 3 * SLACK_S,
                                     headers={"Authorization": f"Bearer {token}"}) as client:
            seeded = await client.post("/v1/episodes", json={"scope": SCOPE, "episodes": [
                {"uid": f"seed-{i}", "content": note(i)} for i in range(30)]})
            assert seeded.status_code == 200, seeded.text

            async def send(kind: str) -> None:
                n = next(uids)
                query = f"Where did the {WORDS[n % 10]} team meet?"
                body = {"scope": SCOPE, "query": query, "k": 5}
                started = time.perf_counter()
                written: list[str] = []
                try:
                    if kind == "search":
                        response = await client.post("/v1/search", json=body)
                    elif kind == "retrieve":
                        response = await client.post("/v1/retrieve", json=body)
                    elif kind == "stream":
                        response = await client.post("/v1/retrieve/stream", json=body)
                    elif kind == "stats":
                        response = await client.get("/v1/scopes/stats", params=SCOPE)
                    else:
                        written = [f"{kind}-{n}-{j}" for j in range(5 if kind == "ingest" else 1)]
                        response = await client.post("/v1/episodes", json={
                            "scope": SCOPE, "episodes": [{"uid": u, "content": note(n + j)}
                                                         for j, u in enumerate(written)]})
                except httpx.HTTPError as exc:  # a dropped connection or a timeout
                    outcomes.append(Outcome(kind, None, time.perf_counter() - started,
                                            f"{type(exc).__name__}: {exc}"))
                    return
                seconds = time.perf_counter() - started
                detail = response.text[:300]
                if kind == "stream" and response.status_code == 200:
                    last = response.text.strip().split("\n\n")[-1]
                    event = last.split("\n")[0].removeprefix("event: ")
                    data = json.loads(last.split("data: ", 1)[1])
                    if event != "final":  # a stream that began reports its error last
                        detail = f"stream {event}: {data.get('kind')}"
                outcomes.append(Outcome(kind, response.status_code, seconds, detail))
                if response.status_code == 200 and written:
                    acknowledged.extend(written)

            sent = itertools.count()
            done = asyncio.Event()

            async def client_loop() -> None:
                while (i := next(sent)) < REQUESTS:
                    await send(MIX[i % len(MIX)])

            async def ingest() -> None:
                while not done.is_set():
                    await send("ingest")

            killed_at: list[float] = []

            async def killer() -> None:
                while len(outcomes) < REQUESTS // 3:
                    await asyncio.sleep(0.05)
                killed_at.append(time.perf_counter())
                await asyncio.to_thread(kill_postmaster, home)

            started = time.perf_counter()
            ingestion = [asyncio.create_task(ingest()) for _ in range(2)]
            await asyncio.gather(killer(), *(client_loop() for _ in range(CONNECTIONS)))
            done.set()
            await asyncio.gather(*ingestion)
            wall = time.perf_counter() - started

        url = embedded_server_status(home)["url"]
        async with await AsyncConnection.connect(url) as conn:
            cur = await conn.execute(f"SELECT uid FROM {SCHEMA}.episodes")
            stored = {row[0] for row in await cur.fetchall()}
    finally:
        server.stop()
        stop_embedded_server(home)

    statuses = Counter(o.status for o in outcomes)
    slowest = max(o.seconds for o in outcomes)
    after_kill = [o for o in outcomes if o.status is not None]
    typed_503 = [o for o in outcomes if o.status == 503 and '"StoreUnavailableError"' in o.detail]
    stream_errors = [o for o in outcomes if o.detail.startswith("stream ")]
    seconds = sorted(o.seconds for o in outcomes)
    print(f"\n{len(outcomes)} requests ({REQUESTS} mixed over {CONNECTIONS} connections + "
          f"{sum(o.kind == 'ingest' for o in outcomes)} ingestion batches) in {wall:.1f}s; "
          f"postmaster killed at {killed_at[0] - started:.1f}s; statuses {dict(statuses)}; "
          f"typed 503s {len(typed_503)}; stream error events {len(stream_errors)}; "
          f"p50 {statistics.median(seconds):.2f}s, p95 {seconds[int(0.95 * len(seconds))]:.2f}s, "
          f"slowest {slowest:.1f}s; acknowledged writes {len(acknowledged)}, all stored: "
          f"{set(acknowledged) <= stored}")
    assert len(outcomes) >= REQUESTS and killed_at
    dropped = [o for o in outcomes if o.status is None]
    assert not dropped, dropped[:3]
    assert statuses[500] == 0, [o.detail for o in outcomes if o.status == 500][:3]
    assert set(statuses) <= {200, 503}, statuses
    assert len(typed_503) == statuses[503]  # every 503 has the typed body
    assert all(o.detail.endswith("StoreUnavailableError") for o in stream_errors), stream_errors
    assert slowest < POOL_TIMEOUT_S + SLACK_S, slowest
    assert set(acknowledged) <= stored
    assert after_kill[-1].status == 200  # recovered
    assert "Exception in ASGI application" not in Path(log).read_text()
