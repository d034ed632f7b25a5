"""The offline planner: the agent's three decisions without an LLM, from the question's
structure (`parsed.route_by_parse`, `parsed.split_by_parse`, `parsed.judge_chain`; the rules
in a page: docs/agent.md). It parses with spaCy (`use_nlp=True`, the default); without the
model it falls back to the surface heuristics of `question_syntax` and
`bridging.judge_evidence`. Every method returns a `PlannerResult` with zero LLM calls and
never raises."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel

from memroute._log import get_logger
from memroute.nlp import INSTALL_HINT, pipeline_available
from memroute.planners.base import EvidenceEntities, EvidenceTimes, PlannerResult
from memroute.planners.offline.bridging import ChainHeuristics, judge_evidence
from memroute.reading.dates import windowed_searches
from memroute.reading.entities import capitalized_phrases
from memroute.reading.events import event_question
from memroute.reading.question import read
from memroute.planners.offline.parsed import (
    SUBJECTS_AFTER_SEARCH,
    compared_subjects,
    first_round_searches,
    judge_chain,
    route_by_parse,
    split_by_parse,
)
from memroute.planners.offline.question_syntax import (
    comparison_subjects,
    nested_relation_words,
    route_by_syntax,
    subject_sub_queries,
)
from memroute.strategies.base import (
    MAX_HOP_QUERIES,
    MAX_REASON_CHARS,
    ChainJudgment,
    ChainSearch,
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

    ``heuristics`` (or its fields as keyword arguments): the chain's six parameters
    (`ChainHeuristics`). ``use_nlp=False`` (or a missing spaCy model, with one warning)
    chooses the surface heuristics. ``attribute_route``: where a plain attribute of a named
    thing goes (``"direct"``). ``split_question_search``: whether a split also searches the
    question itself beside its sub-questions (off: they are whole questions).
    """

    name = "offline"
    spends_llm_calls = False  # so budgets do not steer its routing

    def __init__(self, heuristics: ChainHeuristics | None = None, *,
                 use_nlp: bool = True, attribute_route: Route = "direct",
                 split_question_search: bool = False, **overrides: float) -> None:
        base = heuristics or ChainHeuristics()
        self.heuristics = ChainHeuristics(**{**base.__dict__, **overrides})
        if use_nlp:
            use_nlp = pipeline_available()
            if not use_nlp:
                log.warning("offline_planner.heuristics_fallback",
                            reason="the spaCy English model is not installed",
                            install=INSTALL_HINT)
        self.use_nlp = use_nlp
        self.attribute_route = attribute_route
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
        """Whether `route` reads the scope's speakers: a named speaker's own turns are then
        searched beside the question, at once (`ChainHeuristics.own_turns`)."""
        return self.use_nlp and self.heuristics.own_turns

    @property
    def reads_time(self) -> bool:
        """Whether `route` reads the time the question is asked (``as_of``): a relative
        expression ("last week") then searches its window of time beside the question."""
        return self.use_nlp

    async def route(self, query: str, speakers: Sequence[str] = (),
                    as_of: datetime | None = None) -> PlannerResult[RouteDecision]:
        def build() -> RouteDecision:
            searches = []
            if self.use_nlp and query.strip():
                route, reason, confidence = route_by_parse(query, self.attribute_route)
                if route == "split" and compared_subjects(query):
                    route, reason = "chain", SUBJECTS_AFTER_SEARCH + reason
                if route in ("chain", "direct"):
                    searches = first_round_searches(query, list(speakers), self.heuristics)
                if route == "direct" and searches:
                    reason += f"; {searches[0].producer}'s own turns searched beside it"
                reading = read(query)
                if route == "chain" and reason.startswith("asked") and (
                        event := reading.event):
                    # when it was, beside the question (over passages filed under titles the
                    # judge reads no event: their times are not the world's)
                    searches = [ChainSearch(query=event_question(query, event)), *searches]
                # a date inside a description ("the dentist I see on April 3") describes
                # (`memroute.reading.dates.windowed_searches`)
                timed, said = ((read(query, as_of).windows, read(query, as_of).windows_said)
                               if as_of else ([], ""))
                if route in ("chain", "direct") and timed:
                    searches = [*timed, *searches]
                    reason += f"; {said}, searched beside it"
            else:
                (route, reason), confidence = route_by_syntax(query), 0.5
                said = route != "direct" and (nested_relation_words(query)
                                              or comparison_subjects(query)[0]
                                              or capitalized_phrases(query))
                if said:  # the words that made it a relation, its subjects or its names
                    reason += " ('" + "', '".join(said) + "')"
            return RouteDecision(route=route, reason=f"{reason} (confidence {confidence:.2f})"
                                 [:MAX_REASON_CHARS], confidence=confidence,
                                 newest_first=self.use_nlp and read(query).asks_now,
                                 search_question=route != "split" or self.split_question_search,
                                 first_searches=searches[:MAX_HOP_QUERIES - 1])
        return await self._run(build)

    async def split(self, query: str, *, as_of: datetime | None = None
                    ) -> PlannerResult[SplitPlan]:
        """(``as_of`` is not read: a split's sub-questions name no time of their own.)"""
        def build() -> SplitPlan:
            subs = (split_by_parse(query) if self.use_nlp and query.strip()
                    else subject_sub_queries(query))
            return SplitPlan(sub_queries=subs[:MAX_SUB_QUERIES])
        return await self._run(build)

    async def judge(self, query: str, evidence: list[str], previous_queries: list[str],
                    hop: int, evidence_entities: EvidenceEntities = None, *,
                    evidence_times: EvidenceTimes = None, as_of: datetime | None = None,
                    ) -> PlannerResult[ChainJudgment]:
        """(``as_of`` is not read: the evidence's times date the event.)"""
        if self.use_nlp and query.strip():
            return await self._run(lambda: judge_chain(
                query, list(evidence), list(previous_queries), self.heuristics,
                evidence_entities, evidence_times))
        return await self._run(lambda: judge_evidence(query, list(evidence),
                                                      list(previous_queries), self.heuristics))
