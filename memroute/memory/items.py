"""The items of LangGraph's store face (`MemrouteStore`), and their SQL.

``store_items`` holds one row per (tenant, namespace, key): the value, its times and its ttl.
``store_vectors`` holds one vector per (item, field path) when a caller embeds with their own
model (LangGraph's index config). For memroute's own search an item also has one episode in
its tenant's scope (``episode_uid``), which the search lanes, the agent and the rerank read
like any other episode.

A tenant is a `Scope`. Its key leads every primary key and every statement's WHERE, so no
statement reads or writes another tenant's rows, whatever namespace it is given; the one
exception is the TTL sweep's search for the tenants holding expired items (`StoreItems.sweep`,
maintenance of the whole table, as LangGraph's PostgresStore sweeps). A namespace
is kept as its labels joined by "." (a label never holds one): a prefix matches whole labels,
the namespace itself by equality and its descendants by an escaped LIKE.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from memroute.memory.filters import MAX_CLAUSES, compile_filter
from memroute.memory.limits import MAX_EPISODES_PER_CALL
from memroute.memory.models import STORE_METADATA_KEYS, Episode, Scope, json_text
from memroute.memory.retry import with_retry

if TYPE_CHECKING:
    from memroute.memory.store import Memory

# The tenant of every store built without one (as LangGraph's stores are built) on a schema:
# a reserved org, nobody's tenant (no store names it, no API key reaches it).
DEFAULT_TENANT = Scope(org_id="langgraph-store")
PRODUCER = "langgraph-store"  # the producer and session of an item's episode
SESSION = "store"
# keys of an item episode's metadata: its namespace's labels ({"l0": ..., "l1": ...}), its
# value (what a search's filter reads) and when it expires (Unix seconds; absent: never)
NAMESPACE_KEY, VALUE_KEY, EXPIRES_KEY = STORE_METADATA_KEYS
Distance = Literal["cosine", "inner_product", "l2"]
# a search's score per distance, the larger the closer (as LangGraph's PostgresStore)
_SIMILARITY = {"cosine": "1 - (v.embedding <=> %(query)s::vector)",
               "inner_product": "-(v.embedding <#> %(query)s::vector)",
               "l2": "-(v.embedding <-> %(query)s::vector)"}
_ITEM_COLUMNS = "i.prefix, i.key, i.value, i.created_at, i.updated_at"
_LIVE = "(i.expires_at IS NULL OR i.expires_at > now())"
_VECTOR_COPY_TYPES = ["text", "text", "text", "text", "vector"]


def namespace_text(namespace: Sequence[str]) -> str:
    return ".".join(namespace)


def item_uid(namespace: Sequence[str], key: str) -> str:
    """The uid of an item's episode in its tenant's scope (migration 6 computes the same in
    SQL for the items it moves)."""
    prefix = namespace_text(namespace)
    return "item:" + hashlib.sha256(f"{len(prefix)}:{prefix}{key}".encode()).hexdigest()[:40]


def namespace_filters(prefix: Sequence[str]) -> list[dict[str, Any]]:
    """The item episodes under ``prefix``, in memroute's filter dialect: filters that must
    all hold, each within a filter's limit of conditions however deep the prefix."""
    if not prefix:
        return [{NAMESPACE_KEY: {"$exists": True}}]
    labels = [(f"{NAMESPACE_KEY}.l{i}", label) for i, label in enumerate(prefix)]
    return [dict(labels[i:i + MAX_CLAUSES]) for i in range(0, len(labels), MAX_CLAUSES)]


def live_filter(now: float) -> dict[str, Any]:
    """The item episodes that have not expired at ``now`` (Unix seconds); a read's
    `ReadBound` leaves expired ones out unless it is told not to."""
    return {"$or": [{EXPIRES_KEY: {"$exists": False}}, {EXPIRES_KEY: {"$gt": now}}]}


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _under(prefix: Sequence[str], alias: str = "i") -> tuple[str, list[Any]]:
    """Rows of ``alias`` whose namespace is ``prefix`` or lies under it."""
    if not prefix:
        return "TRUE", []
    text = namespace_text(prefix)
    return (rf"({alias}.prefix = %s OR {alias}.prefix LIKE %s ESCAPE '\')",
            [text, _escape_like(text) + ".%"])


