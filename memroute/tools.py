"""A memory search tool for tool-calling agents, with MemGPT-style pagination.

``memory_search(query, page=0)`` answers "Showing 10 of 124 results (page 1/13):" and the
numbered results, so the model can page through more evidence. The full ranked list of a
query is kept (LRU) so paging neither re-searches nor reorders. With ``agent_mode=True`` the
query goes through the retrieval agent (routing, split, chain) instead of direct search.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from datetime import datetime
from typing import Any

from langchain_core.tools import StructuredTool, ToolException

from memroute.memory import Memory, Scope, ScoredResult, SyncMemory
from memroute.errors import InvalidInputError, MemrouteError
from memroute.memory.limits import MAX_K
from memroute.memory.models import ShownWindow, coerce_scope, disjoint_windows
from memroute.memory.sync import memory_and_loop
from memroute.time.as_of import as_of_text
from memroute.tool_input import DESCRIPTION, MemorySearchInput

class MemorySearch:
    """Paged search over one scope of a memory, directly or through the retrieval agent."""

    def __init__(self, memory: Memory | SyncMemory, scope: Scope | dict, *, page_size: int = 10,
                 max_results: int = 100, filters: dict[str, Any] | None = None,
                 agent_mode: bool = False, agent: Any = None, strategy: str = "auto",
                 budget: Any = None, cache_size: int = 32,
                 as_of: datetime | str | None = None) -> None:
        if not 1 <= page_size <= 100 or not 1 <= max_results <= MAX_K:
            raise InvalidInputError(
                f"page_size must be in [1, 100] and max_results in [1, {MAX_K}]")
        self.memory, self._loop = memory_and_loop(memory)
        self.scope = coerce_scope(scope)
        self.page_size = page_size
        self.max_results = max_results
        self.filters = filters
        self.agent_mode = agent_mode or agent is not None
        self._agent = agent
        self.strategy = strategy
        self.budget = budget
        self.as_of = as_of_text(as_of)  # None: each search as of its own time
        self._cache: OrderedDict[str, tuple[list[ScoredResult], str]] = OrderedDict()
        self._cache_size = cache_size

    @property
    def agent(self) -> Any:
        if self._agent is None:
            from memroute import RetrievalAgent

            self._agent = RetrievalAgent(memory=self.memory)
        return self._agent

    async def _ranked(self, query: str) -> tuple[list[ScoredResult], str]:
        """Every result for ``query`` (up to ``max_results``) and a note on how it was found."""
        key = " ".join(query.split())
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        if self.agent_mode:
            found = await self.agent.aretrieve(query, scope=self.scope, k=self.max_results,
                                               filters=self.filters, strategy=self.strategy,
                                               budget=self.budget, as_of=self.as_of)
            entry = (list(found.results), f" · route {found.route}, {len(found.queries)} "
                     f"quer{'y' if len(found.queries) == 1 else 'ies'}")
        else:
            results = await self.memory.search_scored(self.scope, query, k=self.max_results,
                                                      filters=self.filters, as_of=self.as_of)
            entry = (list(results), "")
        self._cache[key] = entry
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return entry

    async def apage(self, query: str, page: int = 0) -> tuple[str, list[dict[str, Any]]]:
        """The text the model reads for one page, and the page's results as data."""
        try:
            results, note = await self._loop.run_as_async(self._ranked(query))
        except MemrouteError as exc:
            raise ToolException(f"memory_search failed: {exc}") from exc
        if not results:
            return f"No results found for {query!r}.", []
        pages = math.ceil(len(results) / self.page_size)
        if page >= pages:
            return (f"Page {page} is past the end: {len(results)} results make {pages} "
                    f"page(s), numbered 0 to {pages - 1}.", [])
        start = page * self.page_size
        shown = results[start:start + self.page_size]
        windows = disjoint_windows(shown)  # no turn printed twice on one page
        lines = [f"Showing {len(shown)} of {len(results)} results (page {page + 1}/{pages}){note}:"]
        for rank, (result, window) in enumerate(zip(shown, windows), start=start + 1):
            lines.append(format_result(rank, result, window))
        if page + 1 < pages:
            lines.append(f"(More: call memory_search with page={page + 1}.)")
        return "\n".join(lines), [artifact(rank, r, w) for rank, (r, w)
                                  in enumerate(zip(shown, windows), start + 1)]

    def page(self, query: str, page: int = 0) -> tuple[str, list[dict[str, Any]]]:
        """Blocking `apage`, for sync agents (on the memory's loop, `memroute._loop`)."""
        return self._loop.run_as_sync(self.apage(query, page))

    def as_tool(self, name: str = "memory_search", description: str | None = None
                ) -> StructuredTool:
        return StructuredTool.from_function(
            func=self.page, coroutine=self.apage, name=name,
            description=description or DESCRIPTION.format(page_size=self.page_size),
            args_schema=MemorySearchInput, response_format="content_and_artifact",
            handle_tool_error=True,
        )


def format_result(rank: int, result: ScoredResult, window: ShownWindow | None = None) -> str:
    """One numbered result: when, where and its score, then the turns of its context window
    that ``window`` shows (by default all of them)."""
    nucleus = result.nucleus
    window = window or ShownWindow(result.episodes or [nucleus], [])
    head = (f"{rank}. [{nucleus.produced_at:%Y-%m-%d %H:%M}, session {nucleus.session_id}] "
            f"(score {result.score:.2f})")
    turns = [f"   {e.producer}: {' '.join(e.content.split())}" for e in window.episodes]
    return "\n".join([head, *turns])


def artifact(rank: int, result: ScoredResult, window: ShownWindow | None = None
             ) -> dict[str, Any]:
    """One result as data: its episode, its context window's uids and those shown elsewhere
    on the page."""
    nucleus = result.nucleus
    return {"rank": rank, "uid": result.uid, "score": result.score,
            "session_id": nucleus.session_id, "producer": nucleus.producer,
            "produced_at": nucleus.produced_at.isoformat(), "content": nucleus.content,
            "context_uids": [e.uid for e in result.episodes if e.uid != result.uid],
            "shown_elsewhere": window.shown_elsewhere if window else []}


def memory_search_tool(memory: Memory | SyncMemory, scope: Scope | dict, *,
                       page_size: int = 10, max_results: int = 100,
                       filters: dict[str, Any] | None = None, agent_mode: bool = False,
                       agent: Any = None, strategy: str = "auto", budget: Any = None,
                       name: str = "memory_search", description: str | None = None,
                       as_of: datetime | str | None = None) -> StructuredTool:
    """A LangChain tool ``memory_search(query, page=0)`` bound to one memory and scope.

    ``agent_mode=True`` routes each new query through the retrieval agent (pass ``agent`` to
    reuse one, e.g. with an LLM planner); otherwise it is a direct search. ``as_of``: the
    time its questions are asked (None: when each is asked): "last week" is the week before
    it, and nothing produced after it is searched.
    """
    search = MemorySearch(memory, scope, page_size=page_size, max_results=max_results,
                          filters=filters, agent_mode=agent_mode, agent=agent,
                          strategy=strategy, budget=budget, as_of=as_of)
    return search.as_tool(name=name, description=description)
