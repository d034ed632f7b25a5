"""The retrieval graph end to end on the real store, with scripted chat models."""

from __future__ import annotations

import hashlib
import uuid
from importlib.resources import files

import pytest
from fake_chat import (FAST, Delay, RateLimited, ScriptedChatModel, corpus_episodes, judge,
                       route, split)

from memroute import Budget, RetrievalAgent, Scope, ScoredResult
from memroute.graph import GraphPolicies, HopJudged, RouteChosen, SearchDone, SubQueries
from memroute.graph.events import Final
from memroute.errors import InvalidInputError

SHORT_TIMEOUT = GraphPolicies(llm_timeout_s=0.3, llm_max_attempts=2,
                              retry_initial_interval_s=0.01, retry_max_interval_s=0.02)

CHAIN_Q = "Where was the director of Harbor Lights born?"
SPLIT_Q = "Which was founded first, Oakridge College or Pinecrest University?"
DIRECT_Q = "When was the Blue Falcon locomotive built?"


@pytest.fixture(scope="module")
async def corpus(memory) -> Scope:
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="agent", user_id="u1")
    await memory.add(scope, corpus_episodes())
    return scope


def make_agent(memory, script, policies=FAST, **kwargs):
    model = kwargs.pop("model", None) or ScriptedChatModel.of(script)
    return RetrievalAgent(memory, llm=model, policies=policies, **kwargs), model


def contents(result) -> list[str]:
    return [r.nucleus.content for r in result.results]


def assert_valid(result, k: int = 5) -> None:
    assert result.route in ("direct", "split", "chain")
    assert result.stop_reason
    assert 0 < len(result.results) <= k
    assert all(isinstance(r, ScoredResult) for r in result.results)
    assert result.queries and result.queries[0]
    scores = [r.rerank_score for r in result.results]
    assert scores == sorted(scores, reverse=True)


def by_node(result, node: str) -> list[dict]:
    return [c for c in result.costs.nodes if c["node"] == node]


# -- routes end to end ------------------------------------------------------------------------

async def test_direct_route_returns_what_the_store_returns(memory, corpus):
    agent, model = make_agent(memory, [route("direct")])
    result = await agent.aretrieve(DIRECT_Q, scope=corpus, k=3)
    expected = await memory.search_scored(corpus, DIRECT_Q, k=3)
    assert result.route == "direct" and result.stop_reason == "done"
    assert result.queries == [DIRECT_Q]
    assert [r.uid for r in result.results] == [r.uid for r in expected]
    assert "Blue Falcon" in contents(result)[0]
    assert [c["node"] for c in result.costs.nodes] == ["tool_select", "memory_search",
                                                        "final_rerank"]
    assert result.costs.totals["llm_calls"] == 1 == len(model.calls)
    assert not result.costs.totals["estimated"]


async def test_split_route_searches_every_sub_query_and_reports_prompt_hashes(memory, corpus):
    subs = ["When was Oakridge College founded?", "When was Pinecrest University founded?"]
    agent, model = make_agent(memory, [route("split"), split(*subs)])
    result = await agent.aretrieve(SPLIT_Q, scope=corpus, k=4)
    assert_valid(result, 4)
    assert result.route == "split" and result.stop_reason == "done"
    assert result.sub_queries == subs
    assert result.queries[0] == SPLIT_Q and sorted(result.queries[1:]) == sorted(subs)
    text = "\n".join(contents(result))
    assert "founded in 1852" in text and "founded in 1877" in text
    for name in ("tool_select", "split_query", "chain_of_query"):
        raw = files("memroute.prompts").joinpath(f"{name}.md").read_bytes()
        assert result.prompt_versions[name] == hashlib.sha256(raw).hexdigest()
    assert result.costs.by_node["split_plan"]["llm_calls"] == 1


async def test_chain_route_follows_the_bridge_to_the_answer(memory, corpus):
    agent, _ = make_agent(memory, [route("chain"),
                                   judge(False, "Where was Mara Quinlan born?", 0.2, [0]),
                                   judge(True, "", 0.9, [0, 1])])
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5)
    assert_valid(result)
    assert result.route == "chain" and result.stop_reason == "sufficient"
    assert result.queries == [CHAIN_Q, "Where was Mara Quinlan born?"]
    assert any("born in Tallinn" in c for c in contents(result))
    assert [h["decision"] for h in result.hops] == ["continue", "sufficient"]
    assert result.costs.totals["llm_calls"] == 3


