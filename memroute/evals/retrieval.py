"""How the evaluation retrieves: through the retrieval agent, in one row-friendly shape."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memroute.memory import Memory, Scope, ScoredResult

if TYPE_CHECKING:
    from memroute.agent import Costs


@dataclass
class Retrieved:
    """One retrieval: returned results, the route taken, queries used, per-node costs."""

    results: list[ScoredResult]
    route: str
    queries: list[str]
    costs: dict[str, dict[str, float]] = field(default_factory=dict)
    stop_reason: str = ""
    wall_ms: float = 0.0
    prompt_versions: dict[str, str] = field(default_factory=dict)
    decisions: dict[str, int] = field(default_factory=dict)  # a cascade's, by planner
    search_rounds: int = 0  # searches one after another (a round's run at once)


def cost_rows(costs: Costs) -> dict[str, dict[str, float]]:
    """The agent's `Costs` per node and in ``"total"``, as numbers for report rows:
    ``{node: {llm_calls, input_tokens, output_tokens, wall_ms, estimated (0 or 1)}}``."""
    usage = {**costs.by_node, "total": costs.totals}
    return {node: {name: float(value) for name, value in totals.items()}
            for node, totals in usage.items()}


class Retrieval:
    """Retrieves through `memroute.RetrievalAgent` (the graph is the implementation)."""

    def __init__(self, memory: Memory, *, planner: Any = None, llm: Any = None,
                 rerank_mode: str = "fused", context: tuple[int, int] = (0, 0)) -> None:
        from memroute import RetrievalAgent

        self.agent = RetrievalAgent(memory=memory, llm=llm, planner=planner,
                                    rerank_mode=rerank_mode, context=context)
        self.planner_name = getattr(self.agent.planner, "name", type(self.agent.planner).__name__)

    async def retrieve(self, question: str, scope: Scope, strategy: str, k: int,
                       as_of: datetime | None = None) -> Retrieved:
        start = time.perf_counter()
        res = await self.agent.aretrieve(question, scope=scope, k=k, strategy=strategy,
                                         as_of=as_of)
        return Retrieved(list(res.results), str(res.route), list(res.queries),
                         cost_rows(res.costs), str(res.stop_reason or ""),
                         (time.perf_counter() - start) * 1000, dict(res.prompt_versions),
                         res.costs.decisions, res.search_rounds)
