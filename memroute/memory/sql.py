"""The SQL of declarative search: vector and lexical lanes, nuclei, context windows, stored
embeddings."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import numpy as np
import psycopg
from psycopg import AsyncConnection
from psycopg.errors import QueryCanceled
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from memroute._log import get_logger
from memroute.memory.filters import compile_filter
from memroute.memory.limits import LEXICAL_CANDIDATES, MAX_LEXICAL_TERMS
from memroute.memory.models import Episode

RRF_K = 60
EF_SEARCH_RANGE = (40, 1000)  # pgvector accepts hnsw.ef_search in 1..1000
MAX_SCAN_TUPLES = 20_000  # pgvector's default bound of one iterative scan

log = get_logger(__name__)


@dataclass
class SentenceHit:
    episode_uid: str
    text: str
    score: float  # cosine similarity for the vector lane, ts_rank_cd for the lexical lane


@dataclass
class Nucleus:
    uid: str
    sentence: str
    vector_score: float
    lexical_score: float | None = None
    fused: float = 0.0


def _probe_cte(schema: str, where: str) -> str:
    """``hits``: the HNSW probe (parameters: query vector, scope key, the filter's, query
    vector, limit)."""
    return f"""hits AS MATERIALIZED (
            SELECT s.episode_uid, s.text, s.embedding <=> %s AS distance
            FROM {schema}.sentences s
            WHERE s.scope_key = %s AND {where}
            ORDER BY s.embedding <=> %s
            LIMIT %s
        )"""


async def vector_lane(conn: AsyncConnection, schema: str, scope_key: str, embedding: np.ndarray,
                      filters: dict | None, limit: int, *,
                      max_scan_tuples: int = MAX_SCAN_TUPLES) -> list[SentenceHit]:
    """The ``limit`` nearest sentences in the scope that pass the filters (HNSW, iterative).

    ``hnsw.ef_search`` is clamped to pgvector's range; the iterative scan goes on past it
    until ``limit`` rows pass the filters or ``max_scan_tuples`` index tuples were visited.
    """
    where, params = compile_filter(filters, "s")
    await conn.execute(*hnsw_settings(limit, max_scan_tuples))
    cur = await conn.execute(
        f"WITH {_probe_cte(schema, where)} SELECT episode_uid, text, distance FROM hits "
        "ORDER BY distance",
        [embedding, scope_key, *params, embedding, limit],
    )
    return [SentenceHit(uid, text, 1.0 - float(dist)) for uid, text, dist in await cur.fetchall()]


async def lexical_lane(conn: AsyncConnection, schema: str, scope_key: str, query: str,
                       filters: dict | None, limit: int) -> list[SentenceHit] | None:
    """Full-text matches of any query term (OR), ranked by ``ts_rank_cd``; ``None`` when the
    statement ran past its ``statement_timeout`` (the search goes on without this lane).

    Bounded whatever the query: only its first ``MAX_LEXICAL_TERMS`` distinct terms count,
    and only a candidate set of at most ``LEXICAL_CANDIDATES`` matching sentences is ranked,
    shared out between the terms, so a rare term's matches are all ranked and a common term
    contributes an arbitrary share of its own.
    """
    where, params = compile_filter(filters, "s")
    try:
        async with conn.transaction():  # a savepoint: a timeout leaves the search usable
            cur = await conn.execute(
                f"""
                WITH terms AS MATERIALIZED (
                    SELECT term, min(ord) AS ord
                    FROM unnest(string_to_array(plainto_tsquery('english', %s)::text, ' & '))
                         WITH ORDINALITY AS u(term, ord)
                    WHERE term <> ''
                    GROUP BY term ORDER BY min(ord) LIMIT %s
                ), q AS (
                    SELECT string_agg(term, ' | ' ORDER BY ord)::tsquery AS q,
                           greatest(%s / nullif(count(*), 0), 1) AS per_term
                    FROM terms
                ), candidates AS (
                    SELECT DISTINCT ON (c.episode_uid, c.idx) c.episode_uid, c.text, c.tsv
                    FROM terms t CROSS JOIN LATERAL (
                        SELECT s.episode_uid, s.idx, s.text, s.tsv FROM {schema}.sentences s
                        WHERE s.scope_key = %s AND s.tsv @@ t.term::tsquery AND {where}
                        LIMIT (SELECT per_term FROM q)
                    ) c
                )
                SELECT c.episode_uid, c.text, ts_rank_cd(c.tsv, q.q) AS rank
                FROM candidates c, q
                ORDER BY rank DESC
                LIMIT %s
                """,
                [query, MAX_LEXICAL_TERMS, LEXICAL_CANDIDATES, scope_key, *params, limit],
            )
            rows = await cur.fetchall()
    except QueryCanceled as exc:
        log.warning("memory.lexical_lane_timeout", scope=scope_key, query_chars=len(query),
                    error=str(exc).splitlines()[0])
        return None
    return [SentenceHit(uid, text, float(rank)) for uid, text, rank in rows]


def nuclei_from_hits(vector_hits: list[SentenceHit],
                     lexical_hits: list[SentenceHit] | None) -> list[Nucleus]:
    """Distinct episodes from sentence hits, best first (RRF when there are two lanes)."""
    nuclei: dict[str, Nucleus] = {}
    for rank, hit in enumerate(vector_hits):
        if hit.episode_uid not in nuclei:
            nuclei[hit.episode_uid] = Nucleus(hit.episode_uid, hit.text, hit.score,
                                              fused=1.0 / (RRF_K + rank + 1))
    return with_lexical_hits(list(nuclei.values()), lexical_hits)


def with_lexical_hits(nuclei: list[Nucleus], lexical_hits: list[SentenceHit] | None,
                      ) -> list[Nucleus]:
    """The vector lane's ``nuclei`` fused with the lexical lane's hits (RRF), best first;
    lexical-only episodes get a NaN vector score."""
    by_uid = {n.uid: n for n in nuclei}
    for nucleus, hit in fuse_lane(by_uid, lexical_hits or [], lambda hit: float("nan")):
        nucleus.lexical_score = hit.score
    return sorted(by_uid.values(), key=lambda n: -n.fused)


def fuse_lane(nuclei: dict[str, Nucleus], hits: list[SentenceHit],
              vector_score: Callable[[SentenceHit], float]) -> list[tuple[Nucleus, SentenceHit]]:
    """Add one more lane's reciprocal ranks to ``nuclei`` (by episode uid, in place; an
    episode counts once, at its best hit). An episode the nuclei lack is added with
    ``vector_score(hit)``. Returns each nucleus the lane reached with its hit."""
    reached: list[tuple[Nucleus, SentenceHit]] = []
    seen: set[str] = set()
    for rank, hit in enumerate(hits):
        if hit.episode_uid in seen:
            continue
        seen.add(hit.episode_uid)
        nucleus = nuclei.get(hit.episode_uid)
        if nucleus is None:
            nucleus = nuclei[hit.episode_uid] = Nucleus(hit.episode_uid, hit.text,
                                                        vector_score(hit))
        nucleus.fused += 1.0 / (RRF_K + rank + 1)
        reached.append((nucleus, hit))
    return reached


async def exact_lane(conn: AsyncConnection, schema: str, scope_key: str,
                     embedding: np.ndarray, filters: dict | None,
                     limit: int) -> list[SentenceHit]:
    """The ``limit`` nearest sentences in the scope that pass the filters, by an exact scan of
    the filtered sentences (no HNSW index: ``OFFSET 0`` keeps the planner from ordering by it).
    Its cost grows with the filtered rows, so it serves only what the index cannot settle."""
    where, params = compile_filter(filters, "s")
    cur = await conn.execute(
        f"""
        SELECT episode_uid, text, distance FROM (
            SELECT s.episode_uid, s.text, s.embedding <=> %s AS distance
            FROM {schema}.sentences s
            WHERE s.scope_key = %s AND {where}
            OFFSET 0
        ) filtered
        ORDER BY distance
        LIMIT %s
        """,
        [embedding, scope_key, *params, limit],
    )
    return [SentenceHit(uid, text, 1.0 - float(dist)) for uid, text, dist in await cur.fetchall()]


async def probe_nuclei(conn: AsyncConnection, schema: str, scope_key: str,
                       embedding: np.ndarray, query: str, filters: dict | None, *, k: int,
                       limit: int, lexical: bool) -> list[Nucleus]:
    """The candidate nuclei of a search, best first: at least ``k`` distinct episodes when the
    scope (after filters) holds that many.

    The probe is sentence-level, so ``limit`` hits may name fewer than ``k`` episodes; then it
    probes again with four times the limit (and a longer iterative scan). A probe that comes
    back short proves nothing by itself: the index scan also stops after
    ``hnsw.max_scan_tuples`` visited tuples, which a selective filter can reach before
    ``limit`` rows pass. So a short probe is settled by `exact_lane` over the filtered
    sentences: only when that too comes back short is the scope exhausted.
    """
    lexical_hits = (await lexical_lane(conn, schema, scope_key, query, filters, limit)
                    if lexical else None)
    scan, exact = MAX_SCAN_TUPLES, False
    while True:
        if exact:
            hits = await exact_lane(conn, schema, scope_key, embedding, filters, limit)
        else:
            hits = await vector_lane(conn, schema, scope_key, embedding, filters, limit,
                                     max_scan_tuples=scan)
        nuclei = nuclei_from_hits(hits, lexical_hits)
        if len(nuclei) >= k:
            return nuclei
        if len(hits) < limit:
            if exact:
                return nuclei  # the exact scan found every filtered sentence: exhausted
            exact = True
            continue
        limit, scan = limit * 4, scan * 4


_EPISODE_COLUMNS = "e.uid, e.seq, e.session_id, e.producer, e.produced_at, e.content, e.metadata"


class EpisodeRow(NamedTuple):
    """An episode as the search read it. A search with context reads ~4 episodes per
    candidate and returns k results' windows, so `episode` is built for those only."""

    uid: str
    session_id: str
    producer: str
    produced_at: datetime
    content: str
    metadata: dict | None

    def episode(self) -> Episode:
        """The `Episode`, not validated again: it was validated when it was written."""
        return Episode.model_construct(uid=self.uid, session_id=self.session_id,
                                       producer=self.producer, produced_at=self.produced_at,
                                       content=self.content, metadata=self.metadata or {})


