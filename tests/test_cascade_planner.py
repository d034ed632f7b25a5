"""The cascade planner: offline first, the LLM planner only below the confidence threshold."""

from __future__ import annotations

import pytest

from memroute.errors import InvalidInputError
from memroute.planners import make_planner
from memroute.planners.base import Planner, PlannerResult
from memroute.planners.cascade import CascadePlanner
from memroute.planners.offline.planner import OfflinePlanner
from memroute.settings import MemrouteSettings
from memroute.strategies.base import ChainJudgment, RouteDecision, SplitPlan, Usage
from memroute.strategies.budget import CallLimits


class CountingLLM:
    """A stand-in LLM planner that answers fixed decisions and counts its calls."""

    name = "llm:fake"
    spends_llm_calls = True
    prompt_versions = {"route": "abc"}

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail
        self.limits: CallLimits | None = None

    def with_limits(self, limits: CallLimits) -> CountingLLM:
        self.limits = limits
        return self

    def _result(self, kind: str, value):
        self.calls.append(kind)
        usage = Usage(llm_calls=1, input_tokens=100)
        if self.fail:
            return PlannerResult(None, usage, error="invalid_output")
        return PlannerResult(value, usage, raw=["{}"])

    async def route(self, query: str):
        return self._result("route", RouteDecision(route="chain", reason="llm says chain"))

    async def split(self, query: str):
        return self._result("split", SplitPlan(sub_queries=["a?", "b?"]))

    async def judge(self, query, evidence, previous_queries, hop):
        return self._result("judge", ChainJudgment(is_sufficient=True, confidence=0.9))


async def test_confident_offline_decisions_make_no_llm_call() -> None:
    llm = CountingLLM()
    cascade = CascadePlanner(OfflinePlanner(use_nlp=True), llm, threshold=0.7)
    assert isinstance(cascade, Planner)
    result = await cascade.route("When is Yasmin's birthday?")  # offline 0.75
    assert llm.calls == [] and result.value.route == "chain"  # attribute_route="chain"
    assert result.value.reason.startswith("[offline]") and result.raw[0].startswith(
        "cascade: offline")
    split = await cascade.split("Where does Karim study and where is Helga Brandt's office?")
    assert llm.calls == [] and len(split.value.sub_queries) == 2


async def test_unsure_offline_decisions_ask_the_llm_and_record_it() -> None:
    llm = CountingLLM()
    cascade = CascadePlanner(OfflinePlanner(use_nlp=True), llm, threshold=0.95)
    result = await cascade.route("When is Yasmin's birthday?")
    assert llm.calls == ["route"] and result.value.route == "chain"
    assert result.value.reason.startswith("[llm]") and result.usage.llm_calls == 1
    assert result.raw[0] == "cascade: llm (offline 0.75)"
    judged = await cascade.judge("Who founded Fernleaf?", ["Fernleaf makes lamps."],
                                 ["Who founded Fernleaf?"], 1)
    assert llm.calls == ["route", "judge"] and judged.value.is_sufficient


async def test_a_failed_llm_call_leaves_the_offline_decision_and_its_cost() -> None:
    cascade = CascadePlanner(OfflinePlanner(use_nlp=True), CountingLLM(fail=True), threshold=0.95)
    result = await cascade.route("When is Yasmin's birthday?")
    assert result.value is not None and result.value.route == "chain"  # the offline decision
    assert result.usage.llm_calls == 1 and "llm failure" in result.raw[0]


def test_make_planner_builds_each_kind() -> None:
    settings = MemrouteSettings()
    assert make_planner(settings=settings, choice="offline").name == "offline"
    assert make_planner(settings=settings).name == "offline"  # auto without a model
    with pytest.raises(InvalidInputError, match="needs a model"):
        make_planner(settings=settings, choice="cascade")
    with pytest.raises(InvalidInputError, match="unknown planner"):
        make_planner(settings=settings, choice="oracle")
    from memroute.evals.scripted_llm import ScriptedPlannerChat

    cascade = make_planner(ScriptedPlannerChat(), settings=settings.model_copy(
        update={"planner": "cascade", "cascade_threshold": 0.6}))
    assert isinstance(cascade, CascadePlanner) and cascade.threshold == 0.6
    assert cascade.prompt_versions  # the LLM planner's prompts


async def test_the_result_records_which_planner_decided(memory) -> None:
    import uuid

    from memroute import RetrievalAgent, Scope

    scope = Scope(org_id=f"cascade-{uuid.uuid4().hex[:8]}", project_id="p", user_id="u")
    await memory.add(scope, [{"content": "Yasmin's birthday is on the 14th of March."},
                             {"content": "Yasmin works at the Spokehouse cafe."}])
    llm = CountingLLM()
    agent = RetrievalAgent(memory, planner=CascadePlanner(OfflinePlanner(use_nlp=True), llm, threshold=0.95))
    result = await agent.aretrieve("When is Yasmin's birthday?", scope=scope, k=2)
    assert result.route_reason.startswith("[llm]") and result.route == "chain"
    records = [r for node in result.costs.nodes for r in node.get("raw", [])]
    assert "cascade: llm (offline 0.75)" in records
    assert result.costs.totals["llm_calls"] == len(llm.calls) >= 1
