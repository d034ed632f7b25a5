"""`MemrouteRetriever` on the real embedded store: standard suite, options, metadata, tracing."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, create_retriever_tool
from langchain_tests.integration_tests import RetrieversIntegrationTests, ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from memroute import MemrouteRetriever, RetrievalAgent, sample_data
from memroute.memory import Memory, Scope, SyncMemory
from memroute.errors import InvalidInputError

QUESTION = "Which clinic does Biscuit go to?"


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


class TestStandardSuite(RetrieversIntegrationTests):
    """langchain-tests' retriever suite (invoke and ainvoke) against the embedded store, on a
    `SyncMemory` and on an async `Memory` (whose pool lives on the test session's loop)."""

    @pytest.fixture(autouse=True, params=["SyncMemory", "Memory"])
    def _store(self, request: pytest.FixtureRequest) -> None:
        if request.param == "SyncMemory":
            memory, scope = (request.getfixturevalue(name) for name in ("sync_memory",
                                                                         "sync_scope"))
        else:
            memory, scope = (request.getfixturevalue(name) for name in ("memory",
                                                                         "memory_scope"))
        self._params = {"memory": memory, "scope": scope}

    @property
    def retriever_constructor(self) -> type[MemrouteRetriever]:
        return MemrouteRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return self._params

    @property
    def retriever_query_example(self) -> str:
        return QUESTION



class RetrieverTool:
    """`create_retriever_tool` over the retriever, on a `SyncMemory` and on a `Memory`."""

    @pytest.fixture(autouse=True, params=["SyncMemory", "Memory"])
    def _tool(self, request: pytest.FixtureRequest) -> None:
        names = ("sync_memory", "sync_scope") if request.param == "SyncMemory" else (
            "memory", "memory_scope")
        memory, scope = (request.getfixturevalue(name) for name in names)
        retriever = MemrouteRetriever(memory=memory, scope=scope, k=3, strategy="direct")
        self._made = create_retriever_tool(retriever, "search_memory",
                                           "Search the user's memory.",
                                           response_format="content_and_artifact")

    @property
    def tool_constructor(self) -> BaseTool:
        return self._made

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"query": QUESTION}


class TestRetrieverToolUnit(RetrieverTool, ToolsUnitTests):
    """langchain-tests' tool unit suite on the retriever tool."""


class TestRetrieverToolIntegration(RetrieverTool, ToolsIntegrationTests):
    """langchain-tests' tool integration suite on the retriever tool."""

async def test_documents_carry_ids_and_metadata(memory: Memory, filled: Scope) -> None:
    retriever = MemrouteRetriever(memory=memory, scope=filled, k=4, strategy="direct")
    docs = await retriever.ainvoke(QUESTION)
    expected = await memory.search_scored(filled, QUESTION, k=4)
    assert [d.id for d in docs] == [r.uid for r in expected]
    top, result = docs[0], expected[0]
    meta = top.metadata
    assert meta["uid"] == top.id == result.uid
    assert meta["score"] == pytest.approx(result.score, abs=1e-6)  # what the order is
    assert meta["rerank_score"] == pytest.approx(result.rerank_score, abs=1e-6)
    assert [d.metadata["score"] for d in docs] == sorted((d.metadata["score"] for d in docs),
                                                         reverse=True)
    assert meta["vector_score"] == pytest.approx(result.vector_score, abs=1e-6)
    assert (meta["route"], meta["query"], meta["hop"]) == ("direct", QUESTION, 0)
    assert meta["session_id"] == result.nucleus.session_id == "appointments"
    assert meta["producer"] == result.nucleus.producer
    assert datetime.fromisoformat(meta["produced_at"]) == result.nucleus.produced_at
    assert meta["scope"] == filled.as_dict()
    assert meta["episode_metadata"] == result.nucleus.metadata
    # the episode with the neighbouring turns no other document of the response shows
    others = {r.uid for r in expected[1:]}
    assert top.page_content == "\n".join(
        f"[{e.produced_at.astimezone(timezone.utc):%Y-%m-%d %H:%M}] {e.producer}: {e.content}"
        for e in result.episodes if e.uid == result.uid or e.uid not in others)
    assert meta["content"] == result.nucleus.content  # the raw text
    assert meta["shown_elsewhere"] == [e.uid for e in result.episodes
                                       if e.uid != result.uid and e.uid in others]
    assert meta["context_uids"] == [e.uid for e in result.episodes if e.uid != result.uid]
    assert result.nucleus.content in top.page_content
    shown = [line for d in docs for line in d.page_content.split("\n")]
    assert len(shown) == len(set(shown))  # no turn in two documents
    bare = await MemrouteRetriever(memory=memory, scope=filled, k=4, strategy="direct",
                                   include_context=False, content_format="text"
                                   ).ainvoke(QUESTION)
    assert bare[0].page_content == result.nucleus.content