def _row(row: dict) -> EpisodeRow:
    return EpisodeRow(row["uid"], row["session_id"], row["producer"], row["produced_at"],
                      row["content"], row["metadata"])


def _vectors(packed: list[bytes]) -> list[np.ndarray]:
    """Per episode, its rows of ``string_agg(vector_send(embedding), '')``: each vector is
    pgvector's binary form, a 4-byte header (dimension, unused) then big-endian float4s.
    Decoded in one array for all episodes."""
    if not packed:
        return []
    width = int.from_bytes(packed[0][:2], "big") + 1  # in float4s, with the header
    every = np.frombuffer(b"".join(packed), dtype=">f4").reshape(-1, width)[:, 1:]
    every = every.astype(np.float32)
    counts = np.array([len(p) for p in packed]) // (4 * width)
    return np.split(every, np.cumsum(counts)[:-1])


async def fetch_clusters(conn: AsyncConnection, schema: str, scope_key: str, uids: list[str],
                         before: int, after: int,
                         ) -> tuple[dict[str, list[str]], dict[str, EpisodeRow]]:
    """For each nucleus uid, its context window (itself and its neighbours in its session,
    in session order), and every episode found."""
    cur = conn.cursor(row_factory=dict_row)
    if before == 0 and after == 0:  # no context: a plain primary-key lookup
        await cur.execute(
            f"SELECT e.uid AS nucleus, {_EPISODE_COLUMNS} FROM {schema}.episodes e "
            "WHERE e.scope_key = %s AND e.uid = ANY(%s::text[])",
            [scope_key, uids],
        )
        rows = await cur.fetchall()
        return {r["uid"]: [r["uid"]] for r in rows}, {r["uid"]: _row(r) for r in rows}
    await cur.execute(
        f"WITH nuclei AS (SELECT unnest(%s::text[]) AS uid) {_window_sql(schema)}",
        [uids, scope_key, before, after],
    )
    members: dict[str, list[tuple[object, int, str]]] = {}
    episodes: dict[str, EpisodeRow] = {}
    for row in await cur.fetchall():
        members.setdefault(row["nucleus"], []).append((row["produced_at"], row["seq"], row["uid"]))
        if row["uid"] not in episodes:
            episodes[row["uid"]] = _row(row)
    clusters = {n: [uid for _, _, uid in sorted(m)] for n, m in members.items()}
    return clusters, episodes


