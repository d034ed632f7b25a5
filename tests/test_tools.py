"""The paged memory_search tool, driven by a fake tool-calling model in a ToolNode loop."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from memroute import sample_data
from memroute.memory import Memory, Scope
from memroute.tools import MemorySearch, memory_search_tool

QUERY = "What did support say about the laptop?"


class ToolCallingFakeModel(GenericFakeChatModel):
    """A scripted chat model that accepts tools (it replies from its script regardless)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFakeModel:
        return self


def call(query: str, page: int, call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[
        {"name": "memory_search", "args": {"query": query, "page": page}, "id": call_id}])


def agent_loop(model: ToolCallingFakeModel, tool: Any):
    """The usual ReAct loop: model -> tools -> model ... until the model stops calling."""

    async def think(state: MessagesState) -> dict:
        return {"messages": [await model.bind_tools([tool]).ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", think)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


@pytest.fixture
async def filled(memory: Memory, scope: Scope) -> Scope:
    await memory.add(scope, sample_data.episodes())
    return scope



@pytest.fixture(scope="module")
async def memory_scope(memory: Memory) -> Scope:
    """A scope of the async ``memory`` holding the sample conversation (read-only)."""
    scope = Scope(org_id=f"std-{uuid.uuid4().hex[:6]}", project_id="sample")
    await memory.add(scope, sample_data.episodes())
    return scope


class MemorySearchTool:
    """`memory_search_tool`, on a `SyncMemory` and on a `Memory`."""

    @pytest.fixture(autouse=True, params=["SyncMemory", "Memory"])
    def _tool(self, request: pytest.FixtureRequest) -> None:
        names = ("sync_memory", "sync_scope") if request.param == "SyncMemory" else (
            "memory", "memory_scope")
        memory, scope = (request.getfixturevalue(name) for name in names)
        self._made = memory_search_tool(memory, scope, page_size=3)

    @property
    def tool_constructor(self) -> BaseTool:
        return self._made

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"query": QUERY, "page": 1}


class TestMemorySearchToolUnit(MemorySearchTool, ToolsUnitTests):
    """langchain-tests' tool unit suite on memory_search."""


class TestMemorySearchToolIntegration(MemorySearchTool, ToolsIntegrationTests):
    """langchain-tests' tool integration suite on memory_search."""

def script(*messages: AIMessage) -> Iterator[AIMessage]:
    return iter(messages)


async def test_model_pages_through_results(memory: Memory, filled: Scope) -> None:
    expected = await memory.search_scored(filled, QUERY, k=100)
    total = len(expected)
    assert total > 8, "the sample must give several pages"
    pages = math.ceil(total / 4)
    tool = memory_search_tool(memory, filled, page_size=4)
    model = ToolCallingFakeModel(messages=script(
        call(QUERY, 0, "c1"), call(QUERY, 1, "c2"), call(QUERY, 99, "c3"),
        AIMessage(content="The order number is NW-58213."),
    ))
    final = await agent_loop(model, tool).ainvoke({"messages": [HumanMessage(QUERY)]})
    replies = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in replies] == ["c1", "c2", "c3"]
    first, second, past = replies

    assert first.content.splitlines()[0] == f"Showing 4 of {total} results (page 1/{pages}):"
    assert second.content.splitlines()[0] == f"Showing 4 of {total} results (page 2/{pages}):"
    numbers = lambda text: [int(n) for n in re.findall(r"^(\d+)\. \[", text, re.M)]  # noqa: E731
    assert numbers(first.content) == [1, 2, 3, 4]
    assert numbers(second.content) == [5, 6, 7, 8]
    assert "call memory_search with page=1" in first.content
    # Pages follow the search's own ranking, without gaps or repeats.
    assert [a["uid"] for a in first.artifact + second.artifact] == [r.uid for r in expected[:8]]
    assert first.artifact[0]["score"] == pytest.approx(expected[0].rerank_score, abs=1e-6)
    top = expected[0]
    assert f"{top.nucleus.producer}: {top.nucleus.content}" in first.content

    assert past.content.startswith(f"Page 99 is past the end: {total} results make {pages}")
    assert final["messages"][-1].content == "The order number is NW-58213."


async def test_last_page_and_no_results(memory: Memory, filled: Scope) -> None:
    search = MemorySearch(memory, filled, page_size=4)
    expected = await memory.search_scored(filled, QUERY, k=100)
    last = math.ceil(len(expected) / 4) - 1
    text, items = await search.apage(QUERY, last)
    shown = len(expected) - 4 * last
    assert text.startswith(f"Showing {shown} of {len(expected)} results (page {last + 1}/")
    assert "More:" not in text and len(items) == shown

    empty_scope = Scope(org_id="nobody-here")
    text, items = await MemorySearch(memory, empty_scope).apage(QUERY)
    assert text == f"No results found for {QUERY!r}." and items == []


