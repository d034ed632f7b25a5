"""What every strategy shares: decision schemas, usage accounting, cost profiles, the planner.

A planner makes the three decisions of the retrieval agent: which route (ToolSelect), how to
split a query (SplitQuery) and whether the evidence suffices or which query to search next
(ChainOfQuery). The LLM planner asks a model; the offline planner uses documented heuristics.
Both return the same validated objects, so the graph does not know which one ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, Field

Route = Literal["direct", "split", "chain"]


class RouteDecision(BaseModel):
    """ToolSelect's answer."""

    route: Route
    reason: str = Field(default="", max_length=500)


class SplitPlan(BaseModel):
    """SplitQuery's answer: independent single-fact sub-queries (may be empty: do not split)."""

    sub_queries: list[str] = Field(default_factory=list)


class ChainJudgment(BaseModel):
    """ChainOfQuery's combined sufficiency judgment and rewrite."""

    is_sufficient: bool
    evidence_indices: list[int] = Field(default_factory=list)
    new_query: str = ""
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)


@dataclass
class Usage:
    """What one planner call cost. ``estimated`` when tokens were counted with tiktoken."""

    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    wall_ms: float = 0.0
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.llm_calls + other.llm_calls, self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens, self.wall_ms + other.wall_ms,
                     self.estimated or other.estimated)


T = TypeVar("T", bound=BaseModel)


@dataclass
class PlannerResult(Generic[T]):
    """A validated decision, or ``None`` with the ``error`` that made the graph fall back."""

    value: T | None
    usage: Usage = field(default_factory=Usage)
    raw: list[str] = field(default_factory=list)  # raw model outputs, kept for the trace
    error: str | None = None


@dataclass(frozen=True)
class CostProfile:
    """A strategy's measured accuracy and cost, read by the router against the budget.

    ``accuracy_score``: expected sf_recall@10; ``token_cost``: mean LLM tokens (in + out) per
    question; ``time_cost``: mean wall seconds per question, LLM latency excluded;
    ``llm_calls``: the most LLM calls it can make.
    """

    accuracy_score: float
    token_cost: float
    time_cost: float
    llm_calls: int


@runtime_checkable
class Planner(Protocol):
    """Makes the agent's decisions. Implementations never raise for bad model output:
    they return a `PlannerResult` with ``value=None`` and an ``error``. Transient errors
    (rate limits, timeouts, 5xx) may propagate so the graph's retry policy can retry them."""

    name: str

    async def route(self, query: str) -> PlannerResult[RouteDecision]: ...

    async def split(self, query: str) -> PlannerResult[SplitPlan]: ...

    async def judge(self, query: str, evidence: list[str], previous_queries: list[str],
                    hop: int) -> PlannerResult[ChainJudgment]: ...