async def fetch_sentence_embeddings(conn: AsyncConnection, schema: str, scope_key: str,
                                    uids: list[str]) -> dict[str, np.ndarray]:
    """The stored sentence embeddings of each episode, as a matrix per episode uid."""
    cur = await conn.execute(
        f"SELECT episode_uid, embedding FROM {schema}.sentences "
        "WHERE scope_key = %s AND episode_uid = ANY(%s::text[]) ORDER BY episode_uid, idx",
        [scope_key, uids],
        binary=True,  # binary vectors load ~10x faster than parsing their text form
    )
    rows: dict[str, list[np.ndarray]] = {}
    for uid, embedding in await cur.fetchall():
        vector = embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding
        rows.setdefault(uid, []).append(np.asarray(vector, dtype=np.float32))
    return {uid: np.vstack(vectors) for uid, vectors in rows.items()}


@dataclass
class SearchRead:
    """What one search statement read: the vector lane's nuclei (best first, each at its
    best sentence's rank among the ``hits`` sentence hits), their context windows, every
    episode in them and those episodes' stored sentence vectors."""

    hits: int
    nuclei: list[Nucleus]
    windows: dict[str, list[str]]
    episodes: dict[str, EpisodeRow]
    vectors: dict[str, np.ndarray]


def _window_sql(schema: str) -> str:
    """The members of each nucleus's window, from ``nuclei(uid)`` (parameters: scope key,
    before, after)."""
    return f"""
        SELECT n.uid AS nucleus, e.*
        FROM nuclei n
        JOIN {schema}.episodes x ON x.scope_key = %s AND x.uid = n.uid
        CROSS JOIN LATERAL (
            (SELECT * FROM {schema}.episodes b
             WHERE b.scope_key = x.scope_key AND b.session_id = x.session_id
               AND (b.produced_at, b.seq) < (x.produced_at, x.seq)
             ORDER BY b.produced_at DESC, b.seq DESC LIMIT %s)
            UNION ALL
            (SELECT x.*)
            UNION ALL
            (SELECT * FROM {schema}.episodes a
             WHERE a.scope_key = x.scope_key AND a.session_id = x.session_id
               AND (a.produced_at, a.seq) > (x.produced_at, x.seq)
             ORDER BY a.produced_at, a.seq LIMIT %s)
        ) e"""


