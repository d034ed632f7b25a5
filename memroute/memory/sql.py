"""The SQL of declarative search: vector and lexical lanes, nuclei, context windows, stored
embeddings."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import NamedTuple

import numpy as np
import psycopg
from psycopg import AsyncConnection
from psycopg.errors import QueryCanceled
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from memroute._log import get_logger
from memroute.memory.bounds import ReadBound
from memroute.memory.limits import (
    LEXICAL_CANDIDATES,
    LEXICAL_COMMON_FREQ,
    LEXICAL_RARE_TERMS,
    MAX_LEXICAL_TERMS,
)
from memroute.memory.models import Episode
from memroute.memory.tiers import shared_table

RRF_K = 60
EF_SEARCH_RANGE = (40, 1000)  # pgvector accepts hnsw.ef_search in 1..1000
MAX_SCAN_TUPLES = 20_000  # pgvector's default bound of one iterative scan

log = get_logger(__name__)


@dataclass
class SentenceHit:
    episode_uid: str
    text: str
    score: float  # cosine similarity (vector, entity lanes), summed term IDF (lexical lane)


@dataclass
class Nucleus:
    uid: str
    sentence: str
    vector_score: float
    lexical_score: float | None = None
    fused: float = 0.0
    lanes_fused: float = 0.0  # the part of `fused` from lanes other than the vector probe


def _probe_cte(schema: str, where: str) -> str:
    """``hits``: the vector probe, through the scope's own HNSW index or an exact scan of its
    rows (`memroute.memory.tiers`; parameters: query vector, scope key, the bound's
    (``where``), query vector, limit). A zero vector (no direction, NaN distance, left out of an HNSW
    index) is near nothing: an exact scan sorts it last, and it is dropped."""
    return f"""hits AS MATERIALIZED (
            SELECT * FROM (
                SELECT s.episode_uid, s.text, s.embedding <=> %s AS distance
                FROM {schema}.sentences s
                WHERE s.scope_key = %s AND {where}
                ORDER BY s.embedding <=> %s
                LIMIT %s
            ) nearest
            WHERE distance <> 'NaN'::float8
        )"""


async def vector_lane(conn: AsyncConnection, schema: str, scope_key: str, embedding: np.ndarray,
                      bound: ReadBound, limit: int, *, match: Sequence[dict] = (),
                      max_scan_tuples: int = MAX_SCAN_TUPLES) -> list[SentenceHit]:
    """The ``limit`` nearest sentences in the scope within ``bound`` that meet ``match``
    (HNSW, iterative).

    ``hnsw.ef_search`` is clamped to pgvector's range; the iterative scan goes on past it
    until ``limit`` rows pass the filters or ``max_scan_tuples`` index tuples were visited.
    """
    where, params = bound.sentences("s", match)
    await conn.execute(*hnsw_settings(limit, max_scan_tuples))
    # never prepared: a plan for any scope could not be pruned to the scope's own leaf
    # (memroute.memory.tiers) while planning
    cur = await conn.execute(
        f"WITH {_probe_cte(schema, where)} SELECT episode_uid, text, distance FROM hits "
        "ORDER BY distance",
        [embedding, scope_key, *params, embedding, limit], prepare=False,
    )
    return [SentenceHit(uid, text, 1.0 - float(dist)) for uid, text, dist in await cur.fetchall()]


@dataclass(frozen=True)
class Lane:
    """A lane besides the vector probe, as common table expressions for `search_statement`:
    ``ctes`` ends with one named ``name`` of the lane's sentence hits ``(episode_uid, text,
    score, rank)``, ``rank`` 0 for the best; ``params`` are its parameters in order.
    ``order`` says which lane names a nucleus found by several (the lowest)."""

    name: str
    order: int
    ctes: str
    params: list


LEXICAL_ORDER, ENTITY_ORDER = 1, 2


class TermStats(NamedTuple):
    """The full-text column's most common terms and each one's share of the sentences, as
    ``ANALYZE`` last recorded them (``pg_stats``), as Postgres array literals: sent back as
    they came, a search's parameters cost the client nothing to encode. Both ``{}`` before
    the first ``ANALYZE``; ``freqs`` ends with two more entries, the lowest and the highest
    share."""

    terms: str
    freqs: str


# How long a `Memory` searches with the term statistics it read (`TermStats`): they change
# only when the table is analyzed, and reading them in every statement cost ~1 ms of
# planning and execution per search.
TERM_STATS_MAX_AGE_S = 60.0
# Read from the first shared leaves of the partitioned table (memroute.memory.tiers), which
# autovacuum analyzes: each holds a random share of the small scopes. The table's own
# statistics (of an explicit ANALYZE of it: autovacuum never analyzes a partitioned table)
# serve a store whose shared leaves hold none.
_STATS_TABLES = ", ".join(f"'{shared_table(b)}'" for b in range(8))
_TERM_STATS = f"""SELECT p.most_common_elems::text AS elems,
                   p.most_common_elem_freqs::text AS freqs
            FROM pg_stats p
            WHERE p.schemaname = %s AND p.attname = 'tsv' AND p.most_common_elems IS NOT NULL
              AND p.tablename IN ({_STATS_TABLES}, 'sentences')
            ORDER BY p.tablename = 'sentences', p.tablename LIMIT 1"""
# the same read inside the lane's statement, when a search has no statistics yet
_TERM_STATS_CTE = (f"SELECT t.elems::text[] AS elems, t.freqs::float4[] AS freqs "
                   f"FROM ({_TERM_STATS}) t")


def term_stats_of(row: tuple | None) -> TermStats:
    """`TermStats` from a row of ``_TERM_STATS`` (``None``: no statistics yet)."""
    if row is None or row[0] is None:
        return TermStats("{}", "{}")
    return TermStats(row[0], row[1])


def lexical_lane_sql(schema: str, scope_key: str, query: str, bound: ReadBound,
                     limit: int, stats: TermStats | None = None, *,
                     match: Sequence[dict] = ()) -> Lane:
    """The full-text lane: the ``limit`` sentences within ``bound`` (meeting ``match``) best
    matching the query's rarest terms,
    scored by the summed IDF (``-ln`` of the share of sentences holding it) of the terms
    each one holds, shorter sentences first on ties.

    Of the query's first ``MAX_LEXICAL_TERMS`` distinct terms, a term in more than
    ``LEXICAL_COMMON_FREQ`` of the stored sentences is dropped (unless every term is), and
    only the ``LEXICAL_RARE_TERMS`` rarest are searched: a common term matches thousands of
    sentences and barely tells them apart. Frequencies are the ones ``ANALYZE`` keeps for
    the ``tsv`` column (``pg_stats.most_common_elems``, its most common lexemes): ``stats``
    as the caller last read them, else read by the statement itself; a term not among them
    counts as half as frequent as the rarest listed one, and a table not analyzed yet keeps
    the query's first terms (all scored alike). At most ``LEXICAL_CANDIDATES`` matching
    sentences are scored, an equal share per searched term (a constant, so the planner knows
    the bound and takes the term's index).
    """
    where, params = bound.sentences("s", match)
    read_stats = (_TERM_STATS_CTE if stats is None
                  else "SELECT %s::text[] AS elems, %s::float4[] AS freqs")
    ctes = f"""lexical_stats AS MATERIALIZED (
            {read_stats}
        ), lexical_terms AS MATERIALIZED (
            SELECT term, -ln(greatest(freq, 1e-6)) AS idf FROM (
                SELECT t.term,
                       coalesce(f.freq, (SELECT freqs[cardinality(elems) + 1] / 2
                                         FROM lexical_stats), 0) AS freq,
                       row_number() OVER (ORDER BY coalesce(f.freq, 0), t.ord) AS rarity
                FROM (SELECT term, min(ord) AS ord
                      FROM unnest(string_to_array(plainto_tsquery('english', %s)::text, ' & '))
                           WITH ORDINALITY AS u(term, ord)
                      WHERE term <> ''
                      GROUP BY term ORDER BY min(ord) LIMIT %s) t
                LEFT JOIN (SELECT e.elem, e.freq
                           FROM lexical_stats, unnest(elems, freqs) AS e(elem, freq)) f
                       ON f.elem = btrim(t.term, '''')
            ) ranked
            WHERE rarity <= %s AND (freq <= %s OR rarity = 1)
        ), lexical_matches AS (
            SELECT c.episode_uid, c.idx, c.text, t.idf
            FROM lexical_terms t CROSS JOIN LATERAL (
                SELECT s.episode_uid, s.idx, s.text FROM {schema}.sentences s
                WHERE s.scope_key = %s AND s.tsv @@ t.term::tsquery AND {where}
                LIMIT %s
            ) c
        ), lexical AS (
            SELECT episode_uid, text, score,
                   row_number() OVER (ORDER BY score DESC, length(text)) - 1 AS rank
            FROM (SELECT episode_uid, min(text) AS text, sum(idf) AS score
                  FROM lexical_matches GROUP BY episode_uid, idx) m
            ORDER BY rank
            LIMIT %s
        )"""
    return Lane("lexical", LEXICAL_ORDER, ctes,
                [*([schema] if stats is None else stats), query, MAX_LEXICAL_TERMS,
                 LEXICAL_RARE_TERMS, LEXICAL_COMMON_FREQ, scope_key, *params,
                 LEXICAL_CANDIDATES // LEXICAL_RARE_TERMS, limit])


async def lane_hits(conn: AsyncConnection, lane: Lane) -> list[SentenceHit]:
    """One lane's sentence hits on their own, best first."""
    cur = await conn.execute(f"WITH {lane.ctes} SELECT episode_uid, text, score "
                             f"FROM {lane.name} ORDER BY rank", lane.params)
    return [SentenceHit(uid, text, float(score)) for uid, text, score in await cur.fetchall()]


async def lexical_lane(conn: AsyncConnection, schema: str, scope_key: str, query: str,
                       bound: ReadBound, limit: int) -> list[SentenceHit] | None:
    """The full-text lane's hits on their own (`lexical_lane_sql`); ``None`` when the
    statement ran past its ``statement_timeout`` (the search goes on without this lane)."""
    try:
        async with conn.transaction():  # a savepoint: a timeout leaves the search usable
            return await lane_hits(conn, lexical_lane_sql(schema, scope_key, query, bound,
                                                          limit))
    except QueryCanceled as exc:
        log.warning("memory.lexical_lane_timeout", scope=scope_key, query_chars=len(query),
                    error=str(exc).splitlines()[0])
        return None


def nuclei_from_hits(vector_hits: list[SentenceHit]) -> list[Nucleus]:
    """Distinct episodes from the vector lane's sentence hits, best first (each at its best
    hit's reciprocal rank)."""
    nuclei: dict[str, Nucleus] = {}
    for rank, hit in enumerate(vector_hits):
        if hit.episode_uid not in nuclei:
            nuclei[hit.episode_uid] = Nucleus(hit.episode_uid, hit.text, hit.score,
                                              fused=1.0 / (RRF_K + rank + 1))
    return list(nuclei.values())


def with_lane_nuclei(vector_nuclei: list[Nucleus], read: list[Nucleus]) -> list[Nucleus]:
    """A widened vector probe's nuclei with the other lanes' share of a search statement's
    nuclei (``read``) added, best first; episodes only those lanes found come in with a NaN
    vector score."""
    by_uid = {n.uid: n for n in vector_nuclei}
    for lane_nucleus in read:
        if not lane_nucleus.lanes_fused:
            continue
        nucleus = by_uid.get(lane_nucleus.uid)
        if nucleus is None:
            by_uid[lane_nucleus.uid] = replace(lane_nucleus, vector_score=float("nan"),
                                               fused=lane_nucleus.lanes_fused)
        else:
            nucleus.fused += lane_nucleus.lanes_fused
            nucleus.lanes_fused = lane_nucleus.lanes_fused
            nucleus.lexical_score = lane_nucleus.lexical_score
    return sorted(by_uid.values(), key=lambda n: -n.fused)


async def exact_lane(conn: AsyncConnection, schema: str, scope_key: str,
                     embedding: np.ndarray, bound: ReadBound, limit: int, *,
                     match: Sequence[dict] = ()) -> list[SentenceHit]:
    """The ``limit`` nearest sentences in the scope within ``bound`` that meet ``match``, by
    an exact scan of the filtered sentences (no HNSW index: ``OFFSET 0`` keeps the planner from ordering by it).
    Its cost grows with the filtered rows, so it serves only what the index cannot settle.
    A zero vector (no direction, NaN distance, left out of the index too) is near nothing."""
    where, params = bound.sentences("s", match)
    cur = await conn.execute(
        f"""
        SELECT episode_uid, text, distance FROM (
            SELECT s.episode_uid, s.text, s.embedding <=> %s AS distance
            FROM {schema}.sentences s
            WHERE s.scope_key = %s AND {where}
            OFFSET 0
        ) filtered
        WHERE distance <> 'NaN'::float8
        ORDER BY distance
        LIMIT %s
        """,
        [embedding, scope_key, *params, limit],
    )
    return [SentenceHit(uid, text, 1.0 - float(dist)) for uid, text, dist in await cur.fetchall()]


async def probe_nuclei(conn: AsyncConnection, schema: str, scope_key: str,
                       embedding: np.ndarray, bound: ReadBound, *, k: int,
                       limit: int, match: Sequence[dict] = ()) -> list[Nucleus]:
    """The vector lane's nuclei of a search, best first: at least ``k`` distinct episodes
    when the scope (after filters) holds that many.

    The probe is sentence-level, so ``limit`` hits may name fewer than ``k`` episodes; then it
    probes again with four times the limit (and a longer iterative scan). A probe that comes
    back short proves nothing by itself: the index scan also stops after
    ``hnsw.max_scan_tuples`` visited tuples, which a selective filter can reach before
    ``limit`` rows pass. So a short probe is settled by `exact_lane` over the filtered
    sentences: only when that too comes back short is the scope exhausted.
    """
    scan, exact = MAX_SCAN_TUPLES, False
    while True:
        if exact:
            hits = await exact_lane(conn, schema, scope_key, embedding, bound, limit,
                                    match=match)
        else:
            hits = await vector_lane(conn, schema, scope_key, embedding, bound, limit,
                                     match=match, max_scan_tuples=scan)
        nuclei = nuclei_from_hits(hits)
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
    metadata: dict | str | None  # a search reads it as JSON text, decoded by `episode`

    def episode(self) -> Episode:
        """The `Episode`, not validated again: it was validated when it was written."""
        metadata = (json.loads(self.metadata) if isinstance(self.metadata, str)
                    else self.metadata)
        return Episode.model_construct(uid=self.uid, session_id=self.session_id,
                                       producer=self.producer, produced_at=self.produced_at,
                                       content=self.content, metadata=metadata or {})


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
    ends = (np.cumsum([len(p) for p in packed]) // (4 * width)).tolist()
    return [every[start:end] for start, end in zip([0, *ends[:-1]], ends)]


async def fetch_clusters(conn: AsyncConnection, schema: str, scope_key: str, uids: list[str],
                         before: int, after: int, bound: ReadBound,
                         ) -> tuple[dict[str, list[str]], dict[str, EpisodeRow]]:
    """For each nucleus uid within ``bound``, its context window (itself and its neighbours
    in its session within ``bound``, in session order), and every episode found."""
    cur = conn.cursor(row_factory=dict_row)
    if before == 0 and after == 0:  # no context: a plain primary-key lookup
        where, params = bound.episodes("e", f"{schema}.sentences")
        await cur.execute(
            f"SELECT e.uid AS nucleus, {_EPISODE_COLUMNS} FROM {schema}.episodes e "
            f"WHERE e.scope_key = %s AND e.uid = ANY(%s::text[]) AND {where}",
            [scope_key, uids, *params],
        )
        rows = await cur.fetchall()
        return {r["uid"]: [r["uid"]] for r in rows}, {r["uid"]: _row(r) for r in rows}
    window, params = _window_sql(schema, scope_key, before, after, bound)
    await cur.execute(f"WITH nuclei AS (SELECT unnest(%s::text[]) AS uid) {window}",
                      [uids, *params])
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
    """What one search statement read: the nuclei of its lanes (best first by fused
    reciprocal rank; ``hits`` sentence hits of the vector probe), their context windows,
    every episode in them and those episodes' stored sentence vectors."""

    hits: int
    nuclei: list[Nucleus]
    windows: dict[str, list[str]]
    episodes: dict[str, EpisodeRow]
    vectors: dict[str, np.ndarray]
    # per episode, its sentences' stored entities (the JSON text of a list of lists, in
    # sentence order: `Memory.search_scored` decodes those of the results' windows only),
    # when the search was asked for them; episodes stored without entities are left out
    entities: dict[str, str] = field(default_factory=dict)
    # the full-text column's statistics, when the search was asked to read them
    term_stats: TermStats | None = None


def _window_sql(schema: str, scope_key: str, before: int, after: int,
                bound: ReadBound) -> tuple[str, list]:
    """The members of each nucleus's window, from ``nuclei(uid)``: the nucleus and its
    ``before`` and ``after`` neighbours in its session, each within ``bound``; and the
    statement's parameters."""
    sentences = f"{schema}.sentences"
    (on_x, x_params), (on_b, b_params), (on_a, a_params) = (
        bound.episodes(alias, sentences) for alias in ("x", "b", "a"))
    return f"""
        SELECT n.uid AS nucleus, e.*
        FROM nuclei n
        JOIN {schema}.episodes x ON x.scope_key = %s AND x.uid = n.uid AND {on_x}
        CROSS JOIN LATERAL (
            (SELECT * FROM {schema}.episodes b
             WHERE b.scope_key = x.scope_key AND b.session_id = x.session_id
               AND (b.produced_at, b.seq) < (x.produced_at, x.seq) AND {on_b}
             ORDER BY b.produced_at DESC, b.seq DESC LIMIT %s)
            UNION ALL
            (SELECT x.*)
            UNION ALL
            (SELECT * FROM {schema}.episodes a
             WHERE a.scope_key = x.scope_key AND a.session_id = x.session_id
               AND (a.produced_at, a.seq) > (x.produced_at, x.seq) AND {on_a}
             ORDER BY a.produced_at, a.seq LIMIT %s)
        ) e""", [scope_key, *x_params, *b_params, before, *a_params, after]


def search_statement(schema: str, scope_key: str, embedding: np.ndarray,
                     bound: ReadBound, *, limit: int, before: int, after: int,
                     lanes: list[Lane] = (), with_entities: bool = False,
                     match: Sequence[dict] = ()) -> tuple[str, list]:
    """The statement of `read_search` and its parameters (the bench EXPLAINs it).

    The vector probe and the other ``lanes`` are fused by reciprocal rank in SQL: a nucleus
    (an episode) counts in each lane at its best sentence, and the windows and vectors of
    every nucleus are read by the same statement, with ``with_entities`` the stored entities
    of their sentences too (from the same rows as the vectors). Every sentence and episode
    it reads lies within ``bound``; ``match`` narrows the matched sentences only (the lanes
    are built with the same ``bound`` and ``match``)."""
    where, params = bound.sentences("s", match)
    if before == 0 and after == 0:
        on_x, window_args = bound.episodes("x", f"{schema}.sentences")
        members = ("SELECT n.uid AS nucleus, x.* FROM nuclei n JOIN "
                   f"{schema}.episodes x ON x.scope_key = %s AND x.uid = n.uid AND {on_x}")
        window_args = [scope_key, *window_args]
    else:
        members, window_args = _window_sql(schema, scope_key, before, after, bound)
    entities = ("jsonb_agg(s.entities ORDER BY s.idx) FILTER (WHERE s.entities IS NOT NULL)"
                if with_entities else "NULL::jsonb")
    # metadata and entities come as JSON text (jsonb's binary form is that text too): ~75
    # episodes are read per search and only the results' windows are decoded
    lane_ctes = "".join(f", {lane.ctes}" for lane in lanes)
    lane_rows = "".join(f"""
            UNION ALL
            SELECT {lane.order}, episode_uid, text, score, rank FROM {lane.name}"""
                        for lane in lanes)
    statement = f"""
        WITH {_probe_cte(schema, where)}{lane_ctes}, lane_hits AS (
            SELECT 0 AS lane, episode_uid, text, 1 - distance AS score,
                   row_number() OVER (ORDER BY distance) - 1 AS rank
            FROM hits{lane_rows}
        ), best AS (
            SELECT DISTINCT ON (lane, episode_uid) * FROM lane_hits
            ORDER BY lane, episode_uid, rank
        ), nuclei AS MATERIALIZED (
            SELECT episode_uid AS uid, (array_agg(text ORDER BY lane))[1] AS text,
                   sum(1.0 / ({RRF_K} + 1 + rank))::float8 AS fused,
                   max(score) FILTER (WHERE lane = 0) AS vector_score,
                   max(score) FILTER (WHERE lane = {LEXICAL_ORDER}) AS lexical_score,
                   coalesce(sum(1.0 / ({RRF_K} + 1 + rank)) FILTER (WHERE lane > 0), 0)::float8
                       AS lanes_fused
            FROM best GROUP BY episode_uid
        ), members AS MATERIALIZED ({members}
        ), vectors AS (
            SELECT s.episode_uid,
                   string_agg(vector_send(s.embedding), ''::bytea ORDER BY s.idx) AS embeddings,
                   {entities} AS entities
            FROM {schema}.sentences s
            WHERE s.scope_key = %s AND s.episode_uid IN (SELECT DISTINCT m.uid FROM members m)
            GROUP BY s.episode_uid
        )
        SELECT m.nucleus, n.text, n.vector_score, n.lexical_score, n.fused, n.lanes_fused,
               (SELECT count(*) FROM hits),
               m.uid, m.session_id, m.producer, m.produced_at, m.content, m.metadata::text,
               v.embeddings, v.entities::text
        FROM members m JOIN nuclei n ON n.uid = m.nucleus
        LEFT JOIN vectors v ON v.episode_uid = m.uid
        ORDER BY n.fused DESC, n.vector_score DESC NULLS LAST, n.uid, m.produced_at, m.seq
        """
    return statement, [embedding, scope_key, *params, embedding, limit,
                       *(p for lane in lanes for p in lane.params), *window_args, scope_key]


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
                      embedding: np.ndarray, bound: ReadBound, *, limit: int,
                      before: int, after: int, timeout_ms: int,
                      lanes: list[Lane] = (), with_entities: bool = False,
                      read_term_stats: bool = False, match: Sequence[dict] = ()) -> SearchRead:
    """The vector probe and the other ``lanes``, their fused nuclei (best first), the nuclei's
    context windows and the windows' stored vectors in one statement, sent with its HNSW
    settings and statement timeout in one round trip (pipeline mode). A nucleus no vector
    hit reached has a NaN vector score.

    ``hits`` is how many sentence hits the probe found (fewer than ``limit``: the scope,
    after filters, is exhausted, or the scan reached ``hnsw.max_scan_tuples``).
    ``with_entities``: the windows' stored entities too (`SearchRead.entities`).
    ``read_term_stats``: the full-text column's `TermStats` too, in the same round trip
    (`SearchRead.term_stats`)."""
    statement, params = search_statement(schema, scope_key, embedding, bound, limit=limit,
                                         before=before, after=after, lanes=lanes,
                                         with_entities=with_entities, match=match)
    cur = conn.cursor(binary=True)
    # BEGIN, the transaction's HNSW settings, the statement and COMMIT in one pipeline, sent
    # by hand in autocommit mode: psycopg's own BEGIN (implicit or `conn.transaction()`)
    # would wait for the server once more.
    autocommit = conn.autocommit
    await conn.set_autocommit(True)
    # Nothing in the pipeline is prepared: psycopg can record as prepared a statement whose
    # Parse a failed pipeline (a statement timeout) skipped, and every later search on that
    # connection then fails ("prepared statement _pg3_N does not exist"). Planning the
    # statement costs ~0.5 ms (docs/benchmarks.md).
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN", prepare=False)
            await conn.execute(*statement_timeout(timeout_ms), prepare=False)
            await conn.execute(*hnsw_settings(limit), prepare=False)
            await cur.execute(statement, params, prepare=False)
            if read_term_stats:
                stats_cur = conn.cursor(binary=True)
                await stats_cur.execute(_TERM_STATS, [schema], prepare=False)
            await conn.execute("COMMIT", prepare=False)
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
    entities: dict[str, str] = {}
    hits = 0
    for nucleus, text, vector_score, lexical_score, fused, lanes_fused, hits, *row, \
            embeddings, stored_entities in await cur.fetchall():
        if nucleus not in nuclei:
            nuclei[nucleus] = Nucleus(
                nucleus, text, float("nan") if vector_score is None else float(vector_score),
                None if lexical_score is None else float(lexical_score), fused, lanes_fused)
        uid = row[0]
        windows.setdefault(nucleus, []).append(uid)
        if uid not in episodes:
            episodes[uid] = EpisodeRow(*row)
            if embeddings:
                packed[uid] = embeddings
            if stored_entities is not None:
                entities[uid] = stored_entities
    vectors = dict(zip(packed, _vectors(list(packed.values()))))
    term_stats = term_stats_of(await stats_cur.fetchone()) if read_term_stats else None
    return SearchRead(hits, list(nuclei.values()), windows, episodes, vectors, entities,
                      term_stats)