async def test_strategy_override_makes_no_router_call(memory, corpus):
    agent, model = make_agent(memory, [])
    result = await agent.aretrieve(DIRECT_Q, scope=corpus, k=3, strategy="direct")
    assert result.route == "direct" and result.route_reason == "strategy override"
    assert model.calls == [] and result.costs.totals["llm_calls"] == 0


def test_sync_retrieve(settings, embedder):
    from memroute.memory import SyncMemory

    with SyncMemory.open(settings=settings, embedder=embedder,
                         schema=f"s_{uuid.uuid4().hex[:10]}") as memory:
        scope = Scope(org_id="sync")
        memory.add(scope, corpus_episodes())
        agent, _ = make_agent(memory, [route("chain"), judge(True, "", 0.9)])
        result = agent.retrieve(CHAIN_Q, scope=scope, k=2)
    assert_valid(result, 2)
    assert result.route == "chain" and result.stop_reason == "sufficient"


async def test_offline_planner_when_no_llm_is_configured(memory, corpus):
    agent = RetrievalAgent(memory, policies=FAST)
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5)
    assert agent.planner.name == "offline" and result.planner == "offline"
    assert_valid(result)
    assert result.costs.totals["llm_calls"] == 0
    # the offline planner spends no LLM budget, so a zero-call budget does not change its route
    limited = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, budget=Budget(max_llm_calls=0))
    assert limited.route == result.route and limited.queries == result.queries


# -- concurrency and the final rerank ---------------------------------------------------------

SEVEN = [f"When was item {i} of the Oakridge College archive built?" for i in range(7)]


@pytest.mark.parametrize("cap", [1, 4])
async def test_split_searches_run_concurrently_up_to_the_cap(memory, corpus, cap):
    subs = ["When was Oakridge College founded?", "When was Pinecrest University founded?",
            "Where is Oakridge College?"]
    agent, _ = make_agent(memory, [route("split"), split(*subs)], search_concurrency=cap)
    result = await agent.aretrieve(SPLIT_Q, scope=corpus, k=4)
    searches = sorted(by_node(result, "memory_search"), key=lambda c: c["started_at"])
    assert len(searches) == 4
    if cap == 1:  # one at a time: each starts after the previous one ended
        assert all(a["ended_at"] <= b["started_at"] for a, b in zip(searches, searches[1:]))
    else:  # the three sub-queries' searches were in flight at once
        subs = [c for c in searches if c["detail"] != f"split: {SPLIT_Q}"]
        assert max(c["started_at"] for c in subs) < min(c["ended_at"] for c in subs)


async def test_the_original_query_is_searched_while_the_split_planner_decides(memory, corpus):
    """The planner takes 0.3 s; the original query's search runs meanwhile (the final rerank
    needs its hits anyway), is charged like any search, and the rerank waits for all."""
    subs = ["When was Oakridge College founded?", "When was Pinecrest University founded?"]
    agent, _ = make_agent(memory, [route("split"), Delay(0.3, split(*subs))])
    result = await agent.aretrieve(SPLIT_Q, scope=corpus, k=4)
    assert_valid(result, 4)
    (plan,) = by_node(result, "split_plan")
    searches = by_node(result, "memory_search")
    original = next(c for c in searches if c["detail"] == f"split: {SPLIT_Q}")
    assert original["ended_at"] < plan["ended_at"]  # hidden behind planning
    assert all(c["started_at"] >= plan["ended_at"] for c in searches if c is not original)
    (rerank,) = by_node(result, "final_rerank")
    assert rerank["started_at"] >= max(c["ended_at"] for c in searches)
    assert rerank["detail"].endswith("3 queries, fused")
    assert result.queries[0] == SPLIT_Q and sorted(result.queries[1:]) == sorted(subs)
    assert len(searches) == 3


