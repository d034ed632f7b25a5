"""The AsyncOpenAI path against a tiny scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import time
import uuid

import openai
import pytest
from fake_chat import FAST, corpus_episodes, judge, route
from fake_openai import FakeOpenAI, error, hang, reply

from memroute import RetrievalAgent, Scope
from memroute.errors import InvalidInputError
from memroute.graph import GraphPolicies
from memroute.settings import MemrouteSettings
from memroute.strategies.budget import CallLimits
from memroute.planners.llm.structured import StructuredLLM
from memroute.planners.llm.backends import OpenAIChat
from memroute.planners.llm.replies import RouteReply
from memroute.planners.llm.tokens import count_messages, count_tokens

SHORT_TIMEOUT = GraphPolicies(llm_timeout_s=0.3, llm_max_attempts=2,
                              retry_initial_interval_s=0.01, retry_max_interval_s=0.02)
MESSAGES = [{"role": "system", "content": "Route it."}, {"role": "user", "content": "Q?"}]



@pytest.fixture(scope="module")
async def corpus(memory) -> Scope:
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="openai")
    await memory.add(scope, corpus_episodes())
    return scope


async def ask(backend: OpenAIChat, limits: CallLimits = CallLimits()):
    return await StructuredLLM(backend).call(MESSAGES, RouteReply, limits=limits, max_tokens=64)


async def test_a_server_without_json_schema_gets_a_schema_in_json_object(fake_openai):
    fake_openai.script = [error(500, "response_format json_schema not supported"),
                     reply(route("split")), reply(route("chain"))]
    backend = OpenAIChat(fake_openai.client(), "local-model")
    assert (await ask(backend)).value.route == "split"
    assert (await ask(backend)).value.route == "chain"
    formats = [r["response_format"] for r in fake_openai.requests]
    assert formats[0]["type"] == "json_schema"
    assert formats[0]["json_schema"]["schema"] == RouteReply.model_json_schema()
    assert formats[1] == formats[2] == {"type": "json_object",
                                        "schema": RouteReply.model_json_schema()}


async def test_usage_comes_from_the_server_or_is_estimated(fake_openai):
    fake_openai.script = [reply(route("direct")), reply(route("direct"), usage=False)]
    backend = OpenAIChat(fake_openai.client(), "m", response_format="json_schema")
    reported = await ask(backend)
    assert (reported.usage.input_tokens, reported.usage.output_tokens) == (111, 7)
    assert not reported.usage.estimated
    estimated = await ask(backend)
    assert estimated.usage.estimated and 0 < estimated.usage.input_tokens < 111


async def test_the_estimate_counts_what_is_sent_the_response_format_included(fake_openai):
    """Without reported usage, a call is charged the tokens of the request actually sent: its
    messages and the ``json_schema`` response format (55-106 tokens of schema: no docstring,
    no field titles)."""
    fake_openai.script = [reply(route("direct"), usage=False)]
    backend = OpenAIChat(fake_openai.client(), "m", response_format="json_schema")
    estimated = await ask(backend)
    sent = fake_openai.requests[-1]
    schema_tokens = count_tokens(json.dumps(sent["response_format"]["json_schema"]))
    assert schema_tokens > 50
    schema = sent["response_format"]["json_schema"]["schema"]
    assert "description" not in schema and schema["required"] == ["route"]
    assert all("title" not in field for field in schema["properties"].values())
    assert schema["properties"]["route"]["enum"] == ["direct", "split", "chain"]
    assert estimated.usage.input_tokens == count_messages(sent["messages"]) + schema_tokens


async def test_request_carries_model_max_tokens_and_merged_system(fake_openai):
    fake_openai.script = [reply(route("direct"))]
    backend = OpenAIChat(fake_openai.client(), "gemma", response_format="json_object",
                         merge_system=True)
    await ask(backend, CallLimits(output_tokens=20))
    sent = fake_openai.requests[0]
    assert sent["model"] == "gemma" and sent["max_tokens"] == 20 and sent["temperature"] == 0
    assert [m["role"] for m in sent["messages"]] == ["user"]
    assert sent["messages"][0]["content"].startswith("Route it.")


async def test_client_errors_are_not_retried_as_format_problems_once_confirmed(fake_openai):
    fake_openai.script = [reply(route("direct")), error(401, "bad key")]
    backend = OpenAIChat(fake_openai.client(), "m")
    await ask(backend)
    with pytest.raises(openai.AuthenticationError):
        await ask(backend)
    assert len(fake_openai.requests) == 2


async def test_rate_limit_then_success_is_retried_by_the_graph(fake_openai, memory, corpus):
    fake_openai.script = [error(429, "rate limited"), reply(route("chain")),
                     reply(judge(True, "", 0.9, [0]))]
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=FAST)
    result = await agent.aretrieve("Where was the director of Harbor Lights born?",
                                   scope=corpus, k=5)
    assert result.route == "chain" and result.stop_reason == "sufficient"
    assert len(fake_openai.requests) == 3
    assert result.costs.by_node["tool_select"]["llm_calls"] == 2  # the 429 attempt is charged


async def test_a_hanging_server_times_out_and_the_graph_falls_back(fake_openai, memory, corpus):
    fake_openai.script = [hang(), hang()]
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=SHORT_TIMEOUT)
    started = time.perf_counter()
    result = await agent.aretrieve("Where was the director of Harbor Lights born?",
                                   scope=corpus, k=5)
    assert time.perf_counter() - started < 4
    assert result.route == "direct" and result.results
    assert result.stop_reason == "router_failed: timeout after 0.3s"
    assert len(fake_openai.requests) == 2


async def test_settings_configure_the_client_and_a_cheaper_router_model(fake_openai, memory,
                                                                       corpus):
    settings = MemrouteSettings(llm_base_url=fake_openai.url, llm_api_key="k", llm_model="big",
                                llm_router_model="small", llm_timeout_s=2.0)
    fake_openai.script = [reply(route("split")), reply('{"sub_queries": ["When was Oakridge '
                                                  'College founded?"]}')]
    agent = RetrievalAgent(memory, settings=settings, policies=FAST)
    result = await agent.aretrieve("Which was founded first, Oakridge College or Pinecrest "
                                   "University?", scope=corpus, k=4)
    assert result.route == "split" and result.planner == "llm:big+router:small"
    assert [r["model"] for r in fake_openai.requests] == ["small", "big"]


# -- an explicit offline choice never reaches a model --------------------------------------


async def test_planner_offline_never_reaches_the_configured_model(fake_openai, memory, corpus):
    with_model = MemrouteSettings(llm_base_url=fake_openai.url, llm_api_key="k", llm_model="big")
    question = "Which was founded first, Oakridge College or Pinecrest University?"
    chosen = RetrievalAgent(memory, settings=with_model, planner="offline", policies=FAST)
    from_settings = RetrievalAgent(memory, settings=with_model.model_copy(
        update={"planner": "offline"}), policies=FAST)
    for agent in (chosen, from_settings):
        result = await agent.aretrieve(question, scope=corpus, k=4)
        assert result.planner == "offline" and result.costs.llm_calls == 0
        # a comparison of two subjects: the question first, then the subjects it missed
        assert result.route == "chain" and result.results
    assert fake_openai.requests == []
    auto = RetrievalAgent(memory, settings=with_model, planner="auto", policies=FAST)
    assert auto.planner.name.startswith("llm:big")


def test_planner_choice_conflicts_are_typed_errors(memory):
    with pytest.raises(InvalidInputError, match="offline"):
        RetrievalAgent(memory, llm=openai.AsyncOpenAI(base_url="http://127.0.0.1:9", api_key="k"),
                       planner="offline")
    with pytest.raises(InvalidInputError, match="MEMROUTE_LLM_MODEL"):
        RetrievalAgent(memory, settings=MemrouteSettings(llm_model=None), planner="llm")
    with pytest.raises(InvalidInputError, match="unknown planner"):
        RetrievalAgent(memory, planner="offlin")


# -- every HTTP request counts against the budget --------------------------------------------

QUESTION = "Where was the director of Harbor Lights born?"


def formats_sent(fake_openai: FakeOpenAI) -> list[str]:
    return [r.get("response_format", {}).get("type", "none") + (
        "+schema" if "schema" in r.get("response_format", {}) else "")
        for r in fake_openai.requests]


async def test_a_failing_server_gets_no_more_requests_than_the_budget_allows(fake_openai, memory,
                                                                             corpus):
    fake_openai.script = []  # every request: 500 "script exhausted"
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=FAST)
    capped = await agent.aretrieve(QUESTION, scope=corpus, k=5, budget={"max_llm_calls": 2})
    assert len(fake_openai.requests) == 2 == capped.costs.llm_calls
    assert capped.route == "direct" and capped.results
    unbudgeted = await agent.aretrieve(QUESTION, scope=corpus, k=5)
    assert len(fake_openai.requests) - 2 == unbudgeted.costs.llm_calls == FAST.llm_max_attempts
    # 5xx says nothing about the format: every request still asks for json_schema
    assert set(formats_sent(fake_openai)) == {"json_schema"}


async def test_a_format_rejection_is_charged_and_remembered_per_model(fake_openai):
    fake_openai.script = [error(400, "unsupported response_format"), reply(route("split")),
                     reply(route("chain"))]
    backend = OpenAIChat(fake_openai.client(), "local-model")
    first = await ask(backend)
    assert first.value.route == "split" and first.usage.llm_calls == 2
    second = await ask(backend)
    assert second.value.route == "chain" and second.usage.llm_calls == 1
    assert formats_sent(fake_openai) == ["json_schema", "json_object+schema", "json_object+schema"]
    other_model = OpenAIChat(fake_openai.client(), "other-model")
    fake_openai.script = [reply(route("direct"))]
    await ask(other_model)
    assert formats_sent(fake_openai)[-1] == "json_schema"


async def test_a_format_downgrade_stops_at_the_budget(fake_openai):
    fake_openai.script = [error(422, "response_format json_schema unsupported"),
                          reply(route("split"))]
    result = await ask(OpenAIChat(fake_openai.client(), "m"), CallLimits(llm_calls=1))
    assert result.value is None and result.failure.kind == "budget_exhausted"
    assert len(fake_openai.requests) == 1 == result.usage.llm_calls


async def test_a_failure_after_earlier_requests_keeps_their_charge(fake_openai):
    fake_openai.script = [error(400, "response_format json_schema unsupported"),
                     error(503, "overloaded")]
    result = await ask(OpenAIChat(fake_openai.client(), "m"))
    assert result.failure.kind == "request_failed" and "503" in result.failure.message
    assert len(fake_openai.requests) == 2 == result.usage.llm_calls


async def test_cancelled_in_flight_requests_are_charged(fake_openai, memory, corpus):
    fake_openai.script = [hang(), hang()]
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=SHORT_TIMEOUT)
    timed_out = await agent.aretrieve(QUESTION, scope=corpus, k=5)
    assert len(fake_openai.requests) == 2 == timed_out.costs.llm_calls
    fake_openai.script = [hang()]
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=FAST)
    deadline = await agent.aretrieve(QUESTION, scope=corpus, k=5,
                                     budget={"max_latency_s": 0.5})
    assert len(fake_openai.requests) == 3 and deadline.costs.llm_calls == 1
    assert "latency" in deadline.stop_reason


@pytest.mark.parametrize("first", [error(400, "response_format json_schema unsupported"),
                                   reply("not a route at all")],
                         ids=["format-downgrade", "repair"])
async def test_requests_of_an_attempt_the_node_timeout_cancelled_are_all_charged(
        fake_openai, memory, corpus, first):
    """An attempt that sent a downgrade or repair request before the graph's node timeout
    cancelled it is charged every request it sent, not one call."""
    fake_openai.script = [first, hang(), hang()]
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=SHORT_TIMEOUT)
    result = await agent.aretrieve(QUESTION, scope=corpus, k=5)
    assert result.stop_reason == "router_failed: timeout after 0.3s" and result.results
    assert len(fake_openai.requests) == 3 == result.costs.llm_calls
    assert result.costs.by_node["tool_select"]["llm_calls"] == 3
