"""`SyncMemory`: a blocking facade over `Memory` for scripts (same implementation)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from memroute._loop import LoopHandle, PoolLoop
from memroute.errors import InvalidInputError
from memroute.memory.models import Episode, Scope, ScoredResult, StoredEpisode
from memroute.memory.store import Memory, SearchResults
from memroute.memory.warm import WarmReport
from memroute.nlp import Entity


class SyncMemory:
    """``SyncMemory.open(...)`` then the `Memory` methods, blocking, and ``close``.

    The `Memory` and its pool live on ``loop``, memroute's background loop.
    """

    def __init__(self, memory: Memory, loop: LoopHandle | None = None) -> None:
        self.memory = memory
        self.loop = loop or LoopHandle.shared()

    @classmethod
    def open(cls, dsn: str | None = None, **kwargs: Any) -> SyncMemory:
        loop = LoopHandle.shared()
        return cls(loop.run_as_sync(Memory._open(dsn, **kwargs)), loop)

    def add(self, scope: Scope | dict, episodes: list[Episode | dict]) -> list[str]:
        return self.loop.run_as_sync(self.memory.add(scope, episodes))

    def add_batches(self, scope: Scope | dict,
                    batches: Iterable[list[Episode | dict]]) -> Iterator[list[str]]:
        return self.loop.iterate_as_sync(self.memory.add_batches(scope, batches))

    def search_scored(self, scope: Scope | dict, query: str, k: int = 10,
                      **kwargs: Any) -> SearchResults:
        return self.loop.run_as_sync(self.memory.search_scored(scope, query, k, **kwargs))

    def rerank(self, results: list[ScoredResult], queries: list[str], k: int,
               **kwargs: Any) -> list[ScoredResult]:
        return self.loop.run_as_sync(self.memory.rerank(results, queries, k, **kwargs))

    def embed_queries(self, texts: list[str]) -> list[np.ndarray]:
        return self.loop.run_as_sync(self.memory.embed_queries(texts))

    def prefetch_queries(self, texts: list[str], after: str | None = None) -> None:
        """Start embedding ``texts`` on the memory's loop (`Memory.prefetch_queries`)."""
        async def start() -> None:
            self.memory.prefetch_queries(texts, after=after)

        self.loop.run_as_sync(start())

    def delete(self, scope: Scope | dict, **kwargs: Any) -> int:
        return self.loop.run_as_sync(self.memory.delete(scope, **kwargs))

    def merge_metadata(self, scope: Scope | dict, patches: dict[str, dict[str, Any]]) -> int:
        return self.loop.run_as_sync(self.memory.merge_metadata(scope, patches))

    def count(self, scope: Scope | dict) -> dict[str, int]:
        return self.loop.run_as_sync(self.memory.count(scope))

    def with_stored_embeddings(self, scope: Scope | dict,
                               results: list[ScoredResult]) -> list[ScoredResult]:
        return self.loop.run_as_sync(self.memory.with_stored_embeddings(scope, results))

    def upsert(self, scope: Scope | dict, episodes: list[Episode | dict]) -> list[str]:
        return self.loop.run_as_sync(self.memory.upsert(scope, episodes))

    def get(self, scope: Scope | dict, uids: list[str]) -> list[StoredEpisode]:
        return self.loop.run_as_sync(self.memory.get(scope, uids))

    def replies(self, scope: Scope | dict, uids: list[str],
                **kwargs: Any) -> dict[str, StoredEpisode]:
        return self.loop.run_as_sync(self.memory.replies(scope, uids, **kwargs))

    def recent(self, scope: Scope | dict, **kwargs: Any) -> list[StoredEpisode]:
        return self.loop.run_as_sync(self.memory.recent(scope, **kwargs))

    def list_scopes(self, prefix: list[str] | tuple[str, ...] = (), **kwargs: Any) -> list[Scope]:
        return self.loop.run_as_sync(self.memory.list_scopes(prefix, **kwargs))

    def backfill_entities(self, batch: int = 256) -> int:
        return self.loop.run_as_sync(self.memory.backfill_entities(batch))

    def stored_entities(self, scope: Scope | dict, uids: list[str]) -> dict[str, list[Entity]]:
        return self.loop.run_as_sync(self.memory.stored_entities(scope, uids))

    def speakers(self, scope: Scope | dict) -> list[str]:
        return self.loop.run_as_sync(self.memory.speakers(scope))

    def warm(self) -> WarmReport:
        return self.loop.run_as_sync(self.memory.warm())

    def index_scopes(self) -> int:
        return self.loop.run_as_sync(self.memory.index_scopes())
    def read_routing(self) -> dict[str, Any]:
        return self.memory.read_routing()

    def close(self) -> None:
        self.loop.run_as_sync(self.memory.close())

    def __enter__(self) -> SyncMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def memory_and_loop(memory: Memory | SyncMemory) -> tuple[Memory, LoopHandle | PoolLoop]:
    """The async `Memory` behind ``memory`` and the loop its pool lives on."""
    if isinstance(memory, SyncMemory):
        return memory.memory, memory.loop
    if isinstance(memory, Memory):
        return memory, memory.pool_loop
    raise InvalidInputError(f"memory must be a Memory or SyncMemory, not {type(memory).__name__}")
