"""Episodic memory on PostgreSQL + pgvector: the one declarative search every strategy uses."""

from memroute.memory.embedders import Embedder, make_embedder
from memroute.errors import (
    EmbedderMismatchError,
    FilterError,
    InvalidInputError,
    MemrouteError,
    ModelUnavailableError,
    StoreUnavailableError,
)
from memroute.memory.models import Episode, Scope, ScoredResult, StoredEpisode, flatten
from memroute.memory.rerankers import Reranker, make_reranker
from memroute.memory.store import Memory, SearchResults
from memroute.memory.sync import SyncMemory

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
