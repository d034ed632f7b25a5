"""One sync bridge: whatever calls it (blocking or async, from any thread or loop), a memory's
work runs on the loop its pool lives on: memroute's background loop for a `SyncMemory`, the
opening loop for a `Memory`."""

from __future__ import annotations

import asyncio
import inspect
import uuid

import pytest

from memroute import MemrouteRetriever, RetrievalAgent, sample_data
from memroute._loop import LoopHandle, PoolLoop
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


# -- a Memory opened with await: its pool's loop --------------------------------------------

@pytest.fixture
def memory_loops(memory: Memory, monkeypatch) -> list[asyncio.AbstractEventLoop]:
    """The loop each search of the async ``memory`` ran on."""
    loops: list[asyncio.AbstractEventLoop] = []
    search = memory.search_scored

    async def probe(*args, **kwargs):
        loops.append(asyncio.get_running_loop())
        return await search(*args, **kwargs)

    monkeypatch.setattr(memory, "search_scored", probe)
    return loops


@pytest.fixture(scope="module")
async def memory_scope(memory: Memory) -> Scope:
    scope = Scope(org_id=f"loop-{uuid.uuid4().hex[:6]}")
    await memory.add(scope, sample_data.episodes())
    return scope


@pytest.mark.timeout(120)
def test_blocking_calls_with_no_running_loop_drive_the_memorys_loop(
        memory: Memory, memory_scope: Scope, memory_loops) -> None:
    """A script (or a sync test) between the loop's runs: each blocking call runs the idle
    loop until its work is done, concurrent ones (a LangChain ``batch``) included."""
    agent = RetrievalAgent(memory)
    assert len(agent.retrieve(QUESTION, scope=memory_scope, k=2, strategy="direct").results) == 2
    events = list(agent.stream(QUESTION, scope=memory_scope, k=2, strategy="direct"))
    assert isinstance(events[-1], Final) and events[-1].results == 2
    retriever = MemrouteRetriever(memory=memory, scope=memory_scope, k=2, strategy="direct")
    batches = retriever.batch([QUESTION, "Who is my dentist?", "sister Priya", "laptop"])
    assert [len(docs) for docs in batches] == [2, 2, 2, 2]
    # an async caller on another loop (asyncio.run in a script) hops to the memory's loop
    assert len(asyncio.run(retriever.ainvoke(QUESTION))) == 2
    assert len(memory_loops) == 7 and set(memory_loops) == {memory.pool_loop.loop}
    assert not memory.pool_loop.loop.is_running()


@pytest.mark.timeout(120)
async def test_a_blocking_call_from_a_worker_thread_runs_on_the_running_loop(
        memory: Memory, memory_scope: Scope, memory_loops) -> None:
    """A sync tool that an async agent runs in a worker thread (LangChain's default for a
    tool without a coroutine): the work runs on the memory's loop, which keeps serving."""
    retriever = MemrouteRetriever(memory=memory, scope=memory_scope, k=2, strategy="direct")
    threaded, awaited = await asyncio.gather(asyncio.to_thread(retriever.invoke, QUESTION),
                                             retriever.ainvoke(QUESTION))
    assert [d.id for d in threaded] == [d.id for d in awaited]
    assert memory_loops == [asyncio.get_running_loop()] * 2


@pytest.mark.timeout(60)
async def test_a_blocking_call_inside_the_memorys_loop_is_a_typed_error(
        memory: Memory, memory_scope: Scope) -> None:
    """Blocking the loop the work needs would wait forever: an error at once instead."""
    retriever = MemrouteRetriever(memory=memory, scope=memory_scope, k=2, strategy="direct")
    for blocking in (lambda: retriever.invoke(QUESTION),
                     lambda: RetrievalAgent(memory).stream(QUESTION, scope=memory_scope)):
        with pytest.raises(InvalidInputError, match="would wait for that loop forever"):
            blocking()


async def _where() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


@pytest.mark.timeout(60)
def test_pool_loop_drives_an_idle_loop_and_its_guests() -> None:
    """Work handed to an idle loop while a blocking call drives it (from a thread the driven
    coroutine waits for) finishes before the driver lets go: no deadlock, nothing stranded."""
    loop = asyncio.new_event_loop()
    home = PoolLoop(loop)

    async def waits_for_a_thread() -> list[asyncio.AbstractEventLoop]:
        nested = await asyncio.to_thread(home.run_as_sync, _where())
        return [asyncio.get_running_loop(), nested]

    try:
        assert home.run_as_sync(_where()) is loop
        assert home.run_as_sync(waits_for_a_thread()) == [loop, loop]

        async def elsewhere() -> asyncio.AbstractEventLoop:  # another loop, this thread
            return await home.run_as_async(_where())

        assert asyncio.run(elsewhere()) is loop
        assert [i for i in home.iterate_as_sync(_numbers())] == [0, 1, 2]
        assert not loop.is_running()
    finally:
        loop.close()
    with pytest.raises(InvalidInputError, match="is closed"):
        home.run_as_sync(_where())


async def _numbers():
    for i in range(3):
        yield i