async def test_per_call_options_override_the_instance(memory: Memory, filled: Scope) -> None:
    retriever = MemrouteRetriever(memory=memory, scope=filled, k=6)
    assert len(await retriever.ainvoke(QUESTION, k=2)) == 2
    support = await retriever.ainvoke("laptop", filters={"producer": "support"})
    assert support and {d.metadata["producer"] for d in support} == {"support"}
    two_part = "Who is Biscuit's vet and who is my dentist?"
    split = await retriever.ainvoke(two_part, strategy="split")
    same = await RetrievalAgent(memory=memory).aretrieve(two_part, scope=filled, k=6,
                                                         strategy="split")
    assert [d.id for d in split] == [r.uid for r in same.results]
    assert {d.metadata["route"] for d in split} == {"split"}
    assert {d.metadata["query"] for d in split} <= set(same.queries)
    chained = await retriever.ainvoke(QUESTION, strategy="chain")
    assert {d.metadata["route"] for d in chained} == {"chain"}
    assert all(d.metadata["hop"] >= 1 for d in chained)
    empty = await retriever.ainvoke(QUESTION, scope={"org_id": "nobody"})
    assert empty == []
    assert retriever.k == 6 and retriever.strategy == "auto"  # the instance is unchanged
    with pytest.raises(InvalidInputError, match="colour"):
        await retriever.ainvoke(QUESTION, colour="red")
    with pytest.raises(InvalidInputError, match="k must be"):
        await retriever.ainvoke(QUESTION, k=0)
    with pytest.raises(InvalidInputError, match="budget"):
        await retriever.ainvoke(QUESTION, budget={"max_dollars": 1})
    with pytest.raises(InvalidInputError, match="strategy"):
        await retriever.ainvoke(QUESTION, strategy="deep")


async def test_budget_reaches_the_agent(memory: Memory, filled: Scope) -> None:
    from memroute import Budget

    retriever = MemrouteRetriever(memory=memory, scope=filled, strategy="chain",
                                  budget=Budget(max_llm_calls=0))
    docs = await retriever.ainvoke("What is the address of the clinic where Biscuit's vet works?")
    agent = RetrievalAgent(memory=memory)
    direct = await agent.aretrieve("What is the address of the clinic where Biscuit's vet works?",
                                   scope=filled, strategy="chain", budget=Budget(max_llm_calls=0))
    assert [d.id for d in docs] == [r.uid for r in direct.results]
    assert {d.metadata["route"] for d in docs} == {direct.route}


async def test_configurable_fields(memory: Memory, filled: Scope) -> None:
    configurable = MemrouteRetriever(memory=memory, scope=filled).with_config_fields()
    docs = await configurable.ainvoke(QUESTION, config={"configurable": {
        "k": 3, "strategy": "direct", "filters": {"session_id": "appointments"}}})
    assert len(docs) == 3
    assert {d.metadata["session_id"] for d in docs} == {"appointments"}
    assert {d.metadata["route"] for d in docs} == {"direct"}
    other = await configurable.ainvoke(QUESTION, config={"configurable": {
        "scope": {"org_id": "nobody"}}})
    assert other == []


