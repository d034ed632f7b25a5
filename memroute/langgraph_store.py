"""`MemrouteStore`: memroute as a LangGraph `BaseStore`, the long-term memory of any
LangGraph agent (``compile(store=...)``, ``create_react_agent(..., store=...)``).

The mapping:

- a namespace is a scope: ``(org_id, project_id)``, ``(org_id, project_id, user_id)`` or
  ``(org_id, project_id, user_id, agent_id)``; its labels are validated like scope ids.
  An operation reaches that one scope only: a search's ``namespace_prefix`` must name a
  scope too (deeper namespaces are other scopes, never searched together).
- a key is an episode uid (1-256 characters, no NUL).
- a value is an episode: the text at the index fields (``IndexConfig.fields``, default the
  whole value as JSON) is its content, embedded sentence by sentence; the value itself is
  kept verbatim in its metadata (``store_value``), so ``get`` returns it unchanged.
- ``put`` upserts (new content re-embedded, old sentences replaced in one transaction);
  ``put(..., None)`` and ``delete`` remove. ``updated_at`` is the episode's ``produced_at``
  (the time of the put; never before ``created_at``).
- ``search`` with a ``query`` runs the retrieval agent (``strategy``, default ``auto``) and
  scores items by its final rerank; without one it lists the newest first. ``filter`` uses
  LangGraph's syntax (``{"field": value}`` or ``{"field": {"$gt": ...}}``) on the value.
- ``put(..., index=False)`` items are never vector-scored: a search with a query returns them
  after the scored ones, with ``score=None`` (as LangGraph's in-memory store).
- ``ttl`` (minutes, or ``TTLConfig.default_ttl``) stores an expiry with the item; every read
  filters on it in SQL, so an expired item is never returned; reads with ``refresh_ttl``
  restart it; ``sweep_ttl`` deletes the expired items (optional).
- a batch is all or nothing: every op is validated first, any bad input is an
  `InvalidInputError` and nothing is written. ``tenant=`` binds a store to one namespace
  prefix (`ScopeForbiddenError` outside it; ``list_namespaces`` lists only its namespaces).

Episodes written by other faces (``Memory.add``) show up as items whose value is
``{"content": ..., **metadata}``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    NOT_PROVIDED,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path
from pydantic import ValidationError

from memroute.agent import RetrievalAgent
from memroute.errors import InvalidInputError, ScopeForbiddenError
from memroute.memory.limits import MAX_K, MAX_LIST
from memroute.memory.models import (
    MAX_CONTENT_CHARS,
    Episode,
    Scope,
    StoredEpisode,
    coerce_scope,
    json_text,
)
from memroute.memory.store import Memory
from memroute.memory.sync import SyncMemory, memory_and_loop
from memroute.strategies.base import STRATEGIES, Strategy

VALUE_KEY = "store_value"  # the metadata key holding a store item's value
EXPIRES_KEY = "store_expires_at"  # when an item with a ttl expires (Unix seconds)
TTL_KEY = "store_ttl_minutes"  # its ttl, for refreshes on read
UNINDEXED_KEY = "store_unindexed"  # true for an item put with index=False
MAX_VALUE_DEPTH = 64  # levels of nesting in a value
PRODUCER = "langgraph-store"
SESSION = "store"
_SCOPE_IDS = ("org_id", "project_id", "user_id", "agent_id")


def namespace_scope(namespace: Any) -> Scope:
    """The scope a namespace names, or `InvalidInputError`."""
    if not isinstance(namespace, tuple) or not 2 <= len(namespace) <= 4:
        raise InvalidInputError(
            "a memroute namespace is (org_id, project_id[, user_id[, agent_id]]), "
            f"got {namespace!r:.80}")
    if not all(isinstance(label, str) for label in namespace):
        raise InvalidInputError(f"namespace labels must be strings, got {namespace!r:.80}")
    return coerce_scope(dict(zip(_SCOPE_IDS, namespace)))


def scope_namespace(scope: Scope) -> tuple[str, ...]:
    """The namespace of a scope (its ids up to the last one set)."""
    ids = [scope.org_id, scope.project_id, scope.user_id, scope.agent_id]
    while ids[-1] is None:
        ids.pop()
    return tuple(ids)


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > 256 or "\x00" in key:
        raise InvalidInputError("a key is a string of 1-256 characters without NUL bytes")
    return key


def _depth_within(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` levels of dicts and lists (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict)
                                                  else item))
    return True


def _check_value(value: Any) -> str:
    """A put's value as JSON, or `InvalidInputError` saying what is wrong with it."""
    if not isinstance(value, dict):
        raise InvalidInputError(f"a store value is a dict, not {type(value).__name__}")
    if not _depth_within(value, MAX_VALUE_DEPTH):
        raise InvalidInputError(f"a store value nests at most {MAX_VALUE_DEPTH} levels")
    try:
        text = json_text(value)
    except ValueError as exc:
        raise InvalidInputError(f"a store value {exc}") from exc
    if len(text) > MAX_CONTENT_CHARS:
        raise InvalidInputError(
            f"a store value is at most {MAX_CONTENT_CHARS} characters as JSON")
    return text


