"""The two search contracts of a `MemrouteStore`, one class each, chosen by its index config.

- `VectorIndex` (LangGraph's index config with ``embed``): one vector per item and field path
  from the caller's embedder; a search scores the query against every vector of the tenant
  under the prefix, LangGraph's scores (`memroute.memory.items.StoreItems.vector_search`).
- `AgentIndex` (no ``embed``): an item's text is one episode of the tenant's scope; a search
  runs memroute's retrieval agent over those episodes and scores an item by its final
  rerank. The agent's order depends on how many results it ranks, so the order of the items
  is fixed whatever the page (`RANK_DEPTHS`): consecutive pages are slices of one ranking.

Either way the items without text at the index fields come unscored, after the scored ones.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import SearchOp
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from memroute.errors import InvalidInputError, ModelUnavailableError
from memroute.memory.items import (
    VALUE_KEY,
    Distance,
    ItemWrite,
    StoredItem,
    StoreItems,
    live_filter,
    namespace_filters,
)
from memroute.memory.limits import MAX_K
from memroute.memory.models import MAX_CONTENT_CHARS, Scope

if TYPE_CHECKING:
    from memroute.agent import RetrievalAgent
    from memroute.memory.store import Memory
    from memroute.strategies.base import Strategy

# The order of an `AgentIndex` search, whatever the page: the agent's ranking of the first
# depth, then what its ranking of the next depth adds, and so on. A page reads the depths up
# to its end: the first page of 10 costs one ranking of 10, as when the depth followed the
# page, and a deeper page up to about twice its old cost (one ranking of 1,000 for every
# page made a search 5x slower on 100 items and time out on 1,000: docs/interfaces.md).
RANK_DEPTHS = (10, 20, 40, 80, 160, 320, 640, MAX_K)
INDEX_KEYS = frozenset({"dims", "embed", "fields", "distance_type", "ann_index_config"})
_DISTANCES = ("cosine", "inner_product", "l2")
_VECTOR_TYPES = ("vector", "halfvec")
_HALF_MAX = float(np.finfo(np.float16).max)


@dataclass
class PlannedPut:
    """A put (or delete) of a batch, validated; ``texts`` await the caller's embedder."""

    write: ItemWrite
    texts: list[tuple[str, str]] = field(default_factory=list)  # (field path, text)


def tokenized(paths: Any, what: str) -> tuple[tuple[str, Any], ...]:
    """Field paths (LangGraph's syntax: ``a.b``, ``a[*].b``, ``$``) with their tokens."""
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, (list, tuple)) or not all(isinstance(p, str) and p for p in paths):
        raise InvalidInputError(f"{what} is a list of field paths (non-empty strings)")
    return tuple((p, "$" if p == "$" else tokenize_path(p)) for p in paths)


def texts_at(value: dict[str, Any], paths: tuple[tuple[str, Any], ...]) -> dict[str, str]:
    """The non-blank texts of ``value`` at ``paths``, by field path (``path.i`` for each of
    several texts at one path)."""
    texts: dict[str, str] = {}
    for path, tokens in paths:
        found = [t for t in get_text_at_path(value, tokens) if t.strip()]
        texts.update((f"{path}.{i}" if len(found) > 1 else path, t)
                      for i, t in enumerate(found))
    return texts


def episode_filter(filters: dict[str, Any]) -> dict[str, Any]:
    """A filter on an item's value as a filter on the metadata of its episode."""
    prefixed: dict[str, Any] = {}
    for key, condition in filters.items():
        if key in ("$and", "$or") and isinstance(condition, list):
            prefixed[key] = [episode_filter(c) if isinstance(c, dict) else c for c in condition]
        elif isinstance(key, str) and key.startswith("$"):
            prefixed[key] = condition  # not a field: the compiled filter says what is wrong
        else:
            prefixed[f"{VALUE_KEY}.{key}"] = condition
    return prefixed


def _scored(item: StoredItem, score: float) -> StoredItem:
    return StoredItem(item.namespace, item.key, item.value, item.created_at, item.updated_at,
                      float(score))


