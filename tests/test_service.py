"""`memroute serve` and `memroute mcp` as real processes on 127.0.0.1: REST and SSE through
httpx, MCP through the official SDK's client (streamable HTTP and stdio), tenancy, limits,
concurrency during ingestion, and a killed server restarted."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from benchmarks.served import ROOT, ServedProcess, service_env
from memroute.memory import Memory
from memroute.memory.limits import MAX_ID_CHARS, MAX_K, MAX_LIST, MAX_QUERY_CHARS
from memroute.service.keys import KeyStore
from memroute.service.models import MAX_EPISODES_PER_REQUEST, MAX_REQUEST_BYTES
from tests.reasons import names as reason_names

DOCS = ROOT / "docs"
FACTS = ["Alice moved to Lisbon in 2019.", "Alice works as a nurse at Santa Maria hospital.",
         "Bob adopted a grey cat called Miso.", "The team offsite is in Porto in June."]


class Tenant:
    """An org with a key (bound to project ``p``), its scope and an httpx client."""

    def __init__(self, org: str, token: str, url: str) -> None:
        self.org, self.token = org, token
        self.scope = {"org_id": org, "project_id": "p"}
        self.client = httpx.AsyncClient(base_url=url, timeout=60,
                                        headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
async def tenant_factory(keys: KeyStore, served: ServedProcess):
    made: list[Tenant] = []

    async def make(**binding) -> Tenant:
        org = f"org-{uuid.uuid4().hex[:8]}"
        token, _ = await keys.create(org, project_ids=binding.pop("project_ids", ["p"]),
                                     **binding)
        made.append(Tenant(org, token, served.url))
        return made[-1]

    yield make
    for tenant in made:
        await tenant.client.aclose()


def sse_events(text: str) -> list[tuple[str, dict]]:
    """(event, data) pairs of a text/event-stream body."""
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((fields["event"], json.loads(fields["data"])))
    return events


# -- REST ----------------------------------------------------------------------------------

async def test_rest_round_trip(tenant_factory) -> None:
    t = await tenant_factory()
    episodes = [{"content": c, "uid": f"f{i}", "session_id": "s1" if i < 2 else "s2"}
                for i, c in enumerate(FACTS)]
    added = await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": episodes})
    assert added.status_code == 200, added.text
    assert added.json() == {"uids": ["f0", "f1", "f2", "f3"]}
    again = await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": episodes[:2]})
    assert again.json() == {"uids": ["f0", "f1"]}  # idempotent by uid
    stats = (await t.client.get("/v1/scopes/stats", params=t.scope)).json()
    assert (stats["episodes"], stats["scope"]["org_id"]) == (4, t.org)

    found = (await t.client.post("/v1/search", json={
        "scope": t.scope, "query": "Which pet does Bob have?", "k": 2})).json()
    bob = next(r for r in found["results"] if r["uid"] == "f2")  # the answer, in the top k
    assert bob["nucleus"]["content"] == FACTS[2]
    assert set(found["timings"]) >= {"embed_ms", "read_ms"}

    got = (await t.client.post("/v1/retrieve", json={
        "scope": t.scope, "query": "What does Alice do and what does Bob do?", "k": 4,
        "budget": {"max_llm_calls": 2}})).json()
    # the two sub-questions, whole ("What does Alice do?")
    assert got["route"] == "split" and len(got["queries"]) == 2 and got["stop_reason"]
    assert {"f1", "f2"} <= {r["uid"] for r in got["results"]}
    assert got["costs"]["totals"]["llm_calls"] == 0  # the offline planner

    assert (await t.client.delete("/v1/episodes", params=t.scope)).status_code == 422
    by_uid = await t.client.delete("/v1/episodes", params={**t.scope, "uid": ["f3", "nope"]})
    assert by_uid.json() == {"deleted": 1}
    by_session = await t.client.delete("/v1/episodes", params={**t.scope, "session_id": "s1"})
    assert by_session.json() == {"deleted": 2}
    everything = await t.client.delete("/v1/episodes", params={**t.scope, "all": "true"})
    assert everything.json() == {"deleted": 1, "by_scope": {f"{t.org}/p": 1}}


async def test_retrieve_stream_sends_the_agents_steps(tenant_factory) -> None:
    t = await tenant_factory()
    await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
        {"content": c} for c in FACTS]})
    async with t.client.stream("POST", "/v1/retrieve/stream", json={
            "scope": t.scope, "query": "What does Alice do and what does Bob do?"}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        body = (await response.aread()).decode()
    events = sse_events(body)
    names = [name for name, _ in events]
    assert names[0] == "route" and names[-1] == "final" and "sub_queries" in names
    assert names.count("search") == len(events[-1][1]["queries"])
    assert events[-1][1]["route"] == "split" and events[-1][1]["results"]


async def test_health_ready_and_openapi_match_the_checked_in_schema(served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        assert (await client.get("/v1/health")).json()["status"] == "ok"
        assert (await client.get("/v1/ready")).json()["status"] == "ready"
        served_schema = (await client.get("/openapi.json")).json()
    assert served_schema == json.loads((DOCS / "openapi.json").read_text()), (
        "docs/openapi.json is stale: memroute serve --openapi > docs/openapi.json")
    assert {"/v1/episodes", "/v1/search", "/v1/retrieve", "/v1/retrieve/stream",
            "/v1/scopes/stats", "/v1/health", "/v1/ready"} <= set(served_schema["paths"])


# -- tenancy and limits --------------------------------------------------------------------

async def test_keys_gate_every_route_and_nothing_leaks(tenant_factory, keys, served) -> None:
    a, b = await tenant_factory(), await tenant_factory()
    await b.client.post("/v1/episodes", json={"scope": b.scope, "episodes": [
        {"content": "B's secret: the vault code is 0451.", "uid": "secret"}]})
    body = {"scope": b.scope, "query": "vault code"}
    calls = [("POST", "/v1/search", {"json": body}), ("POST", "/v1/retrieve", {"json": body}),
             ("POST", "/v1/retrieve/stream", {"json": body}),
             ("POST", "/v1/episodes", {"json": {"scope": b.scope, "episodes": [
                 {"content": "planted by A", "uid": "planted"}]}}),
             ("GET", "/v1/scopes/stats", {"params": b.scope}),
             ("DELETE", "/v1/episodes", {"params": {**b.scope, "all": "true"}})]
    anonymous = httpx.AsyncClient(base_url=served.url)
    wrong = httpx.AsyncClient(base_url=served.url,
                              headers={"Authorization": f"Bearer {a.token[:-2]}xx"})
    revoked_token, record = await keys.create(b.org, project_ids=["p"])
    assert await keys.revoke(record.key_id)
    revoked = httpx.AsyncClient(base_url=served.url,
                                headers={"Authorization": f"Bearer {revoked_token}"})
    try:
        for method, path, kwargs in calls:
            for client, status in ((anonymous, 401), (wrong, 401), (revoked, 401),
                                   (a.client, 403)):
                response = await client.request(method, path, **kwargs)
                assert response.status_code == status, (method, path, response.text)
                error = response.json()
                assert set(error) == {"error", "kind"} and "vault" not in response.text
    finally:
        for client in (anonymous, wrong, revoked):
            await client.aclose()
    stats = (await b.client.get("/v1/scopes/stats", params=b.scope)).json()
    assert stats["episodes"] == 1  # nothing planted, nothing deleted
    # a key bound to a user reaches that user's scope only
    u = await tenant_factory(user_ids=["u1"])
    own = {**u.scope, "user_id": "u1"}
    assert (await u.client.get("/v1/scopes/stats", params=own)).status_code == 200
    assert (await u.client.get("/v1/scopes/stats", params={**own, "user_id": "u2"})
            ).status_code == 403
    assert (await u.client.get("/v1/scopes/stats", params=u.scope)).status_code == 403


async def test_limits_answer_413_and_422_before_anything_runs(tenant_factory) -> None:
    t = await tenant_factory()
    cases = [
        {"scope": t.scope, "query": "x", "k": MAX_K + 1},
        {"scope": t.scope, "query": "x" * (MAX_QUERY_CHARS + 1)},
        {"scope": t.scope, "query": ""},
        {"scope": t.scope, "query": "x", "filters": {"no_such_op": {"$zz": 1}}},
        {"scope": {"org_id": t.org, "project_id": "bad scope!"}, "query": "x"},
        {"scope": t.scope, "query": "x", "surprise": 1},
    ]
    for body in cases:
        response = await t.client.post("/v1/search", json=body)
        assert response.status_code in (403, 422), (body, response.text)
        assert response.json()["kind"] in ("InvalidInputError", "FilterError",
                                           "ScopeForbiddenError")
    retrieve = await t.client.post("/v1/retrieve", json={
        "scope": t.scope, "query": "x", "budget": {"max_llm_calls": -1}})
    assert retrieve.status_code == 422 and "max_llm_calls" in retrieve.json()["error"]
    batch = [{"content": f"e{i}"} for i in range(MAX_EPISODES_PER_REQUEST + 1)]
    assert (await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": batch})
            ).status_code == 422
    huge = [{"content": "y" * (MAX_REQUEST_BYTES // 2)} for _ in range(3)]
    too_big = await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": huge})
    assert too_big.status_code == 413 and too_big.json()["kind"] == "RequestTooLarge"
    assert (await t.client.get("/v1/scopes/stats", params=t.scope)).json()["episodes"] == 0


async def test_every_body_is_strict(tenant_factory) -> None:
    """Unknown fields and loose types anywhere in a body are refused, typed, before anything
    is stored: a typo in an episode never files it under a default."""
    t = await tenant_factory()
    episode = {"content": "Carol's birthday is on 3 May.", "session_id": "s"}
    cases = [
        ("/v1/episodes", {"episodes": [{**episode, "sesion_id": "s"}]}, "episodes.0.sesion_id"),
        ("/v1/episodes", {"episodes": [{**episode, "produced_at": 1700000000}]},
         "episodes.0.produced_at"),
        ("/v1/episodes", {"episodes": [{**episode, "content": 5}]}, "episodes.0.content"),
        ("/v1/search", {"query": "Carol", "k": "5"}, "k"),
        ("/v1/search", {"query": "Carol", "k": True}, "k"),
        ("/v1/search", {"query": "Carol", "k": 2.0}, "k"),
        ("/v1/retrieve", {"query": "Carol", "budget": {"max_llm_calls": "2"}},
         "budget.max_llm_calls"),
        ("/v1/retrieve", {"query": "Carol", "budget": {"max_llm_calls": True}},
         "budget.max_llm_calls"),
        ("/v1/retrieve", {"query": "Carol", "budget": {"max_dollars": 1}}, "max_dollars"),
        ("/v1/retrieve", {"query": "Carol", "strategy": "Auto"}, "strategy"),
        ("/v1/retrieve/stream", {"query": "Carol", "k": "5"}, "k"),
    ]
    for path, body, where in cases:
        response = await t.client.post(path, json={"scope": t.scope, **body})
        assert response.status_code == 422, (path, body, response.text)
        error = response.json()
        assert error["kind"] == "InvalidInputError" and where in error["error"], (body, error)
        assert "pydantic" not in error["error"]
    assert (await t.client.get("/v1/scopes/stats", params=t.scope)).json()["episodes"] == 0
    good = await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
        {**episode, "produced_at": "2024-05-01T09:30:00+02:00", "metadata": {"n": 1}}]})
    assert good.status_code == 200, good.text


async def test_a_scope_is_read_by_one_strict_model_on_every_face(tenant_factory,
                                                                 served) -> None:
    """A query-string parameter no route has is the typed 422 naming it, never a wider
    scope (a typo'd ``userid`` once erased the project); a query-string boolean is true or
    false; MCP's argument types are as strict as a REST body's. A refused request erases
    nothing."""
    t = await tenant_factory()
    user = {**t.scope, "user_id": "u1"}
    for scope, owner in ((t.scope, "the project"), (user, "u1")):
        added = await t.client.post("/v1/episodes", json={"scope": scope, "episodes": [
            {"content": f"A note kept for {owner}."}]})
        assert added.status_code == 200, added.text

    async def held() -> list[int]:
        return [(await t.client.get("/v1/scopes/stats", params=scope)).json()["episodes"]
                for scope in (t.scope, user)]

    for params, named in [({**t.scope, "userid": "u1", "all": "true"}, "userid"),
                          ({**user, "all": "yes"}, "all"), ({**user, "all": "on"}, "all"),
                          ({**user, "all": "1"}, "all"), ({**user, "all": "True"}, "all"),
                          ({**user, "all": "true", "sub_scopes": "yes"}, "sub_scopes")]:
        refused = await t.client.delete("/v1/episodes", params=params)
        assert refused.status_code == 422, (params, refused.text)
        error = refused.json()
        assert error["kind"] == "InvalidInputError" and named in error["error"], error
    typo = await t.client.get("/v1/scopes/stats", params={**t.scope, "userid": "u1"})
    assert typo.status_code == 422 and "userid" in typo.json()["error"], typo.text
    # a parameter given twice, an empty uid: refused too
    twice = await t.client.delete("/v1/episodes?" + "&".join(
        f"{k}={v}" for k, v in user.items()) + "&all=false&all=true")
    assert twice.status_code == 422 and "all" in twice.json()["error"], twice.text
    empty_uid = await t.client.delete("/v1/episodes", params={**user, "uid": ""})
    assert empty_uid.status_code == 422, empty_uid.text
    # a POST route reads its body only: a query string there is refused, never dropped
    for route, body in (("/v1/episodes", {"scope": t.scope, "episodes": [
            {"content": "A note meant for u1."}]}), ("/v1/search", {"scope": t.scope,
                                                                   "query": "note"})):
        refused = await t.client.post(route, params={"user_id": "u1"}, json=body)
        assert refused.status_code == 422 and "user_id" in refused.json()["error"], refused.text
    assert await held() == [1, 1]

    async with mcp_http(served.url, t.token) as client:  # its scope: the key's project
        for name, arguments, named in [
                ("memory_delete", {"all": "yes"}, "all"),
                ("memory_delete", {"all": "true"}, "all"),
                ("memory_delete", {"all": 1}, "all"),
                ("memory_delete", {"uids": '["x"]'}, "uids"),
                ("memory_delete", {"all": True, "sub_scopes": "yes"}, "sub_scopes"),
                ("memory_delete", {"all": True, "userid": "u1"}, "userid"),
                ("memory_retrieve", {"query": "note", "k": "5"}, "k"),
                ("memory_retrieve", {"query": "note", "k": True}, "k"),
                ("memory_retrieve", {"query": "note", "k": 5.0}, "k"),
                ("memory_search", {"query": "note", "page": "1"}, "page")]:
            result = await client.call_tool(name, arguments)
            text = result.content[0].text
            assert result.is_error and text.startswith(
                f"[InvalidInputError] {name} failed: invalid arguments: {named}"), (arguments, text)
        assert await held() == [1, 1]
        gone = await client.call_tool("memory_delete", {"all": True, "user_id": "u1"})
        assert gone.structured_content["deleted"] == 1
    everything = await t.client.delete("/v1/episodes", params={**t.scope, "all": "true"})
    assert everything.json()["deleted"] == 1 and await held() == [0, 0]


async def test_retrieve_reports_the_hops_as_the_stream_and_the_library_do(
        tenant_factory, memory: Memory) -> None:
    from memroute import RetrievalAgent

    t = await tenant_factory()
    await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
        {"content": c} for c in FACTS]})
    body = {"scope": t.scope, "query": "Where does the woman who works as a nurse live?",
            "k": 4, "strategy": "chain"}
    got = (await t.client.post("/v1/retrieve", json=body)).json()
    assert got["route"] == "chain" and got["hops"], got
    async with t.client.stream("POST", "/v1/retrieve/stream", json=body) as response:
        events = sse_events((await response.aread()).decode())
    streamed = [data for name, data in events if name == "hop"]
    final = events[-1][1]
    assert final["hops"] == got["hops"]
    assert [(h["hop"], h["query"], h["decision"]) for h in got["hops"]] == \
        [(h["hop"], h["query"], h["decision"]) for h in streamed]
    library = await RetrievalAgent(memory).aretrieve(body["query"], scope=t.scope, k=4,
                                                     strategy="chain")
    assert json.loads(json.dumps(library.hops)) == got["hops"]
    # the rounds of searches and the prompts' hashes, as the library's RetrievalResult
    assert got["search_rounds"] == library.search_rounds == final["search_rounds"] >= 1
    assert got["prompt_versions"] == library.prompt_versions == final["prompt_versions"]


async def test_retrieve_is_asked_as_of_a_time(tenant_factory) -> None:
    """``as_of`` anchors "last week" and bounds what is searched; a naive time is UTC, and a
    bad one (a number, words, the calendar's edge) the typed 422."""
    t = await tenant_factory()
    await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
        {"content": "I booked a table at Rosa's.", "produced_at": "2024-07-02T12:00:00Z"},
        {"content": "I booked flights to Rome.", "produced_at": "2024-07-09T12:00:00Z"}]})
    body = {"scope": t.scope, "query": "What did I book last week?", "k": 5,
            "as_of": "2024-07-08T09:00:00+00:00"}
    got = (await t.client.post("/v1/retrieve", json=body)).json()
    assert reason_names(got["route_reason"], "last week", "2024-07-01"), got  # golden: window
    assert [r["nucleus"]["content"] for r in got["results"]] == ["I booked a table at Rosa's."]
    # without an offset: UTC, as on every face
    naive = (await t.client.post("/v1/retrieve", json={**body, "as_of": body["as_of"][:19]}))
    assert naive.status_code == 200 and naive.json()["results"] == got["results"]
    for bad in ("last Tuesday", 1720429200, True, "0001-01-01T00:00:00+01:00"):
        refused = await t.client.post("/v1/retrieve", json={**body, "as_of": bad})
        assert refused.status_code == 422 and "as_of" in refused.text, (bad, refused.text)


