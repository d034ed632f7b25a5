"""The embedded postmaster killed (SIGKILL) under a running `memroute serve` and under
`memroute mcp`: the next request is answered, with a result or a typed 503, within 10 s,
and every later one succeeds; no request fails untyped or loses its connection. Killed
again within a minute, it is not restarted: a typed 503 (a typed tool error), in seconds."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters
from test_db_faults import kill_postmaster

from benchmarks.served import ROOT, ServedProcess
from memroute.memory.server import embedded_server_status, stop_embedded_server
from memroute.service.keys import KeyStore

pytestmark = pytest.mark.skipif(bool(os.environ.get("MEMROUTE_TEST_DATABASE_URL")),
                                reason="kills the embedded server this module starts")

ANSWER_WITHIN_S = 10.0
SCHEMA = "faults"
SCOPE = {"org_id": "crash", "project_id": "p"}


def owned_env(home: Path, **extra: str) -> dict[str, str]:
    """A server that starts (and so may restart) the embedded server under ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMROUTE_")}
    env.update({"MEMROUTE_HOME": str(home), "MEMROUTE_DB_SCHEMA": SCHEMA,
                "MEMROUTE_EMBED_THREADS": "1",
                "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", **extra})
    return env


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("owned-home")
    yield path
    stop_embedded_server(path)


def serve(home: Path, log: Path, *args: str) -> ServedProcess:
    """`memroute serve` owning ``home``'s embedded server (which it creates on first start)."""
    return ServedProcess(owned_env(home), log, *args).start(timeout=180)


async def new_key(home: Path) -> str:
    keys = await KeyStore.open(embedded_server_status(home)["url"], SCHEMA)
    try:
        token, _ = await keys.create(SCOPE["org_id"], project_ids=[SCOPE["project_id"]])
    finally:
        await keys.close()
    return token


def typed(response: httpx.Response) -> bool:
    """A result, or the typed answer to a database that is down."""
    return response.status_code == 200 or (
        response.status_code == 503 and response.json()["kind"] == "StoreUnavailableError")


@pytest.mark.parametrize("key_cache", ["0", "5"])
async def test_serve_answers_within_seconds_after_the_postmaster_dies(home: Path, tmp_path: Path,
                                                                      key_cache: str) -> None:
    server = serve(home, tmp_path / "serve.log", "--key-cache-seconds", key_cache)
    try:
        token = await new_key(home)
        async with httpx.AsyncClient(base_url=server.url, timeout=60, headers={
                "Authorization": f"Bearer {token}"}) as client:
            added = await client.post("/v1/episodes", json={"scope": SCOPE, "episodes": [
                {"uid": f"before-{key_cache}", "content": "The spare key is under the blue pot."}]})
            assert added.status_code == 200, added.text

            async def timed(request) -> tuple[httpx.Response, float]:
                started = time.perf_counter()
                response = await request()
                return response, time.perf_counter() - started

            search = lambda: client.post("/v1/search", json={"scope": SCOPE, "query": "spare key"})
            await asyncio.to_thread(kill_postmaster, home)
            # the next requests, at once and concurrently: each answered in time, typed
            stats = lambda: client.get("/v1/scopes/stats", params=SCOPE)
            write = lambda: client.post("/v1/episodes", json={"scope": SCOPE, "episodes": [
                {"uid": f"during-{key_cache}", "content": "A note written during the crash."}]})
            first = await asyncio.gather(*(timed(search) for _ in range(6)), timed(stats),
                                         timed(write))
            for response, seconds in first:
                assert typed(response), response.text
                assert seconds < ANSWER_WITHIN_S, seconds
            # and every later one succeeds
            for _ in range(5):
                response, seconds = await timed(search)
                assert response.status_code == 200, response.text
                assert "blue pot" in response.text and seconds < ANSWER_WITHIN_S
            counted = (await client.get("/v1/scopes/stats", params=SCOPE)).json()
            wrote = first[-1][0].status_code == 200
            assert counted["episodes"] >= 1 + wrote
            # dead again within a minute: not restarted again, a typed 503 within seconds
            await asyncio.to_thread(kill_postmaster, home)
            response, seconds = await timed(search)
            assert response.status_code == 503, response.text
            assert response.json()["kind"] == "StoreUnavailableError"
            assert seconds < ANSWER_WITHIN_S, seconds
            print(f"\nkey cache {key_cache}s: first answers in "
                  f"{max(s for _, s in first):.1f}s "
                  f"({sorted(r.status_code for r, _ in first)})")
    finally:
        server.stop()
    assert "Exception in ASGI application" not in (tmp_path / "serve.log").read_text()


async def test_mcp_stdio_answers_within_seconds_after_the_postmaster_dies(home: Path) -> None:
    if not embedded_server_status(home)["running"]:
        serve(home, home / "first.log").stop()  # creates the server and its schema
    token = await new_key(home)
    params = StdioServerParameters(command=sys.executable, args=["-m", "memroute.cli", "mcp"],
                                   env=owned_env(home, MEMROUTE_API_KEY=token), cwd=str(ROOT))
    async with Client(params, read_timeout_seconds=60) as client:
        added = await client.call_tool("memory_add", {"episodes": [
            {"uid": "mcp-before", "content": "The boat is moored at pier seven."}]})
        assert not added.is_error, added.content
        await asyncio.to_thread(kill_postmaster, home)
        started = time.perf_counter()
        result = await client.call_tool("memory_search", {"query": "where is the boat"})
        seconds = time.perf_counter() - started
        assert seconds < ANSWER_WITHIN_S, seconds
        text = result.content[0].text
        assert ("pier seven" in text) if not result.is_error else (
            "[StoreUnavailableError]" in text), text
        for tool, arguments in [("memory_search", {"query": "where is the boat"}),
                                ("memory_retrieve", {"query": "where is the boat", "k": 3}),
                                ("memory_add", {"episodes": [{"content": "After the crash."}]})]:
            started = time.perf_counter()
            later = await client.call_tool(tool, arguments)
            assert not later.is_error, later.content
            assert time.perf_counter() - started < ANSWER_WITHIN_S
        await asyncio.to_thread(kill_postmaster, home)  # again: a typed tool error, in time
        started = time.perf_counter()
        failed = await client.call_tool("memory_search", {"query": "where is the boat"})
        failed_in = time.perf_counter() - started
        assert failed.is_error and failed_in < ANSWER_WITHIN_S, failed_in
        assert "[StoreUnavailableError] " in failed.content[0].text, failed.content
        outcome = "error" if result.is_error else "result"
        print(f"\nmcp stdio: first answer in {seconds:.1f}s ({outcome})")
