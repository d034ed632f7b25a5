"""How the evaluation retrieves: through the retrieval agent, in one row-friendly shape."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from memroute.memory import Memory, Scope, ScoredResult

NODE_FIELDS = ("llm_calls", "input_tokens", "output_tokens", "wall_ms")


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


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return {k: getattr(value, k) for k in NODE_FIELDS if hasattr(value, k)}


def normalize_costs(costs: Any) -> dict[str, dict[str, float]]:
    """``{node: {llm_calls, input_tokens, output_tokens, wall_ms, estimated}, "total": ...}``
    from the agent's `Costs` (``by_node`` and ``totals``) or a plain mapping of nodes."""
    if hasattr(costs, "by_node"):
        raw = {**costs.by_node, "total": costs.totals}
    else:
        raw = _as_dict(costs)
    out: dict[str, dict[str, float]] = {}
    for node, value in raw.items():
        data = _as_dict(value)
        if not any(f in data for f in NODE_FIELDS):
            continue
        name = "total" if node in ("total", "totals") else str(node)
        out[name] = {f: float(data.get(f) or 0.0) for f in NODE_FIELDS}
        out[name]["estimated"] = float(bool(data.get("estimated", False)))
    return out


class Retrieval:
    """Retrieves through `memroute.RetrievalAgent` (the graph is the implementation)."""

    def __init__(self, memory: Memory, *, planner: Any = None, llm: Any = None,
                 rerank_mode: str = "fused", context: tuple[int, int] = (0, 0)) -> None:
        from memroute import RetrievalAgent

        self.agent = RetrievalAgent(memory=memory, llm=llm, planner=planner,
                                    rerank_mode=rerank_mode, context=context)
        self.planner_name = getattr(self.agent.planner, "name", type(self.agent.planner).__name__)

    async def retrieve(self, question: str, scope: Scope, strategy: str, k: int) -> Retrieved:
        start = time.perf_counter()
        res = await self.agent.aretrieve(question, scope=scope, k=k, strategy=strategy)
        return Retrieved(list(res.results), str(res.route), list(res.queries),
                         normalize_costs(res.costs), str(res.stop_reason or ""),
                         (time.perf_counter() - start) * 1000, dict(res.prompt_versions))