async def test_an_empty_scope_says_so(tenant_factory, served) -> None:
    """A search or retrieve of a scope holding no episodes returns nothing and a hint naming
    that scope, on REST (the stream's final event too) and MCP; a scope that holds episodes
    gets no hint, even when nothing matches."""
    t = await tenant_factory()
    nobody = {**t.scope, "user_id": "nobody"}
    named = f"scope {t.org}/p/nobody holds no episodes"
    body = {"scope": nobody, "query": "Where does Alice live?"}
    found = (await t.client.post("/v1/search", json=body)).json()
    assert (found["results"], found["hint"]) == ([], named)
    got = (await t.client.post("/v1/retrieve", json=body)).json()
    assert (got["results"], got["hint"]) == ([], named)
    async with t.client.stream("POST", "/v1/retrieve/stream", json=body) as response:
        final = sse_events((await response.aread()).decode())[-1]
    assert final[0] == "final" and final[1]["hint"] == named
    await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
        {"content": c} for c in FACTS]})
    full = {"scope": t.scope, "query": "Where does Alice live?"}
    hit = (await t.client.post("/v1/search", json=full)).json()
    assert hit["results"] and hit["hint"] is None
    filtered = (await t.client.post("/v1/search", json={
        **full, "filters": {"producer": "nobody"}})).json()
    assert (filtered["results"], filtered["hint"]) == ([], None)  # the scope is not empty
    retrieved = (await t.client.post("/v1/retrieve", json=full)).json()
    assert retrieved["results"] and retrieved["hint"] is None
    async with mcp_http(served.url, t.token) as client:
        for name in ("memory_search", "memory_retrieve"):
            empty = (await client.call_tool(name, {"query": "Alice", "user_id": "nobody"})
                     ).structured_content
            assert empty["results"] == [] and empty["hint"] == named
            assert named in empty["text"]  # the text a model reads says it too
            full_page = (await client.call_tool(name, {"query": "Alice"})).structured_content
            assert full_page["results"] and full_page["hint"] is None


