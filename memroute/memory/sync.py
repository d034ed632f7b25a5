"""`SyncMemory`: a blocking facade over `Memory` for scripts (same implementation)."""

from __future__ import annotations

from typing import Any

from memroute._sync import run_sync
from memroute.memory.models import Episode, Scope
from memroute.memory.store import Memory, SearchResults


class SyncMemory:
    """``SyncMemory.open(...)`` then ``add`` / ``search_scored`` / ``delete`` / ``close``."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @classmethod
    def open(cls, dsn: str | None = None, **kwargs: Any) -> SyncMemory:
        return cls(run_sync(Memory.open(dsn, **kwargs)))

    def add(self, scope: Scope | dict, episodes: list[Episode | dict]) -> list[str]:
        return run_sync(self.memory.add(scope, episodes))

    def search_scored(self, scope: Scope | dict, query: str, k: int = 10,
                      **kwargs: Any) -> SearchResults:
        return run_sync(self.memory.search_scored(scope, query, k, **kwargs))

    def delete(self, scope: Scope | dict, **kwargs: Any) -> int:
        return run_sync(self.memory.delete(scope, **kwargs))

    def count(self, scope: Scope | dict) -> dict[str, int]:
        return run_sync(self.memory.count(scope))

    def close(self) -> None:
        run_sync(self.memory.close())

    def __enter__(self) -> SyncMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
