"""The cascade planner: offline first, the LLM planner only below the confidence threshold."""

from __future__ import annotations

import pytest

from memroute.errors import InvalidInputError
from memroute.planners import make_planner
from memroute.planners.base import Planner, PlannerResult
from memroute.planners.cascade import CascadePlanner
from memroute.planners.llm.tokens import count_messages, count_tokens
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
    assert llm.calls == [] and result.value.route == "direct"  # a plain attribute
    # golden: a cascade's reason opens with which planner decided ("[offline]", "[llm]")
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
    assert result.value is not None and result.value.route == "direct"  # the offline decision
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


# -- the cascade over real LLM planners: a fake chat model and the scripted server -----------

YASMIN = "When is Yasmin's birthday?"  # offline route: direct, confidence 0.75
KARIM = "Where does Karim study and where is Helga Brandt's office?"  # split, 0.9


def cascade_over(llm, threshold: float, judge_hops: int = 1, **options) -> CascadePlanner:
    from memroute.planners.llm.planner import LLMPlanner

    return CascadePlanner(OfflinePlanner(use_nlp=True), LLMPlanner(llm, **options),
                          threshold=threshold, judge_hops=judge_hops)


async def test_the_threshold_decides_which_route_decisions_reach_the_model() -> None:
    from fake_chat import ScriptedChatModel, route

    model = ScriptedChatModel.of([route("direct", "one person, one fact")])
    lenient = cascade_over(model, threshold=0.7)
    kept = await lenient.route(YASMIN)
    assert kept.decided_by == "offline" and kept.value.route == "direct" and not model.calls
    strict = cascade_over(model, threshold=0.8)
    assert (await strict.route(KARIM)).decided_by == "offline"  # 0.9 stands at 0.8
    asked = await strict.route(YASMIN)
    assert asked.decided_by == "llm" and asked.value.route == "direct"
    assert len(model.calls) == 1 and asked.usage.llm_calls == 1
    # the model's reported usage is what is charged (fake_chat counts it with tiktoken)
    sent = [{"content": m.text} for m in model.calls[0]["messages"]]
    assert asked.usage.input_tokens == count_messages(sent) and not asked.usage.estimated


async def test_only_the_first_hops_judgment_can_reach_the_model() -> None:
    from fake_chat import ScriptedChatModel, judge

    evidence = ["Fernleaf: Fernleaf was founded by Ana Ruiz and Tom Berg in Porto.",
                "Ana Ruiz: Ana Ruiz studied design in Lisbon and Milan."]
    model = ScriptedChatModel.of([judge(True, confidence=0.9, indices=[0])] * 3)
    cascade = cascade_over(model, threshold=1.0)  # every offline judgment is unsure
    first = await cascade.judge("Who founded Fernleaf?", evidence, ["Who founded Fernleaf?"], 1)
    assert first.decided_by == "llm" and first.value.is_sufficient and len(model.calls) == 1
    later = await cascade.judge("Who founded Fernleaf?", evidence,
                                ["Who founded Fernleaf?", "Fernleaf founded"], 2)
    assert later.decided_by == "offline" and len(model.calls) == 1
    wider = cascade_over(model, threshold=1.0, judge_hops=2)
    assert (await wider.judge("Who founded Fernleaf?", evidence,
                              ["Who founded Fernleaf?", "Fernleaf founded"], 2)).decided_by == "llm"


async def test_a_malformed_reply_from_the_server_leaves_the_offline_decision() -> None:
    from fake_openai import FakeOpenAI, reply

    server = FakeOpenAI()
    try:
        server.script = [reply("the route is chain, I think", usage=False),
                         reply('{"route": "teleport"}', usage=False)]  # then the repair fails
        cascade = cascade_over(server.client(), threshold=0.8, model="m",
                               response_format="json_object")
        result = await cascade.route(YASMIN)
        assert result.decided_by == "offline" and result.value.route == "direct"
        assert result.value.reason.startswith("[offline]")
        assert "llm failure (invalid_output" in result.raw[0]
        # both requests charged, each its prompt as sent, estimated with o200k_base
        assert result.usage.llm_calls == 2 == len(server.requests) and result.usage.estimated
        sent = sum(count_messages(r["messages"]) for r in server.requests)
        outputs = sum(count_tokens(t) for t in ("the route is chain, I think",
                                                '{"route": "teleport"}'))
        assert (result.usage.input_tokens, result.usage.output_tokens) == (sent, outputs)
    finally:
        server.close()


async def test_the_server_reported_usage_is_charged_and_decisions_are_counted(memory) -> None:
    import uuid

    from fake_chat import route
    from fake_openai import FakeOpenAI, reply

    from memroute import RetrievalAgent, Scope

    scope = Scope(org_id=f"cascade-{uuid.uuid4().hex[:8]}", project_id="p", user_id="u")
    await memory.add(scope, [{"content": "Yasmin's birthday is on the 14th of March."},
                             {"content": "Karim studies chemistry in Utrecht."},
                             {"content": "Helga Brandt's office is on the third floor."}])
    server = FakeOpenAI()
    try:
        server.script = [reply(route("direct"))]  # usage: 111 prompt, 7 completion tokens
        agent = RetrievalAgent(memory, planner=cascade_over(server.client(), threshold=0.8,
                                                            model="m"))
        asked = await agent.aretrieve(YASMIN, scope=scope, k=2)
        assert asked.route == "direct" and asked.costs.decisions == {"llm": 1}
        assert (asked.costs.totals["input_tokens"], asked.costs.totals["output_tokens"]) == (111, 7)
        assert any("birthday" in r.text for r in asked.results)  # the answer, in the top k
        kept = await agent.aretrieve(KARIM, scope=scope, k=4)
        assert kept.route == "split" and kept.costs.decisions == {"offline": 2}  # route, split
        assert kept.costs.totals["llm_calls"] == 0 and len(server.requests) == 1
    finally:
        server.close()


def test_the_judge_prompt_shows_the_top_items_cut_to_the_turn_that_matched() -> None:
    from memroute.planners.llm import prompting

    window = ("We went hiking on Sunday.\nMy dog Biscuit loves the beach at Nazaré.\n"
              "Nice! What else?\n" + "We also cooked a very long dinner together. " * 6)
    text = prompting.format_evidence([window, *[f"Item {i}: filler." for i in range(12)]],
                                     "Where does Biscuit love to go?", ["Biscuit dog"])
    lines = text.splitlines()
    last = prompting.JUDGE_ITEMS - 1
    assert len(lines) == prompting.JUDGE_ITEMS and lines[-1].startswith(f"[{last}]")
    first = lines[0]
    assert "Biscuit loves the beach at Nazaré" in first and "long dinner" not in first
    assert len(first) <= len("[0] ") + prompting.EVIDENCE_CHARS