def _check_ttl(ttl: Any) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not (
            math.isfinite(ttl) and ttl > 0):
        raise InvalidInputError(f"ttl is a positive number of minutes or None, got {ttl!r:.40}")
    return float(ttl)


def _check_page(limit: Any, offset: Any) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError("limit must be a positive integer")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError("offset must be a non-negative integer")


def _unexpired(now: float) -> dict[str, Any]:
    return {"$or": [{EXPIRES_KEY: {"$exists": False}}, {EXPIRES_KEY: {"$gt": now}}]}


def _all_of(*filters: dict[str, Any] | None) -> dict[str, Any]:
    parts = [f for f in filters if f]
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    ends = namespace[:len(path)] if condition.match_type == "prefix" else (
        namespace[len(namespace) - len(path):])
    return all(p == "*" or p == n for p, n in zip(path, ends))


def _value_filter(filters: dict[str, Any] | None) -> dict[str, Any] | None:
    """A LangGraph filter on the value, as memroute's filter on the stored value."""
    if not filters:
        return None
    if not isinstance(filters, dict):
        raise InvalidInputError("filter must be a mapping of value fields to conditions")
    for key in filters:
        if not isinstance(key, str) or key.startswith("$"):
            raise InvalidInputError(f"filter keys are value fields, got {key!r:.40}")
    return {f"{VALUE_KEY}.{key}": condition for key, condition in filters.items()}