@pytest.mark.parametrize("mode", ["fused", "concat"])
async def test_final_rerank_scores_the_pool_against_all_queries(memory, corpus, mode):
    subs = ["When was Oakridge College founded?", "When was Pinecrest University founded?"]
    agent, _ = make_agent(memory, [route("split"), split(*subs)], rerank_mode=mode)
    result = await agent.aretrieve(SPLIT_Q, scope=corpus, k=4)
    pool: dict[str, ScoredResult] = {}
    for q in result.queries:
        for r in await memory.search_scored(corpus, q, k=4):
            if r.uid not in pool or r.rerank_score > pool[r.uid].rerank_score:
                pool[r.uid] = r
    expected = await memory.rerank(list(pool.values()), result.queries, 4, mode=mode,
                                   credit="window")
    assert [r.uid for r in result.results] == [r.uid for r in expected]
    assert mode in by_node(result, "final_rerank")[0]["detail"]


# -- chain stop conditions --------------------------------------------------------------------

@pytest.mark.parametrize("replies, stop", [
    ([judge(True, "", 0.95, [0])], "sufficient"),
    ([judge(False, "", 0.3, [0])], "empty_query"),
    ([judge(False, "  ", 0.3)], "empty_query"),
    ([judge(False, CHAIN_Q.upper(), 0.3)], "repeated_query"),
    ([judge(False, "Where was Mara Quinlan born?", 0.3),
      judge(False, "Where was Mara Quinlan born?", 0.3)], "repeated_query"),
    ([judge(False, "Where was Bartholomew Zanuck born?", 0.3)], "ungrounded_query"),
    ([judge(True, "Where was Mara Quinlan born?", 0.5),  # sufficient but unsure: go on
      judge(True, "", 0.85)], "sufficient"),
])
async def test_chain_stops_at_each_condition(memory, corpus, replies, stop):
    agent, model = make_agent(memory, replies)
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, strategy="chain")
    assert_valid(result)
    assert result.stop_reason.split(":")[0] == stop
    assert result.hops[-1]["decision"] == result.stop_reason
    assert len(model.calls) == len(replies)
    if stop == "ungrounded_query":
        assert "Bartholomew" in result.stop_reason and "Zanuck" in result.stop_reason
        assert result.queries == [CHAIN_Q]


async def test_chain_stops_at_the_hop_limit_without_a_useless_judge_call(memory, corpus):
    replies = [judge(False, "Where was Mara Quinlan born?", 0.3),
               judge(False, "What is Tallinn?", 0.3)]
    agent, model = make_agent(memory, replies, max_hops=3)
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, strategy="chain")
    assert result.stop_reason == "hop_limit"
    assert result.queries == [CHAIN_Q, "Where was Mara Quinlan born?", "What is Tallinn?"]
    assert len(model.calls) == 2 and [h["hop"] for h in result.hops] == [1, 2, 3]


async def test_chain_confidence_threshold_is_configurable(memory, corpus):
    agent, _ = make_agent(memory, [judge(True, "", 0.6)], sufficient_confidence=0.5)
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, strategy="chain")
    assert result.stop_reason == "sufficient"


async def test_chain_stops_when_the_budget_allows_no_more_calls(memory, corpus):
    agent, model = make_agent(memory, [judge(False, "Where was Mara Quinlan born?", 0.3),
                                       judge(True, "", 0.9)])
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, strategy="chain",
                                   budget=Budget(max_llm_calls=1))
    assert result.stop_reason.startswith("budget_exhausted: llm_calls")
    assert result.queries == [CHAIN_Q, "Where was Mara Quinlan born?"]  # the searched rewrite
    assert result.costs.totals["llm_calls"] == 1 == len(model.calls)


# -- bad model output and errors --------------------------------------------------------------

