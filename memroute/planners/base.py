"""The `Planner` protocol: what makes the retrieval agent's decisions, and what it returns.

A planner makes the three decisions of the retrieval agent: which route (ToolSelect), how to
split a query (SplitQuery) and whether the evidence suffices or which query to search next
(ChainOfQuery). The LLM planner (`memroute.planners.llm`) asks a model; the offline planner
(`memroute.planners.offline`) uses documented heuristics. Both return the strategies' schemas
(`memroute.strategies.base`), so the graph does not know which one ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from memroute.nlp import Entity
from memroute.strategies.base import ChainJudgment, RouteDecision, SplitPlan, Usage
from memroute.strategies.budget import CallLimits

T = TypeVar("T", bound=BaseModel)
EvidenceEntities = list[list[Entity] | None] | None
"""The stored entities of each evidence item shown to a chain's judge (see `Planner.judge`)."""
EvidenceTimes = list[datetime | None] | None
"""When each evidence item shown to a chain's judge was produced (see `Planner.judge`)."""


@dataclass
class PlannerResult(Generic[T]):
    """A validated decision, or ``None`` with the ``error`` that made the graph fall back."""

    value: T | None
    usage: Usage = field(default_factory=Usage)
    raw: list[str] = field(default_factory=list)  # raw model outputs, kept for the trace
    error: str | None = None
    decided_by: str | None = None  # "offline" or "llm" when a cascade chose between planners


@runtime_checkable
class Planner(Protocol):
    """Makes the agent's decisions. Implementations never raise for bad model output:
    they return a `PlannerResult` with ``value=None`` and an ``error``. Transient errors
    (rate limits, timeouts, 5xx) may propagate so the graph's retry policy can retry them.

    The graph uses every member declared here, and the optional ``wants_speakers``,
    ``reads_time`` and ``confines_to_windows``: a planner with a true
    ``confines_to_windows`` has every search of a run confined to the windows of time the
    question names (`memroute.reading.question.QuestionReading.windows`), whatever it lays
    out."""

    name: str
    spends_llm_calls: bool
    """Whether decisions cost LLM calls and tokens: then budgets steer routing, and a step
    that raised is charged one call per attempt."""

    async def route(self, query: str, speakers: Sequence[str] = ()) -> PlannerResult[RouteDecision]:
        """``speakers``: the scope's speakers (`Memory.speakers`), passed only to a planner
        with a true ``wants_speakers`` attribute (optional: the graph reads it with
        ``getattr``, so planners written without it keep working and are called with the
        query alone); a chain's `RouteDecision.first_searches` may then search one's own
        turns from the start. ``as_of`` (keyword): the time the question is asked, passed
        only to a planner with a true ``reads_time`` attribute (optional, as
        ``wants_speakers``); its first searches may then search a window of time the question
        names ("last week")."""
        ...

    async def split(self, query: str) -> PlannerResult[SplitPlan]:
        """``as_of`` (keyword, only for a planner with a true ``reads_time``): the time the
        question is asked."""
        ...

    async def judge(self, query: str, evidence: list[str], previous_queries: list[str],
                    hop: int, evidence_entities: EvidenceEntities = None,
                    ) -> PlannerResult[ChainJudgment]:
        """``evidence_entities``: what the entity index stored for each evidence item
        (``None`` for an item stored without entities, or for all of them).
        ``evidence_times`` (keyword, only for a planner with a true ``reads_time``): when
        each item was produced, so that a later statement supersedes an earlier one and an
        event's date bounds the next search, and ``as_of``, the time the question is asked."""
        ...

    @property
    def prompt_versions(self) -> dict[str, str]:
        """The sha256 of every prompt file the planner sends, by name (empty when none)."""
        ...

    def with_limits(self, limits: CallLimits) -> Planner:
        """This planner bound to what its next step may spend (itself when it spends nothing)."""
        ...
