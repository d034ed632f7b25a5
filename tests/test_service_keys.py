"""API keys: hashed at rest, bound to an org (and projects/users), created, listed and
revoked with `memroute keys`; and the library never imports the service."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from benchmarks.served import ROOT, service_env
from memroute.cli import app
from memroute.errors import InvalidInputError, NotAuthenticatedError
from memroute.memory import Memory, Scope
from memroute.memory.items import DEFAULT_TENANT
from memroute.service.keys import KeyGrant, KeyStore
from memroute.settings import get_settings
from tests.test_layout import PACKAGE, imported_modules


async def test_only_a_hash_of_the_secret_is_stored(keys: KeyStore, memory: Memory) -> None:
    token, record = await keys.create("acme-h", project_ids=["p1", "p2"], name="bot")
    key_id, secret = token.removeprefix("mr_").split(".")
    assert key_id == record.key_id and len(secret) >= 40
    async with memory._pool.connection() as conn:
        row = await (await conn.execute(
            f"SELECT * FROM {memory.schema}.api_keys WHERE key_id = %s", [key_id])).fetchone()
    assert secret not in repr(row) and token not in repr(row)
    grant = await keys.verify(token)
    assert grant == KeyGrant(key_id=key_id, org_id="acme-h", project_ids=("p1", "p2"))
    for wrong in (None, "", token[:-1] + ("A" if token[-1] != "A" else "B"), f"mr_{key_id}",
                  f"mr_{key_id}.", "Bearer " + token, secret):
        assert await keys.verify(wrong) is None
    assert await keys.revoke(key_id) and not await keys.revoke(key_id)
    assert await keys.verify(token) is None
    listed = {r.key_id: r for r in await keys.list("acme-h")}
    assert listed[key_id].revoked_at is not None and listed[key_id].name == "bot"


async def test_a_key_cache_holds_a_verified_key_for_its_seconds_only(
        keys: KeyStore, memory: Memory) -> None:
    token, record = await keys.create("acme-c")
    cached = await KeyStore.open(memory.url, memory.schema, max_size=1, cache_seconds=0.3)
    try:
        assert (await cached.verify(token)).key_id == record.key_id
        assert await keys.revoke(record.key_id)  # by another process, e.g. `memroute keys`
        assert await keys.verify(token) is None  # no cache: at once
        assert (await cached.verify(token)).key_id == record.key_id  # within its seconds
        await asyncio.sleep(0.35)
        assert await cached.verify(token) is None
        assert await cached.verify(token[:-1] + "x") is None  # a near miss is never cached
    finally:
        await cached.close()


async def test_no_key_reaches_the_store_built_without_a_tenant(
        keys: KeyStore, memory: Memory, served, pg_home: Path) -> None:
    """`DEFAULT_TENANT`'s org holds the items of every LangGraph store built without a
    tenant: nobody's tenant. A key for it is refused when created (library and CLI) and,
    stored before that, when verified; a scope naming it lies outside every key."""
    org = DEFAULT_TENANT.org_id
    with pytest.raises(InvalidInputError, match="built without a tenant"):
        await keys.create(org)
    made = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "memroute.cli", "keys", "create", "--org", org],
        env=service_env(memory.url, memory.schema, pg_home), cwd=ROOT, capture_output=True,
        text=True, timeout=120)
    assert made.returncode == 2 and "built without a tenant" in made.stderr, made.stderr
    assert [r for r in await keys.list(org)] == []
    # one stored before `create` refused it (the table written directly)
    key_id, secret = uuid.uuid4().hex[:12], "s" * 43
    async with memory._pool.connection() as conn:
        await conn.execute(
            f"INSERT INTO {memory.schema}.api_keys (key_id, secret_sha256, org_id, name) "
            "VALUES (%s, %s, %s, 'old')", [key_id, hashlib.sha256(secret.encode()).digest(), org])
    stored = f"mr_{key_id}.{secret}"
    with pytest.raises(NotAuthenticatedError, match="built without a tenant"):
        await keys.verify(stored)
    unbound = {"org_id": org}
    async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
        for method, path, kwargs in [
                ("GET", "/v1/scopes/stats", {"params": unbound}),
                ("POST", "/v1/search", {"json": {"scope": unbound, "query": "x"}}),
                ("DELETE", "/v1/episodes", {"params": {**unbound, "all": "true"}}),
                ("POST", "/mcp", {"json": {}})]:
            answer = await client.request(method, path, **kwargs,
                                          headers={"Authorization": f"Bearer {stored}"})
            assert answer.status_code == 401, (path, answer.text)
            assert answer.json()["kind"] == "NotAuthenticatedError"
        other, _ = await keys.create(f"acme-{uuid.uuid4().hex[:6]}")
        named = await client.get("/v1/scopes/stats", params=unbound,
                                 headers={"Authorization": f"Bearer {other}"})
        assert named.status_code == 403 and "built without a tenant" in named.json()["error"]


def test_a_grant_reaches_its_org_projects_and_users_only() -> None:
    org_wide = KeyGrant(key_id="k", org_id="a")
    assert org_wide.allows(Scope(org_id="a", project_id="x", user_id="u"))
    assert not org_wide.allows(Scope(org_id="b"))
    users = KeyGrant(key_id="k", org_id="a", project_ids=("p",), user_ids=("u1",))
    assert users.allows(Scope(org_id="a", project_id="p", user_id="u1"))
    assert not users.allows(Scope(org_id="a", project_id="p"))  # the project-wide scope
    assert not users.allows(Scope(org_id="a", project_id="q", user_id="u1"))
    assert users.default_scope() == Scope(org_id="a", project_id="p", user_id="u1")
    assert org_wide.default_scope(user_id="z") == Scope(org_id="a", user_id="z")


async def test_bad_bindings_are_refused(keys: KeyStore) -> None:
    for org, projects in (("", None), ("bad org!", None), ("a", []), ("a", ["no spaces"])):
        with pytest.raises(InvalidInputError):
            await keys.create(org, project_ids=projects)


def test_keys_cli_creates_lists_and_revokes(monkeypatch: pytest.MonkeyPatch, pg_url: str,
                                            pg_home: Path, memory: Memory) -> None:
    for name, value in {"MEMROUTE_DATABASE_URL": pg_url, "MEMROUTE_DB_SCHEMA": memory.schema,
                        "MEMROUTE_HOME": str(pg_home), "MEMROUTE_EMBED_THREADS": "1",
                        "MEMROUTE_POOL_MAX_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    runner = CliRunner()

    def invoke(*args: str):
        get_settings.cache_clear()
        return runner.invoke(app, list(args))

    org = f"cli-{uuid.uuid4().hex[:6]}"
    try:
        made = invoke("keys", "create", "--org", org, "--project", "p", "--user", "u1",
                      "--json")
        assert made.exit_code == 0, made.output
        created = json.loads(made.stdout)
        assert created["key"].startswith(f"mr_{created['key_id']}.")
        assert (created["project_ids"], created["user_ids"]) == (["p"], ["u1"])
        listed = json.loads(invoke("keys", "list", "--org", org, "--json").stdout)
        assert [r["key_id"] for r in listed] == [created["key_id"]]
        assert created["key"].split(".")[1] not in json.dumps(listed)
        revoked = invoke("keys", "revoke", created["key"], "--json")  # the whole key works too
        assert json.loads(revoked.stdout) == {"key_id": created["key_id"], "revoked": True}
        assert created["key"].split(".")[1] not in revoked.stdout
        again = invoke("keys", "revoke", created["key_id"])
        assert again.exit_code == 2 and "no active key" in again.output
        bad = invoke("serve", "--host", "0.0.0.0")
        assert bad.exit_code == 2 and "--allow-remote" in bad.output
    finally:
        get_settings.cache_clear()


def test_the_library_never_imports_the_service() -> None:
    offending = [f"{path.relative_to(PACKAGE.parent)} imports {module}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 if "service" not in path.relative_to(PACKAGE).parts
                 and path.relative_to(PACKAGE).parts[0] != "cli"
                 for module in imported_modules(path) if module.startswith("memroute.service")]
    assert not offending, offending
    # the CLI loads the service only when `serve`, `mcp` or `keys` runs
    loaded = subprocess.run([sys.executable, "-c", "import sys, memroute.cli; print(sorted("
                             "m for m in ('fastapi', 'mcp', 'uvicorn', 'memroute.service') "
                             "if m in sys.modules))"], capture_output=True, text=True,
                            cwd=PACKAGE.parent, timeout=60)
    assert loaded.stdout.strip() == "[]", loaded.stderr
