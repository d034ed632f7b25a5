"""`MemrouteStore`: memroute as a LangGraph `BaseStore`, the long-term memory of any
LangGraph agent (``compile(store=...)``, ``create_react_agent(..., store=...)``), with
LangGraph's semantics (its own store test suites run against it: tests/langgraph_store_suite).

- A store is bound to a tenant (a memroute `Scope`; ``tenant=None``: `DEFAULT_TENANT`, shared
  by every store built without one on the same schema, and nobody's: no store may name its
  org). Inside it, namespaces are LangGraph's: any depth >= 1,
  labels without "."; a search or a listing reaches every namespace under its prefix, and
  nothing outside the tenant, whatever the prefix: the tenant's scope key is in every
  statement (memroute.memory.items).
- ``index`` is LangGraph's index config, and chooses one of two search contracts
  (memroute._store_indexes). With ``embed`` (LangChain ``Embeddings``, a function, or a
  "provider:model" string) and ``dims``, each item gets one vector per field path and a
  search scores it as LangGraph's PostgresStore does: the similarity of the query to its best
  field vector (``distance_type`` cosine by default, ``inner_product`` or ``l2``). Without
  ``embed``, an item's text at the index fields is one episode in the tenant's scope and a
  search runs memroute's retrieval agent (hybrid lanes, the strategy, the final rerank): its
  score is the final rerank score. Either way, consecutive pages of one query are slices of
  one ranking.
- Items put with ``index=False``, or with no text at the index fields, are never scored: a
  search with a query returns them after the scored ones, with ``score=None``.
- ``ttl`` is LangGraph's ``TTLConfig``; ``omit_expired`` defaults to True here (expired items
  are never read, ``list_namespaces`` included); ``start_ttl_sweeper`` deletes them, every
  tenant's (one sweep of the whole table, as LangGraph's PostgresStore).
- A batch is validated whole (namespaces, match conditions, keys, values, ttls, filters,
  bounds) before anything runs: any bad op raises a typed error and nothing is written. Its
  reads see the state before its writes, which commit in one transaction. Concurrent calls
  run as one batch (as LangGraph's async stores), and a failing op fails its own caller only
  (memroute._store_batches).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base import InvalidNamespaceError as LangGraphInvalidNamespaceError

from memroute._log import get_logger
from memroute._loop import LoopHandle
from memroute._store_batches import MergedBatches
from memroute._store_indexes import (
    PlannedPut,
    VectorIndex,
    episode_filter,
    make_index,
    texts_at,
    tokenized,
)
from memroute.agent import RetrievalAgent
from memroute.errors import InvalidInputError, InvalidNamespaceError
from memroute.memory.filters import compile_filter
from memroute.memory.items import DEFAULT_TENANT, ItemWrite, StoredItem, item_uid, namespace_text
from memroute.memory.limits import MAX_K, MAX_LIST, MAX_OFFSET, MAX_QUERY_CHARS
from memroute.memory.models import MAX_CONTENT_CHARS, Scope, coerce_scope, json_text, text_problem
from memroute.memory.store import Memory
from memroute.memory.sync import SyncMemory, memory_and_loop
from memroute.strategies.base import STRATEGIES, Strategy

log = get_logger(__name__)

MAX_VALUE_DEPTH = 64  # levels of nesting in a value
MAX_KEY_CHARS = 256
MAX_NAMESPACE_BYTES = 1024  # of the labels joined by "." (an index entry holds ~2.7 kB)
DEFAULT_SWEEP_MINUTES = 5.0
MIN_SWEEP_MINUTES = 1 / 600  # a sweep every 0.1 s at most  # as LangGraph's stores, when the ttl config names no interval
# a ttl (and a sweep interval) of at most 1,000 years: an expiry Python's and PostgreSQL's
# times can hold (None keeps an item until it is deleted)
MAX_TTL_MINUTES = 1_000 * 365.25 * 24 * 60
_SCOPE_IDS = ("org_id", "project_id", "user_id", "agent_id")
_TTL_KEYS = frozenset({"default_ttl", "refresh_on_read", "omit_expired",
                       "sweep_interval_minutes"})
_NEEDS_SYNC_MEMORY = (
    "a synchronous call to a MemrouteStore over a Memory needs that Memory's event loop "
    "running in another thread; use the async call (aget, asearch, aput, ...) or build the "
    "store over a SyncMemory")


def tenant_scope(tenant: Any) -> Scope:
    """The scope a ``tenant=`` names: a `Scope` (or its dict), an org id, or a tuple of
    (org_id[, project_id[, user_id[, agent_id]]]); None is `DEFAULT_TENANT`, whose org no
    tenant may name (it is every unbound store's, nobody's own)."""
    if tenant is None:
        return DEFAULT_TENANT
    if isinstance(tenant, str):
        tenant = (tenant,)
    if isinstance(tenant, (tuple, list)):
        if not 1 <= len(tenant) <= len(_SCOPE_IDS):
            raise InvalidInputError("a tenant is an org id or a tuple of 1-4 scope ids")
        tenant = dict(zip(_SCOPE_IDS, tenant))
    scope = coerce_scope(tenant)
    if scope.org_id == DEFAULT_TENANT.org_id:
        raise InvalidInputError(
            f"org {DEFAULT_TENANT.org_id!r} is reserved: it holds the items of every store "
            "built without a tenant on this schema. Leave tenant out to share those, or "
            "name an org of your own")
    return scope


# -- validation of one op ------------------------------------------------------------------

def _check_labels(labels: Any, *, what: str = "namespace") -> tuple[str, ...]:
    if not isinstance(labels, (tuple, list)):
        raise InvalidNamespaceError(f"a {what} is a tuple of strings, got {labels!r:.80}")
    for label in labels:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError(
                f"{what} labels are non-empty strings, got {label!r:.40} in {labels!r:.80}")
        if "." in label:
            raise InvalidNamespaceError(f"{what} labels cannot contain '.': {label!r:.80}")
        if problem := text_problem(label):
            raise InvalidNamespaceError(f"{what} labels {problem}: {label!r:.80}")
    if len(namespace_text(labels).encode()) > MAX_NAMESPACE_BYTES:
        raise InvalidNamespaceError(
            f"a {what} is at most {MAX_NAMESPACE_BYTES} bytes with its labels joined by '.'")
    return tuple(labels)


def _check_namespace(namespace: Any) -> tuple[str, ...]:
    labels = _check_labels(namespace)
    if not labels:
        raise InvalidNamespaceError("a namespace has at least one label")
    return labels


def _match_path(path: Any) -> Any:
    """A match condition's path: a bare string is one label (``MatchCondition("suffix",
    "public")``)."""
    return (path,) if isinstance(path, str) else tuple(path) if isinstance(path, list) else path


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise InvalidInputError(f"a key is a string of 1-{MAX_KEY_CHARS} characters")
    if problem := text_problem(key):
        raise InvalidInputError(f"a key {problem}")
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


def _check_value(value: Any) -> dict[str, Any]:
    """A put's value as a dict, or `InvalidInputError` saying what is wrong with it."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"a store value is a mapping, not {type(value).__name__}")
    value = dict(value)
    if not _depth_within(value, MAX_VALUE_DEPTH):
        raise InvalidInputError(f"a store value nests at most {MAX_VALUE_DEPTH} levels")
    try:
        text = json_text(value)
    except ValueError as exc:
        raise InvalidInputError(f"a store value {exc}") from exc
    if len(text) > MAX_CONTENT_CHARS:
        raise InvalidInputError(f"a store value is at most {MAX_CONTENT_CHARS} characters as JSON")
    return value