@pytest.mark.parametrize("replies, calls", [
    (["{not json", "still not json"], 2),
    ([route("everything"), '{"route": "CHAIN!!"}'], 2),
    (['{"reason": "no route"}', ""], 2),
    (["", ""], 2),
])
async def test_invalid_router_answers_fall_back_to_direct(memory, corpus, replies, calls):
    agent, model = make_agent(memory, replies)
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5)
    assert_valid(result)
    assert result.route == "direct" and result.queries == [CHAIN_Q]
    assert result.stop_reason.startswith("router_failed: invalid_output")
    assert result.costs.totals["llm_calls"] == calls == len(model.calls)
    assert by_node(result, "tool_select")[0]["raw"] == replies  # kept for the trace


async def test_a_repaired_router_answer_is_used(memory, corpus):
    agent, model = make_agent(memory, ["Sure! The route is chain.", route("split"),
                                       split("When was Oakridge College founded?",
                                             "When was Pinecrest University founded?")])
    result = await agent.aretrieve(SPLIT_Q, scope=corpus, k=4)
    assert result.route == "split" and result.costs.by_node["tool_select"]["llm_calls"] == 2
    repair_prompt = model.calls[1]["messages"][-1].text
    assert "Sure! The route is chain." in repair_prompt


@pytest.mark.parametrize("reply, expected", [
    (split(*SEVEN), SEVEN[:6]),
    (split("", "   ", "When was Oakridge College founded?", "when was oakridge college founded",
           SPLIT_Q, "Which is older, Oakridge College or Pinecrest University?",
           "Pinecrest University founding year"),
     ["When was Oakridge College founded?", "Pinecrest University founding year"]),
    (split(), []),
    ('{"sub_queries": "Oakridge"}', None),  # wrong type twice -> split_failed
])
async def test_split_answers_are_validated(memory, corpus, reply, expected):
    agent, _ = make_agent(memory, [route("split"), reply, reply])
    result = await agent.aretrieve(SPLIT_Q, scope=corpus, k=4)
    assert_valid(result, 4)
    if expected is None:
        assert result.stop_reason.startswith("split_failed: invalid_output")
        assert result.queries == [SPLIT_Q]
        return
    assert result.sub_queries == expected
    assert result.queries[0] == SPLIT_Q and sorted(result.queries[1:]) == sorted(expected)
    if not expected:
        assert any("no valid sub-queries" in n for n in result.notes)


async def test_judge_indices_out_of_range_are_dropped_and_confidence_clamped(memory, corpus):
    reply = '{"is_sufficient": true, "evidence_indices": [0, 99, -3, 1, 1], ' \
            '"new_query": "", "confidence": 7.5}'
    agent, _ = make_agent(memory, [reply])
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, strategy="chain")
    assert result.hops[0]["evidence_indices"] == [0, 1]
    assert result.hops[0]["confidence"] == 1.0 and result.stop_reason == "sufficient"


async def test_model_exceptions_fall_back_with_the_cause(memory, corpus):
    agent, model = make_agent(memory, [ValueError("model crashed")])
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5)
    assert_valid(result)
    assert result.route == "direct"
    assert result.stop_reason == "router_failed: ValueError: model crashed"
    assert len(model.calls) == 1  # not transient: not retried


async def test_rate_limits_are_retried_by_the_graph(memory, corpus):
    agent, model = make_agent(memory, [RateLimited("429"), route("chain"), judge(True, "", 0.9)])
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5)
    assert result.route == "chain" and result.stop_reason == "sufficient"
    assert len(model.calls) == 3
    # the failed attempt is charged as a call (with the prompt's estimated tokens)
    assert result.costs.by_node["tool_select"]["llm_calls"] == 2
    assert result.costs.by_node["tool_select"]["estimated"]


async def test_rate_limits_past_the_retries_fall_back_to_direct(memory, corpus):
    agent, model = make_agent(memory, [RateLimited("429"), RateLimited("429")])
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5)
    assert result.route == "direct" and result.stop_reason.startswith("router_failed: RateLimited")
    assert len(model.calls) == FAST.llm_max_attempts