class VectorIndex:
    """LangGraph's index: the caller's embedder, one vector per item and field path, and
    `PostgresStore`'s scores (``distance``). ``half``: vectors (and queries) rounded to half
    precision, as a ``halfvec`` column keeps them."""

    def __init__(self, fields: tuple[tuple[str, Any], ...], embeddings: Embeddings, dims: int,
                 distance: Distance, half: bool) -> None:
        self.fields, self.embeddings, self.dims = fields, embeddings, dims
        self.distance, self.half = distance, half

    def check_search(self, op: SearchOp) -> None:
        """Every vector is scored: any page may be asked for."""

    def plan_put(self, write: ItemWrite, texts: dict[str, str]) -> PlannedPut:
        return PlannedPut(write, list(texts.items()))

    async def embed(self, puts: list[PlannedPut]) -> None:
        """The vectors of ``puts``, from the caller's embedder, in one call."""
        puts = [put for put in puts if put.texts]
        if not puts:
            return
        texts = [text for put in puts for _, text in put.texts]
        try:
            vectors = await self.embeddings.aembed_documents(texts)
        except Exception as exc:
            raise ModelUnavailableError(f"the index's embedder failed: {exc}") from exc
        if len(vectors) != len(texts) or any(len(v) != self.dims for v in vectors):
            raise ModelUnavailableError(
                f"the index's embedder returned {len(vectors)} vectors of "
                f"{sorted({len(v) for v in vectors})} dimensions for {len(texts)} texts; "
                f"the index config says {self.dims}")
        found = iter(self._kept(vectors))
        for put in puts:
            w = put.write
            put.write = ItemWrite(w.namespace, w.key, w.value, w.ttl_minutes,
                                  vectors=tuple((path, next(found)) for path, _ in put.texts))

    def _kept(self, vectors: list[list[float]]) -> list[list[float]]:
        """``vectors`` as stored: finite, and at half precision when ``half``."""
        array = np.asarray(vectors, dtype=np.float64)
        if not np.isfinite(array).all():
            raise ModelUnavailableError("the index's embedder returned NaN or infinite values")
        if self.half:
            if np.abs(array).max(initial=0.0) > _HALF_MAX:
                raise InvalidInputError(
                    f"the index's embedder returned values beyond half precision "
                    f"(±{_HALF_MAX:g}): use ann_index_config vector_type 'vector'")
            array = array.astype(np.float16)
        return array.astype(np.float32).tolist()

    async def search(self, items: StoreItems, tenant: Scope, op: SearchOp,
                     prefix: tuple[str, ...], query: str, *, omit_expired: bool
                     ) -> list[StoredItem]:
        try:
            vector = await self.embeddings.aembed_query(query)
        except Exception as exc:
            raise ModelUnavailableError(f"the index's embedder failed: {exc}") from exc
        if len(vector) != self.dims:
            raise ModelUnavailableError(
                f"the index's embedder returned a {len(vector)}-d query vector; the index "
                f"config says {self.dims}")
        (vector,) = self._kept([vector])
        return await items.vector_search(
            tenant, prefix, op.filter, vector, distance=self.distance, limit=op.limit,
            offset=op.offset, live_only=omit_expired, refresh=op.refresh_ttl)


class AgentIndex:
    """memroute's own index: an item's text at the fields is one episode of the tenant's
    scope, embedded by the memory's embedder; a search runs ``agent`` (``strategy``) over
    those episodes and scores an item by the final rerank."""

    def __init__(self, fields: tuple[tuple[str, Any], ...], agent: RetrievalAgent,
                 strategy: Strategy) -> None:
        self.fields, self.agent, self.strategy = fields, agent, strategy

    def check_search(self, op: SearchOp) -> None:
        if op.offset + op.limit > RANK_DEPTHS[-1]:
            raise InvalidInputError(
                f"offset + limit must be at most {RANK_DEPTHS[-1]} with a query")

    def plan_put(self, write: ItemWrite, texts: dict[str, str]) -> PlannedPut:
        content = "\n".join(texts.values())[:MAX_CONTENT_CHARS]
        return PlannedPut(ItemWrite(write.namespace, write.key, write.value, write.ttl_minutes,
                                    text=content or None))

    async def embed(self, puts: list[PlannedPut]) -> None:
        """Nothing: the memory embeds an item's episode when it is written."""

    async def search(self, items: StoreItems, tenant: Scope, op: SearchOp,
                     prefix: tuple[str, ...], query: str, *, omit_expired: bool
                     ) -> list[StoredItem]:
        """The page of the items' ranking (`ranked`), then the items without an episode,
        unscored, once every scored item is ranked."""
        end = op.offset + op.limit
        ranked, every = await self.ranked(tenant, prefix, op.filter, query, end,
                                          omit_expired=omit_expired)
        stored = await items.by_episode(tenant, [uid for uid, _ in ranked],
                                        live_only=omit_expired, refresh=False)
        scored = [_scored(stored[uid], score) for uid, score in ranked if uid in stored]
        page = scored[op.offset:end]
        if op.refresh_ttl and page:
            await items.refresh(tenant, [(i.namespace, i.key) for i in page],
                                live_only=omit_expired)
        if every and len(page) < op.limit:
            page += await items.listing(
                tenant, prefix, op.filter, limit=op.limit - len(page),
                offset=max(0, op.offset - len(scored)), live_only=omit_expired,
                refresh=op.refresh_ttl, without_episode=True)
        return page

    async def ranked(self, tenant: Scope, prefix: tuple[str, ...],
                     value_filter: dict[str, Any] | None, query: str, end: int, *,
                     omit_expired: bool) -> tuple[list[tuple[str, float]], bool]:
        """The first ``end`` (or more) of the item episodes' order, with their scores: the
        agent's results at each of `RANK_DEPTHS` in turn, each adding those the depths
        before did not rank, until ``end`` is reached; and whether every item it can find
        is ranked (a depth returned fewer results than it asked for)."""
        # the store's conditions beside the caller's filter, each limited on its own; the
        # agent's bound leaves expired items out, unless it was built to find them
        filters = [*namespace_filters(prefix),
                   *([episode_filter(value_filter)] if value_filter else [])]
        if omit_expired and self.agent.options["expired_items"]:
            filters.append(live_filter(time.time()))
        ranked: dict[str, float] = {}
        for depth in RANK_DEPTHS:
            result = await self.agent.aretrieve(query, scope=tenant, k=depth,
                                                strategy=self.strategy, filters=filters)
            for hit in result.results:
                ranked.setdefault(hit.uid, hit.score)
            if len(result.results) < depth:
                return _order_is_score(ranked), True
            if len(ranked) >= end:
                break
        return _order_is_score(ranked), False


