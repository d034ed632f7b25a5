"""memroute: a retrieval agent over episodic memory on PostgreSQL + pgvector."""

from memroute.memory import Episode, Memory, Scope, ScoredResult, SyncMemory, flatten

__all__ = ["Episode", "Memory", "Scope", "ScoredResult", "SyncMemory", "flatten"]
__version__ = "0.1.0"
