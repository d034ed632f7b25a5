"""SQL of the lookups by key: episodes by uid, a scope's episodes by recency, the scopes
under a prefix. Every statement but `scopes` is confined to one scope key, and every one that
returns episodes to a `ReadBound`."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from memroute.memory.bounds import ReadBound
from memroute.memory.models import Episode, Scope, StoredEpisode

SCOPE_PARTS = ("org_id", "project_id", "user_id", "agent_id")
_COLUMNS = ("uid, session_id, producer, produced_at, content, metadata, created_at, "
            "org_id, project_id, user_id, agent_id")


def _stored(row: tuple[Any, ...]) -> StoredEpisode:
    uid, session_id, producer, produced_at, content, metadata, created_at, *scope = row
    return StoredEpisode(
        episode=Episode.model_construct(uid=uid, session_id=session_id, producer=producer,
                                        produced_at=produced_at, content=content,
                                        metadata=metadata),
        created_at=created_at, scope=Scope(**dict(zip(SCOPE_PARTS, scope))))


async def episodes_by_uid(conn: AsyncConnection, schema: str, scope_key: str,
                          uids: list[str], bound: ReadBound) -> dict[str, StoredEpisode]:
    """The episodes of ``uids`` within ``bound``, by uid."""
    where, params = bound.episodes("e", f"{schema}.sentences")
    cur = await conn.execute(
        f"SELECT {', '.join('e.' + c.strip() for c in _COLUMNS.split(','))} "
        f"FROM {schema}.episodes e WHERE e.scope_key = %s AND e.uid = ANY(%s::text[]) "
        f"AND {where}", [scope_key, uids, *params])
    return {row[0]: _stored(row) for row in await cur.fetchall()}


async def replies(conn: AsyncConnection, schema: str, scope_key: str, uids: list[str],
                  bound: ReadBound) -> dict[str, StoredEpisode]:
    """For each episode of ``uids``, the next episode of its session within ``bound`` when
    another producer said it (its reply), keyed by the uid replied to."""
    where, params = bound.episodes("a", f"{schema}.sentences")
    cur = await conn.execute(
        f"SELECT x.uid, {', '.join('r.' + c.strip() for c in _COLUMNS.split(','))} "
        f"FROM {schema}.episodes x CROSS JOIN LATERAL ("
        f" SELECT * FROM {schema}.episodes a"
        "  WHERE a.scope_key = x.scope_key AND a.session_id = x.session_id"
        f"    AND (a.produced_at, a.seq) > (x.produced_at, x.seq) AND {where}"
        "  ORDER BY a.produced_at, a.seq LIMIT 1) r "
        "WHERE x.scope_key = %s AND x.uid = ANY(%s::text[]) AND r.producer <> x.producer",
        [*params, scope_key, uids])
    return {row[0]: _stored(row[1:]) for row in await cur.fetchall()}


async def recent_episodes(conn: AsyncConnection, schema: str, scope_key: str,
                          bound: ReadBound, limit: int, offset: int) -> list[StoredEpisode]:
    """The scope's episodes within ``bound``, newest first."""
    where, params = bound.episodes("e", f"{schema}.sentences")
    cur = await conn.execute(
        f"SELECT {', '.join('e.' + c.strip() for c in _COLUMNS.split(','))} "
        f"FROM {schema}.episodes e WHERE e.scope_key = %s AND {where} "
        "ORDER BY e.produced_at DESC, e.seq DESC LIMIT %s OFFSET %s",
        [scope_key, *params, limit, offset])
    return [_stored(row) for row in await cur.fetchall()]


async def scopes(conn: AsyncConnection, schema: str, prefix: list[str], limit: int,
                 offset: int) -> list[Scope]:
    """The distinct scopes holding episodes whose leading ids equal ``prefix``, in order."""
    where = " AND ".join(f"{part} = %s" for part in SCOPE_PARTS[:len(prefix)]) or "TRUE"
    order = ", ".join(f"{part} NULLS FIRST" for part in SCOPE_PARTS)
    cur = await conn.execute(
        f"SELECT DISTINCT {', '.join(SCOPE_PARTS)} FROM {schema}.episodes WHERE {where} "
        f"ORDER BY {order} LIMIT %s OFFSET %s", [*prefix, limit, offset])
    return [Scope(**dict(zip(SCOPE_PARTS, row))) for row in await cur.fetchall()]


async def scope_producers(conn: AsyncConnection, schema: str, scope_key: str,
                          limit: int, bound: ReadBound) -> list[str]:
    """The distinct producers of a scope's episodes within ``bound``, in order, at most
    ``limit``: a skip scan of the ``(scope_key, producer)`` index (one probe per producer,
    however many episodes)."""
    where, params = bound.episodes("e", f"{schema}.sentences")
    cur = await conn.execute(
        f"WITH RECURSIVE p(producer) AS ("
        f" (SELECT e.producer FROM {schema}.episodes e WHERE e.scope_key = %s AND {where}"
        f"  ORDER BY e.producer LIMIT 1)"
        f" UNION ALL"
        f" SELECT (SELECT e.producer FROM {schema}.episodes e WHERE e.scope_key = %s"
        f"         AND e.producer > p.producer AND {where} ORDER BY e.producer LIMIT 1)"
        f" FROM p WHERE p.producer IS NOT NULL)"
        f" SELECT producer FROM p WHERE producer IS NOT NULL LIMIT %s",
        [scope_key, *params, scope_key, *params, limit])
    return [row[0] for row in await cur.fetchall()]
