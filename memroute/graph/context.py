"""The graph's runtime context: the dependencies and options one retrieval runs with."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from typing_extensions import get_protocol_members

from memroute._log import get_logger
from memroute.errors import InvalidInputError
from memroute.memory.store import Memory
from memroute.strategies import chain_of_query, direct, split_query, tool_select
from memroute.strategies.base import CostProfile, Route
from memroute.planners.base import Planner


log = get_logger(__name__)


def default_profiles() -> dict[Route, CostProfile]:
    return {"direct": direct.COST_PROFILE, "split": split_query.COST_PROFILE,
            "chain": chain_of_query.COST_PROFILE}


@dataclass
class RetrievalContext:
    """What the graph's nodes need besides the state.

    ``memory`` is read by ``memory_search`` only; ``planner`` makes the route, split and
    chain decisions (any `Planner`); ``neighbours`` is the window of turns kept before and
    after each hit (``search_scored(context=...)``; ``None``: the memory's default);
    ``search_concurrency`` caps concurrent searches of one fan-out;
    ``rerank_mode`` is ``"fused"`` (score against each query, fuse per candidate) or
    ``"concat"`` (MemMachine's: one concatenated query string); ``expired_items``: store
    items past their ttl are found too (a LangGraph store whose ttl config keeps them).
    """

    memory: Memory
    planner: Planner
    max_hops: int = chain_of_query.MAX_HOPS
    sufficient_confidence: float = chain_of_query.SUFFICIENT_CONFIDENCE
    rerank_mode: Literal["fused", "concat"] = "fused"
    search_concurrency: int = 4
    neighbours: tuple[int, int] | None = None  # turns kept around each hit; None: the memory's
    expired_items: bool = False
    profiles: Mapping[Route, CostProfile] = field(default_factory=default_profiles)
    router_profile: CostProfile = tool_select.COST_PROFILE
    _searches: asyncio.Semaphore | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.planner, Planner):
            missing = sorted(m for m in get_protocol_members(Planner)
                             if not hasattr(self.planner, m))
            raise InvalidInputError(
                f"planner must implement memroute.planners.Planner; {type(self.planner).__name__}"
                f" lacks {', '.join(missing)}")
        if not isinstance(self.max_hops, int) or self.max_hops < 1:
            raise InvalidInputError("max_hops must be an integer >= 1")
        if not 0.0 <= self.sufficient_confidence <= 1.0:
            raise InvalidInputError("sufficient_confidence must be in [0, 1]")
        if self.rerank_mode not in ("fused", "concat"):
            raise InvalidInputError("rerank_mode must be 'fused' or 'concat'")
        if not isinstance(self.search_concurrency, int) or self.search_concurrency < 1:
            raise InvalidInputError("search_concurrency must be an integer >= 1")

    @property
    def searches(self) -> asyncio.Semaphore:
        """Caps concurrent memory searches run through this context."""
        if self._searches is None:
            self._searches = asyncio.Semaphore(self.search_concurrency)
        return self._searches


ContextSource = RetrievalContext | Callable[[], Awaitable[RetrievalContext]] | None


class ContextResolver:
    """Finds the `RetrievalContext` of a run: the runtime context itself, a host context's
    ``memroute`` attribute or key, or the default given to `build_retrieval_graph`
    (a context or an async factory, called once)."""

    def __init__(self, default: ContextSource = None) -> None:
        self._default = default
        self._made: RetrievalContext | None = None
        self._lock = asyncio.Lock()

    async def __call__(self, runtime_context: Any) -> RetrievalContext:
        for candidate in (runtime_context, getattr(runtime_context, "memroute", None),
                          runtime_context.get("memroute") if isinstance(runtime_context, dict)
                          else None):
            if isinstance(candidate, RetrievalContext):
                return candidate
        if isinstance(self._default, RetrievalContext):
            return self._default
        if self._default is not None:
            async with self._lock:
                if self._made is None:
                    self._made = await self._default()
            return self._made
        raise InvalidInputError(
            "the retrieval graph needs a RetrievalContext: invoke it with "
            "context=RetrievalContext(memory=..., planner=...), give the host context a "
            "'memroute' field, or pass context= to build_retrieval_graph")


async def scope_speakers(ctx: RetrievalContext, request: dict[str, Any]) -> list[str]:
    """The speakers of the request's scope, within its filters and ``as_of``
    (`Memory.speakers`, cached); [] when the lookup fails (the judge then finds the speaker
    in the evidence, a round later, as without the lookup)."""
    try:
        return await ctx.memory.speakers(request["scope"], filters=request.get("filters"),
                                         as_of=request.get("as_of"))
    except Exception as exc:  # the question's search reports a store that is down
        log.warning("graph.speakers_failed", error=f"{type(exc).__name__}: {exc}")
        return []