async def test_a_failing_stream_ends_with_a_typed_error_event(memory: Memory, pg_url: str,
                                                             pg_home: Path,
                                                             tmp_path: Path) -> None:
    """Whatever fails once a stream has begun, its last event is ``error``: a table renamed
    under a server (psycopg's UndefinedTable: neither a memroute error nor a lost
    connection) ends the stream with ``InternalError``, its text in the server's log only,
    as the JSON route answers it with a 500."""
    schema = f"stream_{uuid.uuid4().hex[:8]}"
    server = ServedProcess(service_env(pg_url, schema, pg_home), tmp_path / "serve.log").start()
    try:
        keys = await KeyStore.open(pg_url, schema)
        try:
            token, _ = await keys.create("broken", project_ids=["p"])
        finally:
            await keys.close()
        scope = {"org_id": "broken", "project_id": "p"}
        body = {"scope": scope, "query": "Where does Alice live?"}
        async with httpx.AsyncClient(base_url=server.url, timeout=60, headers={
                "Authorization": f"Bearer {token}"}) as client:
            await client.post("/v1/episodes", json={"scope": scope, "episodes": [
                {"content": c} for c in FACTS]})
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
                await conn.execute(f"ALTER TABLE {schema}.sentences RENAME TO moved_away")
            async with client.stream("POST", "/v1/retrieve/stream", json=body) as response:
                assert response.status_code == 200
                events = sse_events((await response.aread()).decode())
            plain = await client.post("/v1/retrieve", json=body)
    finally:
        server.stop()
    assert events[0][0] == "route", events  # the stream had begun
    assert events[-1] == ("error", {"error": "internal error (see the server log)",
                                    "kind": "InternalError"}), events
    assert plain.status_code == 500 and plain.json()["kind"] == "InternalError"
    log = (tmp_path / "serve.log").read_text()
    assert "rest.stream_failed" in log and "UndefinedTable" in log, log[-3000:]


