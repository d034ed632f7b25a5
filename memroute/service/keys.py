"""API keys: each bound to one org and optionally to some projects and users.

A key reads ``mr_<key_id>.<secret>``. Only the SHA-256 of the secret is stored (the secret
is 256 random bits, so a fast hash is as safe as a slow one and costs nothing per request);
the key itself is shown once, when it is created. Revoked keys stay listed with their date.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict

from memroute.errors import InvalidInputError, NotAuthenticatedError
from memroute.memory.items import DEFAULT_TENANT
from memroute.memory.models import Scope, text_problem
from memroute.memory.pool import GuardedPool, ServerGuard, check_idle_connection
from memroute.memory.retry import with_retry
from memroute.memory.schema import check_identifier

PREFIX = "mr_"
MAX_CACHED_KEYS = 10_000  # verified keys a process keeps (with cache_seconds > 0)
UNBOUND_STORE_ORG = DEFAULT_TENANT.org_id  # the items of LangGraph stores built without a tenant


def unbound_store_org(org_id: str) -> str | None:
    """Why no API key may reach ``org_id``, or None. The org of `DEFAULT_TENANT` holds the
    items every `MemrouteStore` built without a tenant shares: it is nobody's tenant."""
    if org_id != UNBOUND_STORE_ORG:
        return None
    return (f"org {org_id!r} holds the items of LangGraph stores built without a tenant and "
            "is nobody's tenant: no API key reaches it (bind the store to a tenant, "
            "MemrouteStore(tenant=...), and use that org)")


class KeyGrant(BaseModel):
    """What one key may reach: its org, and its projects and users (``None``: all of them)."""

    model_config = ConfigDict(frozen=True)

    key_id: str
    org_id: str
    project_ids: tuple[str, ...] | None = None
    user_ids: tuple[str, ...] | None = None

    def allows(self, scope: Scope) -> bool:
        """Whether ``scope`` lies inside this key (a key bound to users never reaches the
        user-less scopes of its projects)."""
        return (scope.org_id == self.org_id
                and (self.project_ids is None or scope.project_id in self.project_ids)
                and (self.user_ids is None or scope.user_id in self.user_ids))

    def default_scope(self, project_id: str | None = None, user_id: str | None = None,
                      agent_id: str | None = None) -> Scope:
        """The key's org with the given parts; a part left out is the key's only project
        (or user) when it is bound to exactly one."""
        if project_id is None and self.project_ids and len(self.project_ids) == 1:
            project_id = self.project_ids[0]
        if user_id is None and self.user_ids and len(self.user_ids) == 1:
            user_id = self.user_ids[0]
        parts = {"project_id": project_id, "user_id": user_id, "agent_id": agent_id}
        return Scope(org_id=self.org_id, **{k: v for k, v in parts.items() if v is not None})


class KeyRecord(KeyGrant):
    """A stored key as `memroute keys list` shows it (never its secret)."""

    name: str = ""
    created_at: datetime
    revoked_at: datetime | None = None


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def _split(token: str) -> tuple[str, str] | None:
    if not token.startswith(PREFIX) or "." not in token:
        return None
    key_id, secret = token[len(PREFIX):].split(".", 1)
    return (key_id, secret) if key_id and secret else None


def _check_text(value: str, what: str) -> str:
    """``value`` if PostgreSQL can store it as text, else `InvalidInputError` (a command-line
    argument that is not valid UTF-8 arrives with lone surrogates)."""
    problem = text_problem(value)
    if problem:
        raise InvalidInputError(f"{what} {value!r:.80} {problem}")
    return value


