"""The cascade planner: the offline planner decides first; the LLM planner is asked only where
the offline decision's confidence is below a threshold, and for the chain's judgment only at
its first ``judge_hops`` hops (default 1: the first bridge, where the offline judge's unsure
rewrites measurably lose recall; docs/evaluation.md, "Cascade planner").

Which planner made each decision is recorded in the decision's ``PlannerResult.decided_by``
(``"offline"`` or ``"llm"``; the graph keeps it in the step's cost record, so a result's
``costs.decisions`` counts them) and in ``PlannerResult.raw`` as ``"cascade: offline (0.85)"``
or ``"cascade: llm (offline 0.40)"``; a route's ``reason`` starts with ``[offline]`` or
``[llm]``. A failed LLM call falls back to the offline decision.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Literal

from memroute.planners.base import EvidenceEntities, EvidenceTimes, Planner, PlannerResult
from memroute.strategies.base import MAX_REASON_CHARS, ChainJudgment, RouteDecision, SplitPlan
from memroute.strategies.budget import CallLimits

DEFAULT_THRESHOLD = 0.7
DEFAULT_JUDGE_HOPS = 1
SPLIT_CONFIDENCE = 0.8  # an offline split with sub-queries (its route was already decided)
DecisionKind = Literal["route", "split", "judge"]


class CascadePlanner:
    """Implements `Planner` over an offline planner and an LLM planner. ``threshold``: the
    lowest offline confidence accepted without asking the LLM; ``judge_hops``: the chain hops
    whose judgment may go to the LLM (later ones keep the offline judgment)."""

    spends_llm_calls = True

    def __init__(self, offline: Planner, llm: Planner, threshold: float = DEFAULT_THRESHOLD,
                 judge_hops: int = DEFAULT_JUDGE_HOPS) -> None:
        self.offline, self.llm = offline, llm
        self.threshold, self.judge_hops = threshold, judge_hops
        self.name = f"cascade:{offline.name}+{llm.name}"

    @property
    def prompt_versions(self) -> dict[str, str]:
        return self.llm.prompt_versions

    def with_limits(self, limits: CallLimits) -> CascadePlanner:
        bound = copy.copy(self)
        bound.llm = self.llm.with_limits(limits)
        return bound

    def asks_llm(self, kind: DecisionKind, hop: int, confidence: float | None) -> bool:
        """Whether a decision whose offline confidence is ``confidence`` goes to the LLM."""
        if kind == "judge" and hop > self.judge_hops:
            return False
        return confidence is None or confidence < self.threshold

    async def _decide(self, kind: DecisionKind, query: str, hop: int, first: PlannerResult,
                      confidence: float | None,
                      ask_llm: Callable[[], Awaitable[PlannerResult]]) -> PlannerResult:
        """The offline decision ``first``, or the LLM's (``ask_llm``) where `asks_llm` says so,
        marked with who decided. ``query``: the question, for subclasses that log decisions
        (``benchmarks/cascade.py``)."""
        shown = "none" if confidence is None else f"{confidence:.2f}"
        if first.value is not None and not self.asks_llm(kind, hop, confidence):
            first.raw = [f"cascade: offline ({shown})", *first.raw]
            first.decided_by = "offline"
            return first
        second = await ask_llm()
        if second.value is None and first.value is not None:  # the LLM failed: offline stands
            first.usage = first.usage + second.usage
            first.raw = [f"cascade: offline after llm failure ({second.error})", *second.raw]
            first.decided_by = "offline"
            return first
        second.raw = [f"cascade: llm (offline {shown})", *second.raw]
        second.decided_by = "llm"
        return second

    @property
    def wants_speakers(self) -> bool:
        """The offline planner's (an LLM's route carries no first-round searches)."""
        return getattr(self.offline, "wants_speakers", False)

    @property
    def reads_time(self) -> bool:
        """The offline planner's (the LLM planner is given ``as_of`` when it reads time)."""
        return getattr(self.offline, "reads_time", False)

    def _at(self, as_of: datetime | None) -> dict:
        """``as_of`` for the LLM planner's call when it reads time (and one is given)."""
        return {"as_of": as_of} if as_of is not None and getattr(
            self.llm, "reads_time", False) else {}

    async def route(self, query: str, speakers: Sequence[str] = (),
                    as_of: datetime | None = None) -> PlannerResult[RouteDecision]:
        timed = {"as_of": as_of} if as_of is not None and self.reads_time else {}
        first = await (self.offline.route(query, speakers, **timed) if speakers or timed
                       else self.offline.route(query))
        confidence = first.value.confidence if first.value is not None else None
        result = await self._decide("route", query, 0, first, confidence,
                                    lambda: self.llm.route(query, **self._at(as_of)))
        if result.value is not None:
            result.value = result.value.model_copy(update={
                "reason": f"[{result.decided_by}] {result.value.reason}"[:MAX_REASON_CHARS]})
        return result

    async def split(self, query: str, *, as_of: datetime | None = None
                    ) -> PlannerResult[SplitPlan]:
        first = await self.offline.split(query)
        confidence = (SPLIT_CONFIDENCE if first.value is not None and first.value.sub_queries
                      else None)
        return await self._decide("split", query, 0, first, confidence,
                                  lambda: self.llm.split(query, **self._at(as_of)))

    async def judge(self, query: str, evidence: list[str], previous_queries: list[str],
                    hop: int, evidence_entities: EvidenceEntities = None, *,
                    evidence_times: EvidenceTimes = None, as_of: datetime | None = None,
                    ) -> PlannerResult[ChainJudgment]:
        timed = {"evidence_times": evidence_times} if evidence_times and self.reads_time else {}
        first = await self.offline.judge(query, evidence, previous_queries, hop,
                                         evidence_entities, **timed)
        confidence = first.value.confidence if first.value is not None else None
        # the model reads the evidence itself: the stored entities are the offline judge's
        return await self._decide("judge", query, hop, first, confidence, lambda: self.llm.judge(
            query, evidence, previous_queries, hop, **self._at(as_of),
            **({"evidence_times": evidence_times} if self._at(as_of) else {})))
