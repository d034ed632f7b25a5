"""Opening a store: models from settings, the embedded server, migrations, the pools (the
primary's, and the read replicas')."""

from __future__ import annotations

import asyncio

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection, DataError, OperationalError, ProgrammingError, adapters
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import Format
from psycopg_pool import AsyncConnectionPool

from memroute.errors import InvalidInputError, StoreUnavailableError
from memroute._log import get_logger
from memroute.memory.embedders import Embedder, make_embedder
from memroute.memory.models import MAX_PRODUCED_AT, MIN_PRODUCED_AT
from memroute.memory.pool import GuardedPool, ServerGuard, check_idle_connection
from memroute.memory.replicas import ReadRouter, Replica
from memroute.memory.rerankers import Reranker, make_reranker
from memroute.memory.schema import migrate
from memroute.memory.server import ensure_embedded_server
from memroute.settings import MemrouteSettings

log = get_logger(__name__)

SETTINGS_RERANKER = object()  # `Memory.open`'s default: the reranker the settings name
_TIMESTAMPTZ = adapters.types["timestamptz"].oid


def _clamping_loader(format: Format) -> type[Loader]:
    """A timestamptz loader that returns a time outside Python's years 1..9999 (stored before
    memroute validated times, or shifted there by the session's time zone) clamped to the
    nearest representable instant, with a warning, instead of failing every read of its scope."""
    inner_class = adapters.get_loader(_TIMESTAMPTZ, format)

    class ClampingTimestamptzLoader(Loader):
        def __init__(self, oid: int, context: Any = None) -> None:
            super().__init__(oid, context)
            self._inner = inner_class(oid, context)

        def load(self, data: Any) -> datetime:
            try:
                return self._inner.load(data)
            except DataError as exc:
                low = "too small" in str(exc)
                log.warning("store.time_out_of_range", error=str(exc),
                            clamped_to="min" if low else "max")
                return MIN_PRODUCED_AT if low else MAX_PRODUCED_AT

    ClampingTimestamptzLoader.format = format
    return ClampingTimestamptzLoader


_CLAMPING_LOADERS = [_clamping_loader(format) for format in (Format.TEXT, Format.BINARY)]


def register_time_loaders(conn: AsyncConnection) -> None:
    """Make ``conn`` read out-of-range times as clamped values (see `_clamping_loader`)."""
    for loader in _CLAMPING_LOADERS:
        conn.adapters.register_loader(_TIMESTAMPTZ, loader)


def settings_embedder(spec: str | None, settings: MemrouteSettings) -> Embedder:
    """The embedder ``spec`` (default the settings') with the settings' threads, batch size
    and query model."""
    return make_embedder(spec or settings.embedder, threads=settings.embed_threads,
                         batch_size=settings.embed_batch_size, query_model=settings.query_model,
                         query_threads=settings.query_embed_threads,
                         cache_dir=settings.model_cache_dir)


async def load_models(embedder: Embedder | str | None, reranker: Reranker | str | None | object,
                      settings: MemrouteSettings) -> tuple[Embedder, Reranker | None]:
    """The embedder and reranker to use: given objects as they are, specs built now (so a
    missing or corrupt model fails here, not inside a query)."""
    if embedder is None or isinstance(embedder, str):
        embedder = await asyncio.to_thread(settings_embedder, embedder, settings)
    if reranker is SETTINGS_RERANKER or isinstance(reranker, str):
        spec = settings.reranker if reranker is SETTINGS_RERANKER else reranker
        cache = str(settings.flashrank_cache_dir) if settings.flashrank_cache_dir else None
        reranker = make_reranker(spec, cache_dir=cache)
    return embedder, reranker  # type: ignore[return-value]


