"""The compiled retrieval graph for LangGraph's server tooling (see ``langgraph.json``).

``langgraph dev`` / ``langgraph up`` load `graph` from here. Its memory (``MEMROUTE_*``
settings: the embedded server under ``MEMROUTE_HOME`` or ``MEMROUTE_DATABASE_URL``) and its
planner (an LLM when ``MEMROUTE_LLM_MODEL`` is set, else the offline planner) are opened on
the first run, in the server's event loop, and shared by later runs. A run may instead
bring its own context with a ``memroute`` `RetrievalContext`.
"""

from __future__ import annotations

import asyncio

from memroute.graph import RetrievalContext, build_retrieval_graph
from memroute.settings import MemrouteSettings, get_settings


class LazyRetrievalContext:
    """An async factory of one shared `RetrievalContext`, opened on first use."""

    def __init__(self, settings: MemrouteSettings | None = None) -> None:
        self.settings = settings
        self.context: RetrievalContext | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> RetrievalContext:
        async with self._lock:
            if self.context is None:
                from memroute.agent import RetrievalAgent
                from memroute.memory import Memory

                memory = await Memory.open(settings=self.settings or get_settings())
                self.context = RetrievalAgent(memory=memory).context()
            return self.context

    async def aclose(self) -> None:
        """Close the memory's connection pool (for a clean shutdown)."""
        if self.context is not None:
            await self.context.memory.close()
            self.context = None


def make_graph(context: LazyRetrievalContext | None = None):
    """The compiled retrieval graph with a lazily opened default context."""
    return build_retrieval_graph(context=context or LazyRetrievalContext()).compile(
        name="memroute")


default_context = LazyRetrievalContext()
graph = make_graph(default_context)