class MemrouteStore(BaseStore):
    """A LangGraph `BaseStore` over memroute's episodic memory (see the module docstring).

    ``memory``: a `Memory` (async use) or a `SyncMemory` (sync and async use).
    ``index``: ``{"fields": [...]}`` as in LangGraph's ``IndexConfig`` (the store's own
    embedder is used; ``dims`` and ``embed`` are not needed). ``strategy``: the retrieval
    strategy of a search with a query. ``agent``: a `RetrievalAgent` over the same memory
    (default: the offline planner, no neighbouring turns). ``ttl``: LangGraph's
    ``TTLConfig`` (``default_ttl`` minutes for puts without ``ttl``, ``refresh_on_read``).
    ``tenant``: the namespace prefix (``"acme"`` or ``("acme", "assistant")``) this store is
    bound to: any other namespace is a `ScopeForbiddenError`, and ``list_namespaces`` lists
    only the tenant's.
    """

    supports_ttl = True

    def __init__(self, memory: Memory | SyncMemory, *, index: dict[str, Any] | None = None,
                 strategy: Strategy = "auto", agent: RetrievalAgent | None = None,
                 ttl: TTLConfig | None = None,
                 tenant: str | tuple[str, ...] | None = None) -> None:
        self.memory, self.loop = memory_and_loop(memory)
        if strategy not in STRATEGIES:
            raise InvalidInputError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        fields = list((index or {}).get("fields") or ["$"])
        if not all(isinstance(f, str) and f for f in fields):
            raise InvalidInputError("index fields must be non-empty strings")
        if ttl is not None:
            _check_ttl(ttl.get("default_ttl"))
        if isinstance(tenant, str):
            tenant = (tenant,)
        if tenant is not None:
            if not isinstance(tenant, tuple) or not 1 <= len(tenant) <= 4:
                raise InvalidInputError("tenant is an org id or a namespace prefix of 1-4 ids")
            coerce_scope(dict(zip(_SCOPE_IDS, tenant)))  # labels validated like scope ids
        self.fields = fields
        self.strategy = strategy
        self.ttl_config = ttl
        self.tenant: tuple[str, ...] | None = tenant
        self.agent = agent or RetrievalAgent(memory, context=(0, 0))

    # -- the two entry points ---------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in order, blocking (needs a `SyncMemory`)."""
        return self.loop.run_as_sync(self._batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in order, on the loop the memory's pool lives on."""
        return await self.loop.run_as_async(self._batch(list(ops)))

    async def _batch(self, ops: list[Op]) -> list[Result]:
        """As LangGraph's own stores, all or nothing: every op is validated (every put's
        episode built) before anything runs; reads see the state before the batch's writes;
        then the writes run (the last one per key wins): per scope, the deletions, then the
        puts in one transaction."""
        writes: dict[tuple[tuple[str, ...], str], Episode | None] = {}
        for op in ops:
            self._check(op)
            if isinstance(op, PutOp):
                writes[(op.namespace, op.key)] = self._episode(op)
        results: list[Result] = [None if isinstance(op, PutOp) else await self._run(op)
                                 for op in ops]
        by_scope: dict[Scope, tuple[list[str], list[Episode]]] = {}
        for (namespace, key), episode in writes.items():
            gone, kept = by_scope.setdefault(namespace_scope(namespace), ([], []))
            (gone if episode is None else kept).append(episode or key)  # type: ignore[arg-type]
        for scope, (gone, kept) in by_scope.items():
            if gone:
                await self.memory.delete(scope, uids=gone)
            if kept:
                await self.memory.upsert(scope, kept)
        return results

    def sweep_ttl(self) -> int:
        """Delete the expired items (blocking; needs a `SyncMemory`). Optional: expired items
        are never returned anyway. Returns how many were deleted."""
        return self.loop.run_as_sync(self._sweep())

    async def asweep_ttl(self) -> int:
        """Delete the expired items of every namespace this store reaches (its tenant's, when
        bound). Returns how many were deleted."""
        return await self.loop.run_as_async(self._sweep())

    async def _sweep(self) -> int:
        expired = {EXPIRES_KEY: {"$lte": time.time()}}
        deleted, page = 0, 0
        while True:
            scopes = await self.memory.list_scopes(list(self.tenant or ()), limit=MAX_LIST,
                                                   offset=page)
            for scope in scopes:
                while found := await self.memory.recent(scope, filters=expired, limit=MAX_LIST):
                    deleted += await self.memory.delete(
                        scope, uids=[s.episode.uid for s in found])
            if len(scopes) < MAX_LIST:
                return deleted
            page += MAX_LIST

    # -- one op -----------------------------------------------------------------------------

    def _scope(self, namespace: Any) -> Scope:
        scope = namespace_scope(namespace)
        if self.tenant is not None and tuple(namespace[:len(self.tenant)]) != self.tenant:
            raise ScopeForbiddenError(
                f"this store is bound to {self.tenant!r}; namespace {namespace!r:.80} is not in it")
        return scope

    def _check(self, op: Op) -> None:
        """Validate ``op`` before anything of its batch runs."""
        if isinstance(op, (GetOp, PutOp)):
            _check_key(op.key)
            self._scope(op.namespace)
        elif isinstance(op, SearchOp):
            self._scope(op.namespace_prefix)
            _check_page(op.limit, op.offset)
            if op.query and op.offset + op.limit > MAX_K:
                raise InvalidInputError(f"offset + limit must be at most {MAX_K}")
            _value_filter(op.filter)
        elif isinstance(op, ListNamespacesOp):
            _check_page(op.limit, op.offset)
            if op.max_depth is not None and (
                    isinstance(op.max_depth, bool) or not isinstance(op.max_depth, int)
                    or op.max_depth < 1):
                raise InvalidInputError("max_depth must be a positive integer or None")
        else:
            raise InvalidInputError(f"unknown store operation {type(op).__name__}")

    def _episode(self, op: PutOp) -> Episode | None:
        """The episode a put stores (None: a delete), or `InvalidInputError`."""
        if op.value is None:
            return None
        _check_value(op.value)
        ttl = _check_ttl(None if op.ttl is NOT_PROVIDED else op.ttl)
        metadata: dict[str, Any] = {VALUE_KEY: op.value}
        if ttl is not None:
            metadata.update({EXPIRES_KEY: time.time() + ttl * 60, TTL_KEY: ttl})
        if op.index is False:
            metadata[UNINDEXED_KEY] = True
        if op.index not in (None, False) and (not isinstance(op.index, (list, tuple)) or not all(
                isinstance(f, str) and f for f in op.index)):
            raise InvalidInputError("index is False or a list of field paths")
        fields = self.fields if op.index in (None, False) else list(op.index)
        texts = [t for f in fields for t in get_text_at_path(op.value, tokenize_path(f))
                 if isinstance(t, str) and t.strip()]
        content = "\n".join(texts) if texts else json_text(op.value)
        try:
            return Episode(uid=op.key, content=content[:MAX_CONTENT_CHARS], producer=PRODUCER,
                           session_id=SESSION, produced_at=datetime.now(timezone.utc),
                           metadata=metadata)
        except (ValidationError, ValueError, TypeError) as exc:
            raise InvalidInputError(f"invalid store value for key {op.key!r:.60}: {exc}") from exc

    async def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = [s for s in await self.memory.get(namespace_scope(op.namespace), [op.key])
                     if not self._expired(s, time.time())]
            if found and op.refresh_ttl:
                await self._refresh(found)
            return self._item(found[0], Item) if found else None
        if isinstance(op, SearchOp):
            return await self._search(op)
        return await self._list_namespaces(op)

    @staticmethod
    def _expired(stored: StoredEpisode, now: float) -> bool:
        expires = stored.episode.metadata.get(EXPIRES_KEY)
        return isinstance(expires, (int, float)) and expires <= now

    async def _refresh(self, found: list[StoredEpisode]) -> None:
        """Restart the ttl of the items that have one (LangGraph's ``refresh_ttl``)."""
        now = time.time()
        patches = {s.episode.uid: {EXPIRES_KEY: now + s.episode.metadata[TTL_KEY] * 60}
                   for s in found if isinstance(s.episode.metadata.get(TTL_KEY), (int, float))}
        if patches:
            await self.memory.merge_metadata(found[0].scope, patches)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        """Scored items (indexed, by the agent's final rerank) first, then unindexed ones
        unscored, as LangGraph's stores; expired items are filtered out in SQL."""
        scope = namespace_scope(op.namespace_prefix)
        limit, offset = op.limit, op.offset
        live = _unexpired(time.time())
        filters = _value_filter(op.filter)
        if not op.query:
            found = await self.memory.recent(scope, filters=_all_of(filters, live),
                                             limit=min(limit, MAX_LIST), offset=offset)
            items = [self._item(s, SearchItem) for s in found]
        else:
            indexed = {UNINDEXED_KEY: {"$exists": False}}
            result = await self.agent.aretrieve(
                op.query, scope=scope, k=offset + limit, strategy=self.strategy,
                filters=_all_of(filters, live, indexed))
            ranked = result.results[offset:]
            stored = {s.episode.uid: s
                      for s in await self.memory.get(scope, [r.uid for r in ranked])}
            items = [self._item(stored[r.uid], SearchItem, score=r.rerank_score)
                     for r in ranked if r.uid in stored]
            found = [stored[r.uid] for r in ranked if r.uid in stored]
            if len(result.results) < offset + limit:  # the scored ones are exhausted
                unscored = await self.memory.recent(
                    scope, filters=_all_of(filters, live, {UNINDEXED_KEY: True}),
                    limit=min(limit - len(items), MAX_LIST),
                    offset=max(0, offset - len(result.results)))
                items += [self._item(s, SearchItem) for s in unscored]
                found += unscored
        if found and op.refresh_ttl:
            await self._refresh(found)
        return items

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        limit, offset = op.limit, op.offset
        conditions = list(op.match_conditions or ())
        asked: list[str] = []
        for condition in conditions:
            if condition.match_type == "prefix":
                for label in condition.path:
                    if label == "*" or len(asked) >= 4:
                        break
                    asked.append(label)
                break
        prefix = asked
        if self.tenant is not None:  # the tenant's prefix, and what was asked within it
            shared = min(len(asked), len(self.tenant))
            if list(self.tenant[:shared]) != asked[:shared]:
                return []
            prefix = asked if len(asked) > len(self.tenant) else list(self.tenant)
            conditions.append(MatchCondition(match_type="prefix", path=self.tenant))
        namespaces: set[tuple[str, ...]] = set()
        page = 0
        while True:  # scopes in order, filtered here by the remaining conditions
            scopes = await self.memory.list_scopes(prefix, limit=MAX_LIST, offset=page)
            for scope in scopes:
                namespace = scope_namespace(scope)
                if (scope.user_id is None and scope.agent_id is not None) or not all(
                        _matches(c, namespace) for c in conditions):
                    continue  # a scope with an agent but no user has no namespace
                namespaces.add(namespace if op.max_depth is None else namespace[:op.max_depth])
            if len(scopes) < MAX_LIST:
                break
            page += MAX_LIST
        return sorted(namespaces)[offset:offset + limit]

    @staticmethod
    def _item(stored: StoredEpisode, cls: type[Item], **extra: Any) -> Any:
        episode = stored.episode
        value = episode.metadata.get(VALUE_KEY)
        if not isinstance(value, dict):  # an episode written by another face
            value = {"content": episode.content, **episode.metadata}
        return cls(namespace=scope_namespace(stored.scope), key=episode.uid, value=value,
                   created_at=stored.created_at,
                   updated_at=max(stored.created_at, episode.produced_at), **extra)
