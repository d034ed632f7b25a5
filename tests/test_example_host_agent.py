"""examples/host_agent.py: memroute's graph as a subgraph of a host agent, streamed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from fake_chat import ScriptedChatModel, route, split
from langchain_core.messages import AIMessage, HumanMessage

from memroute import RetrievalAgent, sample_data
from memroute.memory import Memory, Scope

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "host_agent.py"


@pytest.fixture(scope="module")
def host():
    spec = importlib.util.spec_from_file_location("host_agent", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.fixture
async def filled(memory: Memory, scope: Scope) -> Scope:
    await memory.add(scope, sample_data.episodes())
    return scope


async def test_host_streams_memroute_steps_as_a_subgraph(host, memory: Memory,
                                                         filled: Scope) -> None:
    planner_llm = ScriptedChatModel.of([route("split"), split("Where does Priya live?",
                                                              "Where does Jonah Reyes live?")])
    answer_llm = ScriptedChatModel.of(["Priya lives in Lisbon; Jonah lives in apartment 4B."])
    context = host.HostContext(memroute=RetrievalAgent(memory=memory, llm=planner_llm).context(),
                               scope=filled.as_dict(), llm=answer_llm, k=4)
    graph = host.build_host_graph()
    steps = [step async for step in host.stream_steps(
        graph, "Where do Priya and Jonah Reyes live?", context)]

    host_nodes = [node for ns, mode, chunk in steps if ns == () and mode == "updates"
                  for node in chunk]
    assert host_nodes == ["prepare", "memroute", "respond"]
    inner = [(ns, mode, chunk) for ns, mode, chunk in steps if ns]
    assert inner and all(ns[0].startswith("memroute:") for ns, _, _ in inner)
    inner_nodes = [node for _, mode, chunk in inner if mode == "updates" for node in chunk]
    # the question's own search runs beside the planner's split: either may report first
    assert inner_nodes[0] == "tool_select" and "split_plan" in inner_nodes[1:3]
    assert inner_nodes.count("memory_search") == 3 and inner_nodes[-1] == "final_rerank"
    events = [chunk["event"] for _, mode, chunk in inner if mode == "custom"]
    assert events[0] == "route" and "sub_queries" in events[1:3] and events[-1] == "final"

    # The host sees memroute's narrow output only, never its working state.
    (memroute_update,) = [chunk["memroute"] for ns, mode, chunk in steps
                          if ns == () and mode == "updates" and "memroute" in chunk]
    assert set(memroute_update) == {"results", "route", "stop_reason"}
    assert memroute_update["route"] == "split" and len(memroute_update["results"]) == 4

    # The answering model read the evidence memroute found.
    (call,) = answer_llm.calls
    prompt = call["messages"][-1].text
    for result in memroute_update["results"]:
        nucleus = next(e for e in result["episodes"] if e["uid"] == result["uid"])
        assert nucleus["content"] in prompt
    (respond_update,) = [chunk["respond"] for ns, mode, chunk in steps
                         if ns == () and mode == "updates" and "respond" in chunk]
    assert respond_update["messages"][-1].content.startswith("Priya lives in Lisbon")


async def test_host_final_state_and_no_model(host, memory: Memory, filled: Scope) -> None:
    context = host.HostContext(memroute=RetrievalAgent(memory=memory).context(),
                               scope=filled.as_dict(), k=3)
    graph = host.build_host_graph()
    final = await graph.ainvoke({"messages": [HumanMessage("Who looks after Biscuit?")]},
                                context=context)
    assert set(final) <= set(host.HostState.__annotations__)
    # The offline planner picks the route; the host only relays it.
    assert final["query"] == "Who looks after Biscuit?"
    assert final["route"] in ("direct", "split", "chain")
    reply = final["messages"][-1]
    assert isinstance(reply, AIMessage)
    assert reply.content.startswith(f"From memory (route {final['route']})")
    assert "Jonah Reyes" in reply.content  # the sitter, found by the subgraph
    # each turn printed once, as the retriever does: the graph's results say what another
    # result shows already
    turns = [t for line in reply.content.splitlines()[1:] for t in line.split(". ", 1)[1].split(" / ")]
    assert turns and len(turns) == len(set(turns))
    for result in final["results"]:
        # the order is the score; each keeps its own final rerank score beside it
        assert isinstance(result["score"], float) and result["score"] >= result["rerank_score"]
        assert set(result["shown_elsewhere"]) <= {e["uid"] for e in result["episodes"]} - {
            result["uid"]}
    assert any(r["shown_elsewhere"] for r in final["results"])  # the windows do overlap
    scores = [r["score"] for r in final["results"]]
    assert scores == sorted(scores, reverse=True)


async def test_host_without_memroute_context_fails_clearly(host, filled: Scope) -> None:
    from memroute.errors import InvalidInputError

    graph = host.build_host_graph()
    with pytest.raises(InvalidInputError, match="RetrievalContext"):
        await graph.ainvoke({"messages": [HumanMessage("hi")]},
                            context=host.HostContext(memroute=None, scope=filled.as_dict()))
