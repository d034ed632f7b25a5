"""Episodic memory on PostgreSQL + pgvector: the one declarative search every strategy uses.

The public names load on first use, so importing a light submodule (``memroute.memory.models``,
``memroute.memory.limits``) does not import the store, numpy or psycopg.
"""

from typing import TYPE_CHECKING, Any

from memroute.errors import (
    EmbedderMismatchError,
    FilterError,
    InvalidInputError,
    MemrouteError,
    ModelUnavailableError,
    StoreUnavailableError,
)

__all__ = [
    "Embedder",
    "EmbedderMismatchError",
    "Episode",
    "FilterError",
    "InvalidInputError",
    "Memory",
    "MemrouteError",
    "ModelUnavailableError",
    "Reranker",
    "Scope",
    "ScoredResult",
    "SearchResults",
    "StoreUnavailableError",
    "StoredEpisode",
    "SyncMemory",
    "flatten",
    "make_embedder",
    "make_reranker",
]

_LAZY = {"Embedder": "memroute.memory.embedders", "make_embedder": "memroute.memory.embedders",
         "Episode": "memroute.memory.models", "Scope": "memroute.memory.models",
         "ScoredResult": "memroute.memory.models", "StoredEpisode": "memroute.memory.models",
         "flatten": "memroute.memory.models", "Reranker": "memroute.memory.rerankers",
         "make_reranker": "memroute.memory.rerankers", "Memory": "memroute.memory.store",
         "SearchResults": "memroute.memory.store", "SyncMemory": "memroute.memory.sync"}

if TYPE_CHECKING:
    from memroute.memory.embedders import Embedder, make_embedder
    from memroute.memory.models import Episode, Scope, ScoredResult, StoredEpisode, flatten
    from memroute.memory.rerankers import Reranker, make_reranker
    from memroute.memory.store import Memory, SearchResults
    from memroute.memory.sync import SyncMemory


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'memroute.memory' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