async def test_filters_and_bad_input_reach_the_model_as_errors(memory: Memory,
                                                               filled: Scope) -> None:
    tool = memory_search_tool(memory, filled, filters={"producer": "support"})
    model = ToolCallingFakeModel(messages=script(
        call("laptop", 0, "ok"), call("   ", 0, "blank"), call("laptop", -1, "negative"),
        AIMessage(content="done"),
    ))
    final = await agent_loop(model, tool).ainvoke({"messages": [HumanMessage("laptop?")]})
    ok, blank, negative = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert ok.status == "success" and {a["producer"] for a in ok.artifact} == {"support"}
    assert blank.status == "error" and "query must not be empty" in blank.content
    assert negative.status == "error" and "page" in negative.content


async def test_paging_reuses_the_first_search(memory: Memory, filled: Scope) -> None:
    search = MemorySearch(memory, filled, page_size=3)
    first, _ = await search.apage(QUERY, 0)
    await memory.add(filled, [{"content": "Support said the laptop ships on Friday.",
                               "producer": "support", "session_id": "later"}])
    second, items = await search.apage(QUERY, 1)
    total = int(re.match(r"Showing \d+ of (\d+)", first).group(1))
    assert second.startswith(f"Showing 3 of {total} results (page 2/")  # same list, not re-run
    fresh, _ = await MemorySearch(memory, filled, page_size=3).apage(QUERY, 0)
    assert fresh != first and "ships on Friday" in fresh


def test_invalid_settings_are_rejected(memory: Memory) -> None:
    from memroute.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        MemorySearch(memory, {"org_id": "x"}, page_size=0)
    with pytest.raises(InvalidInputError):
        MemorySearch(object(), {"org_id": "x"})  # type: ignore[arg-type]


def test_sync_invoke_with_a_sync_memory(sync_memory, scope: Scope) -> None:
    sync_memory.add(scope, sample_data.episodes())
    tool = memory_search_tool(sync_memory, scope, page_size=5)
    message = tool.invoke({"type": "tool_call", "name": "memory_search", "id": "s1",
                           "args": {"query": "Who is Biscuit's vet?"}})
    assert isinstance(message, ToolMessage)
    assert message.content.startswith("Showing 5 of ")
    assert "Dr. Amara Okafor" in message.content and len(message.artifact) == 5


async def test_async_invoke_with_a_sync_memory(sync_memory, scope: Scope) -> None:
    """A memory on the background loop also serves async callers on another loop."""
    await memory_search_tool(sync_memory, scope).ainvoke({"query": "x"})  # empty scope is fine
    sync_memory.add(scope, sample_data.episodes()[:5])
    text = await memory_search_tool(sync_memory, scope).ainvoke({"query": "sister Priya"})
    assert text.startswith("Showing ") and "Priya" in text


def scripted_split_agent(memory: Memory):
    from fake_chat import ScriptedChatModel, route, split

    from memroute import RetrievalAgent

    llm = ScriptedChatModel.of([route("split"), split("Where does Priya live?",
                                                      "Where does Jonah Reyes live?")])
    return RetrievalAgent(memory=memory, llm=llm)


async def test_agent_mode_routes_through_the_retrieval_agent(memory: Memory,
                                                             filled: Scope) -> None:
    question = "Where do Priya and Jonah Reyes live?"
    expected = await scripted_split_agent(memory).aretrieve(question, scope=filled, k=100)
    total, pages = len(expected.results), math.ceil(len(expected.results) / 3)
    # One scripted router + split reply only: page 2 must come from the first run's list.
    tool = memory_search_tool(memory, filled, agent=scripted_split_agent(memory), page_size=3)
    model = ToolCallingFakeModel(messages=script(
        call(question, 0, "a1"), call(question, 1, "a2"), AIMessage(content="done")))
    final = await agent_loop(model, tool).ainvoke({"messages": [HumanMessage(question)]})
    first, second = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert first.status == second.status == "success"
    assert first.content.splitlines()[0] == (
        f"Showing 3 of {total} results (page 1/{pages}) · route split, 3 queries:")
    assert [a["uid"] for a in first.artifact + second.artifact] == \
        [r.uid for r in expected.results[:6]]


async def test_agent_mode_builds_an_offline_agent(memory: Memory, filled: Scope) -> None:
    from memroute import RetrievalAgent

    tool = memory_search_tool(memory, filled, agent_mode=True, strategy="direct")
    text = await tool.ainvoke({"query": "Who looks after Biscuit?"})
    expected = await RetrievalAgent(memory=memory).aretrieve(
        "Who looks after Biscuit?", scope=filled, k=100, strategy="direct")
    assert "· route direct, 1 query:" in text.splitlines()[0]
    assert f"of {len(expected.results)} results" in text
