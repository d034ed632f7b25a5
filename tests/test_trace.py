"""Runs carry their decisions as trace metadata and tags, seen by any callback handler."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fake_chat import FAST, ScriptedChatModel, corpus_episodes, route, split
from langchain_core.callbacks import AsyncCallbackHandler

from memroute import RetrievalAgent, Scope
from memroute.server_graph import LazyRetrievalContext, make_graph



class Recorder(AsyncCallbackHandler):
    """Records every chain run's name, parent, tags and metadata."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    async def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None,
                             tags=None, metadata=None, **kwargs) -> None:
        self.runs.append({"name": kwargs.get("name"), "parent": parent_run_id,
                          "tags": list(tags or []), "metadata": dict(metadata or {})})

    def named(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.runs if r["name"] == name]


@pytest.fixture(scope="module")
async def corpus(memory) -> Scope:
    scope = Scope(org_id=f"trace-{uuid.uuid4().hex[:8]}", project_id="agent", user_id="u1")
    await memory.add(scope, corpus_episodes())
    return scope


async def test_agent_run_is_tagged_with_request_route_and_stop_reason(memory, corpus) -> None:
    subs = ["When was Oakridge College founded?", "When was Pinecrest University founded?"]
    model = ScriptedChatModel.of([route("split"), split(*subs)])
    agent = RetrievalAgent(memory, llm=model, policies=FAST)
    recorder = Recorder()
    result = await agent.aretrieve("Which was founded first, Oakridge College or Pinecrest?",
                                   scope=corpus, k=4, config={"callbacks": [recorder],
                                                              "tags": ["mine"],
                                                              "metadata": {"user": "x"}})
    (root,) = [r for r in recorder.runs if r["parent"] is None]
    assert {"memroute", "memroute:strategy:auto", "mine"} <= set(root["tags"])
    assert root["metadata"] | {"user": "x"} == root["metadata"]
    assert {k: root["metadata"][k] for k in ("memroute_strategy_requested", "memroute_planner",
                                             "memroute_k", "memroute_org_id",
                                             "memroute_project_id", "memroute_user_id")} == {
        "memroute_strategy_requested": "auto", "memroute_planner": agent.planner.name,
        "memroute_k": 4, "memroute_org_id": corpus.org_id, "memroute_project_id": "agent",
        "memroute_user_id": "u1"}
    (decision,) = recorder.named("memroute_decision")
    assert decision["metadata"]["memroute_route"] == result.route == "split"
    assert decision["metadata"]["memroute_stop_reason"] == result.stop_reason == "done"
    assert decision["metadata"]["memroute_k"] == 4
    assert decision["metadata"]["memroute_org_id"] == corpus.org_id
    assert {"memroute:route:split", "memroute:stop:done", "memroute:strategy:auto"} <= \
        set(decision["tags"])


async def test_served_graph_records_the_decision_without_the_agent(settings, embedder,
                                                                   memory, corpus) -> None:
    """A run not started through `RetrievalAgent` (a served or host graph) still carries the
    decisions, on the decision run."""
    context = LazyRetrievalContext(settings.model_copy(update={"db_schema": memory.schema}))
    recorder = Recorder()
    try:
        output = await make_graph(context).ainvoke(
            {"query": "When was the Blue Falcon built?", "scope": corpus.as_dict(), "k": 2,
             "strategy": "direct"}, {"callbacks": [recorder]})
    finally:
        await context.aclose()
    (decision,) = recorder.named("memroute_decision")
    assert decision["metadata"]["memroute_route"] == output["route"] == "direct"
    assert decision["metadata"]["memroute_strategy_requested"] == "direct"
    assert decision["metadata"]["memroute_planner"] == "offline"
    assert {"memroute:route:direct", "memroute:stop:done"} <= set(decision["tags"])


class _NoThreads(ThreadPoolExecutor):
    """An executor that refuses work: a run that hops to a thread fails."""

    def submit(self, fn, /, *args, **kwargs):
        raise RuntimeError("the decision run hopped to an executor thread")


async def test_decision_run_stays_on_the_event_loop() -> None:
    """`record_decision` records its child run without an executor thread (a sync
    passthrough alone is sent to one on every run: a thread hop per question)."""
    import asyncio

    from memroute.graph.trace import DECISION_RUN, record_decision

    loop = asyncio.get_running_loop()
    kept = loop._default_executor
    loop.set_default_executor(_NoThreads())
    recorder = Recorder()
    state = {"query": "q", "scope": {"org_id": "o"}, "k": 10, "strategy": "auto",
             "planner": "offline", "route": "chain"}
    from langchain_core.runnables import RunnableLambda

    async def node(_: Any) -> None:
        await record_decision(state, "sufficient")

    try:
        await RunnableLambda(node).ainvoke(None, {"callbacks": [recorder]})
    finally:
        loop._default_executor = kept
    [run] = recorder.named(DECISION_RUN)
    assert run["metadata"]["memroute_route"] == "chain"
    assert "memroute:stop:sufficient" in run["tags"]
