"""One loop handle: a `SyncMemory` and everything built on it run on the memory's loop."""

from __future__ import annotations

import asyncio
import inspect
import uuid

import pytest

from memroute import RetrievalAgent
from memroute._loop import CallerLoop, LoopHandle
from memroute.errors import InvalidInputError
from memroute.graph.events import Final
from memroute.memory import Memory, Scope, SyncMemory

QUESTION = "Which clinic does Biscuit go to?"


@pytest.fixture
def search_loops(sync_memory: SyncMemory, monkeypatch) -> list[asyncio.AbstractEventLoop]:
    """The loop each search of the memory ran on."""
    loops: list[asyncio.AbstractEventLoop] = []
    search = sync_memory.memory.search_scored

    async def probe(*args, **kwargs):
        loops.append(asyncio.get_running_loop())
        return await search(*args, **kwargs)

    monkeypatch.setattr(sync_memory.memory, "search_scored", probe)
    return loops


def public_methods(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items()
            if not name.startswith("_") and (inspect.isfunction(value)
                                             or isinstance(value, classmethod))}


def test_sync_memory_offers_every_public_method_of_memory() -> None:
    assert public_methods(SyncMemory) == public_methods(Memory)


async def test_agent_on_a_sync_memory_searches_on_the_memory_loop_from_another_loop(
        sync_memory: SyncMemory, sync_scope: Scope, search_loops) -> None:
    agent = RetrievalAgent(sync_memory)
    assert asyncio.get_running_loop() is not sync_memory.loop.loop
    result = await agent.aretrieve(QUESTION, scope=sync_scope, k=3, strategy="direct")
    assert len(result.results) == 3
    assert search_loops and all(loop is sync_memory.loop.loop for loop in search_loops)

    events = [e async for e in agent.astream(QUESTION, scope=sync_scope, k=2, strategy="direct")]
    assert isinstance(events[-1], Final) and len(events[-1].result.results) == 2
    assert [r.uid for r in events[-1].result.results] == [r.uid for r in result.results[:2]]
    assert all(loop is sync_memory.loop.loop for loop in search_loops)


def test_agent_on_a_sync_memory_retrieves_synchronously(sync_memory: SyncMemory, sync_scope: Scope,
                                                        search_loops) -> None:
    result = RetrievalAgent(sync_memory).retrieve(QUESTION, scope=sync_scope, k=2, strategy="direct")
    assert len(result.results) == 2 and search_loops == [sync_memory.loop.loop]


def test_agent_on_a_sync_memory_streams_synchronously(sync_memory: SyncMemory,
                                                      sync_scope: Scope, search_loops) -> None:
    agent = RetrievalAgent(sync_memory)
    events = list(agent.stream(QUESTION, scope=sync_scope, k=2, strategy="direct"))
    assert [type(e).__name__ for e in events] == ["RouteChosen", "SearchDone", "Final"]
    final = events[-1]
    assert isinstance(final, Final) and final.route == "direct" and final.results == 2
    expected = agent.retrieve(QUESTION, scope=sync_scope, k=2, strategy="direct")
    assert [r.uid for r in final.result.results] == [r.uid for r in expected.results]
    assert search_loops and all(loop is sync_memory.loop.loop for loop in search_loops)
    stream = agent.stream(QUESTION, scope=sync_scope, k=2, strategy="direct")
    assert next(stream).route == "direct"
    stream.close()  # leaving early closes the graph's stream on the memory's loop


def test_sync_stream_with_an_async_memory_says_what_to_do(memory: Memory) -> None:
    with pytest.raises(InvalidInputError, match="needs a SyncMemory"):
        RetrievalAgent(memory).stream(QUESTION, scope={"org_id": "o"})


def test_sync_memory_methods_match_the_async_ones(sync_memory: SyncMemory,
                                                  sync_scope: Scope) -> None:
    hits = sync_memory.search_scored(sync_scope, QUESTION, k=4)
    reranked = sync_memory.rerank(hits, [QUESTION, "Biscuit's vet"], 2)
    assert len(reranked) == 2 and {r.uid for r in reranked} <= {h.uid for h in hits}
    [vector] = sync_memory.embed_queries([QUESTION])
    assert vector.shape == (sync_memory.memory.embedder.dim,)

    scope = Scope(org_id=f"batches-{uuid.uuid4().hex[:6]}")
    batches = [[{"content": f"Note {i} of batch {b}.", "uid": f"b{b}-{i}"} for i in range(3)]
               for b in range(3)]
    assert list(sync_memory.add_batches(scope, batches)) == [
        [f"b{b}-{i}" for i in range(3)] for b in range(3)]
    assert sync_memory.count(scope)["episodes"] == 9


async def test_loop_handle_runs_and_streams_from_any_loop() -> None:
    handle = LoopHandle.shared()

    async def where() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    async def numbers():
        for i in range(3):
            yield i, asyncio.get_running_loop()

    assert handle.run_as_sync(where()) is handle.loop
    assert await handle.run_as_async(where()) is handle.loop
    assert [(i, loop is handle.loop) async for i, loop in handle.iterate_as_async(numbers())] \
        == [(0, True), (1, True), (2, True)]
    assert [i for i, _ in handle.iterate_as_sync(numbers())] == [0, 1, 2]
    with pytest.raises(RuntimeError, match="own loop"):
        await handle.run_as_async(_block_on(handle))


async def _block_on(handle: LoopHandle) -> None:
    handle.run_as_sync(asyncio.sleep(0))


async def test_caller_loop_awaits_in_place_and_refuses_to_block() -> None:
    async def where() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    loop = CallerLoop()
    assert await loop.run_as_async(where()) is asyncio.get_running_loop()
    with pytest.raises(InvalidInputError, match="needs a SyncMemory"):
        loop.run_as_sync(where())
