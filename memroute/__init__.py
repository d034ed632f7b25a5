"""memroute: a retrieval agent over episodic memory on PostgreSQL + pgvector."""

from typing import TYPE_CHECKING, Any

from memroute.errors import (
    EmbedderMismatchError,
    FilterError,
    InvalidInputError,
    MemrouteError,
    ModelUnavailableError,
    StoreUnavailableError,
)

__all__ = ["Budget", "EmbedderMismatchError", "Episode", "FilterError", "InvalidInputError",
           "Memory", "MemrouteError", "MemrouteRetriever", "MemrouteStore", "ModelUnavailableError",
           "RetrievalAgent", "RetrievalResult", "Scope", "ScoredResult", "StoreUnavailableError",
           "SyncMemory", "flatten"]
__version__ = "0.1.0"

# Every public name but the errors loads on first use, so `import memroute` (and the CLI)
# starts fast.
_LAZY = {"Episode": "memroute.memory", "Memory": "memroute.memory", "Scope": "memroute.memory",
         "ScoredResult": "memroute.memory", "SyncMemory": "memroute.memory",
         "flatten": "memroute.memory", "RetrievalAgent": "memroute.agent",
         "RetrievalResult": "memroute.agent", "Budget": "memroute.strategies.budget",
         "MemrouteRetriever": "memroute.retriever",
         "MemrouteStore": "memroute.langgraph_store"}

if TYPE_CHECKING:
    from memroute.agent import RetrievalAgent, RetrievalResult
    from memroute.langgraph_store import MemrouteStore
    from memroute.memory import Episode, Memory, Scope, ScoredResult, SyncMemory, flatten
    from memroute.retriever import MemrouteRetriever
    from memroute.strategies.budget import Budget


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memroute' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
