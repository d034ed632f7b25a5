"""`Memory`: the only door to the episodic store (add, search_scored, delete)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from memroute._log import get_logger
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection, OperationalError
from psycopg_pool import AsyncConnectionPool
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from memroute.memory import sql
from memroute.memory.embedders import Embedder, make_embedder
from memroute.errors import (
    InvalidInputError,
    ModelUnavailableError,
    StoreUnavailableError,
)
from memroute.memory.models import (
    Episode,
    Scope,
    ScoredResult,
    coerce_episode,
    coerce_scope,
)
from memroute.memory.rerankers import (
    RerankCandidate,
    Reranker,
    RerankQuery,
    fuse_scores,
    make_reranker,
)
from memroute.memory.schema import check_identifier, migrate
from memroute.memory.server import ensure_embedded_server
from memroute.memory.limits import MAX_CONTEXT, MAX_EXTRA_QUERIES, MAX_K, MAX_QUERY_CHARS
from memroute.memory.splitter import split_sentences
from memroute.settings import MemrouteSettings, get_settings

log = get_logger(__name__)

_DEFAULT = object()


def _transient(exc: BaseException) -> bool:
    """Connection-level failures (server restart, killed backend, pool timeout)."""
    return isinstance(exc, OperationalError)


async def _with_retry(operation, what: str):
    """Run ``operation`` (a coroutine function), retrying connection failures.

    Safe because every retried operation is idempotent: reads, deletes and `add` (by uid).
    """
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_transient), stop=stop_after_attempt(4),
            wait=wait_exponential(multiplier=0.2, max=3), reraise=True,
        ):
            with attempt:
                return await operation()
    except OperationalError as exc:
        raise StoreUnavailableError(f"{what} failed, database unavailable: {exc}") from exc
    raise AssertionError("unreachable")


class SearchResults(list[ScoredResult]):
    """A list of `ScoredResult`, best first, with the search's stage timings in ms."""

    def __init__(self, items: list[ScoredResult] = (), timings: dict[str, float] | None = None,
                 reranker: str = "none") -> None:
        super().__init__(items)
        self.timings = timings or {}
        self.reranker = reranker


@dataclass
class _PreparedAdd:
    """An `add` between embedding and writing."""

    scope: Scope
    uids: list[str]
    new: list[Episode] = field(default_factory=list)
    sentences: list[tuple[Episode, int, str]] = field(default_factory=list)
    vectors: np.ndarray | None = None
    skipped: int = 0


def _check_query(query: Any, what: str = "query") -> str:
    if not isinstance(query, str):
        raise InvalidInputError(f"{what} must be a string, not {type(query).__name__}")
    if "\x00" in query:
        raise InvalidInputError(f"{what} must not contain NUL bytes")
    stripped = query.strip()
    if not stripped:
        raise InvalidInputError(f"{what} must not be empty")
    if len(stripped) > MAX_QUERY_CHARS:
        raise InvalidInputError(f"{what} is {len(stripped)} characters; the limit is {MAX_QUERY_CHARS}")
    return stripped


def _check_int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"{name} must be an integer in [{low}, {high}], got {value!r:.40}")
    return value