def _matching(kind: str, path: Sequence[str]) -> tuple[str, list[Any]]:
    """Rows of ``i`` whose namespace starts (``prefix``) or ends (``suffix``) with ``path``,
    label by label; ``*`` matches any one label."""
    if not path:
        return "TRUE", []
    labels = "string_to_array(i.prefix, '.')"
    parts, params = [f"cardinality({labels}) >= %s"], [len(path)]
    for index, label in enumerate(path):
        if label == "*":
            continue
        if kind == "prefix":
            parts.append(f"({labels})[%s] = %s")
            params += [index + 1, label]
        else:
            parts.append(f"({labels})[cardinality({labels}) - %s] = %s")
            params += [len(path) - index - 1, label]
    if kind == "prefix":  # the leading labels narrow the scan to the prefix index's range
        literal = list(path[:path.index("*")] if "*" in path else path)
        if literal:
            sql, extra = _under(literal)
            parts.append(sql)
            params += extra
    return "(" + " AND ".join(parts) + ")", params


def _value_filter(filters: dict[str, Any] | None) -> tuple[str, list[Any]]:
    """A filter on the value, in memroute's dialect (fields are keys of the value)."""
    return compile_filter(filters, "i", document="value", columns=False)


@dataclass(frozen=True)
class StoredItem:
    """An item as stored, with its score when a search ranked it."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


def _item(row: Sequence[Any], score: float | None = None) -> StoredItem:
    prefix, key, value, created_at, updated_at = row[:5]
    return StoredItem(tuple(prefix.split(".")), key, value, created_at, updated_at, score)


@dataclass(frozen=True)
class ItemWrite:
    """One put (``value``) or delete (``value=None``) of a batch.

    ``text``: the content of the item's episode (memroute's own index), or None for none.
    ``vectors``: the item's vectors by field path (a caller's own embedder)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    ttl_minutes: float | None = None
    text: str | None = None
    vectors: tuple[tuple[str, Sequence[float]], ...] = field(default_factory=tuple)


