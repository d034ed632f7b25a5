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

Episodes written by other faces (``Memory.add``) show up as items whose value is
``{"content": ..., **metadata}``.
"""

from __future__ import annotations

import json
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
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from memroute.agent import RetrievalAgent
from memroute.errors import InvalidInputError
from memroute.memory.limits import MAX_K, MAX_LIST
from memroute.memory.models import Episode, Scope, StoredEpisode, coerce_scope
from memroute.memory.store import Memory
from memroute.memory.sync import SyncMemory, memory_and_loop
from memroute.strategies.base import STRATEGIES, Strategy

VALUE_KEY = "store_value"  # the metadata key holding a store item's value
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
    (default: the offline planner, no neighbouring turns).
    """

    supports_ttl = False

    def __init__(self, memory: Memory | SyncMemory, *, index: dict[str, Any] | None = None,
                 strategy: Strategy = "auto", agent: RetrievalAgent | None = None) -> None:
        self.memory, self.loop = memory_and_loop(memory)
        if strategy not in STRATEGIES:
            raise InvalidInputError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        fields = list((index or {}).get("fields") or ["$"])
        if not all(isinstance(f, str) and f for f in fields):
            raise InvalidInputError("index fields must be non-empty strings")
        self.fields = fields
        self.strategy = strategy
        self.agent = agent or RetrievalAgent(memory, context=(0, 0))

    # -- the two entry points ---------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in order, blocking (needs a `SyncMemory`)."""
        return self.loop.run_as_sync(self._batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in order, on the loop the memory's pool lives on."""
        return await self.loop.run_as_async(self._batch(list(ops)))

    async def _batch(self, ops: list[Op]) -> list[Result]:
        """As LangGraph's own stores: every op is validated first; reads see the state before
        the batch's writes; then the puts run (the last one per key wins)."""
        for op in ops:
            self._scope_of(op)
        results: list[Result] = [None if isinstance(op, PutOp) else await self._run(op)
                                 for op in ops]
        puts = {(op.namespace, op.key): op for op in ops if isinstance(op, PutOp)}
        for op in puts.values():
            await self._put(op)
        return results

    # -- one op -----------------------------------------------------------------------------

    @staticmethod
    def _scope_of(op: Op) -> Scope | None:
        if isinstance(op, (GetOp, PutOp)):
            _check_key(op.key)
            return namespace_scope(op.namespace)
        if isinstance(op, SearchOp):
            return namespace_scope(op.namespace_prefix)
        if isinstance(op, ListNamespacesOp):
            return None
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")

    async def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            scope = namespace_scope(op.namespace)
            found = await self.memory.get(scope, [op.key])
            return self._item(found[0], Item) if found else None
        if isinstance(op, SearchOp):
            return await self._search(op)
        return await self._list_namespaces(op)

    async def _put(self, op: PutOp) -> None:
        scope = namespace_scope(op.namespace)
        if op.value is None:
            await self.memory.delete(scope, uids=[op.key])
            return
        if not isinstance(op.value, dict):
            raise InvalidInputError(f"a store value is a dict, not {type(op.value).__name__}")
        try:
            as_json = json.dumps(op.value, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"a store value must be JSON-serializable: {exc}") from exc
        fields = self.fields if op.index in (None, False) else list(op.index)
        texts = [t for f in fields for t in get_text_at_path(op.value, tokenize_path(f))
                 if isinstance(t, str) and t.strip()]
        content = "\n".join(texts) if texts else as_json
        await self.memory.upsert(scope, [Episode(
            uid=op.key, content=content, producer=PRODUCER, session_id=SESSION,
            produced_at=datetime.now(timezone.utc), metadata={VALUE_KEY: op.value})])

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        scope = namespace_scope(op.namespace_prefix)
        limit, offset = op.limit, op.offset
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInputError("limit must be a positive integer")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInputError("offset must be a non-negative integer")
        filters = _value_filter(op.filter)
        if not op.query:
            found = await self.memory.recent(scope, filters=filters, limit=min(limit, MAX_LIST),
                                             offset=offset)
            return [self._item(s, SearchItem) for s in found]
        if offset + limit > MAX_K:
            raise InvalidInputError(f"offset + limit must be at most {MAX_K}")
        result = await self.agent.aretrieve(op.query, scope=scope, k=offset + limit,
                                            filters=filters, strategy=self.strategy)
        ranked = result.results[offset:]
        stored = {s.episode.uid: s for s in await self.memory.get(scope, [r.uid for r in ranked])}
        return [self._item(stored[r.uid], SearchItem, score=r.rerank_score)
                for r in ranked if r.uid in stored]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        limit, offset = op.limit, op.offset
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInputError("limit must be a positive integer")
        prefix: list[str] = []
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                for label in condition.path:
                    if label == "*" or len(prefix) >= 4:
                        break
                    prefix.append(label)
                break
        namespaces: set[tuple[str, ...]] = set()
        page = 0
        while True:  # scopes in order, filtered here by the remaining conditions
            scopes = await self.memory.list_scopes(prefix, limit=MAX_LIST, offset=page)
            for scope in scopes:
                namespace = scope_namespace(scope)
                if (scope.user_id is None and scope.agent_id is not None) or not all(
                        _matches(c, namespace) for c in op.match_conditions or ()):
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

