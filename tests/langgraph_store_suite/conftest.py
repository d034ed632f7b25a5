"""LangGraph's own store test suites, run against `MemrouteStore` (README.md beside this file).

The vendored test files are verbatim. What builds the store is replaced here, module by
module (`REPLACED`): the `store` and `vector_store` fixtures and the `_create_vector_store`
helpers of langgraph-checkpoint-postgres's suites (a `MemrouteStore` over this test session's
`SyncMemory`, or its `Memory` for the async suite, each store in a tenant of its own: the
isolation a fresh database gives `PostgresStore`), `InMemoryStore` in langgraph-checkpoint's
suite, and the three helpers that expire a row or read its expiry through `PostgresStore`'s
private cursor (the same on `MemrouteStore`'s table), so the ``omit_expired`` tests run.

The upstream conftest's names the test files import (``tests.conftest``: `DEFAULT_URI`,
`VECTOR_TYPES`, `CharacterEmbeddings`, ``tests.embed_test_utils``) are this module and the
vendored `embed_test_utils`. Tests that are not about the store under test are skipped, each
with its reason (`NOT_THE_STORE_API`).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from memroute.langgraph_store import MemrouteStore
from memroute.memory import Memory, Scope, SyncMemory
from memroute.memory.items import EXPIRES_KEY, namespace_text

from . import embed_test_utils
from .embed_test_utils import CharacterEmbeddings

# what the vendored files import from the upstream conftest
DEFAULT_URI = "unused: the stores run on the test session's embedded server"
VECTOR_TYPES = ["vector", "halfvec"]
sys.modules.setdefault("tests.conftest", sys.modules[__name__])
sys.modules.setdefault("tests.embed_test_utils", embed_test_utils)

HERE = Path(__file__).parent
NOT_THE_STORE_API = {
    "checkpoint_postgres/test_store.py::test_escape_like_literal":
        "tests PostgresStore's own SQL helper (langgraph.store.postgres.base), not the store",
    "checkpoint_postgres/test_store.py::test_namespace_match_pattern":
        "tests PostgresStore's own SQL helper (langgraph.store.postgres.base), not the store",
    "checkpoint_postgres/test_store.py::test_nonnull_migrations":
        "tests PostgresStore.MIGRATIONS, not the store",
    "checkpoint_postgres/test_store.py::test_omit_expired_search_pagination":
        "backdates updated_at through PostgresStore's private cursor and `store` table",
    "checkpoint_postgres/test_async_store.py::test_omit_expired_search_pagination":
        "backdates updated_at through PostgresStore's private cursor and `store` table",
    "checkpoint_postgres/test_async_store.py::test_abatch_uses_single_pool_checkout":
        "counts PostgresStore's pool checkouts (langgraph.checkpoint.postgres._ainternal)",
    "checkpoint_postgres/test_store.py::test_omit_expired_disabled_preserves_expired_rows"
    "[default]":
        "LangGraph's default keeps expired items until swept; memroute omits them unless "
        "TTLConfig omit_expired=False (the [explicit-false] case runs)",
    "checkpoint_postgres/test_async_store.py::"
    "test_omit_expired_disabled_preserves_expired_rows[default]":
        "LangGraph's default keeps expired items until swept; memroute omits them unless "
        "TTLConfig omit_expired=False (the [explicit-false] case runs)",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        if HERE not in path.parents:
            continue
        reason = NOT_THE_STORE_API.get(f"{path.relative_to(HERE).as_posix()}::{item.name}")
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"not MemrouteStore's API: {reason}"))


# -- the memories every store of the suites lives on (the session's, one schema each) -------

_SESSION: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _suite_memories(sync_memory: SyncMemory, memory: Memory) -> None:
    _SESSION.update(sync=sync_memory, async_=memory)


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    """The upstream conftest's embedder (random projections of character counts)."""
    return CharacterEmbeddings(dims=500)


def _tenant() -> Scope:
    """A fresh tenant: an empty store, as the fresh database of each upstream test."""
    return Scope(org_id=f"lgsuite-{uuid.uuid4().hex[:12]}")


