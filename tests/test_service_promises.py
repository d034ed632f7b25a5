"""The service keeps the library's promises, checked on real `memroute serve` and `memroute mcp`
processes through httpx, raw sockets, the official MCP SDK (streamable HTTP and stdio) and
the library: deleted data is never served by any face, every documented k works, bad bodies
and bad CLI arguments get typed errors, and an unauthenticated or slow request costs little."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from benchmarks.served import ROOT, ServedProcess, service_env
from memroute import RetrievalAgent
from memroute.memory import Episode, Memory, Scope
from memroute.service.keys import KeyStore

TIMEOUT_S = 2  # the server's header and body deadlines in this module


@pytest.fixture(scope="module")
def served(memory: Memory, pg_url: str, pg_home: Path, tmp_path_factory):
    # k = 300 searches take longer than the default 2 s statement timeout on a loaded machine
    env = service_env(pg_url, memory.schema, pg_home,
                      MEMROUTE_SEARCH_STATEMENT_TIMEOUT_MS="30000")
    server = ServedProcess(env, tmp_path_factory.mktemp("promises") / "serve.log",
                           "--key-cache-seconds", "0",
                           "--header-timeout-seconds", str(TIMEOUT_S),
                           "--body-timeout-seconds", str(TIMEOUT_S)).start()
    yield server
    server.stop()


class Tenant:
    def __init__(self, org: str, token: str, served: ServedProcess, memory: Memory,
                 pg_url: str, pg_home: Path) -> None:
        self.org, self.token, self.served = org, token, served
        self.scope = {"org_id": org, "project_id": "p"}
        self.client = httpx.AsyncClient(base_url=served.url, timeout=120,
                                        headers={"Authorization": f"Bearer {token}"})
        self.stdio_env = service_env(pg_url, memory.schema, pg_home, MEMROUTE_API_KEY=token)


@pytest.fixture
async def tenant(keys: KeyStore, served: ServedProcess, memory: Memory, pg_url: str,
                 pg_home: Path) -> AsyncIterator[Tenant]:
    org = f"org-{uuid.uuid4().hex[:8]}"
    token, _ = await keys.create(org, project_ids=["p"])
    made = Tenant(org, token, served, memory, pg_url, pg_home)
    yield made
    await made.client.aclose()


@contextlib.asynccontextmanager
async def mcp_clients(t: Tenant) -> AsyncIterator[dict[str, Client]]:
    """MCP over streamable HTTP (the served process) and over stdio (its own process)."""
    http = Client(streamable_http_client(f"{t.served.url}/mcp", http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {t.token}"})))
    stdio = Client(StdioServerParameters(command=sys.executable, args=["-m", "memroute.cli", "mcp"],
                                         env=t.stdio_env, cwd=str(ROOT)),
                   read_timeout_seconds=120)
    async with http, stdio:
        yield {"mcp-http": http, "mcp-stdio": stdio}


async def mcp_search(client: Client, query: str) -> str:
    result = await client.call_tool("memory_search", {"query": query})
    assert not result.is_error, result.content
    return result.content[0].text


async def rest_search(t: Tenant, query: str) -> str:
    response = await t.client.post("/v1/search", json={"scope": t.scope, "query": query})
    assert response.status_code == 200, response.text
    return json.dumps(response.json())


# -- deleted data is never served -----------------------------------------------------------

async def test_deleted_episode_is_never_served_by_mcp(tenant: Tenant) -> None:
    t = tenant
    added = await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
        {"uid": "locker", "content": "Priya's locker code is 7731."}]})
    assert added.status_code == 200, added.text
    async with mcp_clients(t) as clients:
        for client in clients.values():
            assert "7731" in await mcp_search(client, "Priya locker code")
        deleted = await t.client.delete("/v1/episodes", params={**t.scope, "uid": "locker"})
        assert deleted.json() == {"deleted": 1}
        for face, client in clients.items():
            assert "7731" not in await mcp_search(client, "Priya locker code"), face
        # an episode added later shows for the query already asked
        await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
            {"uid": "bike", "content": "Priya's bike lock code is 4402."}]})
        for face, client in clients.items():
            assert "4402" in await mcp_search(client, "Priya locker code"), face


async def test_a_deletion_through_any_face_is_seen_by_every_other(tenant: Tenant,
                                                                  memory: Memory) -> None:
    """Each face deletes one episode in turn; every face then searches for it: REST, MCP
    over HTTP and stdio (three processes) and the library in this one."""
    t = tenant
    scope = Scope(**t.scope)

    async def library_search(query: str) -> str:
        return " ".join(r.nucleus.content for r in await memory.search_scored(scope, query))

    async with mcp_clients(t) as clients:
        async def delete_by(face: str, uid: str) -> int:
            if face == "rest":
                response = await t.client.delete("/v1/episodes", params={**t.scope, "uid": uid})
                return response.json()["deleted"]
            if face == "library":
                return await memory.delete(scope, uids=[uid])
            result = await clients[face].call_tool("memory_delete", {"uids": [uid]})
            return result.structured_content["deleted"]

        searches = {"rest": lambda q: rest_search(t, q), "library": library_search,
                    **{face: (lambda q, c=c: mcp_search(c, q)) for face, c in clients.items()}}
        for n, deleter in enumerate(["rest", "mcp-http", "mcp-stdio", "library"]):
            secret = f"vault code {9000 + n}"
            await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
                {"uid": f"v{n}", "content": f"The {deleter} vault holds {secret}."}]})
            for face, search in searches.items():
                assert secret in await search(f"{deleter} vault code"), (face, "before")
            assert await delete_by(deleter, f"v{n}") == 1
            for face, search in searches.items():
                assert secret not in await search(f"{deleter} vault code"), (deleter, face)


# -- every documented k ---------------------------------------------------------------------

@pytest.fixture(scope="module")
async def many_episodes(memory: Memory) -> Scope:
    """1,400 short notes in 140 sessions: the context windows a chain pools for k = 300 hold
    more episodes than one entity lookup may ask for (1,000)."""
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="p")
    await memory.add(scope, [Episode(uid=f"n{i}", session_id=f"s{i // 10}",
                                     content=f"Person {i} works at firm {i % 37} in town {i % 53}.")
                             for i in range(1400)])
    return scope


async def test_chain_answers_every_documented_k(many_episodes: Scope, memory: Memory,
                                                keys: KeyStore, served: ServedProcess) -> None:
    token, _ = await keys.create(many_episodes.org_id, project_ids=["p"])
    question = "Where does the person who works at firm 5 live?"
    async with httpx.AsyncClient(base_url=served.url, timeout=300,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        response = await client.post("/v1/retrieve", json={
            "scope": many_episodes.as_dict(), "query": question, "k": 300, "strategy": "chain"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["route"] == "chain" and len(body["results"]) == 300
    # k = 600 searches outlast the default 2 s statement timeout on a loaded machine
    patient = memory.settings.model_copy(update={"search_statement_timeout_ms": 30_000})
    async with await Memory.open(settings=patient, embedder=memory.embedder,
                                 schema=memory.schema) as mem:
        found = await RetrievalAgent(mem).aretrieve(question, scope=many_episodes, k=600,
                                                    strategy="auto")
    assert found.route == "chain" and len(found.results) == 600


# -- typed errors ---------------------------------------------------------------------------

async def test_unreadable_bodies_and_non_finite_budgets_are_invalid_input(tenant: Tenant) -> None:
    t = tenant
    search = {"scope": t.scope, "query": "anything"}
    deep = '{"scope": %s, "query": "q", "filters": %s1%s}' % (
        json.dumps(t.scope), '{"a": ' * 1200, "}" * 1200)
    bodies = {
        "NaN budget": json.dumps(search)[:-1] + ', "budget": {"max_latency_s": NaN}}',
        "Infinity budget": json.dumps(search)[:-1] + ', "budget": {"max_latency_s": Infinity}}',
        "nested 1,200 levels": deep,
        "nested 100,000 levels": '{"q": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "invalid UTF-8": json.dumps(search).encode().replace(b"anything", b"any\xff\xfething"),
        "5,000-digit integer": json.dumps(search)[:-1] + ', "k": ' + "9" * 5000 + "}",
    }
    for what, body in bodies.items():
        for route in ("/v1/search", "/v1/retrieve"):
            response = await t.client.post(route, content=body,
                                           headers={"Content-Type": "application/json"})
            assert response.status_code == 422, (what, route, response.text)
            assert response.json()["kind"] == "InvalidInputError", (what, route)
    # the same budget, finite, answers
    fine = await t.client.post("/v1/retrieve", json={**search, "budget": {"max_latency_s": 5}})
    assert fine.status_code == 200 and "router_failed" not in fine.json()["route_reason"]


def run_cli(memory: Memory, pg_url: str, pg_home: Path, *args: str | bytes):
    env = service_env(pg_url, memory.schema, pg_home, MEMROUTE_POOL_MAX_SIZE="2")
    return subprocess.run([sys.executable, "-m", "memroute.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, timeout=180, stdin=subprocess.DEVNULL)


def test_keys_commands_refuse_arguments_that_are_not_utf8(memory: Memory, pg_url: str,
                                                          pg_home: Path) -> None:
    for args in (["keys", "create", "--org", "acme", "--name", b"\xff"],
                 ["keys", "revoke", b"\xff"],
                 ["keys", "list", "--org", b"\xff"]):
        done = run_cli(memory, pg_url, pg_home, *args)
        stderr = done.stderr.decode()
        assert done.returncode == 2, (args, stderr)  # InvalidInputError's documented code
        assert "lone surrogate" in stderr and "unexpected" not in stderr, (args, stderr)


# -- unauthenticated and slow requests ------------------------------------------------------

def raw_request(url: str, head: bytes, body: bytes = b"",
                wait_s: float = 10.0) -> tuple[bytes, float]:
    """Send ``head`` and ``body`` on a raw socket, then read until the server answers or
    closes; returns what it sent and when (seconds after the first byte)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        started = time.perf_counter()
        sock.sendall(head + body)
        received = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := sock.recv(65536):
                received += chunk
                if b"\r\n\r\n" in received and b'"kind"' in received:
                    break
        return received, time.perf_counter() - started