class Memory:
    """Episodic memory on PostgreSQL + pgvector. Open with `Memory.open`."""

    def __init__(self, pool: AsyncConnectionPool, *, schema: str, embedder: Embedder,
                 reranker: Reranker | None, settings: MemrouteSettings, url: str) -> None:
        self._pool = pool
        self.schema = schema
        self.embedder = embedder
        self.reranker = reranker
        self.settings = settings
        self.url = url
        self._query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    async def embed_queries(self, texts: list[str]) -> list[np.ndarray]:
        """Query vectors, reusing the last ``settings.query_cache_size`` computed (a final
        rerank scores the queries its searches have just embedded)."""
        name = self.embedder.name
        missing = [t for t in dict.fromkeys(texts) if (name, t) not in self._query_vectors]
        for text, vector in zip(missing, await asyncio.gather(
                *(self.embedder.embed_query(t) for t in missing))):
            self._query_vectors[(name, text)] = vector
        vectors = []
        for text in texts:
            self._query_vectors.move_to_end((name, text))
            vectors.append(self._query_vectors[(name, text)])
        while len(self._query_vectors) > self.settings.query_cache_size:
            self._query_vectors.popitem(last=False)
        return vectors

    @classmethod
    async def open(
        cls,
        dsn: str | None = None,
        *,
        schema: str | None = None,
        embedder: Embedder | str | None = None,
        reranker: Reranker | str | None = _DEFAULT,  # type: ignore[assignment]
        settings: MemrouteSettings | None = None,
    ) -> Memory:
        """Connect (starting the embedded server unless a DSN is given) and migrate the schema.

        ``dsn`` defaults to ``MEMROUTE_DATABASE_URL``; without either, the embedded server
        under ``MEMROUTE_HOME`` is started or reused. Models load here, so a missing or
        corrupt model fails now, not inside a query.
        """
        settings = settings or get_settings()
        schema = check_identifier(schema or settings.db_schema)
        if embedder is None or isinstance(embedder, str):
            embedder = await asyncio.to_thread(
                make_embedder, embedder or settings.embedder, threads=settings.embed_threads,
                batch_size=settings.embed_batch_size,
            )
        if reranker is _DEFAULT or isinstance(reranker, str):
            spec = settings.reranker if reranker is _DEFAULT else reranker
            cache = str(settings.flashrank_cache_dir) if settings.flashrank_cache_dir else None
            reranker = make_reranker(spec, cache_dir=cache)
        url = dsn or settings.database_url
        if url is None:
            url = await asyncio.to_thread(ensure_embedded_server, settings.home)
        try:
            async with await AsyncConnection.connect(url, autocommit=True) as conn:
                await migrate(conn, schema, embedder.name, embedder.dim)
        except OperationalError as exc:
            raise StoreUnavailableError(f"cannot connect to the database: {exc}") from exc

        async def configure(conn: AsyncConnection) -> None:
            await register_vector_async(conn)
            await conn.execute(
                "SELECT set_config('maintenance_work_mem', %s, false)",
                (settings.maintenance_work_mem,),
            )
            await conn.commit()

        pool = AsyncConnectionPool(
            url, min_size=settings.pool_min_size, max_size=settings.pool_max_size,
            timeout=settings.pool_timeout_s, configure=configure, open=False,
            check=AsyncConnectionPool.check_connection, name=f"memroute-{schema}",
        )
        await pool.open(wait=True, timeout=settings.pool_timeout_s)
        log.debug("memory.open", schema=schema, embedder=embedder.name,
                  reranker=getattr(reranker, "name", "none"))
        return cls(pool, schema=schema, embedder=embedder, reranker=reranker, settings=settings,
                   url=url)

    async def close(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> Memory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def reranker_name(self) -> str:
        return self.reranker.name if self.reranker else "none"

    # -- writes ---------------------------------------------------------------------------

    async def add(self, scope: Scope | dict, episodes: list[Episode | dict]) -> list[str]:
        """Store episodes atomically; idempotent by uid. Returns the uids, in input order."""
        prepared = await self._prepare_add(coerce_scope(scope), episodes)
        await self._commit_add(prepared)
        return prepared.uids

    async def add_batches(self, scope: Scope | dict,
                          batches: Iterable[list[Episode | dict]]) -> AsyncIterator[list[str]]:
        """Store batches in order, each atomically like `add`, yielding each batch's uids once
        it is stored. The next batch is embedded while the previous one is written, so a long
        ingestion runs at the embedder's pace. A bad batch raises when its turn comes; the
        batches before it stay stored."""
        scope = coerce_scope(scope)
        remaining = iter(batches)
        first = next(remaining, None)
        preparing = None if first is None else asyncio.ensure_future(
            self._prepare_add(scope, first))
        try:
            while preparing is not None:
                prepared = await preparing
                following = next(remaining, None)
                preparing = None if following is None else asyncio.ensure_future(
                    self._prepare_add(scope, following))
                await self._commit_add(prepared)
                yield prepared.uids
        finally:
            if preparing is not None and not preparing.done():
                preparing.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await preparing

    async def _prepare_add(self, scope: Scope, episodes: list[Episode | dict]) -> _PreparedAdd:
        """Validate, skip the uids stored already, split and embed; nothing is written."""
        if not isinstance(episodes, (list, tuple)):
            raise InvalidInputError("episodes must be a list")
        items = [coerce_episode(e, i) for i, e in enumerate(episodes)]
        prepared = _PreparedAdd(scope, [e.uid for e in items])
        unique: dict[str, Episode] = {}
        for episode in items:
            unique.setdefault(episode.uid, episode)
        if not unique:
            return prepared
        s = self.schema

        async def existing_uids() -> set[str]:
            async with self._pool.connection() as conn:
                cur = await conn.execute(
                    f"SELECT uid FROM {s}.episodes WHERE scope_key = %s AND uid = ANY(%s::text[])",
                    [scope.key, list(unique)],
                )
                return {row[0] for row in await cur.fetchall()}

        existing = await _with_retry(existing_uids, "add")
        prepared.skipped = len(existing)
        prepared.new = [e for uid, e in unique.items() if uid not in existing]
        if not prepared.new:
            return prepared
        prepared.sentences = [(e, i, text) for e in prepared.new
                              for i, text in enumerate(split_sentences(e.content))]
        vectors = await self.embedder.embed_documents([t for _, _, t in prepared.sentences])
        if getattr(vectors, "shape", None) != (len(prepared.sentences), self.embedder.dim):
            raise ModelUnavailableError(
                f"embedder {self.embedder.name} returned {getattr(vectors, 'shape', None)} "
                f"for {len(prepared.sentences)} sentences of dimension {self.embedder.dim}; "
                "nothing stored"
            )
        prepared.vectors = vectors
        return prepared

    async def _commit_add(self, prepared: _PreparedAdd) -> None:
        if not prepared.new:
            return
        await _with_retry(lambda: self._write(prepared.scope, prepared.new, prepared.sentences,
                                              prepared.vectors), "add")
        log.debug("memory.add", episodes=len(prepared.new), sentences=len(prepared.sentences),
                  skipped=prepared.skipped)

    async def _write(self, scope: Scope, episodes: list[Episode],
                     sentences: list[tuple[Episode, int, str]], vectors: np.ndarray) -> None:
        s = self.schema
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "CREATE TEMP TABLE _memroute_new (ord int, uid text, session_id text, producer text, "
                "produced_at timestamptz, content text, metadata jsonb) ON COMMIT DROP"
            )
            async with conn.cursor().copy(
                "COPY _memroute_new (ord, uid, session_id, producer, produced_at, content, metadata) "
                "FROM STDIN"
            ) as copy:
                for i, e in enumerate(episodes):
                    await copy.write_row([i, e.uid, e.session_id, e.producer, e.produced_at,
                                          e.content, json.dumps(e.metadata)])
            cur = await conn.execute(
                f"""
                INSERT INTO {s}.episodes (scope_key, org_id, project_id, user_id, agent_id, uid,
                                          session_id, producer, produced_at, content, metadata)
                SELECT %s, %s, %s, %s, %s, uid, session_id, producer, produced_at, content, metadata
                FROM _memroute_new ORDER BY ord
                ON CONFLICT (scope_key, uid) DO NOTHING
                RETURNING uid
                """,
                [scope.key, scope.org_id, scope.project_id, scope.user_id, scope.agent_id],
            )
            inserted = {row[0] for row in await cur.fetchall()}
            async with conn.cursor().copy(
                f"COPY {s}.sentences (scope_key, episode_uid, idx, text, embedding, session_id, "
                "producer, produced_at, metadata) FROM STDIN"
            ) as copy:
                for (e, idx, text), vector in zip(sentences, vectors, strict=True):
                    if e.uid in inserted:  # a concurrent add of the same uid wrote its own
                        await copy.write_row([scope.key, e.uid, idx, text, vector, e.session_id,
                                              e.producer, e.produced_at, json.dumps(e.metadata)])

    async def delete(self, scope: Scope | dict, *, session_id: str | None = None,
                     uids: list[str] | None = None) -> int:
        """Delete a session's episodes, the given uids, or (with neither) the whole scope.

        Sentences, embeddings and lexical entries go with their episodes. Returns the count.
        """
        scope = coerce_scope(scope)
        where, params = "scope_key = %s", [scope.key]
        if session_id is not None:
            if not isinstance(session_id, str) or not session_id:
                raise InvalidInputError("session_id must be a non-empty string")
            where += " AND session_id = %s"
            params.append(session_id)
        if uids is not None:
            if not isinstance(uids, (list, tuple)) or not all(isinstance(u, str) for u in uids):
                raise InvalidInputError("uids must be a list of strings")
            where += " AND uid = ANY(%s::text[])"
            params.append(list(uids))

        async def run() -> int:
            async with self._pool.connection() as conn:
                cur = await conn.execute(f"DELETE FROM {self.schema}.episodes WHERE {where}",
                                         params)
                return cur.rowcount

        count = await _with_retry(run, "delete")
        log.info("memory.delete", scope=scope.key, session_id=session_id,
                 uids=len(uids) if uids is not None else None, deleted=count)
        return count

    async def count(self, scope: Scope | dict) -> dict[str, int]:
        """How many episodes and sentences the scope holds."""
        scope = coerce_scope(scope)

        async def run() -> tuple[int, int]:
            async with self._pool.connection() as conn:
                cur = await conn.execute(
                    f"SELECT (SELECT count(*) FROM {self.schema}.episodes WHERE scope_key = %s), "
                    f"(SELECT count(*) FROM {self.schema}.sentences WHERE scope_key = %s)",
                    [scope.key, scope.key],
                )
                return await cur.fetchone()

        episodes, sentences = await _with_retry(run, "count")
        return {"episodes": episodes, "sentences": sentences}

    # -- search ---------------------------------------------------------------------------

    async def search_scored(
        self,
        scope: Scope | dict,
        query: str,
        k: int = 10,
        filters: dict[str, Any] | None = None,
        context: tuple[int, int] = (1, 2),
        queries: list[str] | None = None,
        *,
        candidates: int | None = None,
        lexical: bool | None = None,
        rerank: bool = True,
        fusion: str | None = None,
    ) -> SearchResults:
        """Declarative search: sentences -> nuclei -> neighbours -> dedup -> rerank -> top k.

        ``queries`` are extra queries the reranker also scores against (multi-query rerank);
        per candidate the scores are fused with ``fusion`` (``max`` by default).
        """
        scope = coerce_scope(scope)
        query = _check_query(query)
        k = _check_int(k, "k", 1, MAX_K)
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
        embeddings = await self.embed_queries(all_queries)
        timings["embed_ms"] = (time.perf_counter() - start) * 1000

        async def read():
            async with self._pool.connection() as conn, conn.transaction():
                t0 = time.perf_counter()
                hits = await sql.vector_lane(conn, self.schema, scope.key, embeddings[0],
                                             filters, limit)
                lexical_hits = (await sql.lexical_lane(conn, self.schema, scope.key, query,
                                                       filters, limit) if lexical else None)
                timings["probe_ms"] = (time.perf_counter() - t0) * 1000
                nuclei = sql.nuclei_from_hits(hits, lexical_hits)
                if not nuclei:
                    return nuclei, {}, {}, {}
                t0 = time.perf_counter()
                members, episodes = await sql.fetch_clusters(
                    conn, self.schema, scope.key, [n.uid for n in nuclei], before, after)
                # Stored vectors travel with each result, so a later multi-query rerank
                # (Memory.rerank) needs no second read of the store.
                stored = await sql.fetch_sentence_embeddings(conn, self.schema, scope.key,
                                                             list(episodes))
                timings["context_ms"] = (time.perf_counter() - t0) * 1000
                return nuclei, members, episodes, stored

        nuclei, members, episodes, stored = await _with_retry(read, "search")
        if not nuclei:
            return SearchResults([], timings, self.reranker_name)
        clusters = sql.merge_overlapping(nuclei, members)
        for cluster in clusters:  # lexical-only nuclei get their real cosine similarity
            if math.isnan(cluster.nucleus.vector_score):
                vectors = stored.get(cluster.nucleus.uid)
                cluster.nucleus.vector_score = (float((vectors @ embeddings[0]).max())
                                                if vectors is not None else 0.0)
        start = time.perf_counter()
        cluster_vectors = [self._stack([stored.get(u) for u in c.episode_uids]) for c in clusters]
        if rerank and self.reranker is not None:
            matrix = await self.reranker.score(
                [RerankQuery(q, e) for q, e in zip(all_queries, embeddings)],
                [RerankCandidate("\n".join(episodes[u].content for u in c.episode_uids), v)
                 for c, v in zip(clusters, cluster_vectors)],
            )
            scores = fuse_scores(matrix, fusion)
        else:
            scores = np.array([c.nucleus.vector_score for c in clusters], dtype=np.float32)
        timings["rerank_ms"] = (time.perf_counter() - start) * 1000
        ranked = sorted(zip(clusters, scores, cluster_vectors),
                        key=lambda item: -float(item[1]))[:k]
        results = [
            ScoredResult(
                nucleus=episodes[c.nucleus.uid],
                episodes=[episodes[u] for u in c.episode_uids],
                matched_sentence=c.nucleus.sentence,
                vector_score=float(c.nucleus.vector_score),
                rerank_score=float(score),
                lexical_score=c.nucleus.lexical_score,
                reranker=self.reranker_name if rerank else "none",
                query=query,
                sentence_embeddings=vectors,
            )
            for c, score, vectors in ranked
        ]
        return SearchResults(results, timings, self.reranker_name if rerank else "none")

    def _stack(self, parts: list[np.ndarray | None]) -> np.ndarray:
        present = [p for p in parts if p is not None]
        return np.vstack(present) if present else np.zeros((0, self.embedder.dim), np.float32)

    async def rerank(self, results: list[ScoredResult], queries: list[str], k: int,
                     *, mode: str = "fused", fusion: str | None = None) -> list[ScoredResult]:
        """Rerank pooled results against every query, without reading the store.

        ``mode="fused"`` scores each candidate against each query and fuses the scores
        (``fusion``, ``max`` by default); ``mode="concat"`` is MemMachine's variant: one
        query string made of all queries joined.
        """
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
        candidates = [
            RerankCandidate(r.text, r.sentence_embeddings if r.sentence_embeddings is not None
                            else np.zeros((0, self.embedder.dim), np.float32))
            for r in results
        ]
        matrix = await self.reranker.score(
            [RerankQuery(t, e) for t, e in zip(texts, embeddings)], candidates)
        scores = fuse_scores(matrix, fusion or self.settings.rerank_fusion)
        order = sorted(range(len(results)), key=lambda i: -float(scores[i]))[:k]
        return [replace(results[i], rerank_score=float(scores[i])) for i in order]
