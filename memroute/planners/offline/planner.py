"""The offline planner: the agent's three decisions without an LLM.

By default (``use_nlp=True``, ``MEMROUTE_OFFLINE_PARSE``) it parses the question with spaCy
(`memroute.planners.offline.parsed` documents those rules); the surface heuristics below are
its fallback when the model is missing (``use_nlp=False`` chooses them). Both were tuned only
on the shared development data (``docs/evaluation.md`` has the measurements behind each rule).
The surface heuristics:

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
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from memroute._log import get_logger
from memroute.nlp import INSTALL_HINT, pipeline_available
from memroute.planners.base import EvidenceEntities, PlannerResult
from memroute.planners.offline.bridging import ChainHeuristics, judge_evidence
from memroute.planners.offline.parsed import (
    SUBJECTS_AFTER_SEARCH,
    compared_subjects,
    first_round_searches,
    judge_chain,
    route_by_parse,
    split_by_parse,
)
from memroute.planners.offline.question_parse import read_question
from memroute.planners.offline.question_syntax import route_by_syntax, subject_sub_queries
from memroute.strategies.base import (
    MAX_REASON_CHARS,
    ChainJudgment,
    Route,
    RouteDecision,
    SplitPlan,
    Usage,
)
from memroute.strategies.split_query import MAX_SUB_QUERIES
from memroute.strategies.budget import CallLimits

T = TypeVar("T", bound=BaseModel)
log = get_logger(__name__)


class OfflinePlanner:
    """Implements `memroute.planners.base.Planner` without an LLM.

    By default it parses questions with spaCy (`memroute.planners.offline.parsed`); with
    ``use_nlp=False``, or when the model is missing (one warning), it uses the surface
    heuristics above. ``attribute_route``: where a named subject's direct attribute goes
    (``"chain"``: two searches, measured better on conversations than ``"direct"``).
    ``innermost_first``: a chain's first search is the question's innermost sub-question
    (`QuestionParse.innermost`, "the performer of Green" for "Who is the spouse of the
    performer of Green?") rather than the whole question; off by default (within noise on
    the sentence-protocol sets, docs/evaluation.md). ``split_question_search``: whether a
    split also searches the question itself beside its sub-queries (``False``: the
    sub-queries alone, one search less; HotpotQA 300 -0.17 points, 2Wiki 0.0, for 0.2 fewer
    searches, before comparisons went to `ChainHeuristics.subjects_after_search`; off).
    """

    name = "offline"
    spends_llm_calls = False  # so budgets do not steer its routing

    def __init__(self, heuristics: ChainHeuristics | None = None, *,
                 use_nlp: bool = True, attribute_route: Route = "direct",
                 innermost_first: bool = False, split_question_search: bool = False,
                 **overrides: float) -> None:
        base = heuristics or ChainHeuristics()
        self.heuristics = ChainHeuristics(**{**base.__dict__, **overrides})
        if use_nlp:
            use_nlp = pipeline_available()
            if not use_nlp:
                log.warning("offline_planner.heuristics_fallback",
                            reason="the spaCy English model is not installed",
                            install=INSTALL_HINT)
        self.use_nlp = use_nlp
        # where "one named subject with a direct attribute" goes (docs/evaluation.md)
        self.attribute_route = attribute_route
        self.innermost_first = innermost_first
        self.split_question_search = split_question_search

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

    @property
    def wants_speakers(self) -> bool:
        """Whether `route` reads the scope's speakers: a chain's own-turns searches then go out
        in its first round (`ChainHeuristics.speakers_first_round`)."""
        h = self.heuristics
        return self.use_nlp and h.speakers_first_round and h.own_turns and h.fan_out

    async def route(self, query: str, speakers: Sequence[str] = ()) -> PlannerResult[RouteDecision]:
        def build() -> RouteDecision:
            first, searches = "", []
            if self.use_nlp and query.strip():
                route, reason, confidence = route_by_parse(query, self.attribute_route)
                if (route == "split" and self.heuristics.subjects_after_search
                        and compared_subjects(query)):
                    route, reason = "chain", SUBJECTS_AFTER_SEARCH + reason
                if route == "chain" and self.innermost_first:
                    first = read_question(query).innermost
                if route in ("chain", "direct"):
                    searches = first_round_searches(query, list(speakers), self.heuristics)
                if route == "direct" and searches:
                    reason += f"; {searches[0].producer}'s own turns searched beside it"
            else:
                (route, reason), confidence = route_by_syntax(query), 0.5
            return RouteDecision(route=route, reason=f"{reason} (confidence {confidence:.2f})"
                                 [:MAX_REASON_CHARS], confidence=confidence,
                                 first_query=first[:MAX_REASON_CHARS],
                                 search_question=route != "split" or self.split_question_search,
                                 first_searches=searches)
        return await self._run(build)

    async def split(self, query: str) -> PlannerResult[SplitPlan]:
        def build() -> SplitPlan:
            subs = (split_by_parse(query) if self.use_nlp and query.strip()
                    else subject_sub_queries(query))
            return SplitPlan(sub_queries=subs[:MAX_SUB_QUERIES])
        return await self._run(build)

    async def judge(self, query: str, evidence: list[str], previous_queries: list[str],
                    hop: int, evidence_entities: EvidenceEntities = None,
                    ) -> PlannerResult[ChainJudgment]:
        if self.use_nlp and query.strip():
            return await self._run(lambda: judge_chain(
                query, list(evidence), list(previous_queries), self.heuristics,
                evidence_entities))
        return await self._run(lambda: judge_evidence(query, list(evidence),
                                                      list(previous_queries), self.heuristics))