def _ttl_config(module: Any) -> dict[str, Any]:
    """The ttl config of the upstream `store` fixtures."""
    return {"default_ttl": module.TTL_MINUTES, "refresh_on_read": True,
            "sweep_interval_minutes": module.TTL_MINUTES / 2}


def _index(fake_embeddings: CharacterEmbeddings, vector_type: str, distance_type: str,
           text_fields: list[str] | None) -> dict[str, Any]:
    """The index config of the upstream `_create_vector_store` helpers."""
    return {"dims": fake_embeddings.dims, "embed": fake_embeddings,
            "ann_index_config": {"vector_type": vector_type},
            "distance_type": distance_type, "fields": text_fields}


# -- langgraph-checkpoint-postgres tests/test_store.py (PostgresStore, sync) -------------------

@pytest.fixture(name="store")
def sync_store(request: pytest.FixtureRequest) -> Iterator[MemrouteStore]:
    store = MemrouteStore(_SESSION["sync"], ttl=_ttl_config(request.module), tenant=_tenant())
    store.start_ttl_sweeper()
    yield store
    store.stop_ttl_sweeper()


@contextmanager
def sync_create_vector_store(vector_type: str, distance_type: str,
                             fake_embeddings: CharacterEmbeddings,
                             text_fields: list[str] | None = None,
                             enable_ttl: bool = True) -> Iterator[MemrouteStore]:
    yield MemrouteStore(
        _SESSION["sync"], index=_index(fake_embeddings, vector_type, distance_type, text_fields),
        ttl={"default_ttl": 2, "refresh_on_read": True} if enable_ttl else None,
        tenant=_tenant())


def sync_vector_store(module: Any) -> Any:
    @pytest.fixture(name="vector_store", params=module._vector_params,
                    ids=lambda p: f"{p[0]}_{p[1]}")
    def vector_store(request: pytest.FixtureRequest,
                     fake_embeddings: CharacterEmbeddings) -> Iterator[MemrouteStore]:
        vector_type, distance_type, enable_ttl = request.param
        with sync_create_vector_store(vector_type, distance_type, fake_embeddings,
                                      enable_ttl=enable_ttl) as store:
            yield store
    return vector_store


# -- langgraph-checkpoint-postgres tests/test_async_store.py (AsyncPostgresStore) -------------

@pytest.fixture(name="store")
async def async_store(request: pytest.FixtureRequest) -> AsyncIterator[MemrouteStore]:
    store = MemrouteStore(_SESSION["async_"], ttl=_ttl_config(request.module), tenant=_tenant())
    await store.start_ttl_sweeper()
    yield store
    await store.stop_ttl_sweeper()


@asynccontextmanager
async def async_create_vector_store(vector_type: str, distance_type: str,
                                    fake_embeddings: CharacterEmbeddings,
                                    text_fields: list[str] | None = None
                                    ) -> AsyncIterator[MemrouteStore]:
    yield MemrouteStore(
        _SESSION["async_"], index=_index(fake_embeddings, vector_type, distance_type, text_fields),
        tenant=_tenant())


@pytest.fixture(name="vector_store",
                params=[(vector_type, distance_type) for vector_type in VECTOR_TYPES
                        for distance_type in ("l2", "inner_product", "cosine")],
                ids=lambda p: f"{p[0]}_{p[1]}")
async def async_vector_store(request: pytest.FixtureRequest,
                             fake_embeddings: CharacterEmbeddings
                             ) -> AsyncIterator[MemrouteStore]:
    vector_type, distance_type = request.param
    async with async_create_vector_store(vector_type, distance_type, fake_embeddings) as store:
        yield store


# -- the helpers that reach a row's expiry (the upstream ones use PostgresStore's cursor) -----