def _check_minutes(minutes: Any, what: str) -> float | None:
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not (
            math.isfinite(minutes) and 0 < minutes <= MAX_TTL_MINUTES):
        raise InvalidInputError(f"{what} is a positive number of minutes, at most "
                                f"{MAX_TTL_MINUTES:,.0f} (1,000 years), or None; got "
                                f"{minutes!r:.40}")
    return float(minutes)


def _check_int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"{what} must be an integer in [{low}, {high}], got {value!r:.40}")
    return value


def _check_query(query: Any) -> str | None:
    if query is None or query == "":
        return None
    if not isinstance(query, str):
        raise InvalidInputError(f"query must be a string, not {type(query).__name__}")
    if problem := text_problem(query):
        raise InvalidInputError(f"query {problem}")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInputError(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query if query.strip() else None


def _check_filter(filters: Any) -> dict[str, Any] | None:
    """LangGraph's filter on the value (``{"field": v}``, ``{"field": {"$gt": v}}``; memroute's
    dialect: memroute.memory.filters), or a `FilterError`."""
    if not filters:
        return None
    if not isinstance(filters, dict):
        raise InvalidInputError("filter must be a mapping of value fields to conditions")
    compile_filter(filters, "i", document="value", columns=False)
    compile_filter(episode_filter(filters), "s")
    return filters


def _check_ttl_config(ttl: Any) -> TTLConfig | None:
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise InvalidInputError("ttl is LangGraph's TTLConfig (a mapping) or None")
    if unknown := sorted(str(k) for k in ttl if k not in _TTL_KEYS):
        raise InvalidInputError(f"unknown ttl setting(s) {unknown}: use {sorted(_TTL_KEYS)}")
    _check_minutes(ttl.get("default_ttl"), "default_ttl")
    _check_minutes(ttl.get("sweep_interval_minutes"), "sweep_interval_minutes")
    for flag in ("refresh_on_read", "omit_expired"):
        if not isinstance(ttl.get(flag, True), bool):
            raise InvalidInputError(f"{flag} is true or false")
    return TTLConfig(**ttl)  # type: ignore[typeddict-item]


def _typed_namespace_errors(method: Any) -> Any:
    """``method`` raising memroute's `InvalidNamespaceError` where LangGraph's `BaseStore`
    validation raises its own (an `InvalidInputError` too, as every memroute input error)."""
    if asyncio.iscoroutinefunction(method):
        @functools.wraps(method)
        async def typed_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await method(*args, **kwargs)
            except LangGraphInvalidNamespaceError as exc:
                if isinstance(exc, InvalidInputError):
                    raise
                raise InvalidNamespaceError(str(exc)) from exc
        return typed_async

    @functools.wraps(method)
    def typed(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except LangGraphInvalidNamespaceError as exc:
            if isinstance(exc, InvalidInputError):
                raise
            raise InvalidNamespaceError(str(exc)) from exc
    return typed


class MemrouteStore(BaseStore):
    """A LangGraph `BaseStore` over memroute's memory (see the module docstring).

    ``memory``: a `SyncMemory` (sync and async calls, as LangGraph's ``PostgresStore``) or a
    `Memory` (async calls; sync calls only from other threads, as ``AsyncPostgresStore``).
    ``tenant``: the `Scope` (or org id, or tuple of scope ids) the store is bound to;
    default `DEFAULT_TENANT`. ``index``: LangGraph's ``IndexConfig`` (``dims``, ``embed``,
    ``fields``; ``distance_type`` and ``ann_index_config`` as ``PostgresStore``, without an
    approximate index): with ``embed``, LangGraph's vector search; without, memroute's own.
    ``ttl``: LangGraph's ``TTLConfig``.
    ``strategy`` and ``agent``: the retrieval strategy and `RetrievalAgent` of memroute's own
    search (default: ``auto``, the offline planner, no neighbouring turns).
    """

    supports_ttl = True

    def __init__(self, memory: Memory | SyncMemory, *, index: Mapping[str, Any] | None = None,
                 ttl: TTLConfig | None = None, tenant: Any = None,
                 strategy: Strategy = "auto", agent: RetrievalAgent | None = None) -> None:
        self.memory, self.loop = memory_and_loop(memory)
        if strategy not in STRATEGIES:
            raise InvalidInputError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        self.tenant = tenant_scope(tenant)
        self.ttl_config = _check_ttl_config(ttl)
        self.strategy = strategy
        self.agent = agent or RetrievalAgent(memory, context=(0, 0),
                                             expired_items=not self.omit_expired)
        self._index = make_index(index, self.memory, self.agent, strategy)
        self.index_config = dict(index) if index is not None else None
        self.embeddings = (self._index.embeddings if isinstance(self._index, VectorIndex)
                           else None)
        self.items = self.memory.items
        # the loop the memory's pool lives on (a Memory's: its caller's, known once used)
        self._home = self.loop.loop if isinstance(self.loop, LoopHandle) else _running_loop()
        self._batches = MergedBatches(self._execute)
        self._sweeper: asyncio.Task[None] | concurrent.futures.Future[None] | None = None

    @property
    def omit_expired(self) -> bool:
        """Whether reads leave expired items out (``TTLConfig.omit_expired``; default True)."""
        return bool((self.ttl_config or {}).get("omit_expired", True))

    # -- the two entry points ---------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops as one batch, blocking (see the class docstring for which threads)."""
        plan = self._plan(list(ops))
        if isinstance(self.loop, LoopHandle):
            return self.loop.run_as_sync(self._queued(plan))
        running = _running_loop()
        if running is not None and (self._home is None or running is self._home):
            raise asyncio.InvalidStateError(
                "a synchronous MemrouteStore call on the event loop its Memory lives on would "
                "block that loop: await the async call instead (store.aget, store.asearch, ...)")
        if self._home is None or self._home.is_closed():
            raise InvalidInputError(_NEEDS_SYNC_MEMORY)
        return asyncio.run_coroutine_threadsafe(self._queued(plan), self._home).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops as one batch, on the loop the memory's pool lives on."""
        plan = self._plan(list(ops))
        if isinstance(self.loop, LoopHandle):
            return await self.loop.run_as_async(self._queued(plan))
        running = asyncio.get_running_loop()
        if self._home is None or self._home.is_closed():
            self._home = running
        if running is not self._home:
            return await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(self._queued(plan), self._home))
        return await self._queued(plan)

    # -- planning: every op validated before anything runs ----------------------------------

    def _plan(self, ops: list[Op]) -> list[Any]:
        """The ops, validated whole: puts become `PlannedPut`s, the rest stay as they are."""
        return [self._check(op) for op in ops]

    def _check(self, op: Op) -> Any:
        if isinstance(op, GetOp):
            _check_namespace(op.namespace)
            _check_key(op.key)
            return op
        if isinstance(op, PutOp):
            return self._check_put(op)
        if isinstance(op, SearchOp):
            _check_labels(op.namespace_prefix, what="namespace prefix")
            _check_int(op.limit, "limit", 1, MAX_K)
            _check_int(op.offset, "offset", 0, MAX_OFFSET)
            if _check_query(op.query):
                self._index.check_search(op)
            _check_filter(op.filter)
            return op
        if isinstance(op, ListNamespacesOp):
            for condition in op.match_conditions or ():
                if getattr(condition, "match_type", None) not in ("prefix", "suffix"):
                    raise InvalidInputError(f"a match condition's type is 'prefix' or 'suffix', "
                                            f"got {condition!r:.80}")
                _check_labels(_match_path(condition.path), what=f"{condition.match_type} path")
            if op.max_depth is not None:
                _check_int(op.max_depth, "max_depth", 1, 10_000)
            _check_int(op.limit, "limit", 1, MAX_LIST)
            _check_int(op.offset, "offset", 0, MAX_OFFSET)
            return op
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")

    def _check_put(self, op: PutOp) -> PlannedPut:
        namespace, key = _check_namespace(op.namespace), _check_key(op.key)
        if op.value is None:
            return PlannedPut(ItemWrite(namespace, key, None))
        value = _check_value(op.value)
        ttl = (self.ttl_config or {}).get("default_ttl") if op.ttl is NOT_PROVIDED else op.ttl
        ttl = _check_minutes(ttl, "ttl")
        if op.index is False:
            paths: tuple[tuple[str, Any], ...] = ()
        else:
            paths = self._index.fields if op.index is None else tokenized(op.index, "a put's index")
        return self._index.plan_put(ItemWrite(namespace, key, value, ttl), texts_at(value, paths))

    # -- running: concurrent batches as one -------------------------------------------------

    async def _queued(self, plan: list[Any]) -> list[Result]:
        """Run ``plan`` with every other batch waiting on this loop (`MergedBatches`); each
        caller's embedding is its own."""
        await self._index.embed([step for step in plan if isinstance(step, PlannedPut)])
        return await self._batches.run(plan)

    async def _execute(self, plan: list[Any]) -> list[Result]:
        """The reads (seeing the state before the batch), then the writes, in one transaction."""
        results: list[Result] = [None] * len(plan)
        gets = [(i, step) for i, step in enumerate(plan) if isinstance(step, GetOp)]
        if gets:
            found = await self.items.get(
                self.tenant, [(g.namespace, g.key) for _, g in gets],
                live_only=self.omit_expired, refresh=[g.refresh_ttl for _, g in gets])
            for i, get in gets:
                item = found.get((tuple(get.namespace), get.key))
                results[i] = _as(Item, item) if item is not None else None
        done: dict[Any, Result] = {}
        for i, step in enumerate(plan):
            if isinstance(step, (SearchOp, ListNamespacesOp)):
                key: Any = step
                try:
                    hash(step)
                except TypeError:  # a filter makes it unhashable: run it on its own
                    key = object()
                if key not in done:
                    done[key] = await (self._search(step) if isinstance(step, SearchOp)
                                       else self._list_namespaces(step))
                results[i] = done[key]
        writes = [step.write for step in plan if isinstance(step, PlannedPut)]
        if writes:
            await self.items.write(self.tenant, writes)
        return results

    # -- reads ------------------------------------------------------------------------------

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix, query = tuple(op.namespace_prefix), _check_query(op.query)
        if query is None:
            found = await self.items.listing(self.tenant, prefix, op.filter, limit=op.limit,
                                             offset=op.offset, live_only=self.omit_expired,
                                             refresh=op.refresh_ttl)
        else:
            found = await self._index.search(self.items, self.tenant, op, prefix, query,
                                            omit_expired=self.omit_expired)
        return [_as(SearchItem, item) for item in found]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = [(c.match_type, _match_path(c.path)) for c in op.match_conditions or ()]
        return await self.items.namespaces(self.tenant, conditions, max_depth=op.max_depth,
                                           limit=op.limit, offset=op.offset,
                                           live_only=self.omit_expired)

    # -- ttl --------------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete the expired items of every tenant of the memory's schema now (blocking), as
        LangGraph's stores sweep their whole table; how many."""
        if isinstance(self.loop, LoopHandle):
            return self.loop.run_as_sync(self.items.sweep())
        if self._home is None or _running_loop() is self._home:
            raise InvalidInputError(_NEEDS_SYNC_MEMORY)
        return asyncio.run_coroutine_threadsafe(self.items.sweep(), self._home).result()

    async def asweep_ttl(self) -> int:
        """Delete the expired items of every tenant of the memory's schema now; how many."""
        return await self.loop.run_as_async(self.items.sweep())

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        """Delete every tenant's expired items every ``sweep_interval_minutes`` (default the
        ttl config's, else 5), as LangGraph's stores: over a `SyncMemory` it returns a
        ``concurrent.futures.Future``; over a `Memory` it is awaited (``await
        store.start_ttl_sweeper()``) and gives the ``asyncio.Task``. Without a ttl config it
        does nothing."""
        interval = _check_minutes(sweep_interval_minutes, "sweep_interval_minutes") or float(
            (self.ttl_config or {}).get("sweep_interval_minutes") or DEFAULT_SWEEP_MINUTES)
        if interval < MIN_SWEEP_MINUTES:
            raise InvalidInputError(f"sweep_interval_minutes is at least {MIN_SWEEP_MINUTES:.4f}"
                                    f" (a sweep every 0.1 s), got {interval!r:.40}")
        if isinstance(self.loop, LoopHandle):
            if self.ttl_config is None:
                idle: concurrent.futures.Future[None] = concurrent.futures.Future()
                idle.set_result(None)
                return idle
            if self._sweeper is None or self._sweeper.done():
                self._sweeper = asyncio.run_coroutine_threadsafe(self._sweep_every(interval),
                                                                 self.loop.loop)
            return self._sweeper

        async def start() -> asyncio.Task[None]:
            if self._sweeper is None or self._sweeper.done():
                self._home = self._home or asyncio.get_running_loop()
                self._sweeper = asyncio.ensure_future(
                    self._sweep_every(interval) if self.ttl_config is not None else _nothing())
            return self._sweeper  # type: ignore[return-value]
        return start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> Any:
        """Stop the sweeper: True once it stopped (or was not running), False if it did not
        within ``timeout`` seconds. Awaited over a `Memory`, as `start_ttl_sweeper`."""
        sweeper, self._sweeper = self._sweeper, None
        if isinstance(self.loop, LoopHandle):
            if sweeper is None or sweeper.done():
                return True
            sweeper.cancel()
            try:
                sweeper.result(timeout)
            except (concurrent.futures.CancelledError, asyncio.CancelledError):
                return True
            except concurrent.futures.TimeoutError:
                return False
            return True

        async def stop() -> bool:
            if sweeper is None or sweeper.done():
                return True
            sweeper.cancel()
            done, _ = await asyncio.wait([sweeper], timeout=timeout)  # type: ignore[list-item]
            return bool(done)
        return stop()

    async def _sweep_every(self, minutes: float) -> None:
        while True:
            await asyncio.sleep(minutes * 60)
            try:
                swept = await self.items.sweep()
            except Exception as exc:  # the next round tries again
                log.warning("store.ttl_sweep_failed", error=str(exc))
            else:
                if swept:
                    log.info("store.ttl_swept", items=swept)


for _name in ("get", "search", "put", "delete", "list_namespaces"):
    for _method in (_name, f"a{_name}"):
        setattr(MemrouteStore, _method, _typed_namespace_errors(getattr(BaseStore, _method)))


async def _nothing() -> None:
    return None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _as(cls: type[Item], item: StoredItem) -> Any:
    extra = {"score": item.score} if cls is SearchItem else {}
    return cls(namespace=item.namespace, key=item.key, value=item.value,
               created_at=item.created_at, updated_at=item.updated_at, **extra)


__all__ = ["DEFAULT_TENANT", "MemrouteStore", "item_uid", "tenant_scope"]
