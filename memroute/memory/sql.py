"""The SQL of declarative search: vector and lexical lanes, nuclei, context windows, stored
embeddings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from psycopg import AsyncConnection
from psycopg.rows import dict_row

from memroute.memory.filters import compile_filter
from memroute.memory.models import Episode

RRF_K = 60
EF_SEARCH_RANGE = (40, 1000)  # pgvector accepts hnsw.ef_search in 1..1000
MAX_SCAN_TUPLES = 20_000  # pgvector's default bound of one iterative scan


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
                       filters: dict | None, limit: int) -> list[SentenceHit]:
    """Full-text matches of any query term (OR), ranked by ``ts_rank_cd``."""
    where, params = compile_filter(filters, "s")
    cur = await conn.execute(
        f"""
        WITH q AS (
            SELECT nullif(replace(plainto_tsquery('english', %s)::text, '&', '|'), '')::tsquery AS q
        )
        SELECT s.episode_uid, s.text, ts_rank_cd(s.tsv, q.q) AS rank
        FROM {schema}.sentences s, q
        WHERE q.q IS NOT NULL AND s.scope_key = %s AND s.tsv @@ q.q AND {where}
        ORDER BY rank DESC
        LIMIT %s
        """,
        [query, scope_key, *params, limit],
    )
    return [SentenceHit(uid, text, float(rank)) for uid, text, rank in await cur.fetchall()]


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
