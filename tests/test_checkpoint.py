"""The retrieval graph's state checkpoints safely: strict msgpack, InMemorySaver and the real
Postgres saver, plain data only (no vectors, no unregistered types), a lossless round trip,
and a small checkpoint per returned result."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fake_chat import FAST, ScriptedChatModel, corpus_episodes, judge, route, split
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde import _msgpack
from langgraph.types import Overwrite, Send
from psycopg import AsyncConnection
from psycopg.rows import dict_row

from langgraph._internal import _serde
from memroute import Budget, RetrievalAgent, Scope
from memroute.agent import RetrievalResult
from memroute.graph import build_retrieval_graph
from memroute.planners.offline.planner import OfflinePlanner

CHAIN_Q = "Where was the director of Harbor Lights born?"
SPLIT_Q = "Which was founded first, Oakridge College or Pinecrest University?"
DIRECT_Q = "When was the Blue Falcon locomotive built?"
SCRIPTS = {
    "direct": (DIRECT_Q, [route("direct")]),
    "split": (SPLIT_Q, [route("split"), split("When was Oakridge College founded?",
                                              "When was Pinecrest University founded?")]),
    "chain": (CHAIN_Q, [route("chain"), judge(False, "Where was Mara Quinlan born?", 0.4, [0]),
                        judge(True, "", 0.9, [0])]),
}
MAX_CHECKPOINT_BYTES_PER_RESULT = 1152  # plain data at k = 10: about 575 B a result, the rest channels
PLAIN = (str, int, float, bool, type(None))


@pytest.fixture(scope="module")
async def corpus(memory) -> Scope:
    scope = Scope(org_id=f"ckpt-{uuid.uuid4().hex[:8]}", project_id="agent", user_id="u1")
    await memory.add(scope, corpus_episodes())
    return scope


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LANGGRAPH_STRICT_MSGPACK=true``, as read at import by langgraph (compile and serde)."""
    monkeypatch.setattr(_msgpack, "STRICT_MSGPACK_ENABLED", True)
    monkeypatch.setattr(_serde, "STRICT_MSGPACK_ENABLED", True)


@pytest.fixture(params=["memory", "postgres"])
async def saver(request, strict, pg_url: str):
    if request.param == "memory":
        yield InMemorySaver()
        return
    schema = f"ckpt_{uuid.uuid4().hex[:8]}"  # the saver's own schema on the test server
    async with await AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute(f"CREATE SCHEMA {schema}")
    async with await AsyncConnection.connect(pg_url, autocommit=True, prepare_threshold=0,
                                             row_factory=dict_row,
                                             options=f"-c search_path={schema}") as conn:
        postgres = AsyncPostgresSaver(conn)
        await postgres.setup()
        yield postgres


def plain_paths(value: Any, path: str = "") -> list[str]:
    """Paths under ``value`` that hold anything but JSON-ready data (LangGraph's own
    `Send` and `Overwrite` wrappers are walked into)."""
    if isinstance(value, PLAIN):
        return []
    if isinstance(value, Send):
        return plain_paths(value.arg, f"{path}<Send {value.node}>")
    if isinstance(value, Overwrite):
        return plain_paths(value.value, f"{path}<Overwrite>")
    if isinstance(value, dict):
        return [p for k, v in value.items()
                for p in ([f"{path}.{k!r}"] if not isinstance(k, str) else [])
                + plain_paths(v, f"{path}.{k}")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in plain_paths(v, f"{path}[{i}]")]
    return [f"{path}: {type(value).__module__}.{type(value).__qualname__}"]