def raw_get(url: str, target: bytes) -> tuple[int, dict]:
    """GET ``target`` on a raw socket (httpx refuses URLs past 64 KiB): status and JSON body."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), head
    return int(head.split()[1]), json.loads(body)


async def test_oversized_urls_and_headers_get_the_typed_json_error(tenant_factory,
                                                                  served) -> None:
    t = await tenant_factory()
    status, error = await asyncio.to_thread(raw_get, served.url,
                                            b"/v1/scopes/stats?pad=" + b"x" * 600_000)
    assert (status, error["kind"]) == (414, "URITooLong") and set(error) == {"error", "kind"}
    long_url = await t.client.get("/v1/scopes/stats", params={**t.scope, "pad": "x" * 60_000})
    assert long_url.status_code == 414 and long_url.json()["kind"] == "URITooLong"
    big_header = await t.client.get("/v1/scopes/stats", params=t.scope,
                                    headers={"X-Pad": "y" * 200_000})
    assert big_header.status_code == 431 and big_header.json() == {
        "error": "request headers over 16384 bytes", "kind": "HeadersTooLarge"}
    status, error = await asyncio.to_thread(raw_get, served.url, b"/v1/health?x=a b")
    assert (status, error["kind"]) == (400, "BadRequest")  # a space in the request line
    assert (await t.client.get("/v1/scopes/stats", params=t.scope)).status_code == 200


def test_serve_prints_one_line_when_ready(served) -> None:
    url = served.url
    ready = [line for line in served.log.read_text().splitlines() if "ready" in line]
    assert ready and ready[-1] == (f"memroute serve: ready on {url} (REST {url}/v1, "
                                   f"docs {url}/docs, MCP {url}/mcp)")


async def test_concurrent_requests_across_four_keys_during_ingestion(tenant_factory) -> None:
    tenants = [await tenant_factory() for _ in range(4)]
    marker = {t.org: f"marker{n}" for n, t in enumerate(tenants)}

    async def ingest(t: Tenant) -> None:
        for batch in range(4):
            response = await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
                {"content": f"{marker[t.org]} note {batch}-{i}: the shared topic is gardening."}
                for i in range(5)]})
            assert response.status_code == 200, response.text

    async def ask(t: Tenant, n: int) -> tuple[Tenant, httpx.Response]:
        path = "/v1/retrieve" if n % 4 == 0 else "/v1/search"
        return t, await t.client.post(path, json={
            "scope": t.scope, "query": "what is the shared topic?", "k": 10})

    await asyncio.gather(*(t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
        {"content": f"{marker[t.org]} first note: the shared topic is gardening."}]})
        for t in tenants))
    ingestion = [asyncio.create_task(ingest(t)) for t in tenants]
    answers = await asyncio.gather(*(ask(tenants[n % 4], n) for n in range(100)))
    await asyncio.gather(*ingestion)
    errors = [r.text for _, r in answers if r.status_code != 200]
    leaks = [(t.org, hit["nucleus"]["content"]) for t, r in answers if r.status_code == 200
             for hit in r.json()["results"] for e in hit["episodes"]
             if not e["content"].startswith(marker[t.org])]
    assert (len(errors), len(leaks)) == (0, 0), (errors[:3], leaks[:3])
    assert all(r.json()["results"] for _, r in answers)
    for t in tenants:
        stats = (await t.client.get("/v1/scopes/stats", params=t.scope)).json()
        assert stats["episodes"] == 21


# -- docs ----------------------------------------------------------------------------------

async def test_the_curl_examples_in_docs_run(served, keys) -> None:
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", (DOCS / "serving.md").read_text(),
                                    re.S) if b.lstrip().startswith("curl")]
    assert len(blocks) >= 5
    token, _ = await keys.create("acme", project_ids=["support"])
    env = {"PATH": "/usr/bin:/bin", "MEMROUTE_URL": served.url, "MEMROUTE_API_KEY": token}
    outputs = []
    for block in blocks:
        done = await asyncio.to_thread(subprocess.run, ["bash", "-euo", "pipefail", "-c", block],
                                       env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (block, done.stdout, done.stderr)
        outputs.append(done.stdout)
    added, found, retrieved = json.loads(outputs[0]), json.loads(outputs[1]), outputs[2]
    assert added == {"uids": ["t1", "t2"]}
    assert [r["uid"] for r in found["results"]] == ["t1"]  # the producer filter
    assert "Monday" in retrieved and "event: final" in retrieved
    assert '"deleted":1' in outputs[3]  # stats, then deleting t2, then session s1


async def test_the_mcp_client_in_docs_runs(served, keys, tmp_path: Path) -> None:
    """docs/serving.md's ```python served blocks (not run by tests/test_example_docs.py: they
    need a server), as files, with the installed SDK."""
    (snippet,) = re.findall(r"```python served\n(.*?)```", (DOCS / "serving.md").read_text(),
                            re.S)
    (tmp_path / "mcp_client.py").write_text(snippet)
    token, _ = await keys.create(f"docs-{uuid.uuid4().hex[:6]}", project_ids=["support"])
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, str(tmp_path / "mcp_client.py")], capture_output=True,
        text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "MEMROUTE_URL": served.url,
                                     "MEMROUTE_API_KEY": token, "PYTHONWARNINGS": "default"})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    tools, first, refused = done.stdout.splitlines()
    assert tools == "['memory_add', 'memory_delete', 'memory_retrieve', 'memory_search']"
    assert first == "Showing 1 of 1 results (page 1/1):"
    assert refused.startswith("True [InvalidInputError] memory_retrieve failed: invalid "
                              "arguments: k: Input should be greater than or equal to 1")


async def test_the_docs_signatures_are_the_served_ones() -> None:
    """docs/serving.md's signatures of search and retrieve (REST and MCP) name every field
    their schemas have, ``as_of`` included, and say how each reads it."""
    from memroute.service.app import openapi_schema
    from memroute.service.mcp_server import build_mcp_server

    text = " ".join((DOCS / "serving.md").read_text().split())
    bodies = openapi_schema()["components"]["schemas"]
    for route, model in (("search", "Search"), ("retrieve", "Retrieve")):
        (fields,) = re.findall(rf"`POST /v1/{route} {{(.*?)}}`", text)
        assert {f.split("=")[0] for f in fields.split(", ")} == set(
            bodies[model]["properties"]), (route, fields)
    tools = {t.name: t for t in await build_mcp_server(lambda: None, lambda ctx: None
                                                        ).list_tools()}
    for name in ("memory_search", "memory_retrieve"):
        (arguments,) = re.findall(rf"`{name}\((.*?)\)`", text)
        scope_parts = {"project_id", "user_id", "agent_id"}
        assert {a.split("=")[0] for a in arguments.split(", ")} == set(
            tools[name].input_schema["properties"]) - scope_parts, (name, arguments)
    assert "matches the query as written" in text
    assert "also reads \"last week\" or \"yesterday\" against `as_of`" in text


# -- MCP -----------------------------------------------------------------------------------

def mcp_http(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(f"{url}/mcp",
                                         http_client=create_mcp_http_client(headers=headers)))


KIND = re.compile(r"^\[(InvalidInputError|ScopeForbiddenError)\] memory_\w+ failed: ")


async def exercise_mcp(client: Client, other_project: str = "elsewhere") -> None:
    """List the tools and call each, with good and bad arguments: every result's text is
    the JSON of its structured content, every error's text starts with its kind."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"memory_search", "memory_retrieve", "memory_add", "memory_delete"}
    for tool in tools.values():
        assert len(tool.description) > 60
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert tools["memory_search"].input_schema["required"] == ["query"]
    assert "description" in tools["memory_search"].input_schema["properties"]["page"]
    # the bounds the server enforces, as declared in memroute.memory.limits and Budget
    retrieve = tools["memory_retrieve"].input_schema
    assert (retrieve["properties"]["k"]["minimum"], retrieve["properties"]["k"]["maximum"]) \
        == (1, MAX_K)
    assert retrieve["properties"]["query"]["maxLength"] == MAX_QUERY_CHARS
    budget = retrieve["$defs"]["Budget"]
    assert budget["additionalProperties"] is False
    assert all(field["anyOf"][0]["minimum"] == 0 for field in budget["properties"].values())
    episode = tools["memory_add"].input_schema["$defs"]["StrictEpisode"]
    assert episode["additionalProperties"] is False
    uids = tools["memory_delete"].input_schema["properties"]["uids"]["anyOf"][0]
    assert uids["maxItems"] == MAX_LIST and uids["items"]["maxLength"] == MAX_ID_CHARS

    async def ok(name: str, arguments: dict) -> dict:
        result = await client.call_tool(name, arguments)
        assert not result.is_error, (name, result.content)
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content

    added = await ok("memory_add", {"episodes": [
        {"content": c, "uid": f"m{i}", "session_id": "mcp"} for i, c in enumerate(FACTS)]})
    assert added == {"uids": ["m0", "m1", "m2", "m3"]}
    page = await ok("memory_search", {"query": "Bob's cat"})
    assert page["text"].startswith("Showing") and "Miso" in page["text"]
    assert "m2" in [r["uid"] for r in page["results"]]  # the answer, in the top k
    past = await ok("memory_search", {"query": "Bob's cat", "page": 9})
    assert "past the end" in past["text"] and past["results"] == []
    data = await ok("memory_retrieve", {"query": "What does Alice do and what does Bob do?",
                                        "k": 4})
    assert data["route"] == "split" and len(data["queries"]) == 2
    assert data["stop_reason"] and {"m1", "m2"} <= {r["uid"] for r in data["results"]}
    assert await ok("memory_delete", {"session_id": "mcp"}) == {"deleted": 4, "by_scope": None}

    for name, arguments, names in [
            ("memory_search", {}, "query"), ("memory_search", {"query": ""}, "query"),
            ("memory_search", {"query": "x", "page": -1}, "page"),
            ("memory_search", {"query": "x", "colour": "red"}, "colour"),
            ("memory_retrieve", {"query": "x", "k": MAX_K + 1}, "k"),
            ("memory_retrieve", {"query": "x", "strategy": "guess"}, "strategy"),
            ("memory_retrieve", {"query": "x", "budget": {"max_llm_calls": -1}},
             "budget.max_llm_calls"),
            ("memory_retrieve", {"query": "x", "budget": {"max_dollars": 1}}, "max_dollars"),
            ("memory_add", {"episodes": [{"content": ""}]}, "episodes.0.content"),
            ("memory_add", {"episodes": [{"content": "a typo", "sesion_id": "s"}]},
             "episodes.0.sesion_id"),
            ("memory_delete", {}, "uids, a session_id, or all=true"),
            ("memory_delete", {"uids": [""]}, "uids.0"),
            ("memory_search", {"query": "x", "project_id": "bad scope!"}, "project_id"),
            ("memory_search", {"query": "x", "project_id": other_project}, "does not reach")]:
        result = await client.call_tool(name, arguments)
        text = result.content[0].text
        assert result.is_error and KIND.match(text), (name, arguments, text)
        assert names in text and "pydantic" not in text and "http" not in text, text
    nothing = await ok("memory_search", {"query": "a typo"})
    assert nothing["results"] == []  # the refused episode was not stored
    unknown = await client.call_tool("memory_forget", {"uids": ["m0"]})
    assert unknown.is_error and unknown.content[0].text.startswith(
        "[InvalidInputError] unknown tool 'memory_forget': the tools are memory_add, "), unknown