class StoreItems:
    """The store items of one `Memory`'s schema (reached as ``memory.items``)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.schema = memory.schema

    async def _run(self, what: str, statement: Any) -> Any:
        async def run() -> Any:
            async with self.memory._pool.connection() as conn:
                return await statement(conn)
        return await with_retry(run, what)

    # -- writes ---------------------------------------------------------------------------

    async def write(self, tenant: Scope, writes: list[ItemWrite]) -> None:
        """Apply the puts and deletes (the last one per item wins) in one transaction, with
        their vectors and episodes (embedded first: nothing is written if that fails). An
        episode whose content is stored already keeps its sentence vectors (only its metadata
        changes), unless its content changes meanwhile."""
        last = {(w.namespace, w.key): w for w in writes}
        writes = list(last.values())
        now = time.time()
        expiry = {(w.namespace, w.key): now + w.ttl_minutes * 60
                  for w in writes if w.value is not None and w.ttl_minutes is not None}
        episodes = [
            Episode(uid=item_uid(w.namespace, w.key), content=w.text, producer=PRODUCER,
                    session_id=SESSION, produced_at=datetime.fromtimestamp(now, timezone.utc),
                    metadata=_episode_metadata(w, expiry.get((w.namespace, w.key))))
            for w in writes if w.value is not None and w.text is not None]
        try:
            await self._write(tenant, writes, expiry, episodes,
                              await self._stored_contents(tenant, episodes))
        except _ContentChanged:  # another write changed an episode: embed them all
            await self._write(tenant, writes, expiry, episodes, {})
        self.memory._forget_vectors(tenant.key, [item_uid(w.namespace, w.key) for w in writes])
        self.memory._forget_speakers(tenant.key)
        await self._wrote([tenant.key])

    async def _wrote(self, tenant_keys: list[str]) -> None:
        """After a commit: the memory's reads of these tenants see it, on a replica too
        (`memroute.memory.replicas`)."""
        await self.memory._reads.wrote(tenant_keys)

    async def _stored_contents(self, tenant: Scope, episodes: list[Episode]) -> dict[str, str]:
        """The uids of ``episodes`` stored with the same content, and that content."""
        if not episodes:
            return {}

        async def read(conn: AsyncConnection) -> list[Any]:
            cur = await conn.execute(
                f"SELECT uid, content FROM {self.schema}.episodes "
                "WHERE scope_key = %s AND uid = ANY(%s::text[])",
                [tenant.key, [e.uid for e in episodes]])
            return await cur.fetchall()

        wanted = {e.uid: e.content for e in episodes}
        return {uid: content for uid, content in await self._run("store write", read)
                if wanted.get(uid) == content}

    async def _write(self, tenant: Scope, writes: list[ItemWrite],
                     expiry: dict[tuple[tuple[str, ...], str], float], episodes: list[Episode],
                     unchanged: dict[str, str]) -> None:
        writer = self.memory._writer
        embed = [e for e in episodes if e.uid not in unchanged]
        prepared = [await writer.prepare(tenant, embed[i:i + MAX_EPISODES_PER_CALL],
                                         replace=True, store_items=True)
                    for i in range(0, len(embed), MAX_EPISODES_PER_CALL)]
        kept = [e for e in episodes if e.uid in unchanged]

        async def write(conn: AsyncConnection) -> None:
            async with conn.transaction():
                await self._write_items(conn, tenant, writes, expiry)
                if kept:
                    await self._keep_vectors(conn, tenant, kept)
                for part in prepared:
                    await writer.write_in(conn, part)

        await self._run("store write", write)
        for part in prepared:
            writer.after_commit(part)

    async def _keep_vectors(self, conn: AsyncConnection, tenant: Scope,
                            kept: list[Episode]) -> None:
        """Give episodes whose content is stored their new metadata and time, on the episode
        and its sentences; `_ContentChanged` if one's content is not what was read."""
        s, t = self.schema, tenant.key
        uids = [e.uid for e in kept]
        metadata = [_jsonb(e.metadata) for e in kept]
        times = [e.produced_at for e in kept]
        cur = await conn.execute(
            f"UPDATE {s}.episodes e SET metadata = w.metadata, produced_at = w.produced_at "
            "FROM unnest(%s::text[], %s::text[], %s::jsonb[], %s::timestamptz[]) "
            "AS w(uid, content, metadata, produced_at) "
            "WHERE e.scope_key = %s AND e.uid = w.uid AND e.content = w.content RETURNING e.uid",
            [uids, [e.content for e in kept], metadata, times, t])
        if len(await cur.fetchall()) != len(kept):
            raise _ContentChanged
        await conn.execute(
            f"UPDATE {s}.sentences x SET metadata = w.metadata, produced_at = w.produced_at "
            "FROM unnest(%s::text[], %s::jsonb[], %s::timestamptz[]) "
            "AS w(uid, metadata, produced_at) WHERE x.scope_key = %s AND x.episode_uid = w.uid",
            [uids, metadata, times, t])

    async def _write_items(self, conn: AsyncConnection, tenant: Scope, writes: list[ItemWrite],
                           expiry: dict[tuple[tuple[str, ...], str], float]) -> None:
        s, t = self.schema, tenant.key
        prefixes = [namespace_text(w.namespace) for w in writes]
        keys = [w.key for w in writes]
        uids = [item_uid(w.namespace, w.key) if w.value is not None and w.text is not None
                else None for w in writes]
        # the episodes of items deleted, or put again without one, go first
        await conn.execute(
            f"DELETE FROM {s}.episodes e USING {s}.store_items i, "
            "unnest(%s::text[], %s::text[], %s::text[]) AS w(prefix, key, uid) "
            "WHERE i.scope_key = %s AND i.prefix = w.prefix AND i.key = w.key "
            "AND w.uid IS NULL AND e.scope_key = %s AND e.uid = i.episode_uid",
            [prefixes, keys, uids, t, t])
        await conn.execute(
            f"DELETE FROM {s}.store_items i USING unnest(%s::text[], %s::text[]) AS w(prefix, key)"
            " WHERE i.scope_key = %s AND i.prefix = w.prefix AND i.key = w.key",
            [[p for p, w in zip(prefixes, writes) if w.value is None],
             [w.key for w in writes if w.value is None], t])
        puts = [(p, w, u) for p, w, u in zip(prefixes, writes, uids) if w.value is not None]
        if not puts:
            return
        expires = [datetime.fromtimestamp(expiry[(w.namespace, w.key)], timezone.utc)
                   if (w.namespace, w.key) in expiry else None for _, w, _ in puts]
        await conn.execute(
            f"INSERT INTO {s}.store_items (scope_key, org_id, project_id, user_id, agent_id, "
            "prefix, key, value, created_at, updated_at, expires_at, ttl_minutes, episode_uid) "
            "SELECT %s, %s, %s, %s, %s, w.prefix, w.key, w.value, now(), now(), w.expires_at, "
            "w.ttl, w.uid FROM unnest(%s::text[], %s::text[], %s::jsonb[], %s::timestamptz[], "
            "%s::float8[], %s::text[]) AS w(prefix, key, value, expires_at, ttl, uid) "
            "ON CONFLICT (scope_key, prefix, key) DO UPDATE SET value = EXCLUDED.value, "
            "updated_at = now(), expires_at = EXCLUDED.expires_at, "
            "ttl_minutes = EXCLUDED.ttl_minutes, episode_uid = EXCLUDED.episode_uid",
            [t, tenant.org_id, tenant.project_id, tenant.user_id, tenant.agent_id,
             [p for p, _, _ in puts], [w.key for _, w, _ in puts],
             [_jsonb(w.value) for _, w, _ in puts], expires,
             [w.ttl_minutes for _, w, _ in puts], [u for _, _, u in puts]])
        await conn.execute(
            f"DELETE FROM {s}.store_vectors v "
            "USING unnest(%s::text[], %s::text[]) AS w(prefix, key) "
            "WHERE v.scope_key = %s AND v.prefix = w.prefix AND v.key = w.key",
            [[p for p, _, _ in puts], [w.key for _, w, _ in puts], t])
        if any(w.vectors for _, w, _ in puts):
            async with conn.cursor().copy(
                f"COPY {s}.store_vectors (scope_key, prefix, key, field_name, embedding) "
                "FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(_VECTOR_COPY_TYPES)
                for prefix, w, _ in puts:
                    for path, vector in w.vectors:
                        await copy.write_row([t, prefix, w.key, path, vector])

    # -- reads ----------------------------------------------------------------------------

    async def get(self, tenant: Scope, wanted: list[tuple[tuple[str, ...], str]], *,
                  live_only: bool, refresh: list[bool] | None = None
                  ) -> dict[tuple[tuple[str, ...], str], StoredItem]:
        """The items asked for that are stored (and, ``live_only``, not expired); those with
        ``refresh`` set get their ttl restarted."""
        if not wanted:
            return {}
        prefixes = [namespace_text(ns) for ns, _ in wanted]
        keys = [k for _, k in wanted]

        async def read(conn: AsyncConnection) -> list[Any]:
            cur = await conn.execute(
                f"SELECT {_ITEM_COLUMNS} FROM {self.schema}.store_items i "
                "JOIN unnest(%s::text[], %s::text[]) AS w(prefix, key) "
                "ON i.prefix = w.prefix AND i.key = w.key "
                f"WHERE i.scope_key = %s AND {_LIVE if live_only else 'TRUE'}",
                [prefixes, keys, tenant.key])
            rows = await cur.fetchall()
            fresh = {(p, k) for (p, k), again in zip(zip(prefixes, keys), refresh or [])
                     if again}
            await self._refresh(conn, tenant, [r[:2] for r in rows if tuple(r[:2]) in fresh],
                                live_only)
            return rows

        rows = await self._run("store get", read)
        if rows and any(refresh or ()):
            await self._wrote([tenant.key])
        found = [_item(row) for row in rows]
        return {(item.namespace, item.key): item for item in found}

    async def listing(self, tenant: Scope, prefix: tuple[str, ...],
                      filters: dict[str, Any] | None, *, limit: int, offset: int,
                      live_only: bool, refresh: bool, without_episode: bool = False
                      ) -> list[StoredItem]:
        """The items under ``prefix`` matching ``filters``, last updated first
        (``without_episode``: only those memroute's own search cannot find)."""
        under, params = _under(prefix)
        where, filter_params = _value_filter(filters)

        async def read(conn: AsyncConnection) -> list[Any]:
            cur = await conn.execute(
                f"SELECT {_ITEM_COLUMNS} FROM {self.schema}.store_items i "
                f"WHERE i.scope_key = %s AND {under} AND {where} "
                f"AND {_LIVE if live_only else 'TRUE'} "
                f"AND {'i.episode_uid IS NULL' if without_episode else 'TRUE'} "
                "ORDER BY i.updated_at DESC, i.prefix, i.key LIMIT %s OFFSET %s",
                [tenant.key, *params, *filter_params, limit, offset])
            rows = await cur.fetchall()
            if refresh:
                await self._refresh(conn, tenant, [r[:2] for r in rows], live_only)
            return rows

        rows = await self._run("store search", read)
        if refresh and rows:
            await self._wrote([tenant.key])
        return [_item(row) for row in rows]

    async def by_episode(self, tenant: Scope, uids: list[str], *, live_only: bool,
                         refresh: bool) -> dict[str, StoredItem]:
        """The items whose episodes have these uids, by uid."""
        if not uids:
            return {}

        async def read(conn: AsyncConnection) -> list[Any]:
            cur = await conn.execute(
                f"SELECT {_ITEM_COLUMNS}, i.episode_uid FROM {self.schema}.store_items i "
                "WHERE i.scope_key = %s AND i.episode_uid = ANY(%s::text[]) "
                f"AND {_LIVE if live_only else 'TRUE'}", [tenant.key, uids])
            rows = await cur.fetchall()
            if refresh:
                await self._refresh(conn, tenant, [r[:2] for r in rows], live_only)
            return rows

        rows = await self._run("store search", read)
        if refresh and rows:
            await self._wrote([tenant.key])
        return {row[5]: _item(row) for row in rows}

    async def vector_search(self, tenant: Scope, prefix: tuple[str, ...],
                            filters: dict[str, Any] | None, query: Sequence[float], *,
                            distance: Distance, limit: int, offset: int, live_only: bool,
                            refresh: bool) -> list[StoredItem]:
        """The items under ``prefix`` matching ``filters``: those with vectors of the query's
        dimension first, by their best field's similarity to ``query`` (every vector is
        scored: no approximate index), then the others, last updated first, unscored."""
        under, under_params = _under(prefix)
        where, filter_params = _value_filter(filters)
        params: dict[str, Any] = {
            "tenant": tenant.key, "query": list(query), "dims": len(query),
            "limit": limit, "offset": offset,
            **{f"u{i}": p for i, p in enumerate(under_params)},
            **{f"f{i}": p for i, p in enumerate(filter_params)}}
        under = _named(under, "u", len(under_params))
        vectors_under = _named(_under(prefix, "v")[0], "u", len(under_params))
        where = _named(where, "f", len(filter_params))

        async def read(conn: AsyncConnection) -> list[Any]:
            cur = await conn.execute(
                f"WITH scored AS (SELECT v.prefix, v.key, "
                f"max(nullif({_SIMILARITY[distance]}, 'NaN'::float8)) AS score "
                f"FROM {self.schema}.store_vectors v WHERE v.scope_key = %(tenant)s "
                f"AND vector_dims(v.embedding) = %(dims)s AND {vectors_under} "
                "GROUP BY v.prefix, v.key) "
                f"SELECT {_ITEM_COLUMNS}, s.score FROM {self.schema}.store_items i "
                "LEFT JOIN scored s ON s.prefix = i.prefix AND s.key = i.key "
                f"WHERE i.scope_key = %(tenant)s AND {under} AND {where} "
                f"AND {_LIVE if live_only else 'TRUE'} "
                "ORDER BY s.score DESC NULLS LAST, i.updated_at DESC, i.prefix, i.key "
                "LIMIT %(limit)s OFFSET %(offset)s", params)
            rows = await cur.fetchall()
            if refresh:
                await self._refresh(conn, tenant, [r[:2] for r in rows], live_only)
            return rows

        rows = await self._run("store search", read)
        if refresh and rows:
            await self._wrote([tenant.key])
        return [_item(row, row[5]) for row in rows]

    async def namespaces(self, tenant: Scope, conditions: list[tuple[str, tuple[str, ...]]], *,
                         max_depth: int | None, limit: int, offset: int, live_only: bool
                         ) -> list[tuple[str, ...]]:
        """The namespaces holding items that match every ``(kind, path)`` condition, cut to
        ``max_depth`` labels, distinct, in order of their labels."""
        parts, params = [], []
        for kind, path in conditions:
            sql, extra = _matching(kind, path)
            parts.append(sql)
            params += extra

        async def read(conn: AsyncConnection) -> list[Any]:
            cur = await conn.execute(
                "SELECT ns FROM (SELECT DISTINCT (string_to_array(i.prefix COLLATE \"C\", '.'))"
                "[1:%s] AS ns "
                f"FROM {self.schema}.store_items i WHERE i.scope_key = %s "
                f"AND {' AND '.join(parts) or 'TRUE'} AND {_LIVE if live_only else 'TRUE'}) n "
                "ORDER BY ns LIMIT %s OFFSET %s",
                [max_depth or 2**31 - 1, tenant.key, *params, limit, offset])
            return await cur.fetchall()

        return [tuple(row[0]) for row in await self._run("store list_namespaces", read)]

    # -- ttl ------------------------------------------------------------------------------

    async def refresh(self, tenant: Scope, found: list[tuple[tuple[str, ...], str]], *,
                      live_only: bool) -> None:
        """Restart the ttl of these items (see `_refresh`)."""
        async def refresh(conn: AsyncConnection) -> None:
            await self._refresh(conn, tenant, [(namespace_text(ns), k) for ns, k in found],
                                live_only)
        await self._run("store refresh", refresh)
        if found:
            await self._wrote([tenant.key])

    async def _refresh(self, conn: AsyncConnection, tenant: Scope,
                       found: list[tuple[str, str]], live_only: bool) -> None:
        """Restart the ttl of the items read (never of one expired, when ``live_only``), and
        the expiry their episodes carry for memroute's own search."""
        if not found:
            return
        s, t = self.schema, tenant.key
        await conn.execute(
            f"WITH refreshed AS (UPDATE {s}.store_items i "
            "SET expires_at = now() + i.ttl_minutes * interval '1 minute' "
            "FROM unnest(%s::text[], %s::text[]) AS w(prefix, key) "
            "WHERE i.scope_key = %s AND i.prefix = w.prefix AND i.key = w.key "
            f"AND i.ttl_minutes IS NOT NULL AND {_LIVE if live_only else 'TRUE'} "
            "RETURNING i.episode_uid, extract(epoch FROM i.expires_at) AS expires), "
            f"episodes AS (UPDATE {s}.episodes e "
            f"SET metadata = jsonb_set(e.metadata, '{{{EXPIRES_KEY}}}', to_jsonb(r.expires)) "
            "FROM refreshed r WHERE e.scope_key = %s AND e.uid = r.episode_uid) "
            f"UPDATE {s}.sentences x "
            f"SET metadata = jsonb_set(x.metadata, '{{{EXPIRES_KEY}}}', to_jsonb(r.expires)) "
            "FROM refreshed r WHERE x.scope_key = %s AND x.episode_uid = r.episode_uid",
            [[p for p, _ in found], [k for _, k in found], t, t, t])

    async def sweep(self) -> int:
        """Delete every tenant's expired items (with their vectors and episodes), one tenant
        at a time; how many. Finding the tenants reads the whole table (the one statement
        of the store's that reaches several tenants: docs/scaling.md)."""
        async def expired_tenants(conn: AsyncConnection) -> list[str]:
            cur = await conn.execute(f"SELECT DISTINCT scope_key FROM {self.schema}.store_items "
                                     "WHERE expires_at <= now()")
            return [key for key, in await cur.fetchall()]

        swept: dict[str, int] = {}
        for key in await self._run("store sweep", expired_tenants):
            swept[key] = await self._run("store sweep",
                                         lambda conn, key=key: self._sweep_tenant(conn, key))
            if swept[key]:
                self.memory._forget_vectors(key)
        if swept:
            await self._wrote(list(swept))
        return sum(swept.values())

    async def _sweep_tenant(self, conn: AsyncConnection, tenant_key: str) -> int:
        cur = await conn.execute(
            f"WITH gone AS (DELETE FROM {self.schema}.store_items "
            "WHERE scope_key = %s AND expires_at <= now() RETURNING episode_uid), "
            f"episodes AS (DELETE FROM {self.schema}.episodes e USING gone g "
            "WHERE e.scope_key = %s AND e.uid = g.episode_uid) SELECT count(*) FROM gone",
            [tenant_key, tenant_key])
        return (await cur.fetchone())[0]


class _ContentChanged(Exception):
    """An episode's content changed between reading it and writing (the write is redone)."""


def _jsonb(value: dict[str, Any]) -> Jsonb:
    """A value or metadata as jsonb, through `json_text` (which keeps a float a float)."""
    return Jsonb(json_text(value), dumps=str)


def _named(sql: str, name: str, count: int) -> str:
    """``sql`` with its ``count`` positional placeholders named ``name0``, ``name1``, ..."""
    for i in range(count):
        sql = sql.replace("%s", f"%({name}{i})s", 1)
    return sql


def _episode_metadata(write: ItemWrite, expires: float | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        NAMESPACE_KEY: {f"l{i}": label for i, label in enumerate(write.namespace)},
        VALUE_KEY: write.value}
    if expires is not None:
        metadata[EXPIRES_KEY] = expires
    return metadata
