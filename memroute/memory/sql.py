"""The SQL of declarative search: vector and lexical lanes, nuclei, context windows, stored
embeddings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from psycopg import AsyncConnection
from psycopg.errors import QueryCanceled
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


async def vector_lane(conn: AsyncConnection, schema: str, scope_key: str, embedding: np.ndarray,
                      filters: dict | None, limit: int, *,
                      max_scan_tuples: int = MAX_SCAN_TUPLES) -> list[SentenceHit]:
    """The ``limit`` nearest sentences in the scope that pass the filters (HNSW, iterative).

    ``hnsw.ef_search`` is clamped to pgvector's range; the iterative scan goes on past it
    until ``limit`` rows pass the filters or ``max_scan_tuples`` index tuples were visited.
    """
    where, params = compile_filter(filters, "s")
    ef_search = min(max(limit, EF_SEARCH_RANGE[0]), EF_SEARCH_RANGE[1])
    await conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.max_scan_tuples', %s, true)",
        (str(ef_search), str(max(max_scan_tuples, MAX_SCAN_TUPLES))),
    )
    cur = await conn.execute(
        f"""
        WITH hits AS MATERIALIZED (
            SELECT s.episode_uid, s.text, s.embedding <=> %s AS distance
            FROM {schema}.sentences s
            WHERE s.scope_key = %s AND {where}
            ORDER BY s.embedding <=> %s
            LIMIT %s
        )
        SELECT episode_uid, text, distance FROM hits ORDER BY distance
        """,
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
    for nucleus, hit in fuse_lane(nuclei, lexical_hits or [], lambda hit: float("nan")):
        nucleus.lexical_score = hit.score
    return sorted(nuclei.values(), key=lambda n: -n.fused)


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


async def probe_nuclei(conn: AsyncConnection, schema: str, scope_key: str,
                       embedding: np.ndarray, query: str, filters: dict | None, *, k: int,
                       limit: int, lexical: bool) -> list[Nucleus]:
    """The candidate nuclei of a search, best first: at least ``k`` distinct episodes when the
    scope (after filters) holds that many.

    The probe is sentence-level, so ``limit`` hits may name fewer than ``k`` episodes; then it
    probes again with four times the limit (and a longer iterative scan) until ``k`` episodes
    are found or the probe comes back short, i.e. the scope is exhausted.
    """
    lexical_hits = (await lexical_lane(conn, schema, scope_key, query, filters, limit)
                    if lexical else None)
    scan = MAX_SCAN_TUPLES
    while True:
        hits = await vector_lane(conn, schema, scope_key, embedding, filters, limit,
                                 max_scan_tuples=scan)
        nuclei = nuclei_from_hits(hits, lexical_hits)
        if len(nuclei) >= k or len(hits) < limit:
            return nuclei
        limit, scan = limit * 4, scan * 4


_EPISODE_COLUMNS = "e.uid, e.seq, e.session_id, e.producer, e.produced_at, e.content, e.metadata"


def _episode(row: dict) -> Episode:
    return Episode(uid=row["uid"], session_id=row["session_id"], producer=row["producer"],
                   produced_at=row["produced_at"], content=row["content"],
                   metadata=row["metadata"] or {})


async def fetch_clusters(conn: AsyncConnection, schema: str, scope_key: str, uids: list[str],
                         before: int, after: int) -> tuple[dict[str, list[str]], dict[str, Episode]]:
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
        return {r["uid"]: [r["uid"]] for r in rows}, {r["uid"]: _episode(r) for r in rows}
    await cur.execute(
        f"""
        SELECT n.uid AS nucleus, {_EPISODE_COLUMNS}
        FROM unnest(%s::text[]) AS n(uid)
        JOIN {schema}.episodes x ON x.scope_key = %s AND x.uid = n.uid
        CROSS JOIN LATERAL (
            (SELECT * FROM {schema}.episodes b
             WHERE b.scope_key = x.scope_key AND b.session_id = x.session_id
               AND (b.produced_at, b.seq) < (x.produced_at, x.seq)
             ORDER BY b.produced_at DESC, b.seq DESC LIMIT %s)
            UNION ALL
            (SELECT * FROM {schema}.episodes c WHERE c.scope_key = x.scope_key AND c.uid = x.uid)
            UNION ALL
            (SELECT * FROM {schema}.episodes a
             WHERE a.scope_key = x.scope_key AND a.session_id = x.session_id
               AND (a.produced_at, a.seq) > (x.produced_at, x.seq)
             ORDER BY a.produced_at, a.seq LIMIT %s)
        ) e
        """,
        [uids, scope_key, before, after],
    )
    members: dict[str, list[tuple[object, int, str]]] = {}
    episodes: dict[str, Episode] = {}
    for row in await cur.fetchall():
        members.setdefault(row["nucleus"], []).append((row["produced_at"], row["seq"], row["uid"]))
        if row["uid"] not in episodes:
            episodes[row["uid"]] = _episode(row)
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