def search_statement(schema: str, scope_key: str, embedding: np.ndarray,
                     filters: dict | None, *, limit: int, before: int,
                     after: int) -> tuple[str, list]:
    """The statement of `read_search` and its parameters (the bench EXPLAINs it)."""
    where, params = compile_filter(filters, "s")
    no_context = before == 0 and after == 0
    members = ("SELECT n.uid AS nucleus, x.* FROM nuclei n JOIN "
               f"{schema}.episodes x ON x.scope_key = %s AND x.uid = n.uid"
               if no_context else _window_sql(schema))
    statement = f"""
        WITH {_probe_cte(schema, where)}, nuclei AS MATERIALIZED (
            SELECT DISTINCT ON (episode_uid) episode_uid AS uid, text, distance, rank
            FROM (SELECT *, row_number() OVER (ORDER BY distance) - 1 AS rank FROM hits) r
            ORDER BY episode_uid, distance
        ), members AS MATERIALIZED ({members}
        ), vectors AS (
            SELECT s.episode_uid,
                   string_agg(vector_send(s.embedding), ''::bytea ORDER BY s.idx) AS embeddings
            FROM {schema}.sentences s
            WHERE s.scope_key = %s AND s.episode_uid IN (SELECT DISTINCT m.uid FROM members m)
            GROUP BY s.episode_uid
        )
        SELECT m.nucleus, n.text, n.distance, n.rank, (SELECT count(*) FROM hits),
               m.uid, m.session_id, m.producer, m.produced_at, m.content, m.metadata,
               v.embeddings
        FROM members m JOIN nuclei n ON n.uid = m.nucleus
        LEFT JOIN vectors v ON v.episode_uid = m.uid
        ORDER BY n.distance, m.produced_at, m.seq
        """
    window_args = [scope_key] if no_context else [scope_key, before, after]
    return statement, [embedding, scope_key, *params, embedding, limit, *window_args, scope_key]


