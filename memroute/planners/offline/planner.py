"""The offline planner: deterministic heuristics for the agent's three decisions, no LLM.

A heuristic, documented as one, tuned only on the shared development data
(``docs/evaluation.md`` has the measurements behind each rule):

- **route**: two or more named subjects under a comparison or coordination ("Which was
  founded first, A or B?", "Are A and B both ...?") -> ``split``, unless it compares a role
  reached through each subject ("Which film has the director who died first, A or B?") or
  only describes the entity asked for ("Which actor starred in both A and B?") -> ``chain``;
  a nested relation (relative clause, passive or possessive relation chain) -> ``chain``;
  any other question that names something -> ``chain`` as well, because bridging from what
  it names was measured better than one search on every question class of the four
  benchmarks at no token cost; nothing named -> ``direct``.
- **split**: one sub-query per subject, the subject plus the question's relation words
  (no comparison wording).
- **judge** (ChainOfQuery) bridges on entities: capitalized and quoted phrases of the
  evidence and the titles of stored ``"Title: sentence"`` contents that the question does not
  name, scored by the rank of the evidence they occur in (higher in a sentence about an
  entity the question names). The first rewrite is the best entity plus the question's
  relation words; the last one packs the next few entities into one query. Rewrites only use
  words of the question and the evidence, so they are grounded. When every permitted rewrite
  was searched, or nothing untried is left, the evidence is judged sufficient.

Every method returns a `PlannerResult` with zero LLM calls and never raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from memroute.planners.base import PlannerResult
from memroute.planners.offline.bridging import ChainHeuristics, judge_evidence
from memroute.planners.offline.question_syntax import route_by_syntax, subject_sub_queries
from memroute.strategies.base import ChainJudgment, RouteDecision, SplitPlan, Usage
from memroute.strategies.budget import CallLimits

T = TypeVar("T", bound=BaseModel)


class OfflinePlanner:
    """Implements `memroute.planners.base.Planner` with the heuristics above."""

    name = "offline"
    spends_llm_calls = False  # so budgets do not steer its routing

    def __init__(self, heuristics: ChainHeuristics | None = None, **overrides: float) -> None:
        base = heuristics or ChainHeuristics()
        self.heuristics = ChainHeuristics(**{**base.__dict__, **overrides})

    @property
    def prompt_versions(self) -> dict[str, str]:
        """Empty: it sends no prompts."""
        return {}

    def with_limits(self, limits: CallLimits) -> OfflinePlanner:
        """Itself: it spends no LLM calls, so call limits do not bind it."""
        return self

    @staticmethod
    async def _run(build: Callable[[], T]) -> PlannerResult[T]:
        start = time.perf_counter()
        try:
            value = build()
            error = None
        except Exception as exc:  # a heuristic bug must not break the graph: it falls back
            value, error = None, f"offline planner failed: {type(exc).__name__}: {exc}"
        return PlannerResult(value, Usage(wall_ms=(time.perf_counter() - start) * 1000),
                             error=error)

    async def route(self, query: str) -> PlannerResult[RouteDecision]:
        def build() -> RouteDecision:
            route, reason = route_by_syntax(query)
            return RouteDecision(route=route, reason=reason)
        return await self._run(build)

    async def split(self, query: str) -> PlannerResult[SplitPlan]:
        return await self._run(lambda: SplitPlan(sub_queries=subject_sub_queries(query)))

    async def judge(self, query: str, evidence: list[str], previous_queries: list[str],
                    hop: int) -> PlannerResult[ChainJudgment]:
        return await self._run(lambda: judge_evidence(query, list(evidence),
                                                      list(previous_queries), self.heuristics))