def test_an_unauthenticated_request_is_refused_before_its_body(served: ServedProcess) -> None:
    for path in ("/v1/search", "/v1/episodes", "/v1/retrieve/stream", "/mcp"):
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: 100000\r\n\r\n").encode()
        answer, seconds = raw_request(served.url, head, b"{")
        assert answer.startswith(b"HTTP/1.1 401"), (path, answer[:200])
        assert b'"kind":"NotAuthenticatedError"' in answer and seconds < TIMEOUT_S, path
    # a client that goes on sending the refused body is cut off after the header deadline
    host, port = served.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S + 5) as sock:
        sock.sendall(head.replace(b"/mcp", b"/v1/search") + b"{")
        assert sock.recv(65536).startswith(b"HTTP/1.1 401")
        started = time.perf_counter()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while time.perf_counter() - started < TIMEOUT_S + 5:
                sock.sendall(b" ")
                time.sleep(0.2)
        assert time.perf_counter() - started < TIMEOUT_S + 2  # closed by the server
    # open routes need no key; a wrong key is refused the same way
    assert httpx.get(f"{served.url}/v1/health").status_code == 200
    wrong = httpx.post(f"{served.url}/v1/search", headers={"Authorization": "Bearer mr_x.y"},
                       json={})
    assert wrong.status_code == 401 and wrong.json()["kind"] == "NotAuthenticatedError"


async def test_slow_headers_and_bodies_are_timed_out(served: ServedProcess,
                                                     tenant: Tenant) -> None:
    # headers that never end: the connection is closed after the deadline
    answer, seconds = await asyncio.to_thread(
        raw_request, served.url, b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    assert answer == b"" and TIMEOUT_S - 0.5 < seconds < TIMEOUT_S + 3, (answer, seconds)
    # an authenticated body that stops coming: 408, typed
    head = (f"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {tenant.token}\r\nContent-Length: 1000\r\n\r\n").encode()
    answer, seconds = await asyncio.to_thread(raw_request, served.url, head, b'{"scope": ')
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b'"kind":"RequestTimeout"' in answer and seconds < TIMEOUT_S + 3
    # and the server still answers
    assert (await tenant.client.get("/v1/scopes/stats", params=tenant.scope)).status_code == 200
