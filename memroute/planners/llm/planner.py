"""The LLM planner: the agent's three decisions asked of a chat model, through prompt files."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from pydantic import BaseModel

from memroute.planners.base import EvidenceEntities, EvidenceTimes, PlannerResult
from memroute.planners.llm import replies
from memroute.planners.llm.backends import make_backend
from memroute.planners.llm.prompting import (
    JUDGE,
    JUDGE_ITEMS,
    PROMPTS,
    QUESTION_CHARS,
    ROUTE,
    SPLIT,
    PromptSpec,
    as_data,
    format_asked,
    format_evidence,
    format_queries,
)
from memroute.planners.llm.structured import LLMResult, StructuredLLM
from memroute.planners.llm.tokens import encoding
from memroute.prompts import load_prompt
from memroute.reading.question import QuestionReading, read
from memroute.settings import MemrouteSettings
from memroute.strategies.base import ChainJudgment, RouteDecision, SplitPlan
from memroute.strategies.budget import CallLimits
from memroute.time.events import EventSpan, event_span

T = TypeVar("T", bound=BaseModel)


class LLMPlanner:
    """Implements `Planner` with a chat model; a cheaper ``router_llm``/``router_model`` may
    serve ToolSelect. ``llm`` is an ``openai.AsyncOpenAI`` (with ``model``), a LangChain
    ``BaseChatModel`` or a `ChatBackend`.

    Bad model output never raises: it yields a `PlannerResult` with an ``error``. Transient
    errors propagate for the graph's retry policy. `with_limits` binds what a step may spend.
    """

    spends_llm_calls = True

    def __init__(self, llm: Any, *, model: str | None = None, router_llm: Any = None,
                 router_model: str | None = None, settings: MemrouteSettings | None = None,
                 repair: bool = True, **openai_options: Any) -> None:
        main = make_backend(llm, model, settings=settings, **openai_options)
        if router_llm is None and router_model is None and settings and settings.llm_router_model:
            router_model = settings.llm_router_model
        if router_llm is None and router_model is None:
            router = main
        else:
            router = make_backend(router_llm if router_llm is not None else llm,
                                  router_model or model, settings=settings, **openai_options)
        encoding()  # load the token vocabulary now, not inside the first call's timeout
        self.llm = StructuredLLM(main, repair=repair)
        self.router_llm = StructuredLLM(router, repair=repair)
        self.limits = CallLimits()
        self.name = f"llm:{main.model}" + (f"+router:{router.model}" if router is not main else "")

    @property
    def prompt_versions(self) -> dict[str, str]:
        """The sha256 of every prompt file this planner sends, by prompt name."""
        return {name: load_prompt(name).sha256 for name in PROMPTS}

    def with_limits(self, limits: CallLimits) -> LLMPlanner:
        """This planner bound to what the next step may spend (the clients are shared)."""
        bound = copy.copy(self)
        bound.limits = limits
        return bound

    async def _ask(self, llm: StructuredLLM, spec: PromptSpec, reply: type[T],
                   **fields: str) -> LLMResult[T]:
        """``spec``'s prompt rendered with ``fields``, asked of ``llm`` within the limits."""
        return await llm.call(load_prompt(spec.name).render(**fields), reply, limits=self.limits,
                              max_tokens=spec.max_tokens,
                              min_output_tokens=spec.min_output_tokens)

    wants_speakers = False  # the model routes from the question alone
    # Every prompt says when the question is asked (``as_of``, else now) and the windows of
    # time and the event its reading names; the graph confines every search of the run to
    # those windows (`memroute.graph.tool_select.confined`): no query the model writes
    # leaves them.
    reads_time = True
    confines_to_windows = True

    @staticmethod
    def _reading(query: str, as_of: datetime | None) -> QuestionReading:
        return read(query, as_of or datetime.now(timezone.utc))

    async def route(self, query: str, speakers: Sequence[str] = (),
                    as_of: datetime | None = None) -> PlannerResult[RouteDecision]:
        result = await self._ask(self.router_llm, ROUTE, replies.RouteReply,
                                 query=as_data(query, QUESTION_CHARS),
                                 asked=format_asked(self._reading(query, as_of)))
        return result.to_planner(result.value and replies.to_decision(result.value))

    async def split(self, query: str, *, as_of: datetime | None = None
                    ) -> PlannerResult[SplitPlan]:
        result = await self._ask(self.llm, SPLIT, replies.SplitReply,
                                 query=as_data(query, QUESTION_CHARS),
                                 asked=format_asked(self._reading(query, as_of)))
        return result.to_planner(result.value and replies.to_plan(result.value))

    async def judge(self, query: str, evidence: list[str], previous_queries: list[str],
                    hop: int, evidence_entities: EvidenceEntities = None, *,
                    evidence_times: EvidenceTimes = None, as_of: datetime | None = None,
                    ) -> PlannerResult[ChainJudgment]:
        """(``evidence_entities`` is not sent: the model reads the evidence itself; each
        item's day, ``evidence_times``, is.)"""
        reading = self._reading(query, as_of)
        span = self._event_span(reading, evidence, evidence_times, evidence_entities)
        result = await self._ask(self.llm, JUDGE, replies.JudgeReply,
                                 query=as_data(query, QUESTION_CHARS),
                                 asked=format_asked(reading, span),
                                 previous=format_queries(previous_queries, query),
                                 evidence=format_evidence(evidence, query, previous_queries,
                                                          evidence_times, reading.as_of))
        judgment = result.value and replies.to_judgment(result.value,
                                                        min(len(evidence), JUDGE_ITEMS))
        if judgment and span is not None and judgment.new_query:
            # the next search stays in the window the event's date gives its relation
            judgment = judgment.model_copy(update={
                "produced_after": "" if span.after is None else span.after.isoformat(),
                "produced_before": "" if span.before is None else span.before.isoformat()})
        return result.to_planner(judgment)

    @staticmethod
    def _event_span(reading: QuestionReading, evidence: list[str], times: EvidenceTimes,
                    entities: EvidenceEntities) -> EventSpan | None:
        """Where the evidence dates the event the question is asked around, if it does."""
        if reading.event is None or not times or len(times) != len(evidence):
            return None
        return event_span(reading.event, evidence, list(times), entities)