async def test_mcp_over_streamable_http(tenant_factory, served) -> None:
    t = await tenant_factory()
    async with mcp_http(served.url, t.token) as client:
        await exercise_mcp(client)
        denied = await client.call_tool("memory_search", {"query": "x", "project_id": "q"})
        assert denied.content[0].text.startswith("[ScopeForbiddenError] memory_search failed: "
                                                 "this API key does not reach")
    for token in (None, t.token + "x"):
        response = httpx.post(f"{served.url}/mcp", json={}, headers={
            "Authorization": f"Bearer {token}"} if token else {})
        assert response.status_code == 401 and response.json()["kind"] == "NotAuthenticatedError"


async def test_mcp_keys_never_cross_orgs(tenant_factory, served) -> None:
    a, b = await tenant_factory(), await tenant_factory()
    await b.client.post("/v1/episodes", json={"scope": b.scope, "episodes": [
        {"content": "B's secret: the vault code is 0451.", "uid": "secret"}]})
    async with mcp_http(served.url, a.token) as client:
        for name, arguments in [("memory_search", {"query": "vault code"}),
                                ("memory_retrieve", {"query": "vault code"})]:
            result = await client.call_tool(name, arguments)
            assert "0451" not in json.dumps(result.model_dump(mode="json"))
        await client.call_tool("memory_delete", {"uids": ["secret"]})
    assert (await b.client.get("/v1/scopes/stats", params=b.scope)).json()["episodes"] == 1