def hnsw_settings(limit: int, max_scan_tuples: int | None = None) -> tuple[str, tuple]:
    """The transaction's HNSW settings for a probe of ``limit`` rows: ``hnsw.ef_search``
    clamped to pgvector's range, the iterative scan on, bounded by ``max_scan_tuples``
    (`MAX_SCAN_TUPLES` by default)."""
    ef_search = min(max(limit, EF_SEARCH_RANGE[0]), EF_SEARCH_RANGE[1])
    max_scan_tuples = MAX_SCAN_TUPLES if max_scan_tuples is None else max_scan_tuples
    return ("SELECT set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.max_scan_tuples', %s, true)",
            (str(ef_search), str(max_scan_tuples)))


def statement_timeout(timeout_ms: int) -> tuple[str, tuple]:
    """The transaction's bound on each search statement's database time."""
    return "SELECT set_config('statement_timeout', %s, true)", (str(timeout_ms),)


async def read_search(conn: AsyncConnection, schema: str, scope_key: str,
                      embedding: np.ndarray, filters: dict | None, *, limit: int,
                      before: int, after: int, timeout_ms: int) -> SearchRead:
    """The vector probe, its nuclei, their context windows and the windows' stored vectors in
    one statement, sent with its HNSW settings and statement timeout in one round trip
    (pipeline mode).

    ``hits`` is how many sentence hits the probe found (fewer than ``limit``: the scope,
    after filters, is exhausted, or the scan reached ``hnsw.max_scan_tuples``)."""
    statement, params = search_statement(schema, scope_key, embedding, filters, limit=limit,
                                         before=before, after=after)
    cur = conn.cursor(binary=True)
    # BEGIN, the transaction's HNSW settings, the statement and COMMIT in one pipeline, sent
    # by hand in autocommit mode: psycopg's own BEGIN (implicit or `conn.transaction()`)
    # would wait for the server once more.
    autocommit = conn.autocommit
    await conn.set_autocommit(True)
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN")
            await conn.execute(*statement_timeout(timeout_ms))
            await conn.execute(*hnsw_settings(limit))
            await cur.execute(statement, params)
            await conn.execute("COMMIT")
    finally:
        if conn.info.transaction_status != TransactionStatus.IDLE:  # the pipeline failed
            with contextlib.suppress(psycopg.Error):
                await conn.execute("ROLLBACK")
        if conn.info.transaction_status == TransactionStatus.IDLE:
            await conn.set_autocommit(autocommit)
    nuclei: dict[str, Nucleus] = {}
    windows: dict[str, list[str]] = {}
    episodes: dict[str, EpisodeRow] = {}
    packed: dict[str, bytes] = {}
    hits = 0
    for nucleus, text, distance, rank, hits, *row, embeddings in await cur.fetchall():
        if nucleus not in nuclei:
            nuclei[nucleus] = Nucleus(nucleus, text, 1.0 - float(distance),
                                      fused=1.0 / (RRF_K + rank + 1))
        uid = row[0]
        windows.setdefault(nucleus, []).append(uid)
        if uid not in episodes:
            episodes[uid] = EpisodeRow(*row)
            if embeddings:
                packed[uid] = embeddings
    vectors = dict(zip(packed, _vectors(list(packed.values()))))
    return SearchRead(hits, list(nuclei.values()), windows, episodes, vectors)