def _order_is_score(ranked: dict[str, float]) -> list[tuple[str, float]]:
    """The ranking with each score capped by the one above it: an item a deeper ranking
    added comes after the earlier ones, and its score says so. A cap depends only on the
    items above, so an item scores the same on every page that shows it."""
    out, cap = [], float("inf")
    for uid, score in ranked.items():
        cap = min(cap, score)
        out.append((uid, cap))
    return out


StoreIndex = VectorIndex | AgentIndex


def _check_ann_config(config: Any) -> bool:
    """Whether LangGraph's ``ann_index_config`` asks for half-precision vectors; refused
    when it asks for an approximate index, which memroute does not build."""
    if config is None:
        return False
    if not isinstance(config, Mapping):
        raise InvalidInputError("ann_index_config is a mapping")
    if unknown := sorted(str(k) for k in set(config) - {"kind", "vector_type"}):
        raise InvalidInputError(
            f"unknown ann_index_config setting(s) {unknown}: memroute builds no approximate "
            "index of a store's vectors, so it takes only kind 'flat' and vector_type")
    if str(config.get("kind", "flat")).lower() != "flat":
        asked = {k: v for k, v in config.items() if k != "vector_type"}
        raise InvalidInputError(
            f"ann_index_config {asked!r:.80} asks for an approximate index, which memroute "
            "does not build: a search scores every vector of its tenant under the prefix "
            "exactly (kind 'flat'), and one index over every tenant's vectors would make "
            "each tenant's search pass over the others'. Leave kind out or set 'flat'")
    vector_type = config.get("vector_type", "vector")
    if vector_type not in _VECTOR_TYPES:
        raise InvalidInputError(f"ann_index_config vector_type is one of {_VECTOR_TYPES}, "
                                f"got {vector_type!r:.40}")
    return vector_type == "halfvec"


def make_index(index: Any, memory: Memory, agent: RetrievalAgent,
               strategy: Strategy) -> StoreIndex:
    """The index a store's ``index=`` config (LangGraph's ``IndexConfig``) asks for."""
    if index is None:
        return AgentIndex(tokenized("$", "index fields"), agent, strategy)
    if not isinstance(index, Mapping):
        raise InvalidInputError("index is LangGraph's IndexConfig (a mapping) or None")
    if unknown := sorted(str(k) for k in index if k not in INDEX_KEYS):
        raise InvalidInputError(f"unknown index setting(s) {unknown}: use {sorted(INDEX_KEYS)}")
    fields = tokenized(index.get("fields") or ["$"], "index fields")
    dims = index.get("dims")
    half = _check_ann_config(index.get("ann_index_config"))
    if index.get("embed") is None:
        if dims is not None and dims != memory.embedder.dim:
            raise InvalidInputError(
                f"without embed, items are embedded by the memory's embedder "
                f"({memory.embedder.name}, {memory.embedder.dim}-d), not {dims!r:.20}-d")
        if index.get("distance_type", "cosine") != "cosine" or half:
            raise InvalidInputError(
                "distance_type and a halfvec vector_type apply to an index with its own embed")
        return AgentIndex(fields, agent, strategy)
    if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= 65_535:
        raise InvalidInputError(f"index dims must be an integer in [1, 65535], got {dims!r:.40}")
    distance = index.get("distance_type", "cosine")
    if distance not in _DISTANCES:
        raise InvalidInputError(f"distance_type is one of {_DISTANCES}, got {distance!r:.40}")
    embed = index["embed"]
    if not (isinstance(embed, (Embeddings, str)) or callable(embed)):
        raise InvalidInputError("embed is a LangChain Embeddings, a function of texts, or a "
                                "'provider:model' string")
    try:
        embeddings = ensure_embeddings(embed)
    except (ValueError, ImportError) as exc:
        raise InvalidInputError(f"index embed {embed!r:.60}: {exc}") from exc
    return VectorIndex(fields, embeddings, dims, distance, half)