async def test_mcp_over_stdio_as_the_docs_configure_it(tenant_factory, memory: Memory,
                                                      pg_url: str, pg_home: Path) -> None:
    (config,) = re.findall(r"```json\n(.*?)```", (DOCS / "serving.md").read_text(), re.S)
    server = json.loads(config)["mcpServers"]["memroute"]
    assert server["command"] == "memroute" and "MEMROUTE_API_KEY" in server["env"]
    t = await tenant_factory()
    env = service_env(pg_url, memory.schema, pg_home, MEMROUTE_API_KEY=t.token)
    params = StdioServerParameters(command=sys.executable,  # the `memroute` script, from here
                                   args=["-m", "memroute.cli", *server["args"]],
                                   env=env, cwd=str(ROOT))
    async with Client(params, read_timeout_seconds=120) as client:
        await exercise_mcp(client)


UNREADABLE = [  # (line, the id a reply can name, JSON-RPC code)
    (b"this is not JSON", None, -32700),
    (b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', None, -32600),
    (b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', None, -32600),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', None, -32600),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', None, -32600),  # a batch
    (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "memory_search",'
     b' "arguments": {"query": "\\ud800"}}}', 7, -32700),  # a lone surrogate escape
    (b"[" * 100_000 + b"]" * 100_000, None, -32700),  # nested 100k levels deep
    (b'{"jsonrpc": "2.0", "id": "a", "method": 5}', "a", -32600),  # JSON, not JSON-RPC
    (b"[]", None, -32600),
]


async def test_mcp_answers_every_unreadable_message(tenant_factory, served, memory: Memory,
                                                    pg_url: str, pg_home: Path) -> None:
    """Over stdio each unreadable line gets its JSON-RPC error (the client does not wait for
    its own timeout), as the same bodies do over HTTP (not an empty 202 nor pydantic's
    report); the session goes on. A request whose id is null or true is one: the SDK would
    read it as a notification and never answer."""
    t = await tenant_factory()
    env = service_env(pg_url, memory.schema, pg_home, MEMROUTE_API_KEY=t.token)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "memroute.cli", "mcp", cwd=str(ROOT), env=env, limit=2**20,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL)
    try:
        for line, request_id, code in UNREADABLE:
            process.stdin.write(line + b"\n")
            await process.stdin.drain()
            reply = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
            assert reply["jsonrpc"] == "2.0" and reply["id"] == request_id, reply
            assert reply["error"]["code"] == code, reply
        process.stdin.write(json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}).encode() + b"\n")
        await process.stdin.drain()
        reply = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "memroute"
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 60)
    headers = {"Authorization": f"Bearer {t.token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    for line, request_id, code in UNREADABLE:  # the same bodies over HTTP
        over_http = await t.client.post("/mcp", content=line, headers=headers)
        reply = over_http.json()
        assert over_http.status_code == 400 and reply["id"] == request_id, over_http.text
        assert reply["error"]["code"] == code, (line[:40], over_http.text)
        message = reply["error"]["message"]
        assert "validation error" not in message.lower() and "pydantic" not in message
        assert len(message) < 200, message


def test_mcp_stdio_refuses_a_wrong_key(memory: Memory, pg_url: str, pg_home: Path) -> None:
    env = service_env(pg_url, memory.schema, pg_home, MEMROUTE_API_KEY="mr_nope.nope")
    done = subprocess.run([sys.executable, "-m", "memroute.cli", "mcp"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 6 and "invalid or revoked API key" in done.stderr
    assert done.stdout == ""


# -- crash safety (last: it restarts the module's server) ----------------------------------

async def test_a_killed_server_restarted_loses_no_acknowledged_episode(
        tenant_factory, served: ServedProcess, memory: Memory) -> None:
    t = await tenant_factory()
    acknowledged: list[str] = []

    async def writer(n: int) -> None:
        for i in range(1000):
            uid = f"w{n}-{i}"
            try:
                response = await t.client.post("/v1/episodes", json={"scope": t.scope, "episodes": [
                    {"content": f"durable note {uid}", "uid": uid}]})
            except httpx.TransportError:
                return
            if response.status_code == 200:
                acknowledged.append(uid)

    writers = [asyncio.create_task(writer(n)) for n in range(4)]
    while len(acknowledged) < 20:
        await asyncio.sleep(0.05)
    await asyncio.to_thread(served.kill)
    await asyncio.gather(*writers)
    served.start()
    stats = (await t.client.get("/v1/scopes/stats", params=t.scope)).json()
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT uid FROM {memory.schema}.episodes WHERE scope_key = %s",
            [memory_scope_key(t.scope)])
        stored = {row[0] for row in await cur.fetchall()}
    assert set(acknowledged) <= stored and stats["episodes"] == len(stored)
    assert len(stored) - len(acknowledged) <= 4  # at most one in flight per writer


def memory_scope_key(scope: dict) -> str:
    from memroute.memory import Scope

    return Scope(**scope).key
