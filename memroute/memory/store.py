"""`Memory`: the only door to the episodic store. Reads live here; writes are in
`memory.writes`, opening in `memory.connect`."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Coroutine, Generator, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from psycopg.errors import QueryCanceled
from psycopg_pool import AsyncConnectionPool

from memroute._log import get_logger
from memroute._loop import PoolLoop
from memroute.errors import InvalidInputError, ModelUnavailableError

from memroute.memory import connect, entity_sql, lookup, sql
from memroute.memory.bounds import ReadBound
from memroute.memory.embedders import Embedder
from memroute.memory.embedders.coalescing import CoalescingEmbedder
from memroute.memory.items import StoreItems
from memroute.memory.limits import (
    MAX_CONTEXT,
    MAX_EXTRA_QUERIES,
    MAX_ID_CHARS,
    MAX_K,
    MAX_LIST,
    MAX_OFFSET,
    MAX_QUERY_CHARS,
)
from memroute.memory.models import (
    Episode,
    Scope,
    ScoredResult,
    StoredEpisode,
    coerce_scope,
    json_text,
    reserved_metadata_problem,
    text_problem,
)
from memroute.memory.replicas import ReadRouter
from memroute.memory.rerankers import RerankCandidate, Reranker, RerankQuery
from memroute.memory.rerankers.base import CREDITS, ContextCandidate, rank_in_context
from memroute.memory.retry import with_retry
from memroute.memory.schema import check_identifier
from memroute.memory.tiers import ScopeTiers
from memroute.memory.server import pgdata_path
from memroute.memory.warm import WarmReport, warm_schema
from memroute.memory.writes import EpisodeWriter
from memroute.nlp import Entity
from memroute.settings import MemrouteSettings, get_settings

# `Memory.speakers`: how long a scope's speakers are reused before they are read again (other
# processes' writes are seen after this; this process's writes at once), how many scopes are
# kept, and how many producers one scope returns at most.
SPEAKERS_TTL_S = 5.0
SPEAKERS_CACHED_SCOPES = 1024
MAX_SPEAKERS = 64

log = get_logger(__name__)


def all_strings(values: Iterable[Any]) -> bool:
    return builtins.all(isinstance(v, str) for v in values)


def scope_path(scope: Scope) -> str:
    """``org/project[/user[/agent]]``, as the CLI's ``--scope`` spells it."""
    return "/".join(i for i in (scope.org_id, scope.project_id, scope.user_id, scope.agent_id)
                    if i is not None)


class Deleted(int):
    """How many episodes a delete removed, and (``by_scope``) how many in each scope."""

    by_scope: dict[str, int]

    def __new__(cls, count: int = 0, by_scope: dict[str, int] | None = None) -> Deleted:
        deleted = super().__new__(cls, count)
        deleted.by_scope = dict(by_scope or {})
        return deleted


class OpeningMemory:
    """What `Memory.open` returns: await it for the `Memory`, or use it as an async context
    manager that closes the memory on exit."""

    def __init__(self, opening: Coroutine[Any, Any, Memory]) -> None:
        self._opening: Coroutine[Any, Any, Memory] | None = opening
        self._memory: Memory | None = None

    def _take(self) -> Coroutine[Any, Any, Memory]:
        if self._opening is None:
            raise RuntimeError("Memory.open() was awaited already; call it again")
        opening, self._opening = self._opening, None
        return opening

    def __await__(self) -> Generator[Any, None, Memory]:
        return self._take().__await__()

    async def __aenter__(self) -> Memory:
        self._memory = await self._take()
        return self._memory

    async def __aexit__(self, *exc: object) -> None:
        if self._memory is not None:
            await self._memory.close()

    def __del__(self) -> None:
        if self._opening is not None:  # never awaited: no "coroutine was never awaited"
            self._opening.close()


class SearchResults(list[ScoredResult]):
    """A list of `ScoredResult`, best first, with the search's stage timings in ms."""

    def __init__(self, items: list[ScoredResult] = (), timings: dict[str, float] | None = None,
                 reranker: str = "none", entities: dict[str, list[Entity]] | None = None) -> None:
        super().__init__(items)
        self.timings = timings or {}
        self.reranker = reranker
        # with ``search_scored(with_entities=True)``: the stored entities of every episode in
        # the results' windows, by uid, as `Memory.stored_entities` gives them
        self.entities = entities or {}


def _check_query(query: Any, what: str = "query") -> str:
    if not isinstance(query, str):
        raise InvalidInputError(f"{what} must be a string, not {type(query).__name__}")
    problem = text_problem(query)
    if problem:
        raise InvalidInputError(f"{what} {problem}")
    stripped = query.strip()
    if not stripped:
        raise InvalidInputError(f"{what} must not be empty")
    if len(stripped) > MAX_QUERY_CHARS:
        raise InvalidInputError(f"{what} is {len(stripped)} characters; the limit is {MAX_QUERY_CHARS}")
    return stripped


def _check_uids(uids: Any) -> list[str]:
    if not isinstance(uids, (list, tuple)) or not all(
            isinstance(u, str) and u and "\x00" not in u and len(u) <= MAX_ID_CHARS
            for u in uids):
        raise InvalidInputError(f"uids must be a list of non-empty strings (at most "
                                f"{MAX_ID_CHARS} characters, no NUL)")
    if len(uids) > MAX_LIST:
        raise InvalidInputError(f"at most {MAX_LIST} uids per call")
    return list(uids)


def _check_int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"{name} must be an integer in [{low}, {high}], got {value!r:.40}")
    return value


class _EmbeddingAbandoned(Exception):
    """A query's embedding ended without a vector (its caller was cancelled or failed)."""


