"""The cascade planner: the offline planner decides first; the LLM planner is asked only where
the offline decision's confidence is below a threshold.

Which planner made each decision is recorded in the decision's `PlannerResult.raw` (kept in
the graph's cost records, so in every result's ``costs``) as ``"cascade: offline (0.85)"`` or
``"cascade: llm (offline 0.40)"``, and a route's ``reason`` starts with ``[offline]`` or
``[llm]``. A failed LLM call falls back to the offline decision.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable

from memroute.planners.base import EvidenceEntities, Planner, PlannerResult
from memroute.strategies.base import MAX_REASON_CHARS, ChainJudgment, RouteDecision, SplitPlan
from memroute.strategies.budget import CallLimits

DEFAULT_THRESHOLD = 0.7
SPLIT_CONFIDENCE = 0.8  # an offline split with sub-queries (its route was already decided)


class CascadePlanner:
    """Implements `Planner` over an offline planner and an LLM planner (``threshold``: the
    lowest offline confidence accepted without asking the LLM)."""

    spends_llm_calls = True

    def __init__(self, offline: Planner, llm: Planner,
                 threshold: float = DEFAULT_THRESHOLD) -> None:
        self.offline, self.llm, self.threshold = offline, llm, threshold
        self.name = f"cascade:{offline.name}+{llm.name}"

    @property
    def prompt_versions(self) -> dict[str, str]:
        return self.llm.prompt_versions

    def with_limits(self, limits: CallLimits) -> CascadePlanner:
        bound = copy.copy(self)
        bound.llm = self.llm.with_limits(limits)
        return bound

    async def _decide(self, first: PlannerResult, confidence: float | None,
                      ask_llm: Callable[[], Awaitable[PlannerResult]]) -> PlannerResult:
        if first.value is not None and confidence is not None and confidence >= self.threshold:
            first.raw = [f"cascade: offline ({confidence:.2f})", *first.raw]
            return first
        second = await ask_llm()
        shown = "none" if confidence is None else f"{confidence:.2f}"
        if second.value is None and first.value is not None:  # the LLM failed: offline stands
            first.usage = first.usage + second.usage
            first.raw = [f"cascade: offline after llm failure ({second.error})", *second.raw]
            return first
        second.raw = [f"cascade: llm (offline {shown})", *second.raw]
        return second

    async def route(self, query: str) -> PlannerResult[RouteDecision]:
        first = await self.offline.route(query)
        confidence = first.value.confidence if first.value is not None else None
        result = await self._decide(first, confidence, lambda: self.llm.route(query))
        if result.value is not None:
            who = "offline" if result is first else "llm"
            result.value = result.value.model_copy(update={
                "reason": f"[{who}] {result.value.reason}"[:MAX_REASON_CHARS]})
        return result

    async def split(self, query: str) -> PlannerResult[SplitPlan]:
        first = await self.offline.split(query)
        confidence = (SPLIT_CONFIDENCE if first.value is not None and first.value.sub_queries
                      else None)
        return await self._decide(first, confidence, lambda: self.llm.split(query))

    async def judge(self, query: str, evidence: list[str], previous_queries: list[str],
                    hop: int, evidence_entities: EvidenceEntities = None,
                    ) -> PlannerResult[ChainJudgment]:
        first = await self.offline.judge(query, evidence, previous_queries, hop,
                                         evidence_entities)
        confidence = first.value.confidence if first.value is not None else None
        # the model reads the evidence itself: the stored entities are the offline judge's
        return await self._decide(first, confidence, lambda: self.llm.judge(
            query, evidence, previous_queries, hop))
