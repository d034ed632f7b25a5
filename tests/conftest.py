"""Shared fixtures: one real embedded PostgreSQL server per test session, real models."""

from __future__ import annotations

import os

# A shared 2-core machine makes multi-threaded numeric code 10-35x slower under contention.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from statement_routes import SESSION_LOG

from memroute import sample_data
from memroute.memory import Memory, Scope, SyncMemory
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.memory.server import ensure_embedded_server, stop_embedded_server
from memroute.settings import MemrouteSettings


def pytest_configure(config: pytest.Config) -> None:
    SESSION_LOG.install()  # what memroute sends while the tests run (tests/test_scaling.py)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``last`` run after all the others."""
    items.sort(key=lambda item: item.get_closest_marker("last") is not None)


@pytest.fixture(scope="session")
def pg_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("memroute-home")


@pytest.fixture(scope="session")
def pg_url(pg_home: Path):
    """A real PostgreSQL + pgvector: ``MEMROUTE_TEST_DATABASE_URL`` or an embedded server."""
    external = os.environ.get("MEMROUTE_TEST_DATABASE_URL")
    if external:
        yield external
        return
    url = ensure_embedded_server(pg_home)
    yield url
    stop_embedded_server(pg_home)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """The scripted OpenAI-compatible server on 127.0.0.1, for one test."""
    server = FakeOpenAI()
    yield server
    server.close()


@pytest.fixture(scope="session")
def settings(pg_home: Path, pg_url: str) -> MemrouteSettings:
    # four buckets: a store of many is the same but slower to create (each bucket is tables)
    return MemrouteSettings(home=pg_home, database_url=pg_url, embed_threads=1, pool_max_size=6,
                            scope_buckets=4)


@pytest.fixture(scope="session")
def embedder() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(threads=1)


@pytest.fixture(scope="session")
async def memory(settings: MemrouteSettings, embedder: MiniLMOnnxEmbedder) -> AsyncIterator[Memory]:
    """One open `Memory` for the session, in its own schema; tests isolate by scope."""
    mem = await Memory.open(settings=settings, embedder=embedder,
                            schema=f"t_{uuid.uuid4().hex[:10]}")
    yield mem
    await mem.close()


@pytest.fixture(scope="session")
def sync_memory(settings: MemrouteSettings, embedder: MiniLMOnnxEmbedder):
    """One `SyncMemory` (on memroute's background loop) for the session, in its own schema."""
    mem = SyncMemory.open(settings=settings, embedder=embedder,
                          schema=f"sync_{uuid.uuid4().hex[:10]}")
    yield mem
    mem.close()


@pytest.fixture(scope="session")
def sync_scope(sync_memory: SyncMemory) -> Scope:
    """A scope of ``sync_memory`` holding the sample conversation (read-only)."""
    scope = Scope(org_id=f"sync-{uuid.uuid4().hex[:6]}", project_id="sample")
    sync_memory.add(scope, sample_data.episodes())
    return scope


@pytest.fixture
def scope() -> Scope:
    """A fresh scope per test, so tests never see each other's data."""
    return Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="tests", user_id="u1")


@dataclass
class SearchLog:
    """What `timed_searches` saw: ("start" | "end", query) in order, and each query's uids."""
    events: list[tuple[str, str]] = field(default_factory=list)
    found: dict[str, list[str]] = field(default_factory=dict)


@pytest.fixture
def timed_searches(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> SearchLog:
    """``memory``'s searches, each held 50 ms (so concurrent ones overlap) and logged."""
    log = SearchLog()
    search = memory.search_scored

    async def timed(scope, query, **options):
        log.events.append(("start", query))
        await asyncio.sleep(0.05)
        results = await search(scope, query, **options)
        log.events.append(("end", query))
        log.found[query] = [r.uid for r in results]
        return results

    monkeypatch.setattr(memory, "search_scored", timed)
    return log


@pytest.fixture(scope="module")
async def keys(memory: Memory):
    """The API keys of the session memory's schema."""
    from memroute.service.keys import KeyStore

    store = await KeyStore.open(memory.url, memory.schema)
    yield store
    await store.close()


@pytest.fixture(scope="module")
def served(memory: Memory, pg_url: str, pg_home: Path, tmp_path_factory):
    """A `memroute serve` process on the session memory's schema (a module may override it
    with its own options)."""
    from benchmarks.served import ServedProcess, service_env

    env = service_env(pg_url, memory.schema, pg_home)
    server = ServedProcess(env, tmp_path_factory.mktemp("serve") / "serve.log").start()
    yield server
    server.stop()
