"""The service opens in the background (issue 48): `memroute mcp` answers ``initialize`` and
``tools/list`` before its models and store are open, a tool call made at once waits for them
(or gets its typed error), and `memroute serve`'s health route tells ``starting`` from
``ready``. Against the real embedded store; no timing is asserted (benchmarks/cold_start.py
measures it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from benchmarks.served import ROOT, ServedProcess, free_port, service_env
from memroute.errors import InvalidInputError, StoreUnavailableError
from memroute.memory import Memory
from memroute.service.context import ServiceOpener
from memroute.settings import MemrouteSettings

TOOLS = {"memory_search", "memory_retrieve", "memory_add", "memory_delete"}


def closed_port_url() -> str:
    """A database URL nothing listens at."""
    return f"postgresql://postgres@127.0.0.1:{free_port()}/postgres?connect_timeout=5"


def mcp_params(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "memroute.cli", "mcp"],
                                 env=env, cwd=str(ROOT))


async def test_the_opener_waits_while_starting_and_keeps_its_outcome() -> None:
    gate = asyncio.Event()

    async def opening() -> str:
        await gate.wait()
        return "service"

    opener = ServiceOpener(opening)  # type: ignore[arg-type]
    assert opener.state == "starting" and opener.error is None
    waiting = asyncio.ensure_future(opener.get())
    await asyncio.sleep(0.05)
    assert not waiting.done() and opener.state == "starting"
    gate.set()
    assert await waiting == "service" and opener.state == "ready"
    assert await opener.get() == "service"  # opened once

    async def crash() -> None:
        raise OSError("disk on fire")

    failed = ServiceOpener(crash)  # type: ignore[arg-type]
    assert await failed.wait() == "failed"
    with pytest.raises(StoreUnavailableError, match="OSError: disk on fire"):
        await failed.get()

    async def refuse() -> None:
        raise InvalidInputError("bad setting")

    typed = ServiceOpener(refuse)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="bad setting"):  # its own kind, kept
        await typed.get()


async def test_mcp_stdio_lists_its_tools_and_answers_a_call_made_at_once(
        memory: Memory, pg_url: str, pg_home: Path) -> None:
    from memroute.service.keys import KeyStore

    org = f"open-{uuid.uuid4().hex[:8]}"
    scope = {"org_id": org, "project_id": "p"}
    await memory.add(scope, [{"uid": "kite", "content": "The red kite is stored in the attic."}])
    keys = await KeyStore.open(memory.url, memory.schema)
    try:
        token, _ = await keys.create(org, project_ids=["p"])
    finally:
        await keys.close()
    env = service_env(pg_url, memory.schema, pg_home, MEMROUTE_API_KEY=token)
    async with stdio_client(mcp_params(env)) as (read, write), \
            ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "memroute"
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        found = await session.call_tool("memory_search", {"query": "where is the red kite"})
        assert not found.is_error, found.content
        first = json.loads(found.content[0].text)["results"][0]
        assert first["uid"] == "kite" and "attic" in first["content"]


async def test_mcp_stdio_that_cannot_open_answers_with_a_typed_tool_error(
        memory: Memory, tmp_path: Path) -> None:
    env = service_env(closed_port_url(), memory.schema, tmp_path,
                      MEMROUTE_API_KEY="mr_any.key")
    async with stdio_client(mcp_params(env)) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        for _ in range(2):  # the outcome is kept: the second call fails the same way
            failed = await session.call_tool("memory_search", {"query": "anything"})
            assert failed.is_error
            assert failed.content[0].text.startswith(
                "[StoreUnavailableError] memory_search failed: cannot connect"), failed.content
    # stdin closed: the opening's error is the command's (one line, its exit code)
    done = subprocess.run([sys.executable, "-m", "memroute.cli", "mcp"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == StoreUnavailableError.exit_code, done.stderr
    assert done.stderr.startswith("error: cannot connect") and done.stdout == ""


async def test_health_tells_starting_from_ready(memory: Memory, pg_url: str, pg_home: Path,
                                                tmp_path: Path) -> None:
    server = ServedProcess(service_env(pg_url, memory.schema, pg_home), tmp_path / "serve.log")
    server.launch()  # not waiting for it to be ready
    states: list[str] = []
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            for _ in range(1200):
                assert server.proc.poll() is None, server.log.read_text()[-2000:]
                try:
                    health = await client.get("/v1/health")
                except httpx.TransportError:
                    await asyncio.sleep(0.1)  # not listening yet
                    continue
                body = health.json()
                assert health.status_code == 200 and body["status"] == "ok", body
                states.append(body["state"])
                if body["state"] != "starting":
                    break
                ready = await client.get("/v1/ready")
                if ready.status_code == 503:  # it may have opened since the health answer
                    assert ready.json()["status"] == "starting", ready.text
                await asyncio.sleep(0.1)
            assert states and states[-1] == "ready", states
            assert set(states[:-1]) <= {"starting"}, states
            assert (await client.get("/v1/ready")).json()["status"] == "ready"
    finally:
        server.stop()
    assert "memroute serve: ready on" in server.log.read_text()


async def test_a_store_that_cannot_open_is_a_failed_state_and_typed_503s(
        settings: MemrouteSettings) -> None:
    from memroute.service.app import create_app

    app = create_app(settings.model_copy(update={"database_url": closed_port_url()}),
                     mcp=False)
    async with app.router.lifespan_context(app):
        assert await app.state.opener.wait() == "failed"
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            health = (await client.get("/v1/health")).json()
            assert health["status"] == "ok" and health["state"] == "failed", health
            assert health["detail"].startswith("cannot connect"), health
            ready = await client.get("/v1/ready")
            assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
            search = await client.post("/v1/search", json={"scope": {"org_id": "a"},
                                                            "query": "q"},
                                        headers={"Authorization": "Bearer mr_a.b"})
            assert search.status_code == 503, search.text
            assert search.json()["kind"] == "StoreUnavailableError"


def test_serve_whose_memory_cannot_open_exits_with_its_error(memory: Memory,
                                                             tmp_path: Path) -> None:
    env = service_env(closed_port_url(), memory.schema, tmp_path)
    done = subprocess.run([sys.executable, "-m", "memroute.cli", "serve", "--port",
                           str(free_port())], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == StoreUnavailableError.exit_code, done.stderr
    assert done.stderr.startswith("error: cannot connect"), done.stderr
    assert "ready on" not in done.stdout and "Traceback" not in done.stderr
