"""How the evaluation retrieves: through the retrieval agent, in one uniform result shape."""

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


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if hasattr(value, "__dataclass_fields__"):
        return {k: getattr(value, k) for k in value.__dataclass_fields__}
    return {k: getattr(value, k) for k in NODE_FIELDS if hasattr(value, k)}


def normalize_costs(costs: Any) -> dict[str, dict[str, float]]:
    """``{node: {llm_calls, input_tokens, output_tokens, wall_ms, estimated}}`` from whatever
    shape the agent reports (mappings, dataclasses or pydantic models; a ``nodes`` level and a
    ``total``/``totals`` entry are accepted)."""
    raw = _as_dict(costs)
    if "nodes" in raw:
        raw = {**_as_dict(raw["nodes"]), **{k: v for k, v in raw.items() if k != "nodes"}}
    out: dict[str, dict[str, float]] = {}
    for node, value in raw.items():
        data = _as_dict(value)
        if not any(f in data for f in NODE_FIELDS):
            continue
        name = "total" if node in ("total", "totals") else str(node)
        out[name] = {f: float(data.get(f) or 0.0) for f in NODE_FIELDS}
        out[name]["estimated"] = float(bool(data.get("estimated", False)))
    return out


def agent_available() -> bool:
    try:
        from memroute import RetrievalAgent  # noqa: F401
    except ImportError:
        return False
    return True


class Retrieval:
    """Retrieves with `memroute.RetrievalAgent` (or, until the graph exists, the dev harness)."""

    def __init__(self, memory: Memory, *, planner: Any = None, llm: Any = None,
                 rerank_mode: str = "fused", context: tuple[int, int] = (0, 0)) -> None:
        self.memory = memory
        self.planner = planner
        self.llm = llm
        self.rerank_mode = rerank_mode
        self.context = context
        self.agent = None
        if agent_available():
            from memroute import RetrievalAgent

            self.agent = RetrievalAgent(memory=memory, llm=llm, planner=planner)
        self.engine = "graph" if self.agent is not None else "harness"

    async def retrieve(self, question: str, scope: Scope, strategy: str, k: int) -> Retrieved:
        start = time.perf_counter()
        if self.agent is not None:
            res = await self.agent.aretrieve(question, scope=scope, k=k, strategy=strategy)
            return Retrieved(list(res.results), str(res.route), list(res.queries),
                             normalize_costs(res.costs), str(res.stop_reason or ""),
                             (time.perf_counter() - start) * 1000)
        from memroute.evals.harness import simulate
        from memroute.strategies.offline_planner import OfflinePlanner

        out = await simulate(self.memory, self.planner or OfflinePlanner(), scope, question,
                             strategy, k, context=self.context, rerank_mode=self.rerank_mode)
        return Retrieved(out.results, out.route, out.queries, {}, out.stop_reason,
                         (time.perf_counter() - start) * 1000)
