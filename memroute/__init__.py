"""memroute: a retrieval agent over episodic memory on PostgreSQL + pgvector."""

from typing import Any

from memroute.memory import Episode, Memory, Scope, ScoredResult, SyncMemory, flatten

__all__ = ["Budget", "Episode", "Memory", "MemrouteRetriever", "RetrievalAgent",
           "RetrievalResult", "Scope", "ScoredResult", "SyncMemory", "flatten"]
__version__ = "0.1.0"

_LAZY = {"RetrievalAgent": "memroute.agent", "RetrievalResult": "memroute.agent",
         "Budget": "memroute.strategies.budget", "MemrouteRetriever": "memroute.retriever"}


def __getattr__(name: str) -> Any:
    """The agent's names load on first use, so importing the memory layer stays light."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memroute' has no attribute {name!r}")