@pytest.mark.parametrize("route_name", ["direct", "split", "chain"])
async def test_runs_checkpoint_plain_data_under_strict_msgpack(memory, corpus, saver,
                                                               route_name, caplog) -> None:
    query, script = SCRIPTS[route_name]
    agent = RetrievalAgent(memory, llm=ScriptedChatModel.of(script), policies=FAST)
    graph = build_retrieval_graph(policies=FAST).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    output = await graph.ainvoke({"query": query, "scope": corpus.as_dict(), "k": 10,
                                  "budget": {"max_llm_calls": 5}}, config,
                                 context=agent.context())
    assert output["route"] == route_name and output["results"]
    assert "unregistered type" not in caplog.text and "blocked" not in caplog.text

    # Every checkpoint and every pending write (Send payloads included) is plain data.
    checkpoints = [c async for c in saver.alist(config)]
    assert len(checkpoints) >= 3
    for tuple_ in checkpoints:
        assert plain_paths(tuple_.checkpoint["channel_values"]) == []
        assert plain_paths([value for _, _, value in tuple_.pending_writes or []]) == []
    sends = [v for c in checkpoints for _, channel, v in c.pending_writes or []
             if isinstance(v, Send)]
    if route_name != "direct":
        assert sends and all(s.arg["scope"] == corpus.as_dict() for s in sends)

    # The round trip is lossless: the stored state gives back the same result.
    state = await graph.aget_state(config)
    assert {k: state.values[k] for k in output} == output
    direct = RetrievalResult.from_output(output)
    restored = RetrievalResult.from_output(state.values)
    assert restored.results == direct.results and restored.route == direct.route
    assert [r.nucleus.produced_at for r in restored.results] == \
        [r.nucleus.produced_at for r in direct.results]
    assert all(r.sentence_embeddings is None for r in restored.results)

    # Size at the protocol's k = 10: the final checkpoint, and its results, per returned result.
    final = checkpoints[0].checkpoint
    n = len(output["results"])
    size = len(saver.serde.dumps_typed(final)[1])
    results_size = len(saver.serde.dumps_typed(final["channel_values"]["results"])[1])
    thread_size = sum(len(saver.serde.dumps_typed(c.checkpoint)[1]) for c in checkpoints)
    print(f"\n{type(saver).__name__} {route_name}: {n} results; final checkpoint {size} B "
          f"= {size / n:.0f} B per result (results alone {results_size / n:.0f} B); "
          f"{len(checkpoints)} checkpoints, {thread_size} B in all")
    assert n >= 5
    assert results_size / n <= size / n <= MAX_CHECKPOINT_BYTES_PER_RESULT


async def test_typed_input_survives_the_round_trip(memory, corpus, strict) -> None:
    """A caller's `Scope` and `Budget` are types of the input schema, so strict msgpack
    allows them; they come back as themselves, and the working state holds plain dicts."""
    saver = InMemorySaver()
    agent = RetrievalAgent(memory, llm=ScriptedChatModel.of([route("direct")]), policies=FAST)
    graph = build_retrieval_graph(policies=FAST).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    budget = Budget(max_llm_calls=3)
    await graph.ainvoke({"query": DIRECT_Q, "scope": corpus, "k": 2, "budget": budget},
                        config, context=agent.context())
    first = [c async for c in saver.alist(config)][-1]
    start = first.checkpoint["channel_values"]["__start__"]
    assert start["scope"] == corpus and isinstance(start["scope"], Scope)
    assert start["budget"] == budget
    values = (await graph.aget_state(config)).values
    assert values["scope"] == corpus.as_dict() and values["budget"]["max_llm_calls"] == 3


async def test_agent_passes_plain_input(memory, corpus) -> None:
    """`RetrievalAgent` hands the graph plain data, so a checkpointed host needs no types."""
    agent = RetrievalAgent(memory, llm=ScriptedChatModel.of([route("direct")]), policies=FAST)
    request = agent._input(DIRECT_Q, corpus, 3, None, "auto", Budget(max_llm_calls=2))
    assert plain_paths(request) == []
    assert request["scope"] == corpus.as_dict() and request["budget"]["max_llm_calls"] == 2


async def test_a_hop_sending_two_searches_checkpoints_and_reruns(memory, corpus, saver) -> None:
    """A chain hop fanning out (a comparison's two subjects, `ChainJudgment.concurrent_searches`)
    checkpoints as plain data, and a second run on the thread starts from hop 0 again."""
    query = "Who has been to more countries, Caroline or Melanie?"
    agent = RetrievalAgent(memory, planner=OfflinePlanner(), policies=FAST)
    graph = build_retrieval_graph(policies=FAST).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}
    for _ in range(2):
        output = await graph.ainvoke({"query": query, "scope": corpus.as_dict(), "k": 10},
                                     config, context=agent.context())
        assert output["route"] == "chain" and len(output["queries"]) == 3
        assert output["search_rounds"] == 2 and [h["hop"] for h in output["hops"]] == [1, 2]
    checkpoints = [c async for c in saver.alist(config)]
    for tuple_ in checkpoints:
        assert plain_paths(tuple_.checkpoint["channel_values"]) == []
        assert plain_paths([value for _, _, value in tuple_.pending_writes or []]) == []
    state = await graph.aget_state(config)
    assert {k: state.values[k] for k in output} == output