async def _expire(store: MemrouteStore, ns: tuple[str, ...], key: str) -> None:
    """Backdate an item's expiry a minute into the past, unswept (its episode's too)."""
    s = store.memory.schema
    async with store.memory._pool.connection() as conn:
        await conn.execute(
            f"WITH gone AS (UPDATE {s}.store_items SET expires_at = now() - interval '1 minute' "
            "WHERE scope_key = %s AND prefix = %s AND key = %s "
            "RETURNING episode_uid, extract(epoch FROM expires_at) AS expires) "
            f"UPDATE {s}.sentences x SET metadata = "
            f"jsonb_set(x.metadata, '{{{EXPIRES_KEY}}}', to_jsonb(g.expires)) FROM gone g "
            "WHERE x.scope_key = %s AND x.episode_uid = g.episode_uid",
            [store.tenant.key, namespace_text(ns), key, store.tenant.key])


async def _expiry(store: MemrouteStore, ns: tuple[str, ...], key: str) -> list[Any]:
    async with store.memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT expires_at FROM {store.memory.schema}.store_items "
            "WHERE scope_key = %s AND prefix = %s AND key = %s",
            [store.tenant.key, namespace_text(ns), key])
        return await cur.fetchall()


def _expire_now(store: MemrouteStore, ns: tuple[str, ...], key: str) -> None:
    store.loop.run_as_sync(_expire(store, ns, key))


def _row_exists(store: MemrouteStore, ns: tuple[str, ...], key: str) -> bool:
    return len(store.loop.run_as_sync(_expiry(store, ns, key))) == 1


def _stored_expires_at(store: MemrouteStore, ns: tuple[str, ...], key: str) -> Any:
    return store.loop.run_as_sync(_expiry(store, ns, key))[0][0]


async def _aexpire_now(store: MemrouteStore, ns: tuple[str, ...], key: str) -> None:
    await _expire(store, ns, key)


async def _arow_exists(store: MemrouteStore, ns: tuple[str, ...], key: str) -> bool:
    return len(await _expiry(store, ns, key)) == 1


async def _astored_expires_at(store: MemrouteStore, ns: tuple[str, ...], key: str) -> Any:
    return (await _expiry(store, ns, key))[0][0]


# -- langgraph-checkpoint tests/test_store.py (InMemoryStore) ----------------------------------

class InMemoryStore(MemrouteStore):
    """``InMemoryStore(index=..., ttl=...)`` as that suite builds it: a `MemrouteStore` over the
    session's `SyncMemory` (its `MockAsyncBatchedStore` calls ``batch`` on the event loop)."""

    def __init__(self, *, index: dict[str, Any] | None = None,
                 ttl: dict[str, Any] | None = None) -> None:
        super().__init__(_SESSION["sync"], index=index, ttl=ttl, tenant=_tenant())


REPLACED: dict[str, dict[str, Any]] = {
    "checkpoint_postgres/test_store.py": {
        "store": sync_store, "vector_store": sync_vector_store,
        "_create_vector_store": sync_create_vector_store, "_expire_now": _expire_now,
        "_row_exists": _row_exists, "_stored_expires_at": _stored_expires_at},
    "checkpoint_postgres/test_async_store.py": {
        "store": async_store, "vector_store": async_vector_store,
        "_create_vector_store": async_create_vector_store, "_aexpire_now": _aexpire_now,
        "_arow_exists": _arow_exists, "_astored_expires_at": _astored_expires_at},
    "checkpoint/test_store.py": {"InMemoryStore": InMemoryStore},
}


class _VendoredModule(pytest.Module):
    """A vendored test module with what builds the store replaced before its tests and
    fixtures are collected."""

    def _getobj(self) -> Any:
        module = super()._getobj()
        for name, replacement in REPLACED[self.path.relative_to(HERE).as_posix()].items():
            if not hasattr(module, name):
                raise AssertionError(f"{self.path.name} has no {name} to replace")
            if replacement is sync_vector_store:
                replacement = sync_vector_store(module)
            setattr(module, name, replacement)
        return module


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> Any:
    if module_path.relative_to(HERE).as_posix() in REPLACED:
        return _VendoredModule.from_parent(parent, path=module_path)
    return None

