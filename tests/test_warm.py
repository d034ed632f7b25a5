"""Warming a store after a cold start (`Memory.warm`, `memroute db warm`), on the real
embedded server."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from memroute import sample_data
from memroute.cli import app
from memroute.memory import Memory, Scope
from memroute.memory.warm import segment_paths
from memroute.settings import MemrouteSettings, get_settings


def _main_fork_bytes(url: str, schema: str) -> tuple[int, set[str]]:
    """The bytes of the main fork of every table, index and TOAST table of ``schema``."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.oid::regclass::text, pg_relation_size(c.oid), c.reltoastrelid "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'i', 'm')", (schema,)).fetchall()
        toast = [conn.execute("SELECT pg_relation_size(%s)", (oid,)).fetchone()[0]
                 for _, _, oid in rows if oid]
    return sum(size for _, size, _ in rows) + sum(toast), {name for name, _, _ in rows}


@pytest.fixture
def embedded_settings(pg_home: Path, pg_url: str) -> MemrouteSettings:
    """The test server reached as memroute's embedded server (no database URL)."""
    if os.environ.get("MEMROUTE_TEST_DATABASE_URL"):
        pytest.skip("an external test database has no embedded server to warm")
    return MemrouteSettings(home=pg_home, database_url=None, embed_threads=1, pool_max_size=3,
                            warm_on_open=False)


async def test_warm_reads_exactly_the_store_schema_files(embedded_settings, embedder,
                                                         pg_url: str) -> None:
    schema = f"warm_{uuid.uuid4().hex[:8]}"
    other = f"warm_{uuid.uuid4().hex[:8]}"
    memory = await Memory.open(settings=embedded_settings, embedder=embedder, schema=schema)
    neighbour = await Memory.open(settings=embedded_settings, embedder=embedder, schema=other)
    try:
        await memory.add(Scope(org_id="o", project_id="p"), sample_data.episodes())
        await neighbour.add(Scope(org_id="o", project_id="p"), sample_data.episodes()[:3])
        first = await memory.warm()
        again = await memory.warm()
        expected, names = _main_fork_bytes(pg_url, schema)
        assert first.method == again.method == "files"
        assert first.bytes == again.bytes == expected > 0  # idempotent, only this schema
        assert first.relations == again.relations >= len(names) >= 7
        hits = await memory.search_scored(Scope(org_id="o", project_id="p"), "hiking", k=3)
        assert hits  # the store is untouched and answers
    finally:
        await memory.close()
        await neighbour.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
            conn.execute(f"DROP SCHEMA {other} CASCADE")


async def test_open_warms_in_the_background_and_close_stops_it(embedded_settings, embedder,
                                                               pg_url: str) -> None:
    schema = f"warm_{uuid.uuid4().hex[:8]}"
    settings = embedded_settings.model_copy(update={"warm_on_open": True})
    memory = await Memory.open(settings=settings, embedder=embedder, schema=schema)
    try:
        report = await asyncio.wait_for(asyncio.shield(memory._warming), 30)
        assert report is not None and report.method == "files"
        assert report.bytes == _main_fork_bytes(pg_url, schema)[0]
    finally:
        await memory.close()
    # a Memory reached through a database URL is not the embedded server's: no warm-up
    external = await Memory.open(settings=settings.model_copy(update={"database_url": pg_url}),
                                 embedder=embedder, schema=schema)
    try:
        assert external._warming is None
    finally:
        await external.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_segment_paths_lists_every_segment(tmp_path: Path) -> None:
    (tmp_path / "base" / "5").mkdir(parents=True)
    for name in ("16384", "16384.1", "16384.2", "16384_fsm", "163840"):
        (tmp_path / "base" / "5" / name).write_bytes(b"x")
    assert [p.name for p in segment_paths(tmp_path, "base/5/16384")] == [
        "16384", "16384.1", "16384.2"]
    assert segment_paths(tmp_path, "base/5/99") == []


async def test_a_role_without_pg_prewarm_or_the_data_directory_warms_nothing(
        embedded_settings, embedder, pg_url: str) -> None:
    """A server that has no pg_prewarm and does not show this role its data directory (a
    managed database): warm reports why it read nothing, and the store works."""
    schema = f"warm_{uuid.uuid4().hex[:8]}"
    role = f"warm_{uuid.uuid4().hex[:8]}"
    owner = await Memory.open(settings=embedded_settings, embedder=embedder, schema=schema)
    await owner.add(Scope(org_id="o", project_id="p"), sample_data.episodes()[:4])
    await owner.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT CREATE ON DATABASE postgres TO {role}")  # memroute migrates
        conn.execute(f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} "
                     f"TO {role}")
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
    url = psycopg.conninfo.make_conninfo(pg_url, user=role)
    memory = await Memory.open(url, settings=embedded_settings, embedder=embedder, schema=schema)
    try:
        report = await memory.warm()
        assert (report.method, report.bytes) == ("none", 0)
        assert "pg_prewarm" in report.reason
        assert await memory.search_scored(Scope(org_id="o", project_id="p"), "hiking", k=2)
    finally:
        await memory.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
            conn.execute(f"REVOKE CREATE ON DATABASE postgres FROM {role}")
            conn.execute(f"DROP ROLE {role}")


def test_db_warm_command(monkeypatch: pytest.MonkeyPatch, pg_home: Path, pg_url: str) -> None:
    schema = f"warm_{uuid.uuid4().hex[:8]}"
    for name, value in {"MEMROUTE_HOME": str(pg_home), "MEMROUTE_DB_SCHEMA": schema,
                        "MEMROUTE_EMBED_THREADS": "1", "MEMROUTE_POOL_MAX_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MEMROUTE_DATABASE_URL", raising=False)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["db", "warm", "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["method"] == "files"
        assert report["bytes"] == _main_fork_bytes(pg_url, schema)[0] > 0
        plain = CliRunner().invoke(app, ["db", "warm"])
        assert plain.exit_code == 0 and "MiB" in plain.stdout and "files" in plain.stdout
    finally:
        get_settings.cache_clear()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