def _check_parts(values: list[str] | None, what: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    for value in values:  # the same rule as a scope's parts
        try:
            Scope(org_id="x", project_id=value)
        except ValueError as exc:
            raise InvalidInputError(f"invalid {what} {value!r}: {exc}") from exc
    if not values:
        raise InvalidInputError(f"give at least one {what}, or none to allow all")
    return tuple(dict.fromkeys(values))


class KeyStore:
    """The ``api_keys`` table of a store's schema (created by its migrations)."""

    def __init__(self, pool: AsyncConnectionPool, schema: str, *,
                 cache_seconds: float = 0.0) -> None:
        self._pool = pool
        self.schema = check_identifier(schema)
        self.cache_seconds = cache_seconds
        self._verified: dict[bytes, tuple[float, KeyGrant]] = {}

    @classmethod
    async def open(cls, url: str, schema: str, max_size: int = 4, *,
                   cache_seconds: float = 0.0, guard: ServerGuard | None = None,
                   timeout_s: float = 30.0) -> KeyStore:
        """A key store on its own small pool (the schema must be migrated: open a `Memory`
        on it first). ``cache_seconds`` > 0 keeps a verified key that long without asking
        the database again, so a revocation takes up to that long to reach this process.

        The pool is guarded as the memory's is (`GuardedPool`; pass the memory's ``guard``
        so a dead embedded server is restarted once for both), and every lookup is retried
        across connection failures (`with_retry`): a dead database is a
        `StoreUnavailableError` within seconds, never the pool's whole ``timeout_s``."""
        # each lookup is one statement in autocommit, on a connection lent without a check
        # while its socket is quiet: one round trip (with a check, BEGIN and the pool's
        # ROLLBACK it was four, ~0.4 ms more per request looked up)
        pool = GuardedPool(url, min_size=1, max_size=max_size, open=False, timeout=timeout_s,
                           check=check_idle_connection, kwargs={"autocommit": True},
                           name=f"memroute-keys-{schema}", guard=guard or ServerGuard(url, None))
        await pool.open(wait=True, timeout=timeout_s)
        return cls(pool, schema, cache_seconds=cache_seconds)

    async def _run(self, what: str, sql: str, params: Any, fetch: str | None = None) -> Any:
        """One statement on the pool, retried across connection failures: the row(s) of
        ``fetch`` ("one" or "all"), else the row count."""
        async def run() -> Any:
            async with self._pool.connection() as conn:
                cur = await conn.execute(sql, params)
                if fetch == "one":
                    return await cur.fetchone()
                return await cur.fetchall() if fetch == "all" else cur.rowcount
        return await with_retry(run, what)

    async def close(self) -> None:
        await self._pool.close()

    async def create(self, org_id: str, *, project_ids: list[str] | None = None,
                     user_ids: list[str] | None = None, name: str = "") -> tuple[str, KeyRecord]:
        """A new key: the token (shown once) and its record."""
        if not org_id:
            raise InvalidInputError("a key needs an org")
        try:
            Scope(org_id=org_id)
        except ValueError as exc:
            raise InvalidInputError(f"invalid org {org_id!r}: {exc}") from exc
        if problem := unbound_store_org(org_id):
            raise InvalidInputError(problem)
        projects = _check_parts(project_ids, "project")
        users = _check_parts(user_ids, "user")
        _check_text(name, "name")
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        # a retry after a lost acknowledgement finds its own row (same id and secret)
        row = await self._run(
            "create key",
            f"INSERT INTO {self.schema}.api_keys AS k "
            "(key_id, secret_sha256, org_id, project_ids, user_ids, name) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (key_id) DO UPDATE SET "
            "key_id = EXCLUDED.key_id WHERE k.secret_sha256 = EXCLUDED.secret_sha256 "
            "RETURNING created_at",
            (key_id, _digest(secret), org_id, projects and list(projects),
             users and list(users), name), "one")
        if row is None:  # 48 random bits collided with another key's id
            return await self.create(org_id, project_ids=project_ids, user_ids=user_ids,
                                     name=name)
        created_at = row[0]
        record = KeyRecord(key_id=key_id, org_id=org_id, project_ids=projects, user_ids=users,
                           name=name, created_at=created_at)
        return f"{PREFIX}{key_id}.{secret}", record

    async def verify(self, token: str | None) -> KeyGrant | None:
        """The grant of a valid, unrevoked key; ``None`` for anything else.

        Raises:
            NotAuthenticatedError: the key is bound to `UNBOUND_STORE_ORG` (stored before
                `create` refused it)."""
        parts = _split(token or "")
        if parts is None or text_problem(token or ""):
            return None
        key_id, secret = parts
        cache_key = _digest(token or "")
        asked_at = time.monotonic()
        cached = self._verified.get(cache_key)
        if cached is not None and cached[0] > asked_at:
            return cached[1]
        grant = await self._lookup(key_id, secret)
        if grant is not None and (problem := unbound_store_org(grant.org_id)):
            raise NotAuthenticatedError(f"API key {key_id} is refused: {problem}")
        if grant is not None and self.cache_seconds > 0:
            if len(self._verified) >= MAX_CACHED_KEYS:
                self._verified.clear()
            # trusted from when it was asked, not answered: a revocation the lookup just
            # missed still reaches this process within cache_seconds
            self._verified[cache_key] = (asked_at + self.cache_seconds, grant)
        return grant

    async def _lookup(self, key_id: str, secret: str) -> KeyGrant | None:
        row = await self._run(
            "key lookup",
            f"SELECT secret_sha256, org_id, project_ids, user_ids FROM {self.schema}.api_keys "
            "WHERE key_id = %s AND revoked_at IS NULL", (key_id,), "one")
        if row is None or not hmac.compare_digest(bytes(row[0]), _digest(secret)):
            return None
        return KeyGrant(key_id=key_id, org_id=row[1],
                        project_ids=tuple(row[2]) if row[2] is not None else None,
                        user_ids=tuple(row[3]) if row[3] is not None else None)

    async def list(self, org_id: str | None = None) -> list[KeyRecord]:
        """Every key (of one org), oldest first, revoked ones included."""
        where, params = ("WHERE org_id = %s", [_check_text(org_id, "org")]) if org_id else ("", [])
        rows = await self._run(
            "list keys",
            f"SELECT key_id, org_id, project_ids, user_ids, name, created_at, revoked_at "
            f"FROM {self.schema}.api_keys {where} ORDER BY created_at, key_id", params, "all")
        return [KeyRecord(key_id=r[0], org_id=r[1], project_ids=r[2], user_ids=r[3], name=r[4],
                          created_at=r[5], revoked_at=r[6]) for r in rows]

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key by its id (the part between ``mr_`` and the dot); ``False`` if there
        is no such unrevoked key."""
        parts = _split(key_id)
        key_id = _check_text(parts[0] if parts else key_id.removeprefix(PREFIX), "key id")
        self._verified = {k: v for k, v in self._verified.items() if v[1].key_id != key_id}
        return await self._run(
            "revoke key", f"UPDATE {self.schema}.api_keys SET revoked_at = now() "
            "WHERE key_id = %s AND revoked_at IS NULL", (key_id,)) == 1
