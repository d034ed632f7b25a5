"""The LLM layer: structured output, repair, usage accounting and call limits."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from fake_chat import Delay, RateLimited, ScriptedChatModel, judge, route
from langgraph.errors import NodeTimeoutError

from memroute.strategies.base import RouteDecision, Usage
from memroute.strategies.budget import Budget, CallLimits, with_margin
from memroute.planners.llm.replies import JudgeReply, RouteReply
from memroute.planners.llm.structured import StructuredLLM, extract_json, is_transient
from memroute.planners.llm.backends import LangChainChat, make_backend
from memroute.planners.llm.planner import LLMPlanner
from memroute.planners.llm.tokens import count_messages
from memroute.planners.llm.structured import request_tokens

MESSAGES = [{"role": "system", "content": "Pick a route."},
            {"role": "user", "content": "<question>Who directed it?</question>"}]


def llm(script, **kwargs) -> tuple[StructuredLLM, ScriptedChatModel]:
    model = ScriptedChatModel.of(script, **kwargs)
    return StructuredLLM(LangChainChat(model)), model


async def call(structured: StructuredLLM, limits: CallLimits = CallLimits(), schema=RouteReply,
               max_tokens: int = 96):
    return await structured.call(MESSAGES, schema, limits=limits, max_tokens=max_tokens,
                                 min_output_tokens=8)


@pytest.mark.parametrize("tool_calling", [True, False])
async def test_valid_reply_with_reported_usage(tool_calling):
    structured, model = llm([route("chain", "bridge")], tool_calling=tool_calling)
    result = await call(structured)
    assert result.value == RouteReply(route="chain", reason="bridge") and result.failure is None
    assert result.usage.llm_calls == 1 and not result.usage.estimated
    assert result.usage.input_tokens == count_messages(MESSAGES)  # what the fake reports
    assert result.raw == [route("chain", "bridge")]
    assert (model.calls[0]["tools"] is not None) == tool_calling


async def test_json_mode_tolerates_fences_and_prose():
    structured, _ = llm(["Here you go:\n```json\n" + route("split") + "\n```\nDone."],
                        tool_calling=False)
    assert (await call(structured)).value.route == "split"


async def test_usage_is_estimated_with_tiktoken_when_the_model_reports_none():
    structured, _ = llm([route("direct")], report_usage=False)
    result = await call(structured)
    assert result.usage.estimated  # the messages and the schema with_structured_output sends
    assert result.usage.input_tokens == request_tokens(MESSAGES, RouteReply, structured.backend)
    assert result.usage.input_tokens > count_messages(MESSAGES)
    assert result.usage.output_tokens > 0


async def test_one_repair_re_prompt_quotes_the_invalid_reply():
    structured, model = llm(['{"route": "sideways"}', route("direct")])
    result = await call(structured)
    assert result.value.route == "direct" and result.usage.llm_calls == 2
    assert result.raw == ['{"route": "sideways"}', route("direct")]
    repair = model.calls[1]["messages"][-1].text
    assert '{"route": "sideways"}' in repair and "route" in repair


async def test_two_invalid_replies_are_a_typed_failure_with_the_raw_text():
    structured, model = llm(["nope", "[1, 2]"])
    result = await call(structured)
    assert result.value is None and result.failure.kind == "invalid_output"
    assert result.raw == ["nope", "[1, 2]"] and len(model.calls) == 2
    planner_result = result.to_planner()
    assert planner_result.value is None and planner_result.error.startswith("invalid_output")


async def test_repair_is_skipped_when_the_budget_has_no_call_left():
    structured, model = llm(["nope", route("direct")])
    result = await call(structured, CallLimits(llm_calls=1))
    assert result.failure.kind == "budget_exhausted" and "repair" in result.failure.message
    assert len(model.calls) == 1


async def test_a_prompt_over_the_input_ceiling_is_never_sent():
    structured, model = llm([route("direct")])
    needed = with_margin(request_tokens(MESSAGES, RouteReply, structured.backend))
    result = await call(structured, CallLimits(input_tokens=needed - 1))
    assert result.failure.kind == "budget_exhausted" and model.calls == []
    assert (await call(structured, CallLimits(input_tokens=needed))).value is not None


async def test_max_tokens_is_what_is_left_of_the_output_budget():
    structured, model = llm([route("direct"), route("direct")])
    await call(structured, CallLimits(output_tokens=20), max_tokens=96)
    await call(structured, CallLimits(), max_tokens=96)
    assert [c["max_tokens"] for c in model.calls] == [20, 96]


async def test_a_cut_reply_is_invalid_not_over_budget():
    structured, model = llm([route("chain", "a long reason " * 20)] * 2)
    result = await call(structured, CallLimits(output_tokens=30), max_tokens=96)
    assert result.value is None and result.usage.output_tokens <= 30


async def test_an_output_ceiling_needs_a_model_that_takes_max_tokens():
    class Uncapped:
        model, can_cap_output = "uncapped", False

        async def complete(self, *args):  # pragma: no cover - must not be called
            raise AssertionError("called")

    result = await StructuredLLM(Uncapped()).call(MESSAGES, RouteReply,
                                                  limits=CallLimits(output_tokens=500),
                                                  max_tokens=96)
    assert result.failure.kind == "budget_exhausted" and "max_tokens" in result.failure.message


async def test_a_call_past_the_deadline_is_cancelled_and_charged():
    structured, _ = llm([Delay(5, route("direct"))])
    started = time.perf_counter()
    result = await call(structured, CallLimits(deadline=time.time() + 0.2))
    assert time.perf_counter() - started < 2
    assert result.failure.kind == "budget_exhausted" and "latency" in result.failure.message
    assert result.usage.llm_calls == 1 and result.usage.estimated


async def test_earlier_attempts_are_charged_against_the_limits():
    structured, model = llm([route("direct")])
    estimate = request_tokens(MESSAGES, RouteReply, structured.backend)
    result = await call(structured, CallLimits(llm_calls=3, prior_attempts=2))
    assert result.usage.llm_calls == 3 and result.usage.estimated
    # earlier attempts at their estimate, this one as the model reports it
    assert result.usage.input_tokens == 2 * estimate + count_messages(MESSAGES)
    refused = await call(llm([route("direct")])[0], CallLimits(llm_calls=2, prior_attempts=2))
    assert refused.failure.kind == "budget_exhausted"


async def test_transient_errors_propagate_for_the_retry_policy():
    structured, _ = llm([RateLimited("slow down")])
    with pytest.raises(RateLimited):
        await call(structured)


def test_transient_errors_are_told_apart():
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")

    def status(code: int) -> openai.APIStatusError:
        return openai.APIStatusError("x", response=httpx.Response(code, request=request),
                                     body=None)

    assert is_transient(RateLimited("429"))
    assert is_transient(status(503)) and is_transient(status(429))
    assert not is_transient(status(400)) and not is_transient(status(401))
    assert is_transient(openai.APITimeoutError(request=request))
    assert is_transient(httpx.ConnectError("refused"))
    assert is_transient(TimeoutError())
    assert not is_transient(ValueError("bad"))
    assert not is_transient(NodeTimeoutError("n", 1.0, kind="run", run_timeout=1.0))  # graph's job


def test_extract_json():
    assert extract_json('prefix {"a": {"b": 1}} suffix {"c": 2}') == {"a": {"b": 1}}
    for bad in ("", "no braces", '{"a": '):
        with pytest.raises(ValueError):
            extract_json(bad)


def test_make_backend_rejects_unknown_clients():
    from memroute.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        make_backend(object())
    with pytest.raises(InvalidInputError, match="model name"):
        make_backend(openai.AsyncOpenAI(api_key="x", base_url="http://127.0.0.1:9"))


async def test_planner_uses_the_router_model_for_routing_only():
    main = ScriptedChatModel.of([judge(True, "", 0.9, [0, 5])])
    router = ScriptedChatModel.of([route("chain")])
    planner = LLMPlanner(main, router_llm=router)
    assert (await planner.route("q?")).value == RouteDecision(route="chain", reason="scripted")
    judged = await planner.judge("q?", ["one", "two"], ["q?"], 1)
    assert judged.value.evidence_indices == [0]
    assert len(main.calls) == 1 and len(router.calls) == 1
    assert set(planner.prompt_versions) == {"tool_select", "split_query", "chain_of_query",
                                            "repair"}


def test_budget_validation_and_limits():
    from memroute.errors import InvalidInputError

    for bad in ({"max_llm_calls": -1}, {"max_llm_calls": 1.5}, {"max_latency_s": "1"},
                {"max_input_tokens": True}):
        with pytest.raises(InvalidInputError):
            Budget.coerce(bad)
    limits = CallLimits.remaining(Budget(max_llm_calls=3, max_input_tokens=100), Usage(1, 40, 5),
                                  started_at=time.time())
    assert (limits.llm_calls, limits.input_tokens, limits.output_tokens) == (2, 60, None)
    assert limits.shortfall(calls=3).startswith("llm_calls")
    assert limits.shortfall(input_tokens=61).startswith("input_tokens")
    assert limits.shortfall(calls=2, input_tokens=60) is None


def test_judge_reply_is_lenient_so_the_validator_can_clamp():
    reply = JudgeReply.model_validate({"is_sufficient": "true", "confidence": "1.5"})
    assert reply.is_sufficient is True and reply.confidence == 1.5