@pytest.mark.parametrize("where", ["router", "split", "judge"])
async def test_hanging_model_times_out_and_the_graph_still_answers(memory, corpus, where):
    script = [Delay(30), Delay(30)]
    strategy = {"router": "auto", "split": "split", "judge": "chain"}[where]
    agent, model = make_agent(memory, script, policies=SHORT_TIMEOUT)
    result = await agent.aretrieve(SPLIT_Q if where == "split" else CHAIN_Q, scope=corpus, k=5,
                                   strategy=strategy)
    assert_valid(result)
    step = {"router": "router", "split": "split", "judge": "judge"}[where]
    assert result.stop_reason == f"{step}_failed: timeout after 0.3s"
    assert len(model.calls) == len(script)
    assert len(result.queries) == 1


# -- budgets ----------------------------------------------------------------------------------

def chain_script(strategy: str = "auto") -> list[str]:
    router = [route("chain")] if strategy == "auto" else []
    return router + [judge(False, "Where was Mara Quinlan born?", 0.3, [0]),
                     judge(False, "What is Tallinn?", 0.3, [0]), judge(True, "", 0.9)]


@pytest.mark.parametrize("budget", [
    Budget(max_llm_calls=0), Budget(max_llm_calls=1), Budget(max_llm_calls=2),
    Budget(max_llm_calls=3), Budget(max_input_tokens=300), Budget(max_input_tokens=600),
    Budget(max_input_tokens=1500), Budget(max_output_tokens=10), Budget(max_output_tokens=40),
    Budget(max_output_tokens=70), Budget(max_llm_calls=2, max_input_tokens=900,
                                         max_output_tokens=60),
])
async def test_budgets_are_never_exceeded(memory, corpus, budget):
    for strategy in ("auto", "chain"):
        agent, model = make_agent(memory, chain_script(strategy))
        result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, strategy=strategy,
                                       budget=budget)
        assert_valid(result)
        totals = result.costs.totals
        assert totals["llm_calls"] == len(model.calls)
        for spent, limit in ((totals["llm_calls"], budget.max_llm_calls),
                             (totals["input_tokens"], budget.max_input_tokens),
                             (totals["output_tokens"], budget.max_output_tokens)):
            assert limit is None or spent <= limit, (strategy, result.stop_reason)
        if budget.max_output_tokens is not None:
            assert all(c["max_tokens"] <= budget.max_output_tokens for c in model.calls)


async def test_no_call_budget_skips_the_router(memory, corpus):
    agent, model = make_agent(memory, chain_script())
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, budget={"max_llm_calls": 0})
    assert result.route == "direct" and model.calls == []
    assert result.stop_reason.startswith("budget_exhausted") and "router skipped" in \
        result.route_reason


async def test_router_pick_that_does_not_fit_takes_the_best_that_does(memory, corpus):
    agent, model = make_agent(memory, [route("chain"), split("When was Oakridge College founded?",
                                                             "Where is Tallinn?")])
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, budget=Budget(max_llm_calls=2))
    assert result.route == "split"  # chain needs 2 more calls, split 1
    assert "chain does not fit the budget" in result.route_reason
    assert result.costs.totals["llm_calls"] == 2


async def test_latency_budget_cancels_a_slow_call(memory, corpus):
    agent, model = make_agent(memory, [Delay(5, route("chain"))])
    result = await agent.aretrieve(CHAIN_Q, scope=corpus, k=5, budget=Budget(max_latency_s=0.3))
    assert_valid(result)
    assert result.route == "direct"
    assert result.stop_reason.startswith("budget_exhausted: latency")


# -- streaming, injection, input, embedding ---------------------------------------------------

async def test_stream_events_arrive_in_order(memory, corpus):
    agent, _ = make_agent(memory, [route("chain"),
                                   judge(False, "Where was Mara Quinlan born?", 0.2),
                                   judge(True, "", 0.9)])
    events = [e async for e in agent.astream(CHAIN_Q, scope=corpus, k=5)]
    assert [type(e) for e in events] == [RouteChosen, SearchDone, HopJudged, SearchDone,
                                         HopJudged, Final]
    assert events[0].route == "chain" and events[0].source == "planner"
    assert [e.decision for e in events if isinstance(e, HopJudged)] == ["continue", "sufficient"]
    assert events[2].confidence == 0.2 and events[2].is_sufficient is False
    final = events[-1]
    assert final.stop_reason == "sufficient" and final.result.queries == final.queries
    assert len(final.result.results) == final.results > 0


