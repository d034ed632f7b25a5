"""The compiled retrieval graph for LangGraph's server tooling (see ``langgraph.json``).

``langgraph dev`` / ``langgraph up`` load `graph` from here. Its memory (``MEMROUTE_*``
settings: the embedded server under ``MEMROUTE_HOME`` or ``MEMROUTE_DATABASE_URL``) and its
planner (an LLM when ``MEMROUTE_LLM_MODEL`` is set, else the offline planner) are opened on
the first run, in the server's event loop, and shared by later runs. LangGraph's server
passes each run a plain dict as context (``{}`` by default), so the graph declares
`ServedContext`, a schema with no required field; per-run options (scope, k, filters,
strategy, budget) come from the input. An in-process caller may still bring its own
`RetrievalContext`, directly or as the ``memroute`` field of a host context.
"""

from __future__ import annotations

import asyncio

from typing_extensions import TypedDict

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


class ServedContext(TypedDict, total=False):
    """The runtime context a served run may carry: nothing is required (the server passes
    ``{}``); the memory and planner come from the settings."""


def make_graph(context: LazyRetrievalContext | None = None):
    """The compiled retrieval graph with a lazily opened default context."""
    return build_retrieval_graph(context=context or LazyRetrievalContext(),
                                 context_schema=ServedContext).compile(name="memroute")


default_context = LazyRetrievalContext()
graph = make_graph(default_context)