class Recorder(BaseCallbackHandler):
    """Records every run's name, parent and thread (inline: on the thread that starts it)."""

    run_inline = True

    def __init__(self) -> None:
        self.runs: dict[UUID, dict[str, Any]] = {}

    def _add(self, kind: str, name: str, run_id: UUID, parent_run_id: UUID | None,
             metadata: dict | None = None) -> None:
        self.runs[run_id] = {"kind": kind, "name": name, "parent": parent_run_id,
                             "thread": threading.get_ident(), "metadata": metadata or {}}

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None,
                           metadata=None, name=None, **kwargs):
        self._add("retriever", name or "", run_id, parent_run_id, metadata)

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, name=None,
                       **kwargs):
        self._add("chain", name or "", run_id, parent_run_id)

    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None,
                            name=None, **kwargs):
        self._add("llm", name or "", run_id, parent_run_id)

    def ancestors(self, run_id: UUID) -> list[str]:
        names, parent = [], self.runs[run_id]["parent"]
        while parent is not None and parent in self.runs:
            names.append(self.runs[parent]["name"])
            parent = self.runs[parent]["parent"]
        return names

    def named(self, name: str) -> list[UUID]:
        return [run_id for run_id, run in self.runs.items() if run["name"] == name]


async def test_graph_runs_nested_under_the_retriever_on_the_callers_thread(
        memory: Memory, filled: Scope) -> None:
    recorder = Recorder()
    retriever = MemrouteRetriever(memory=memory, scope=filled)
    await retriever.ainvoke("Who is Biscuit's vet and who is my dentist?",
                            config={"callbacks": [recorder]}, strategy="split")
    (root,) = [r for r in recorder.runs.values() if r["kind"] == "retriever"]
    assert root["name"] == "MemrouteRetriever" and root["parent"] is None
    assert root["metadata"]["ls_retriever_name"] == "memroute"
    assert root["metadata"]["ls_embedding_model"] == memory.embedder.name
    (graph_run,) = recorder.named("memroute")
    assert recorder.ancestors(graph_run) == ["MemrouteRetriever"]
    assert recorder.named("memory_search") and recorder.named("final_rerank")
    for node in ("tool_select", "split_plan", "memory_search", "final_rerank"):
        for run_id in recorder.named(node):
            assert recorder.ancestors(run_id)[-2:] == ["memroute", "MemrouteRetriever"]
    # Native async: the graph ran on this loop's thread, not in an executor thread.
    assert {run["thread"] for run in recorder.runs.values()} == {threading.get_ident()}


async def test_llm_calls_are_traced_inside_the_retriever(memory: Memory, filled: Scope) -> None:
    from fake_chat import ScriptedChatModel, route, split

    llm = ScriptedChatModel.of([route("split"), split("Who is Biscuit's vet?",
                                                      "Who is my dentist?")])
    recorder = Recorder()
    retriever = MemrouteRetriever(memory=memory, scope=filled, llm=llm, k=5)
    docs = await retriever.ainvoke("Who is Biscuit's vet and who is my dentist?",
                                   config={"callbacks": [recorder]})
    assert {d.metadata["route"] for d in docs} == {"split"}
    assert {d.metadata["query"] for d in docs} <= {
        "Who is Biscuit's vet and who is my dentist?", "Who is Biscuit's vet?",
        "Who is my dentist?"}
    assert len(recorder.named("memory_search")) == 3  # two sub-queries and the question
    llm_runs = [run_id for run_id, run in recorder.runs.items() if run["kind"] == "llm"]
    assert len(llm_runs) == 2
    for run_id in llm_runs:
        chain = recorder.ancestors(run_id)
        assert chain[-2:] == ["memroute", "MemrouteRetriever"]
        assert {"tool_select", "split_plan"} & set(chain)