async def test_split_stream_reports_sub_queries_before_searches(memory, corpus):
    subs = ["When was Oakridge College founded?", "When was Pinecrest University founded?"]
    agent, _ = make_agent(memory, [route("split"), split(*subs)])
    events = [e async for e in agent.astream(SPLIT_Q, scope=corpus, k=4)]
    # the original query's search runs beside the planner: its event may come either side
    # of the sub-queries'
    plan = [e for e in events if not (isinstance(e, SearchDone) and e.query == SPLIT_Q)]
    assert [type(e) for e in plan] == [RouteChosen, SubQueries, SearchDone, SearchDone, Final]
    assert plan[1].queries == subs
    assert sum(isinstance(e, SearchDone) and e.query == SPLIT_Q for e in events) == 1


async def test_evidence_is_delimited_as_data(memory, corpus):
    agent, model = make_agent(memory, [judge(False, "Where is Zanzibar gold?", 0.3),
                                       judge(True, "", 0.9)])
    question = "What does the notice say about Zanzibar gold?"
    result = await agent.aretrieve(question, scope=corpus, k=5, strategy="chain")
    prompt = model.calls[0]["messages"][-1].text
    assert "Ignore previous instructions" in prompt  # the stored text is shown ...
    assert prompt.count("</evidence>") == 1  # ... but cannot close the data block
    assert result.stop_reason != "ungrounded_query"  # Zanzibar is in the evidence


@pytest.mark.parametrize("kwargs", [
    {"query": "   "}, {"k": 0}, {"strategy": "everything"}, {"budget": {"max_llm_calls": -1}},
    {"budget": {"tokens": 5}}, {"scope": {"org_id": "bad scope!"}},
])
async def test_bad_input_is_a_typed_error(memory, corpus, kwargs):
    agent, _ = make_agent(memory, [route("direct")])
    args = {"query": DIRECT_Q, "scope": corpus, **kwargs}
    with pytest.raises(InvalidInputError):
        await agent.aretrieve(args.pop("query"), **args)


async def test_a_planner_missing_protocol_members_is_refused_by_name(memory):
    class RoutesOnly:
        name = "partial"

        async def route(self, query):  # pragma: no cover - never called
            raise AssertionError

    with pytest.raises(InvalidInputError, match="lacks judge, prompt_versions, spends_llm_calls"):
        RetrievalAgent(memory=memory, planner=RoutesOnly())


async def test_the_uncompiled_graph_embeds_in_a_host_graph(memory, corpus):
    from dataclasses import dataclass

    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from memroute.graph import RetrievalContext, build_retrieval_graph

    class Host(TypedDict, total=False):
        query: str
        scope: dict
        k: int
        strategy: str
        results: list
        route: str
        answer: str

    @dataclass
    class HostContext:
        user: str
        memroute: RetrievalContext

    def answer(state: Host) -> dict:
        best = state["results"][0]
        return {"answer": next(e["content"] for e in best["episodes"] if e["uid"] == best["uid"])}

    retrieval = build_retrieval_graph()
    assert not hasattr(retrieval, "ainvoke")  # uncompiled: the host compiles it
    host = StateGraph(Host, context_schema=HostContext)
    host.add_node("retrieve", retrieval.compile())
    host.add_node("answer", answer)
    host.add_edge(START, "retrieve")
    host.add_edge("retrieve", "answer")
    host.add_edge("answer", END)
    planner = ScriptedChatModel.of([route("direct")])
    from memroute.planners.llm.planner import LLMPlanner

    context = HostContext("u1", RetrievalContext(memory=memory, planner=LLMPlanner(planner)))
    chunks = [c async for c in host.compile().astream(
        {"query": DIRECT_Q, "scope": corpus.model_dump(), "k": 3}, context=context,
        stream_mode=["custom", "values"], subgraphs=True)]
    custom = [payload["event"] for _, mode, payload in chunks if mode == "custom"]
    assert custom == ["route", "search", "final"]
    final = [payload for ns, mode, payload in chunks if mode == "values" and ns == ()][-1]
    assert final["route"] == "direct" and "Blue Falcon" in final["answer"]