def _forget_prefetch(running: set[asyncio.Task[None]]):
    """A done callback: drop a finished prefetch, its failure retrieved (the later
    `embed_queries` of the same text embeds it again and reports its own error)."""
    def done(task: asyncio.Task[None]) -> None:
        running.discard(task)
        if not task.cancelled():
            task.exception()
    return done


class Memory:
    """Episodic memory on PostgreSQL + pgvector. Open with `Memory.open`."""

    def __init__(self, pool: AsyncConnectionPool, *, schema: str, embedder: Embedder,
                 reranker: Reranker | None, settings: MemrouteSettings, url: str,
                 reads: ReadRouter | None = None) -> None:
        self._pool = pool
        # the loop the pool is bound to: every call of every face runs there
        self.pool_loop = PoolLoop(asyncio.get_running_loop())
        # where reads go: the read replicas, once they have replayed this Memory's writes
        self._reads = reads or ReadRouter(pool)
        self.schema = schema
        self.embedder = embedder
        self.reranker = reranker
        self.settings = settings
        self.url = url
        self._query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        # query vectors being computed, (embedder, text) -> the vector's future: a caller that
        # asks for one in flight waits for it instead of embedding the text again
        self._embedding: dict[tuple[str, str], asyncio.Future[np.ndarray]] = {}
        self._prefetching: set[asyncio.Task[None]] = set()  # kept referenced until done
        # the full-text column's statistics and when they were read (monotonic seconds): the
        # full-text lane's term frequencies, read again with a search once they are older
        # than `sql.TERM_STATS_MAX_AGE_S`
        self._term_stats: tuple[float, sql.TermStats] | None = None
        # (scope key, episode uid) -> the episode's stored sentence vectors, newest last
        self._stored_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        # scope key -> (monotonic expiry, its speakers), least recently used first
        # (scope key, its bound as JSON) -> (monotonic expiry, its speakers), least recently
        # used first
        self._speakers: OrderedDict[tuple[str, str], tuple[float, tuple[str, ...]]] = \
            OrderedDict()
        self._writes = 0  # counts this process's writes: a lookup older than one is not kept
        self._stop_warming = threading.Event()
        self._warming: asyncio.Task[WarmReport] | None = None
        self._scope_tiers = ScopeTiers(pool, schema, settings.scope_index_min_sentences,
                                       settings.scope_moves_at_once)
        # the embedder as writes use it: concurrent adds' sentences embedded as one batch
        self._document_embedder = CoalescingEmbedder(embedder)

    async def embed_queries(self, texts: list[str]) -> list[np.ndarray]:
        """Query vectors, reusing the last ``settings.query_cache_size`` computed (a final
        rerank scores the queries its searches have just embedded) and sharing those being
        computed: a text another caller is embedding is awaited, not embedded twice (the
        router's early embedding of the question, a composed query embedded during a search:
        `prefetch_queries`)."""
        name = getattr(self.embedder, "query_name", self.embedder.name)
        unique = list(dict.fromkeys(texts))
        found = {t: self._query_vectors[(name, t)] for t in unique
                 if (name, t) in self._query_vectors}
        waiting = {t: self._embedding[(name, t)] for t in unique
                   if t not in found and (name, t) in self._embedding}
        missing = [t for t in unique if t not in found and t not in waiting]
        if missing:
            found.update(await self._embed_missing(name, missing))
        for text, future in waiting.items():
            try:
                found[text] = await asyncio.shield(future)
            except _EmbeddingAbandoned:  # its caller was cancelled or failed: embed it here
                found[text] = (await self.embed_queries([text]))[0]
        for text in unique:
            if (name, text) in self._query_vectors:
                self._query_vectors.move_to_end((name, text))
        while len(self._query_vectors) > self.settings.query_cache_size:
            self._query_vectors.popitem(last=False)
        return [found[t] for t in texts]

    async def _embed_missing(self, name: str, missing: list[str]) -> dict[str, np.ndarray]:
        """Embed ``missing`` (none in the cache or in flight), announcing each as in flight."""
        loop = asyncio.get_running_loop()
        futures = {t: loop.create_future() for t in missing}
        for text, future in futures.items():
            self._embedding[(name, text)] = future
        try:
            # one text is embedded without a task of its own: a caller's `ensure_future` has
            # it in the embedder's thread after one step of the loop
            computed = ([await self.embedder.embed_query(missing[0])] if len(missing) == 1 else
                        await asyncio.gather(*(self.embedder.embed_query(t) for t in missing)))
        except BaseException:
            for text, future in futures.items():
                self._embedding.pop((name, text), None)
                future.set_exception(_EmbeddingAbandoned())
                future.exception()  # marks it retrieved: no waiter is not an error
            raise
        vectors = dict(zip(missing, computed))
        if not all(np.isfinite(v).all() for v in computed):
            error = ModelUnavailableError(
                f"embedder {self.embedder.name} returned NaN or infinite values for a query")
            for text, future in futures.items():
                self._embedding.pop((name, text), None)
                future.set_exception(_EmbeddingAbandoned())
                future.exception()
            raise error
        for text, future in futures.items():
            self._embedding.pop((name, text), None)
            self._query_vectors[(name, text)] = vectors[text]
            future.set_result(vectors[text])
        return vectors

    def prefetch_queries(self, texts: list[str], after: str | None = None) -> None:
        """Start embedding ``texts`` in the background (after ``after``'s vector, when given:
        a search's own query first), for a later `embed_queries` or `rerank` to find kept or
        in flight. Nothing when the query cache is off; a failure is left to the later call."""
        if not texts or not self.settings.query_cache_size:
            return

        async def embed() -> None:
            if after is not None:
                await self.embed_queries([after])
            await self.embed_queries(texts)

        task = asyncio.ensure_future(embed())
        self._prefetching.add(task)
        task.add_done_callback(_forget_prefetch(self._prefetching))

    def _remember_vectors(self, scope_key: str, stored: dict[str, np.ndarray]) -> None:
        """Keep the stored vectors a search read (bounded, least recently used out)."""
        for uid, vectors in stored.items():
            self._stored_vectors[(scope_key, uid)] = vectors
            self._stored_vectors.move_to_end((scope_key, uid))
        while len(self._stored_vectors) > self.settings.stored_vector_cache_size:
            self._stored_vectors.popitem(last=False)

    def _forget_speakers(self, scope_key: str) -> None:
        """Drop a scope's cached speakers after a write (`speakers`)."""
        self._writes += 1
        for key in [k for k in self._speakers if k[0] == scope_key]:
            del self._speakers[key]

    def _forget_vectors(self, scope_key: str, uids: list[str] | None = None) -> None:
        """Drop kept vectors of ``uids`` (or of the whole scope) after a write or delete."""
        for key in [k for k in self._stored_vectors
                    if k[0] == scope_key and (uids is None or k[1] in uids)]:
            del self._stored_vectors[key]

    @classmethod
    def open(cls, dsn: str | None = None, **kwargs: Any) -> OpeningMemory:
        """Connect (starting the embedded server unless a DSN is given) and migrate the schema:
        ``memory = await Memory.open()`` (then ``await memory.close()``), or
        ``async with Memory.open() as memory:``, which closes it at the end of the block.

        ``dsn`` defaults to ``MEMROUTE_DATABASE_URL``; without either, the embedded server
        under ``MEMROUTE_HOME`` is started or reused. Keyword arguments: ``schema``,
        ``embedder``, ``reranker``, ``settings``. Models load here, while the server starts
        and is connected to, so a missing or corrupt model fails now, not inside a query
        (MiniLM's documents' session is built at its first use; its file is checked here).
        """
        return OpeningMemory(cls._open(dsn, **kwargs))

    @classmethod
    async def _open(
        cls,
        dsn: str | None = None,
        *,
        schema: str | None = None,
        embedder: Embedder | str | None = None,
        reranker: Reranker | str | None = connect.SETTINGS_RERANKER,  # type: ignore[assignment]
        settings: MemrouteSettings | None = None,
    ) -> Memory:
        settings = settings or get_settings()
        schema = check_identifier(schema or settings.db_schema)
        pool, url, embedder, reranker = await connect.open_pool(
            dsn, schema, connect.load_models(embedder, reranker, settings), settings)
        try:
            reads = await connect.open_reads(pool, schema, settings)
        except BaseException:
            await pool.close()
            raise
        log.debug("memory.open", schema=schema, embedder=embedder.name,
                  query_embedder=getattr(embedder, "query_name", embedder.name),
                  reranker=getattr(reranker, "name", "none"))
        memory = cls(pool, schema=schema, embedder=embedder, reranker=reranker,
                     settings=settings, url=url, reads=reads)
        if settings.warm_on_open and memory._embedded_pgdata is not None:
            memory._warming = asyncio.ensure_future(memory._warm_in_background())
        return memory

    @property
    def _embedded_pgdata(self) -> Path | None:
        """The data directory of the embedded server this Memory started or reuses."""
        home = getattr(getattr(self._pool, "guard", None), "home", None)
        return pgdata_path(home) if home is not None else None

    async def warm(self) -> WarmReport:
        """Read this store's tables and indexes into memory (``pg_prewarm`` where the server
        has it, else the embedded server's files), so searches after a cold start read no
        disk. Idempotent; reads only this store's schema. With ``MEMROUTE_WARM_ON_OPEN``,
        `open` does it in the background for the embedded server."""
        report = await warm_schema(self._pool, self.schema,
                                   data_directory=self._embedded_pgdata,
                                   stop=self._stop_warming)
        log.info("memory.warm", schema=self.schema, **report.as_dict())
        return report

    async def _warm_in_background(self) -> WarmReport | None:
        try:
            return await self.warm()
        except Exception as exc:  # a failed warm-up costs speed only: searches still work
            log.warning("memory.warm_failed", schema=self.schema, error=str(exc))
            return None

    async def index_scopes(self) -> int:
        """Move now every scope to the tier its sentences say (`memroute.memory.tiers`): a
        leaf of its own, with its own indexes, for each scope holding
        ``settings.scope_index_min_sentences`` sentences or more, and back to its bucket's
        shared leaf for one under half of that (writes and deletes do it in the background;
        this is for a store loaded or restored by other means). Returns how many scopes have
        a leaf of their own."""
        return len(await self._scope_tiers.place_all())

    async def close(self) -> None:
        if self._warming is not None:
            self._stop_warming.set()  # the file reader stops at its next chunk
            with contextlib.suppress(asyncio.CancelledError):
                await self._warming
        await self._scope_tiers.close()
        await self._reads.close()
        await self._pool.close()

    async def __aenter__(self) -> Memory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def reranker_name(self) -> str:
        return self.reranker.name if self.reranker else "none"

    def read_routing(self) -> dict[str, Any]:
        """Where this Memory's reads go: each read replica (URL without password), whether
        it serves reads and why not, its lag and reads; and the reads by where they went."""
        return self._reads.status()

    # -- writes ---------------------------------------------------------------------------

    @property
    def _writer(self) -> EpisodeWriter:
        if self._document_embedder.inner is not self.embedder:  # the embedder was replaced
            self._document_embedder = CoalescingEmbedder(self.embedder)
        return EpisodeWriter(self._pool, self.schema, self._document_embedder,
                             self.settings.extract_entities, self._scope_tiers)

    async def add(self, scope: Scope | dict, episodes: list[Episode | dict]) -> list[str]:
        """Store episodes atomically; idempotent by uid. Returns the uids, in input order."""
        scope = coerce_scope(scope)
        try:
            uids = await self._writer.add(scope, episodes)
        finally:
            self._forget_speakers(scope.key)
        await self._reads.wrote([scope.key])
        return uids

    async def add_batches(self, scope: Scope | dict,
                          batches: Iterable[list[Episode | dict]]) -> AsyncIterator[list[str]]:
        """Store batches in order, each atomically like `add`, yielding each batch's uids once
        it is stored. The next batch is embedded while the previous one is written, so a long
        ingestion runs at the embedder's pace. A bad batch raises when its turn comes; the
        batches before it stay stored."""
        scope = coerce_scope(scope)
        async with contextlib.aclosing(self._writer.add_batches(scope, batches)) as stored:
            async for uids in stored:
                self._forget_speakers(scope.key)
                await self._reads.wrote([scope.key])
                yield uids

    async def upsert(self, scope: Scope | dict, episodes: list[Episode | dict]) -> list[str]:
        """Store episodes atomically, replacing those whose uid is stored already: the new
        content is re-embedded and the old sentences are replaced in the same transaction.
        Returns the uids, in input order."""
        scope = coerce_scope(scope)
        uids = await self._writer.upsert(scope, episodes)
        self._forget_vectors(scope.key, uids)
        self._forget_speakers(scope.key)
        await self._reads.wrote([scope.key])
        return uids

    @property
    def items(self) -> StoreItems:
        """The key-value items of LangGraph's store face (`memroute.memory.items`)."""
        return StoreItems(self)

    # -- lookups by key ---------------------------------------------------------------------

    async def get(self, scope: Scope | dict, uids: list[str], *,
                  filters: Any = None, as_of: Any = None) -> list[StoredEpisode]:
        """The scope's episodes with these uids, in the order asked (missing uids left out,
        and those produced after ``as_of`` or outside ``filters``: `ReadBound`)."""
        scope = coerce_scope(scope)
        uids = _check_uids(uids)
        bound = ReadBound.of(filters, as_of)

        async def run() -> dict[str, StoredEpisode]:
            async with self._reads.connection(scope.key) as conn:
                return await lookup.episodes_by_uid(conn, self.schema, scope.key, uids, bound)

        found = await with_retry(run, "get")
        return [found[u] for u in dict.fromkeys(uids) if u in found]

    async def replies(self, scope: Scope | dict, uids: list[str], *,
                      filters: Any = None, as_of: Any = None) -> dict[str, StoredEpisode]:
        """For each of these episodes, the next turn of its session produced by another
        producer (the reply to a question), among those at or before ``as_of`` and within
        ``filters`` (as a search's), keyed by the uid replied to."""
        scope = coerce_scope(scope)
        uids = _check_uids(uids)
        bound = ReadBound.of(filters, as_of)

        async def run() -> dict[str, StoredEpisode]:
            async with self._reads.connection(scope.key) as conn:
                return await lookup.replies(conn, self.schema, scope.key, uids, bound)

        return await with_retry(run, "replies")

    async def recent(self, scope: Scope | dict, *, filters: Any = None, as_of: Any = None,
                     limit: int = 10, offset: int = 0) -> list[StoredEpisode]:
        """The scope's episodes matching ``filters`` and produced at or before ``as_of``,
        newest ``produced_at`` first."""
        scope = coerce_scope(scope)
        limit = _check_int(limit, "limit", 1, MAX_LIST)
        offset = _check_int(offset, "offset", 0, MAX_OFFSET)
        bound = ReadBound.of(filters, as_of)

        async def run() -> list[StoredEpisode]:
            async with self._reads.connection(scope.key) as conn:
                return await lookup.recent_episodes(conn, self.schema, scope.key, bound,
                                                    limit, offset)

        return await with_retry(run, "recent")

    async def list_scopes(self, prefix: list[str] | tuple[str, ...] = (), *,
                          limit: int = 100, offset: int = 0) -> list[Scope]:
        """The scopes holding episodes whose leading ids (org, project, user, agent) equal
        ``prefix``, ordered by those ids."""
        if not isinstance(prefix, (list, tuple)) or len(prefix) > len(lookup.SCOPE_PARTS):
            raise InvalidInputError("prefix must be a list of at most 4 scope ids "
                                    "(org_id, project_id, user_id, agent_id)")
        for part in prefix:  # validated like the ids of a scope
            coerce_scope({"org_id": part})
        limit = _check_int(limit, "limit", 1, MAX_LIST)
        offset = _check_int(offset, "offset", 0, MAX_OFFSET)

        async def run() -> list[Scope]:
            async with self._reads.connection() as conn:
                return await lookup.scopes(conn, self.schema, list(prefix), limit, offset)

        return await with_retry(run, "list_scopes")

    async def delete(self, scope: Scope | dict, *, session_id: str | None = None,
                     uids: list[str] | None = None, all: bool = False,  # noqa: A002
                     sub_scopes: bool = False) -> Deleted:
        """Delete a session's episodes, the given uids, or (``all=True``) the whole scope;
        ``all=True, sub_scopes=True`` erases the scope with every scope under it (a user's
        agents; a project's users and their agents).

        Erasing a whole scope is never implied: with neither ``session_id`` nor ``uids``,
        ``all=True`` is required. Sentences, embeddings and lexical entries go with their
        episodes; an erased scope's store items (of a `MemrouteStore` bound to it) go too.
        Returns the count, an int whose ``by_scope`` maps each scope path
        (``org/project[/user[/agent]]``) to the episodes deleted there.
        """
        scope = coerce_scope(scope)
        if not isinstance(all, bool) or not isinstance(sub_scopes, bool):
            raise InvalidInputError("all and sub_scopes are booleans")
        if all and (session_id is not None or uids is not None):
            raise InvalidInputError("all (true) erases the whole scope: give it without "
                                    "session_id or uids")
        if session_id is None and uids is None and not all:
            raise InvalidInputError("give session_id, uids, or all (true) to erase the whole "
                                    "scope")
        if sub_scopes and not all:
            raise InvalidInputError("sub_scopes (true) erases whole scopes: it needs all (true)")
        if sub_scopes and scope.user_id is None and scope.agent_id is not None:
            raise InvalidInputError("a scope with an agent but no user has no sub-scopes")
        if sub_scopes:
            ids = [i for i in (scope.org_id, scope.project_id, scope.user_id, scope.agent_id)
                   if i is not None]
            where = " AND ".join(f"{c} = %s" for c in lookup.SCOPE_PARTS[:len(ids)])
            params: list[Any] = list(ids)
        else:
            where, params = "scope_key = %s", [scope.key]
        if session_id is not None:
            if not isinstance(session_id, str) or not session_id:
                raise InvalidInputError("session_id must be a non-empty string")
            if problem := text_problem(session_id):
                raise InvalidInputError(f"session_id {problem}")
            where += " AND session_id = %s"
            params.append(session_id)
        if uids is not None:
            if not isinstance(uids, (list, tuple)) or not all_strings(uids):
                raise InvalidInputError("uids must be a list of strings")
            if problem := next(filter(None, map(text_problem, uids)), None):
                raise InvalidInputError(f"uids {problem}")
            where += " AND uid = ANY(%s::text[])"
            params.append(list(uids))

        async def run() -> list[tuple[Scope, int]]:
            async with self._pool.connection() as conn:
                if all:  # a scope erased takes the store items of its tenant along
                    await conn.execute(
                        f"DELETE FROM {self.schema}.store_items WHERE {where}", params)
                cur = await conn.execute(
                    f"WITH gone AS (DELETE FROM {self.schema}.episodes WHERE {where} "
                    "RETURNING org_id, project_id, user_id, agent_id) "
                    "SELECT org_id, project_id, user_id, agent_id, count(*) FROM gone "
                    "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3 NULLS FIRST, 4 NULLS FIRST", params)
                return [(Scope(org_id=o, project_id=p, user_id=u, agent_id=a), n)
                        for o, p, u, a, n in await cur.fetchall()]

        counts = await with_retry(run, "delete")
        deleted = Deleted(sum(n for _, n in counts),
                          {scope_path(s): n for s, n in counts})
        for gone, _ in counts or [(scope, 0)]:
            self._forget_vectors(gone.key, None if uids is None or session_id else list(uids))
            self._forget_speakers(gone.key)
        for gone, _ in counts:  # a large scope under half the bound goes back to its bucket
            if self._scope_tiers.known_placed(gone.key):
                self._scope_tiers.schedule(gone.key)
        await self._reads.wrote([scope.key, *(gone.key for gone, _ in counts)])
        log.info("memory.delete", scope=scope.key, session_id=session_id, all=all,
                 sub_scopes=sub_scopes, uids=len(uids) if uids is not None else None,
                 deleted=int(deleted), scopes=len(counts))
        return deleted

    async def merge_metadata(self, scope: Scope | dict, patches: dict[str, dict[str, Any]]
                             ) -> int:
        """Merge ``patches[uid]`` into the metadata of each episode (and its sentences, which
        searches filter on), in one transaction; nothing is re-embedded. Returns how many
        episodes were found."""
        scope = coerce_scope(scope)
        if not isinstance(patches, dict) or not patches:
            return 0
        uids = _check_uids(list(patches))
        texts = []
        for uid in uids:
            if not isinstance(patches[uid], dict):
                raise InvalidInputError("a metadata patch is a dict")
            if problem := reserved_metadata_problem(patches[uid]):
                raise InvalidInputError(problem)
            try:
                texts.append(json_text(patches[uid]))
            except ValueError as exc:
                raise InvalidInputError(f"metadata {exc}") from exc

        async def run() -> int:
            async with self._pool.connection() as conn, conn.transaction():
                cur = await conn.execute(
                    f"UPDATE {self.schema}.episodes e SET metadata = e.metadata || p.patch "
                    "FROM unnest(%s::text[], %s::jsonb[]) AS p(uid, patch) "
                    "WHERE e.scope_key = %s AND e.uid = p.uid", [uids, texts, scope.key])
                found = cur.rowcount
                await conn.execute(
                    f"UPDATE {self.schema}.sentences s SET metadata = s.metadata || p.patch "
                    "FROM unnest(%s::text[], %s::jsonb[]) AS p(uid, patch) "
                    "WHERE s.scope_key = %s AND s.episode_uid = p.uid", [uids, texts, scope.key])
                return found

        found = await with_retry(run, "merge_metadata")
        await self._reads.wrote([scope.key])
        return found

    async def backfill_entities(self, batch: int = 256) -> int:
        """Extract and store the entities of sentences written without them (stores created
        before schema version 2, or written while the spaCy model was missing), and the days
        named by sentences written before days were kept. Returns how many sentences were
        filled; safe to interrupt and rerun."""
        batch = _check_int(batch, "batch", 1, 10_000)
        async with self._pool.connection() as conn:
            filled = await entity_sql.backfill(conn, self.schema, batch)
        await self._reads.wrote(None)
        return filled

    async def stored_entities(self, scope: Scope | dict,
                              uids: list[str]) -> dict[str, list[Entity]]:
        """The entities stored for each episode (its sentences' NER and its speaker), by uid;
        episodes stored without entities are left out."""
        scope = coerce_scope(scope)
        uids = _check_uids(uids)

        async def run() -> dict[str, list[Entity]]:
            async with self._reads.connection(scope.key) as conn:
                return await entity_sql.entities_of(conn, self.schema, scope.key, uids)
        return await with_retry(run, "stored_entities")

    async def speakers(self, scope: Scope | dict, *, filters: Any = None,
                       as_of: Any = None) -> list[str]:
        """The scope's speakers: the producers of its episodes (produced at or before
        ``as_of``, within ``filters``) that name someone (not a role such as "user" or
        "system"; `entity_sql.speaker_entity`), at most `MAX_SPEAKERS`, in order. One indexed
        lookup (`lookup.scope_producers`), reused for `SPEAKERS_TTL_S`; this process's writes
        to the scope drop it at once."""
        scope = coerce_scope(scope)
        bound = ReadBound.of(filters, as_of)
        key = (scope.key, json.dumps([bound.as_of and bound.as_of.isoformat(),
                                      bound.filters], sort_keys=True, default=str))
        now = time.monotonic()
        cached = self._speakers.get(key)
        if cached is not None and cached[0] > now:
            self._speakers.move_to_end(key)
            return list(cached[1])
        writes = self._writes

        async def run() -> list[str]:
            async with self._reads.connection(scope.key) as conn:
                return await lookup.scope_producers(
                    conn, self.schema, scope.key,
                    MAX_SPEAKERS + len(entity_sql.ROLE_PRODUCERS), bound)

        named = tuple(speaker.text for speaker in map(entity_sql.speaker_entity,
                                                       await with_retry(run, "speakers"))
                      if speaker is not None)[:MAX_SPEAKERS]
        if writes != self._writes:  # a write may have ended while this was read
            return list(named)
        self._speakers[key] = (now + SPEAKERS_TTL_S, named)
        self._speakers.move_to_end(key)
        while len(self._speakers) > SPEAKERS_CACHED_SCOPES:
            self._speakers.popitem(last=False)
        return list(named)

    async def count(self, scope: Scope | dict) -> dict[str, int]:
        """How many episodes and sentences the scope holds."""
        scope = coerce_scope(scope)

        async def run() -> tuple[int, int]:
            async with self._reads.connection(scope.key) as conn:
                cur = await conn.execute(
                    f"SELECT (SELECT count(*) FROM {self.schema}.episodes WHERE scope_key = %s), "
                    f"(SELECT count(*) FROM {self.schema}.sentences WHERE scope_key = %s)",
                    [scope.key, scope.key],
                )
                return await cur.fetchone()

        episodes, sentences = await with_retry(run, "count")
        return {"episodes": episodes, "sentences": sentences}

    # -- search ---------------------------------------------------------------------------

    async def search_scored(
        self,
        scope: Scope | dict,
        query: str,
        k: int = 10,
        filters: Any = None,
        context: tuple[int, int] = (1, 2),
        queries: list[str] | None = None,
        *,
        as_of: Any = None,
        match: dict[str, Any] | None = None,
        expired_items: bool = False,
        candidates: int | None = None,
        lexical: bool | None = None,
        rerank: bool = True,
        fusion: str | None = None,
        entities: bool | None = None,
        with_entities: bool = False,
    ) -> SearchResults:
        """Declarative search: sentences -> nuclei -> context windows -> rerank -> top k.

        Results are per nucleus (a matched episode), each with its own context window
        (``context`` = neighbours before and after it in its session). Windows may overlap;
        no result is dropped for that, and `flatten` lists each episode once. ``k`` results
        come back whenever the scope, after ``filters``, holds at least ``k`` episodes.
        Nothing a search returns, matched turn or context, was produced after ``as_of`` (a
        datetime or ISO-8601 text, `memroute.time.parse_as_of`) or lies outside ``filters``
        (one filter, or a list of filters that must all hold): `ReadBound`. ``match``: a
        filter only the matched turns must pass (their context need not). ``expired_items``:
        store items past their ttl may be found too (a store that keeps them readable).
        ``queries`` are extra queries the reranker also scores against (multi-query rerank);
        per candidate the scores are fused with ``fusion`` (``max`` by default).
        ``entities``: the entity lane (`memroute.memory.entity_sql`), default
        ``settings.entity_lane``. ``with_entities``: also read the stored entities of the
        results' episodes (`SearchResults.entities`), in the same statement.
        """
        scope = coerce_scope(scope)
        query = _check_query(query)
        k = _check_int(k, "k", 1, MAX_K)
        bound = ReadBound.of(filters, as_of, expired_items=expired_items)
        matched = ReadBound.of(match).filters
        if not isinstance(context, (tuple, list)) or len(context) != 2:
            raise InvalidInputError("context must be a (before, after) pair")
        before = _check_int(context[0], "context[0]", 0, MAX_CONTEXT)
        after = _check_int(context[1], "context[1]", 0, MAX_CONTEXT)
        extra = [_check_query(q, "queries[]") for q in (queries or [])][:MAX_EXTRA_QUERIES]
        all_queries = list(dict.fromkeys([query, *extra]))
        limit = max(candidates or self.settings.candidates, 3 * k)
        lexical = self.settings.lexical if lexical is None else lexical
        fusion = fusion or self.settings.rerank_fusion
        timings: dict[str, float] = {}

        start = time.perf_counter()
        embeddings, entity_keys = await asyncio.gather(
            self.embed_queries(all_queries), entity_sql.query_keys(
                query, self.settings.entity_lane if entities is None else entities))
        timings["embed_ms"] = (time.perf_counter() - start) * 1000

        kept_stats = self._term_stats
        read_term_stats = lexical and (
            kept_stats is None or time.monotonic() - kept_stats[0] > sql.TERM_STATS_MAX_AGE_S)
        lanes = self._search_lanes(scope.key, query, embeddings[0], entity_keys, bound, matched,
                                   k=k, limit=limit, lexical=lexical)

        async def read_with_lanes(conn, lanes):
            try:
                return await sql.read_search(
                    conn, self.schema, scope.key, embeddings[0], bound, limit=limit,
                    before=before, after=after,
                    timeout_ms=self.settings.search_statement_timeout_ms, lanes=lanes,
                    with_entities=with_entities, read_term_stats=read_term_stats,
                    match=matched)
            except QueryCanceled as exc:
                if not lexical:
                    raise
                # the full-text lane is the one whose cost a query can drive up: the search
                # goes on without it (the issue-16 bound)
                log.warning("memory.lexical_lane_timeout", scope=scope.key,
                            query_chars=len(query), error=str(exc).splitlines()[0])
                return await sql.read_search(
                    conn, self.schema, scope.key, embeddings[0], bound, limit=limit,
                    before=before, after=after,
                    timeout_ms=self.settings.search_statement_timeout_ms,
                    lanes=[lane for lane in lanes if lane.name != "lexical"],
                    with_entities=with_entities, match=matched)

        async def read():
            async with self._reads.connection(scope.key) as conn:
                t0 = time.perf_counter()
                found = await read_with_lanes(conn, lanes)
                timings["read_ms"] = (time.perf_counter() - t0) * 1000
                if found.term_stats is not None:
                    self._term_stats = (time.monotonic(), found.term_stats)
                nuclei, windows = found.nuclei, found.windows
                episodes, stored = found.episodes, found.vectors
                entities: dict[str, Any] = dict(found.entities)  # JSON text, decoded below
                # fewer than k episodes from the vector probe: a full probe names too few,
                # and a short one may have stopped at the scan bound; `probe_nuclei` widens
                # or settles it exactly, in statements of its own
                if sum(not math.isnan(n.vector_score) for n in nuclei) >= k:
                    return nuclei, windows, episodes, stored, entities
                t0 = time.perf_counter()
                async with conn.transaction():
                    await conn.execute(*sql.statement_timeout(
                        self.settings.search_statement_timeout_ms))
                    nuclei = sql.with_lane_nuclei(await sql.probe_nuclei(
                        conn, self.schema, scope.key, embeddings[0], bound, k=k,
                        limit=4 * limit, match=matched), nuclei)
                    missing = [n.uid for n in nuclei if n.uid not in windows]
                    if missing:
                        more_windows, more_episodes = await sql.fetch_clusters(
                            conn, self.schema, scope.key, missing, before, after, bound)
                        new = [u for u in more_episodes if u not in episodes]
                        windows = {**windows, **more_windows}
                        episodes = {**episodes, **more_episodes}
                        stored = {**stored, **await sql.fetch_sentence_embeddings(
                            conn, self.schema, scope.key, new)}
                        if with_entities:
                            entities = {**entities, **await entity_sql.entities_of(
                                conn, self.schema, scope.key, new)}
                timings["widen_ms"] = (time.perf_counter() - t0) * 1000
                return nuclei, windows, episodes, stored, entities

        nuclei, windows, episodes, stored, entities = await with_retry(read, "search")
        self._remember_vectors(scope.key, stored)
        nuclei = [n for n in nuclei if n.uid in windows]  # deleted between probe and fetch
        if not nuclei:
            return SearchResults([], timings, self.reranker_name)
        for nucleus in nuclei:  # lexical-only nuclei get their real cosine similarity
            if math.isnan(nucleus.vector_score):
                vectors = stored.get(nucleus.uid)
                nucleus.vector_score = (float((vectors @ embeddings[0]).max())
                                        if vectors is not None else 0.0)
        start = time.perf_counter()

        def window_vectors(nucleus: Any) -> tuple[np.ndarray, tuple[int, int]]:
            """A window's stacked vectors and the rows of its nucleus."""
            parts = [stored.get(u) for u in windows[nucleus.uid]]
            offset = sum(len(p) for p in parts[:windows[nucleus.uid].index(nucleus.uid)]
                         if p is not None)
            return self._stack(parts), (offset, offset + len(stored.get(nucleus.uid, ())))

        if rerank and self.reranker is not None:
            stacked = dict(enumerate(map(window_vectors, nuclei)))
            order = await rank_in_context(
                self.reranker, [RerankQuery(q, e) for q, e in zip(all_queries, embeddings)],
                [ContextCandidate(
                    n.uid,
                    RerankCandidate("\n".join(episodes[u].content for u in windows[n.uid]), v),
                    tuple(windows[n.uid]),
                    RerankCandidate(episodes[n.uid].content, v[a:b])
                    if len(windows[n.uid]) > 1 else None)
                 for n, (v, (a, b)) in zip(nuclei, stacked.values())],
                k, fusion)
        else:
            order = sorted(((i, n.vector_score) for i, n in enumerate(nuclei)),
                           key=lambda item: -item[1])[:k]
            stacked = {i: window_vectors(nuclei[i]) for i, _ in order}  # the results' only
        timings["rerank_ms"] = (time.perf_counter() - start) * 1000
        ranked = [(nuclei[i], score, *stacked[i]) for i, score in order]
        reranker = self.reranker_name if rerank else "none"
        shown = {u: episodes[u].episode() for n, *_ in ranked for u in windows[n.uid]}
        results = [
            ScoredResult(
                nucleus=shown[n.uid],
                episodes=[shown[u] for u in windows[n.uid]],
                matched_sentence=n.sentence,
                vector_score=float(n.vector_score),
                rerank_score=float(score),
                lexical_score=n.lexical_score,
                reranker=reranker,
                query=query,
                sentence_embeddings=vectors,
                nucleus_rows=rows,
            )
            for n, score, vectors, rows in ranked
        ]
        shown_entities = {u: entity_sql.episode_entities({u: json.loads(entities[u])})[u]
                          if isinstance(entities[u], str) else entities[u]
                          for u in shown if u in entities}
        return SearchResults(results, timings, reranker, shown_entities)

    def _search_lanes(self, scope_key: str, query: str, embedding: np.ndarray,
                      entity_keys: list[str], bound: ReadBound, match: tuple[dict, ...], *,
                      k: int, limit: int, lexical: bool) -> list[sql.Lane]:
        """The lanes a search's statement reads besides the vector probe: the full-text lane
        (at most ``k`` sentences: its later hits cost reranking and recall little;
        docs/research.md, "The full-text lane, cheap"), with the term statistics last read,
        and the entity lane when the query names something."""
        lanes = ([sql.lexical_lane_sql(self.schema, scope_key, query, bound, k,
                                       self._term_stats[1] if self._term_stats else None,
                                       match=match)]
                 if lexical else [])
        if entity_keys:
            lanes.append(entity_sql.entity_lane_sql(self.schema, scope_key, entity_keys,
                                                    embedding, bound, limit, match=match))
        return lanes

    async def with_stored_embeddings(self, scope: Scope | dict,
                                     results: list[ScoredResult]) -> list[ScoredResult]:
        """``results`` with the stored embeddings of their episodes' sentences, for a `rerank`
        of results that travelled without vectors (the retrieval graph's checkpointed state).

        Vectors of episodes a recent search of this `Memory` returned are kept
        (``settings.stored_vector_cache_size``); only the others are read, in one statement
        (e.g. a run resumed in another process)."""
        scope = coerce_scope(scope)
        uids = list(dict.fromkeys(e.uid for r in results for e in r.episodes if e.uid))
        if not uids:
            return list(results)
        kept = {u: self._stored_vectors[(scope.key, u)] for u in uids
                if (scope.key, u) in self._stored_vectors}
        missing = [u for u in uids if u not in kept]

        async def read() -> dict[str, np.ndarray]:
            async with self._reads.connection(scope.key) as conn:
                return await sql.fetch_sentence_embeddings(conn, self.schema, scope.key, missing)

        stored = {**kept, **(await with_retry(read, "rerank") if missing else {})}
        self._remember_vectors(scope.key, {u: stored[u] for u in missing if u in stored})
        return [self._with_vectors(r, stored) for r in results]

    def _with_vectors(self, result: ScoredResult, stored: dict[str, np.ndarray]) -> ScoredResult:
        """``result`` with its window's stacked vectors and the rows of its nucleus."""
        parts = [stored.get(e.uid or "") for e in result.episodes]
        uids = [e.uid for e in result.episodes]
        offset = sum(len(p) for p in parts[:uids.index(result.uid)] if p is not None)
        rows = (offset, offset + len(stored.get(result.uid, ())))
        return replace(result, sentence_embeddings=self._stack(parts), nucleus_rows=rows)

    def _stack(self, parts: list[np.ndarray | None]) -> np.ndarray:
        present = [p for p in parts if p is not None]
        if len(present) == 1:  # a window of one episode: its own rows, not a copy
            return present[0]
        return np.vstack(present) if present else np.zeros((0, self.embedder.dim), np.float32)

    async def rerank(self, results: list[ScoredResult], queries: list[str], k: int,
                     *, mode: str = "fused", fusion: str | None = None,
                     credit: str = "nucleus", link_bonus: float = 0.0,
                     entity_bonus: float = 0.0,
                     entity_keys: list[tuple[frozenset[str], frozenset[str]]] | None = None
                     ) -> list[ScoredResult]:
        """Rerank pooled results against every query, without reading the store.

        ``mode="fused"`` scores each candidate against each query and fuses the scores
        (``fusion``, ``max`` by default); ``mode="concat"`` is MemMachine's variant: one
        query string made of all queries joined. ``credit``: ``"nucleus"`` ranks as
        `search_scored` does; ``"window"`` scores each result on its whole context window
        (`rank_by_window`: the windows around strong matches fill the top k, and a
        neighbour still never outranks its match); with it, ``link_bonus`` is added to the
        results whose title the best windows of another title name (`linked_by_top`), and
        ``entity_bonus`` to those the best windows link through ``entity_keys`` (per result:
        its nucleus's keys, its window's; `linked_by_entities`).
        """
        if credit not in CREDITS:
            raise InvalidInputError(f"unknown credit {credit!r}: use {' or '.join(CREDITS)}")
        k = _check_int(k, "k", 1, MAX_K)
        texts = list(dict.fromkeys(_check_query(q, "queries[]") for q in queries))
        if not results or not texts:
            return list(results)[:k]
        if mode == "concat":
            texts = [" ".join(texts)]
        elif mode != "fused":
            raise InvalidInputError(f"unknown rerank mode {mode!r}: use fused or concat")
        if self.reranker is None:
            ranked = sorted(results, key=lambda r: -r.vector_score)
            return ranked[:k]
        embeddings = await self.embed_queries(texts)
        empty = np.zeros((0, self.embedder.dim), np.float32)
        order = await rank_in_context(
            self.reranker, [RerankQuery(t, e) for t, e in zip(texts, embeddings)],
            [ContextCandidate(
                r.uid,
                RerankCandidate(r.text, r.sentence_embeddings
                                if r.sentence_embeddings is not None else empty),
                tuple(e.uid or "" for e in r.episodes),
                RerankCandidate(r.nucleus.content, r.nucleus_embeddings()
                                if r.sentence_embeddings is not None else empty)
                if len(r.episodes) > 1 else None)
             for r in results],
            k, fusion or self.settings.rerank_fusion, credit, link_bonus, entity_bonus, entity_keys)
        return [replace(results[i], rerank_score=score, score=score) for i, score in order]