def test_sync_invoke_and_retriever_tool(sync_memory: SyncMemory, sync_scope: Scope) -> None:
    retriever = MemrouteRetriever(memory=sync_memory, scope=sync_scope, k=3,
                                  strategy="direct")
    docs = retriever.invoke(QUESTION, k=2)
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)

    tool = create_retriever_tool(retriever, "search_memory", "Search the user's memory.",
                                 response_format="content_and_artifact")
    message = tool.invoke({"type": "tool_call", "name": "search_memory", "id": "t1",
                           "args": {"query": QUESTION}})
    assert isinstance(message, ToolMessage)
    assert [d.id for d in message.artifact] == [d.id for d in retriever.invoke(QUESTION)]
    assert message.content == "\n\n".join(d.page_content for d in message.artifact)


async def test_retriever_tool_async(memory: Memory, filled: Scope) -> None:
    retriever = MemrouteRetriever(memory=memory, scope=filled, k=2, strategy="direct")
    tool = create_retriever_tool(retriever, "search_memory", "Search the user's memory.",
                                 response_format="content_and_artifact")
    message = await tool.ainvoke({"type": "tool_call", "name": "search_memory", "id": "t2",
                                  "args": {"query": QUESTION}})
    assert len(message.artifact) == 2 and message.artifact[0].metadata["route"] == "direct"


def test_bad_construction_is_a_clear_error(memory: Memory) -> None:
    with pytest.raises(ValueError, match="memory must be"):
        MemrouteRetriever(memory="postgres://", scope={"org_id": "x"})
    with pytest.raises(ValueError, match="scope ids"):
        MemrouteRetriever(memory=memory, scope={"org_id": "bad scope!"})


async def test_search_kwargs_as_in_langchain(memory: Memory, filled: Scope) -> None:
    retriever = MemrouteRetriever(memory=memory, scope=filled,
                                  search_kwargs={"k": 1, "filter": {"producer": "support"}})
    assert (retriever.k, retriever.filters) == (1, {"producer": "support"})
    docs = await retriever.ainvoke("laptop")
    assert len(docs) == 1 and docs[0].metadata["producer"] == "support"
    per_call = await retriever.ainvoke("laptop", k=3, filter={"producer": "user"})
    assert len(per_call) == 3 and {d.metadata["producer"] for d in per_call} == {"user"}
    configurable = retriever.with_config_fields()
    assert len(await configurable.ainvoke("laptop", config={"configurable": {"k": 2}})) == 2


@pytest.mark.parametrize("options", [{"kk": 1}, {"search_kwargs": {"kk": 1}},
                                     {"search_kwargs": {"score_threshold": 0.5}},
                                     {"search_kwargs": ["k", 1]},
                                     {"k": 2, "search_kwargs": {"k": 3}}, {"k": 0},
                                     {"k": "many"}, {"include_context": "sometimes"}])
def test_unknown_or_bad_constructor_options_are_typed_errors(memory: Memory, options) -> None:
    with pytest.raises(InvalidInputError):
        MemrouteRetriever(memory=memory, scope={"org_id": "x"}, **options)


async def test_page_content_is_a_transcript_by_default(memory: Memory, scope: Scope) -> None:
    """`format_docs` keeps who said what and when: ``[2024-03-18 12:16] user: ...``."""
    when = datetime(2024, 3, 18, 12, 16, tzinfo=timezone.utc)
    await memory.add(scope, [
        {"uid": "q", "content": "Where should we eat tonight?", "producer": "user",
         "session_id": "s", "produced_at": when},
        {"uid": "a", "content": "Try the ramen place on Rua Augusta.", "producer": "assistant",
         "session_id": "s", "produced_at": when.replace(minute=17)}])
    retriever = MemrouteRetriever(memory=memory, scope=scope, k=1, strategy="direct")
    (doc,) = await retriever.ainvoke("ramen place")
    assert doc.page_content == ("[2024-03-18 12:16] user: Where should we eat tonight?\n"
                                "[2024-03-18 12:17] assistant: Try the ramen place on Rua Augusta.")
    assert doc.metadata["content"] == "Try the ramen place on Rua Augusta."
    plain = MemrouteRetriever(memory=memory, scope=scope, k=1, strategy="direct",
                              content_format="text", include_context=False)
    assert (await plain.ainvoke("ramen place"))[0].page_content == doc.metadata["content"]
