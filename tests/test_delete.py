"""Deletion, one rule on every face: erasing a whole scope needs an explicit ``all``, and one
call erases a scope with its sub-scopes (a user's agents), reporting counts per scope."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from typer.testing import CliRunner

from memroute.cli import app
from memroute.errors import InvalidInputError
from memroute.memory import Memory, Scope, SyncMemory
from memroute.service.keys import KeyStore
from memroute.settings import get_settings


def family(org: str) -> dict[str, Scope]:
    """A user, two of the user's agents, another user and the project itself."""
    return {"user": Scope(org_id=org, project_id="p", user_id="u1"),
            "agent1": Scope(org_id=org, project_id="p", user_id="u1", agent_id="a1"),
            "agent2": Scope(org_id=org, project_id="p", user_id="u1", agent_id="a2"),
            "other": Scope(org_id=org, project_id="p", user_id="u2"),
            "project": Scope(org_id=org, project_id="p")}


async def plant(memory: Memory, scopes: dict[str, Scope]) -> None:
    for name, scope in scopes.items():
        await memory.add(scope, [{"uid": f"{name}-{i}", "content": f"{name} fact {i}.",
                                  "session_id": "s"} for i in range(2)])


async def counts(memory: Memory, scopes: dict[str, Scope]) -> dict[str, int]:
    return {name: (await memory.count(scope))["episodes"] for name, scope in scopes.items()}


async def test_library_needs_all_and_erases_sub_scopes(memory: Memory) -> None:
    scopes = family(f"del-{uuid.uuid4().hex[:8]}")
    await plant(memory, scopes)
    for wrong in ({}, {"sub_scopes": True}, {"all": True, "session_id": "s"},
                  {"all": True, "uids": ["user-0"]}, {"all": "yes"}):
        with pytest.raises(InvalidInputError):
            await memory.delete(scopes["user"], **wrong)
    assert set((await counts(memory, scopes)).values()) == {2}  # nothing deleted

    only = await memory.delete(scopes["agent2"], all=True)
    assert only == 2 and only.by_scope == {f"{scopes['user'].org_id}/p/u1/a2": 2}
    user = await memory.delete(scopes["user"], all=True, sub_scopes=True)
    org = scopes["user"].org_id
    assert user == 4 and user.by_scope == {f"{org}/p/u1": 2, f"{org}/p/u1/a1": 2}
    assert await counts(memory, scopes) == {"user": 0, "agent1": 0, "agent2": 0, "other": 2,
                                            "project": 2}
    project = await memory.delete(scopes["project"], all=True, sub_scopes=True)
    assert project == 4 and project.by_scope == {f"{org}/p": 2, f"{org}/p/u2": 2}


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, sync_memory: SyncMemory, pg_url: str, pg_home: Path):
    for name, value in {"MEMROUTE_DATABASE_URL": pg_url,
                        "MEMROUTE_DB_SCHEMA": sync_memory.memory.schema,
                        "MEMROUTE_HOME": str(pg_home), "MEMROUTE_EMBED_THREADS": "1",
                        "MEMROUTE_POOL_MAX_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MEMROUTE_SCOPE", raising=False)

    def invoke(*args: str):
        get_settings.cache_clear()
        return CliRunner().invoke(app, list(args))

    yield invoke
    get_settings.cache_clear()


def test_cli_erases_a_user_with_its_agents(sync_memory: SyncMemory, cli) -> None:
    scopes = family(f"del-{uuid.uuid4().hex[:8]}")
    sync_memory.loop.run_as_sync(plant(sync_memory.memory, scopes))

    def sync_counts() -> dict[str, int]:
        return sync_memory.loop.run_as_sync(counts(sync_memory.memory, scopes))

    org = scopes["user"].org_id
    exact = cli("db", "erase", "--scope", f"{org}/p/u1/a1", "--yes", "--json")
    assert json.loads(exact.stdout)["by_scope"] == {f"{org}/p/u1/a1": 2}
    erased = cli("db", "erase", "--scope", f"{org}/p/u1", "--sub-scopes", "--yes")
    assert erased.exit_code == 0, erased.output
    assert "erased 4 episode(s)" in erased.stdout and f"{org}/p/u1/a2: 2" in erased.stdout
    assert sync_counts() == {"user": 0, "agent1": 0, "agent2": 0, "other": 2, "project": 2}
    mixed = cli("db", "erase", "--scope", f"{org}/p", "--sub-scopes", "--session", "s", "--yes")
    assert mixed.exit_code == 2 and sync_counts()["other"] == 2


async def test_rest_and_mcp_need_all_and_erase_sub_scopes(memory: Memory, served) -> None:
    org = f"del-{uuid.uuid4().hex[:8]}"
    scopes = family(org)
    await plant(memory, scopes)
    keys = await KeyStore.open(memory.url, memory.schema)
    try:
        token, _ = await keys.create(org, project_ids=["p"])
    finally:
        await keys.close()
    headers = {"Authorization": f"Bearer {token}"}
    user = {"org_id": org, "project_id": "p", "user_id": "u1"}
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=60) as client:
        refused = await client.delete("/v1/episodes", params=user)
        assert refused.status_code == 422 and "all (true)" in refused.text, refused.text
        erased = await client.delete("/v1/episodes",
                                     params={**user, "all": "true", "sub_scopes": "true"})
        assert erased.json() == {"deleted": 6, "by_scope": {
            f"{org}/p/u1": 2, f"{org}/p/u1/a1": 2, f"{org}/p/u1/a2": 2}}
        by_uid = await client.delete("/v1/episodes", params={
            "org_id": org, "project_id": "p", "user_id": "u2", "uid": ["other-0"]})
        assert by_uid.json() == {"deleted": 1}  # no by_scope unless a whole scope went
    assert (await counts(memory, scopes))["other"] == 1

    http = create_mcp_http_client(headers=headers)
    async with Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as mcp:
        refused = await mcp.call_tool("memory_delete", {"user_id": "u2"})
        assert refused.is_error and (await counts(memory, scopes))["other"] == 1
        gone = await mcp.call_tool("memory_delete", {"all": True, "sub_scopes": True})
        assert not gone.is_error, gone.content
        assert gone.structured_content == {"deleted": 3, "by_scope": {
            f"{org}/p": 2, f"{org}/p/u2": 1}}
    assert set((await counts(memory, scopes)).values()) == {0}