async def open_pool(dsn: str | None, schema: str,
                    models: Awaitable[tuple[Embedder, Reranker | None]],
                    settings: MemrouteSettings
                    ) -> tuple[AsyncConnectionPool, str, Embedder, Reranker | None]:
    """Migrate ``schema`` for the embedder of ``models`` and open a connection pool; returns
    it, the URL and the models. The models load meanwhile: the server is started and
    connected to while they do (a model's failure is still this call's error).

    Without ``dsn`` or ``settings.database_url``, the embedded server under
    ``settings.home`` is started or reused, and restarted if it dies (see `GuardedPool`).
    """
    loading = asyncio.ensure_future(models)
    try:
        url = dsn or settings.database_url
        owned_home = None
        if url is None:
            url = await asyncio.to_thread(ensure_embedded_server, settings.home)
            owned_home = settings.home
        try:
            async with await AsyncConnection.connect(url, autocommit=True) as conn:
                embedder, reranker = await loading
                await migrate(conn, schema, embedder.name, embedder.dim,
                              buckets=settings.scope_buckets)
        except OperationalError as exc:
            raise StoreUnavailableError(f"cannot connect to the database: {exc}") from exc
    except BaseException:
        if not loading.done():
            loading.cancel()  # the thread finishes its model; nothing waits for it
        await asyncio.wait([loading])
        if not loading.cancelled():
            loading.exception()  # retrieved: the server's error is the one raised
        raise

    pool = GuardedPool(
        url, min_size=settings.pool_min_size, max_size=settings.pool_max_size,
        timeout=settings.pool_timeout_s, configure=_configure(settings), open=False,
        check=check_idle_connection, name=f"memroute-{schema}",
        guard=ServerGuard(url, owned_home),
    )
    await pool.open(wait=True, timeout=settings.pool_timeout_s)
    return pool, url, embedder, reranker


def _configure(settings: MemrouteSettings) -> Callable[[AsyncConnection], Awaitable[None]]:
    """How a pool readies each new connection: vector and time types, the session's
    ``maintenance_work_mem``, and custom plans only (``plan_cache_mode``): a generic plan of a
    statement on the partitioned sentences table (a prepared one's, or the foreign key's
    cascade) names every partition and locks them all, which with thousands of large
    scopes runs out of the server's lock table (memroute.memory.tiers)."""
    async def configure(conn: AsyncConnection) -> None:
        await register_vector_async(conn)
        register_time_loaders(conn)
        await conn.execute(
            "SELECT set_config('maintenance_work_mem', %s, false), "
            "set_config('plan_cache_mode', 'force_custom_plan', false)",
            (settings.maintenance_work_mem,),
        )
        await conn.commit()

    return configure


async def open_reads(primary: AsyncConnectionPool, schema: str,
                     settings: MemrouteSettings) -> ReadRouter:
    """The router of a memory's reads over the replicas of ``settings.read_database_url``
    (none: every read on ``primary``). A replica that does not answer yet is left out, not
    an error: it is taken back once it does."""
    urls = settings.read_database_url.split() if settings.read_database_url else []
    replicas = []
    for n, url in enumerate(urls):
        try:
            conninfo_to_dict(url)
            if not url.startswith(("postgresql://", "postgres://")):
                raise ProgrammingError("not a URL")
        except ProgrammingError:  # its message may quote the URL, password and all
            raise InvalidInputError(
                f"MEMROUTE_READ_DATABASE_URL: item {n + 1} of {len(urls)} is not a "
                "postgresql:// URL (give one or more URLs, separated by spaces)") from None
        replicas.append(Replica(url, GuardedPool(
            url, min_size=1, max_size=settings.pool_max_size, timeout=settings.pool_timeout_s,
            configure=_configure(settings), open=False, check=check_idle_connection,
            name=f"memroute-{schema}-replica-{n}", guard=ServerGuard(url, None))))
    router = ReadRouter(primary, replicas, max_lag_s=settings.read_max_lag_s)
    try:
        await router.start()
    except BaseException:
        await router.close()
        raise
    return router
