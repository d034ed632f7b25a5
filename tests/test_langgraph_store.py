"""`MemrouteStore` holds to LangGraph's documented Store semantics: every shared case runs
against LangGraph's own `InMemoryStore` (the reference) and `MemrouteStore`."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_store
from langgraph.prebuilt import create_react_agent
from langgraph.store.base import GetOp, Item, ListNamespacesOp, PutOp, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import AsyncPostgresStore
from psycopg import AsyncConnection
from langmem import create_manage_memory_tool, create_search_memory_tool

from memroute.errors import InvalidInputError, ScopeForbiddenError
from memroute.langgraph_store import MemrouteStore
from memroute.memory import Memory, Scope, SyncMemory

INDEX_FIELDS = ["text"]
PETS = {
    "biscuit": {"text": "Biscuit is my dog; he eats salmon kibble.", "kind": "pet", "n": 1},
    "flight": {"text": "I always fly with Aurora Air and sit by the window.", "kind": "travel",
               "n": 2},
    "sister": {"text": "My sister Priya moved to Lisbon last year.", "kind": "family", "n": 3},
}


@pytest.fixture(params=["inmemory", "memroute"])
def store(request, memory: Memory, embedder):
    if request.param == "inmemory":
        async def embed(texts: list[str]) -> list[list[float]]:
            return (await embedder.embed_documents(texts)).tolist()

        return InMemoryStore(index={"dims": embedder.dim, "embed": embed,
                                    "fields": INDEX_FIELDS})
    return MemrouteStore(memory, index={"fields": INDEX_FIELDS})


@pytest.fixture
def ns() -> tuple[str, ...]:
    return (f"org-{uuid.uuid4().hex[:8]}", "assistant", "maya")


async def fill(store, ns) -> None:
    for key, value in PETS.items():
        await store.aput(ns, key, value)


# -- shared semantics -------------------------------------------------------------------------

async def test_put_get_round_trip(store, ns) -> None:
    await store.aput(ns, "biscuit", PETS["biscuit"])
    item = await store.aget(ns, "biscuit")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (ns, "biscuit", PETS["biscuit"])
    assert isinstance(item.created_at, datetime) and item.created_at.tzinfo is not None
    assert item.created_at <= item.updated_at
    assert await store.aget(ns, "missing") is None
    assert await store.aget((*ns[:2], "someone-else"), "biscuit") is None


async def test_put_again_replaces_the_value(store, ns) -> None:
    await store.aput(ns, "k", {"text": "first version", "v": 1})
    first = await store.aget(ns, "k")
    await asyncio.sleep(0.01)
    await store.aput(ns, "k", {"text": "second version", "v": 2})
    second = await store.aget(ns, "k")
    assert second.value == {"text": "second version", "v": 2}
    assert second.updated_at > first.updated_at


async def test_delete_and_put_none_remove(store, ns) -> None:
    await fill(store, ns)
    await store.adelete(ns, "biscuit")
    await store.aput(ns, "flight", None)
    assert await store.aget(ns, "biscuit") is None and await store.aget(ns, "flight") is None
    assert [i.key for i in await store.asearch(ns)] == ["sister"]
    await store.adelete(ns, "never-stored")  # deleting a missing key is a no-op


async def test_search_without_query_lists_filters_and_pages(store, ns) -> None:
    await fill(store, ns)
    listed = await store.asearch(ns, limit=10)
    assert {i.key for i in listed} == set(PETS)
    assert all(isinstance(i, SearchItem) and i.value == PETS[i.key] for i in listed)
    assert [i.key for i in await store.asearch(ns, filter={"kind": "pet"})] == ["biscuit"]
    assert {i.key for i in await store.asearch(ns, filter={"n": {"$gte": 2}})} == \
        {"flight", "sister"}
    assert await store.asearch(ns, filter={"kind": "none"}) == []
    pages = [await store.asearch(ns, limit=1, offset=i) for i in range(4)]
    assert [len(p) for p in pages] == [1, 1, 1, 0]
    assert {p[0].key for p in pages[:3]} == set(PETS)


async def test_search_with_query_ranks_by_meaning(store, ns) -> None:
    await fill(store, ns)
    hits = await store.asearch(ns, query="What does my dog eat?", limit=2)
    assert hits[0].key == "biscuit" and hits[0].value == PETS["biscuit"]
    assert len(hits) == 2 and all(isinstance(h.score, float) for h in hits)
    assert hits[0].score >= hits[1].score
    travel = await store.asearch(ns, query="Which airline?", filter={"kind": "travel"})
    assert [h.key for h in travel] == ["flight"]


async def test_list_namespaces_prefix_suffix_depth_paging(store, ns) -> None:
    org = ns[0]
    spaces = [(org, "assistant", "maya"), (org, "assistant", "li"), (org, "crm", "maya"),
              (org, "crm", "maya", "bot")]
    for space in spaces:
        await store.aput(space, "k", {"text": "x"})
    assert await store.alist_namespaces(prefix=(org,)) == sorted(spaces)
    assert await store.alist_namespaces(prefix=(org, "crm")) == sorted(spaces[2:])
    assert await store.alist_namespaces(prefix=(org,), suffix=("maya",)) == \
        sorted([spaces[0], spaces[2]])
    assert await store.alist_namespaces(prefix=(org, "*", "maya")) == \
        sorted([spaces[0], spaces[2], spaces[3]])
    assert await store.alist_namespaces(prefix=(org,), max_depth=2) == \
        [(org, "assistant"), (org, "crm")]
    assert await store.alist_namespaces(prefix=(org,), limit=2, offset=1) == sorted(spaces)[1:3]


async def test_batch_reads_see_the_state_before_its_writes(store, ns) -> None:
    await store.aput(ns, "a", {"text": "Alpha is first."})
    results = await store.abatch([
        PutOp(ns, "a", None),
        GetOp(ns, "a"),
        SearchOp(ns, None, 10, 0),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=1000, offset=0),
        PutOp(ns, "b", {"text": "Beta"}),
        PutOp(ns, "b", {"text": "Beta, second"}),
    ])
    assert results[0] is None and results[1].value == {"text": "Alpha is first."}
    assert [i.key for i in results[2]] == ["a"]
    assert ns in results[3]
    assert await store.aget(ns, "a") is None
    assert (await store.aget(ns, "b")).value == {"text": "Beta, second"}


# -- memroute's own guarantees ---------------------------------------------------------------

@pytest.fixture
def mstore(memory: Memory) -> MemrouteStore:
    return MemrouteStore(memory, index={"fields": INDEX_FIELDS}, strategy="direct")


async def test_update_re_embeds_and_replaces_sentences(mstore, memory, ns) -> None:
    await mstore.aput(ns, "pet", {"text": "My cat Miso sleeps all day. She is grey."})
    scope = Scope(org_id=ns[0], project_id=ns[1], user_id=ns[2])
    assert (await memory.count(scope))["sentences"] == 2
    created = (await mstore.aget(ns, "pet")).created_at
    await mstore.aput(ns, "pet", {"text": "My parrot Kiwi repeats every word."})
    assert (await memory.count(scope)) == {"episodes": 1, "sentences": 1}
    hit = (await mstore.asearch(ns, query="Which bird talks?", limit=1))[0]
    assert hit.key == "pet" and "Kiwi" in hit.value["text"]
    assert (await mstore.aget(ns, "pet")).created_at == created


async def test_search_without_query_is_newest_first(mstore, ns) -> None:
    for key in ("one", "two", "three"):
        await mstore.aput(ns, key, {"text": f"item {key}"})
    assert [i.key for i in await mstore.asearch(ns)] == ["three", "two", "one"]


async def test_whole_value_is_indexed_by_default(memory, ns) -> None:
    store = MemrouteStore(memory, strategy="direct")
    await store.aput(ns, "pref", {"airline": "Aurora Air", "seat": "window"})
    await store.aput(ns, "other", {"food": "salmon kibble"})
    assert (await store.asearch(ns, query="Aurora Air window seat", limit=1))[0].key == "pref"


async def test_episodes_of_other_faces_are_items(mstore, memory, ns) -> None:
    scope = Scope(org_id=ns[0], project_id=ns[1], user_id=ns[2])
    await memory.add(scope, [{"uid": "m1", "content": "Priya works at Tidewave Labs.",
                              "metadata": {"topic": "work"}}])
    item = await mstore.aget(ns, "m1")
    assert item.value == {"content": "Priya works at Tidewave Labs.", "topic": "work"}


@pytest.mark.parametrize("namespace", [("only-org",), ("a", "b", "c", "d", "e"), ("a", "b/c"),
                                       ("a", ""), ("a", "x" * 200), ("a", 3), ["a", "b"]])
async def test_bad_namespaces_are_typed_errors_and_store_nothing(mstore, memory,
                                                                 namespace) -> None:
    with pytest.raises(InvalidInputError) as raised:
        await mstore.abatch([PutOp(namespace, "k", {"text": "x"})])
    assert isinstance(raised.value, InvalidInputError)
    assert not [n for n in await mstore.alist_namespaces(prefix=("a",)) if n[1:2] == ("b",)]


@pytest.mark.parametrize("key,value", [("", {"text": "x"}), ("a\x00b", {"text": "x"}),
                                       ("k" * 257, {"text": "x"}), (3, {"text": "x"}),
                                       ("k", ["not", "a", "dict"]), ("k", {"t": object()})])
async def test_bad_keys_and_values_are_typed_errors(mstore, memory, ns, key, value) -> None:
    with pytest.raises(InvalidInputError):
        await mstore.abatch([PutOp(ns, key, value)])
    scope = Scope(org_id=ns[0], project_id=ns[1], user_id=ns[2])
    assert (await memory.count(scope))["episodes"] == 0


async def test_a_bad_op_in_a_batch_writes_nothing(mstore, memory, ns) -> None:
    with pytest.raises(InvalidInputError):
        await mstore.abatch([PutOp(ns, "good", {"text": "fine"}),
                             PutOp(("x",), "bad", {"text": "no scope"})])
    assert await mstore.aget(ns, "good") is None


def test_sync_api_over_sync_memory(sync_memory: SyncMemory) -> None:
    store = MemrouteStore(sync_memory, index={"fields": INDEX_FIELDS}, strategy="direct")
    ns = (f"org-{uuid.uuid4().hex[:8]}", "sync")
    store.put(ns, "biscuit", PETS["biscuit"])
    store.put(ns, "flight", PETS["flight"])
    assert store.get(ns, "biscuit").value == PETS["biscuit"]
    assert store.search(ns, query="dog food", limit=1)[0].key == "biscuit"
    assert store.list_namespaces(prefix=(ns[0],)) == [ns]
    store.delete(ns, "biscuit")
    assert store.get(ns, "biscuit") is None


# -- as a LangGraph agent's store ------------------------------------------------------------

class ToolCallingFake(GenericFakeChatModel):
    """Replies with its scripted messages in order; tools bind without changing it."""

    def bind_tools(self, tools, **kwargs):
        return self


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # langgraph.prebuilt, as asked
async def test_react_agent_reads_memroute_through_get_store(mstore, ns) -> None:
    await fill(mstore, ns)

    @tool
    async def recall(question: str) -> str:
        """Search the user's long-term memory."""
        hits = await get_store().asearch(ns, query=question, limit=1)
        return hits[0].value["text"] if hits else "nothing found"

    model = ToolCallingFake(messages=iter([
        AIMessage("", tool_calls=[{"name": "recall", "args": {"question": "What does my dog eat?"},
                                   "id": "call_1", "type": "tool_call"}]),
        AIMessage("Biscuit eats salmon kibble."),
    ]))
    agent = create_react_agent(model, [recall], store=mstore)
    state = await agent.ainvoke({"messages": [HumanMessage("What does Biscuit eat?")]})
    (tool_reply,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert tool_reply.content == PETS["biscuit"]["text"]
    assert state["messages"][-1].content == "Biscuit eats salmon kibble."


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_langmem_memory_tools_write_and_search_memroute(memory: Memory) -> None:
    """LangMem's manage/search tools (the `langmem` extra) on a `MemrouteStore`."""
    store = MemrouteStore(memory, index={"fields": ["content"]}, strategy="direct")
    org = f"lm-{uuid.uuid4().hex[:6]}"
    namespace = (org, "assistant", "{langgraph_user_id}")
    tools = [create_manage_memory_tool(namespace), create_search_memory_tool(namespace)]
    model = ToolCallingFake(messages=iter([
        AIMessage("", tool_calls=[{"name": "manage_memory", "id": "c1", "type": "tool_call",
                                   "args": {"content": "Biscuit the dog eats salmon kibble.",
                                            "action": "create"}}]),
        AIMessage("", tool_calls=[{"name": "manage_memory", "id": "c2", "type": "tool_call",
                                   "args": {"content": "Maya flies with Aurora Air.",
                                            "action": "create"}}]),
        AIMessage("", tool_calls=[{"name": "search_memory", "id": "c3", "type": "tool_call",
                                   "args": {"query": "What does the dog eat?", "limit": 1}}]),
        AIMessage("Salmon kibble."),
    ]))
    agent = create_react_agent(model, tools, store=store)
    config = {"configurable": {"langgraph_user_id": "maya"}}
    state = await agent.ainvoke({"messages": [HumanMessage("Remember these, then recall.")]},
                                config)
    replies = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.name for m in replies] == ["manage_memory", "manage_memory", "search_memory"]
    found = json.loads(replies[-1].content)
    assert len(found) == 1 and found[0]["value"]["content"] == "Biscuit the dog eats salmon kibble."
    assert found[0]["namespace"] == [org, "assistant", "maya"]
    stored = await store.asearch((org, "assistant", "maya"), limit=10)
    assert sorted(i.value["content"] for i in stored) == [
        "Biscuit the dog eats salmon kibble.", "Maya flies with Aurora Air."]


# -- index=False, ttl (LangGraph's contract: ttl in minutes, refreshed on read) -------------

async def test_unindexed_items_come_unscored_after_the_scored(store, ns) -> None:
    await store.aput(ns, "dog", {"text": "Biscuit the dog eats salmon kibble."})
    await store.aput(ns, "note", {"text": "Biscuit the dog eats salmon kibble daily."},
                     index=False)
    found = await store.asearch(ns, query="What does the dog eat?", limit=5)
    assert [(i.key, i.score is None) for i in found] == [("dog", False), ("note", True)]
    assert [i.key for i in await store.asearch(ns, query="dog", limit=1)] == ["dog"]
    assert [i.key for i in await store.asearch(ns, query="dog", limit=1, offset=1)] == ["note"]


@pytest.fixture(params=["postgres", "memroute"])
async def ttl_store(request, memory: Memory, embedder, pg_url: str):
    """A store with ttl support: LangGraph's own `AsyncPostgresStore` (the reference, on the
    test server in a schema of its own) or `MemrouteStore`; both omit expired items."""
    ttl = {"refresh_on_read": True, "omit_expired": True}
    if request.param == "memroute":
        yield MemrouteStore(memory, index={"fields": INDEX_FIELDS}, ttl=ttl)
        return
    schema = f"lgstore_{uuid.uuid4().hex[:8]}"
    async with await AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute(f"CREATE SCHEMA {schema}")

    async def embed(texts: list[str]) -> list[list[float]]:
        return (await embedder.embed_documents(texts)).tolist()

    url = f"{pg_url}{'&' if '?' in pg_url else '?'}options=-csearch_path%3D{schema},public"
    async with AsyncPostgresStore.from_conn_string(
            url, index={"dims": embedder.dim, "embed": embed, "fields": INDEX_FIELDS},
            ttl=ttl) as store:
        await store.setup()
        yield store


async def test_expired_items_are_never_returned(ttl_store, ns) -> None:
    store = ttl_store
    await store.aput(ns, "short", {"text": "Biscuit naps after lunch."}, ttl=1.5 / 60)
    await store.aput(ns, "forever", {"text": "Biscuit is a beagle."})
    assert (await store.aget(ns, "short", refresh_ttl=False)).value["text"].endswith("lunch.")
    await asyncio.sleep(2)
    assert await store.aget(ns, "short", refresh_ttl=False) is None
    assert [i.key for i in await store.asearch(ns, limit=10, refresh_ttl=False)] == ["forever"]
    scored = await store.asearch(ns, query="Biscuit naps", limit=10, refresh_ttl=False)
    assert [i.key for i in scored] == ["forever"]


async def test_reads_refresh_the_ttl(memory: Memory, ns) -> None:
    """(LangGraph's PostgresStore keeps ``ttl_minutes`` as an integer, so a refresh of a
    sub-minute ttl cannot be compared with it in a test of seconds.)"""
    store = MemrouteStore(memory, index={"fields": INDEX_FIELDS}, ttl={"refresh_on_read": True})
    second = 1 / 60  # ttl is in minutes
    await store.aput(ns, "short", {"text": "Biscuit naps after lunch."}, ttl=2 * second)
    await store.aput(ns, "kept", {"text": "Biscuit naps on the sofa."}, ttl=2 * second)
    await store.aput(ns, "forever", {"text": "Biscuit is a beagle."})
    for _ in range(3):  # reading "kept" every second keeps it alive past its first expiry
        await asyncio.sleep(1)
        assert (await store.aget(ns, "kept")) is not None
    assert await store.aget(ns, "short", refresh_ttl=False) is None
    listed = {i.key for i in await store.asearch(ns, limit=10)}
    scored = {i.key for i in await store.asearch(ns, query="Biscuit naps", limit=10)}
    assert listed == scored == {"kept", "forever"}
    await asyncio.sleep(1.2)
    assert await store.aget(ns, "kept", refresh_ttl=False) is not None  # refreshed by search
    await asyncio.sleep(1.2)
    assert await store.aget(ns, "kept", refresh_ttl=False) is None
    assert await store.aget(ns, "forever") is not None


async def test_expired_items_stay_stored_until_swept(memory: Memory, ns) -> None:
    store = MemrouteStore(memory, index={"fields": INDEX_FIELDS})
    await store.aput(ns, "gone", {"text": "Biscuit naps after lunch."}, ttl=1 / 60)
    await store.aput(ns, "forever", {"text": "Biscuit is a beagle."})
    await asyncio.sleep(1.2)
    assert await store.aget(ns, "gone") is None
    scope = Scope(org_id=ns[0], project_id=ns[1], user_id=ns[2])
    assert (await memory.count(scope))["episodes"] == 2  # expired, never returned, still stored
    bound = MemrouteStore(memory, tenant=ns[0])
    assert await bound.asweep_ttl() == 1  # the optional sweep deletes it
    assert (await memory.count(scope))["episodes"] == 1


async def test_default_ttl_and_bad_ttls(memory: Memory, ns) -> None:
    store = MemrouteStore(memory, ttl={"default_ttl": 1 / 60, "refresh_on_read": False})
    await store.aput(ns, "k", {"text": "gone soon"})
    await asyncio.sleep(1.5)
    assert await store.aget(ns, "k") is None
    for ttl in (-1, 0, float("nan"), float("inf"), "5"):
        with pytest.raises(InvalidInputError):
            await store.aput(ns, "bad", {"text": "x"}, ttl=ttl)
    assert (await memory.count(Scope(org_id=ns[0], project_id=ns[1], user_id=ns[2])))[
        "episodes"] == 1  # the expired one, never returned
    with pytest.raises(InvalidInputError):
        MemrouteStore(memory, ttl={"default_ttl": -3})


# -- typed errors, all-or-nothing batches, bounds, a store bound to one tenant -----------------

def nested(depth: int) -> dict:
    value: dict = {"text": "deep"}
    for _ in range(depth):
        value = {"v": value}
    return value


@pytest.mark.parametrize("value", [{"text": "a\x00b"}, {"text": "\ud800"}, {"v": float("nan")},
                                   {"v": float("inf")}, {"text": "x" * 1_000_001},
                                   nested(5000), nested(100), {"\ud800": 1}])
async def test_every_bad_value_is_an_invalid_input_error(mstore, memory, ns, value) -> None:
    with pytest.raises(InvalidInputError):
        await mstore.abatch([PutOp(ns, "ok", {"text": "fine"}), PutOp(ns, "bad", value)])
    assert (await memory.count(Scope(org_id=ns[0], project_id=ns[1], user_id=ns[2])))[
        "episodes"] == 0


async def test_a_batch_is_all_or_nothing_across_scopes(mstore, memory, ns) -> None:
    other = (*ns[:2], "someone")
    with pytest.raises(InvalidInputError):
        await mstore.abatch([PutOp(other, "a", {"text": "first"}),
                             PutOp(ns, "b", {"text": "second", "n": float("nan")})])
    assert await mstore.aget(other, "a") is None
    with pytest.raises(InvalidInputError):  # a bad read fails the batch before any write
        await mstore.abatch([PutOp(ns, "c", {"text": "third"}),
                             SearchOp(ns, filter=None, limit=0)])
    assert await mstore.aget(ns, "c") is None


@pytest.mark.parametrize("options", [{"offset": -1}, {"limit": 0}, {"limit": -5},
                                     {"max_depth": 0}, {"max_depth": -1}, {"limit": True}])
async def test_list_namespaces_rejects_bad_bounds(mstore, ns, options) -> None:
    await mstore.aput(ns, "k", {"text": "x"})
    with pytest.raises(InvalidInputError):
        await mstore.alist_namespaces(prefix=ns[:1], **options)


async def test_a_store_bound_to_a_tenant_sees_only_its_namespaces(memory: Memory) -> None:
    mine, theirs = f"org-{uuid.uuid4().hex[:8]}", f"org-{uuid.uuid4().hex[:8]}"
    shared = MemrouteStore(memory, index={"fields": INDEX_FIELDS})
    await shared.aput((mine, "p", "u1"), "k", {"text": "mine"})
    await shared.aput((theirs, "p", "u1"), "k", {"text": "theirs"})
    bound = MemrouteStore(memory, index={"fields": INDEX_FIELDS}, tenant=mine)
    assert await bound.alist_namespaces() == [(mine, "p", "u1")]
    assert await bound.alist_namespaces(prefix=(theirs,)) == []
    assert await bound.alist_namespaces(prefix=(mine, "p"), max_depth=2) == [(mine, "p")]
    for call in (bound.aget((theirs, "p", "u1"), "k"),
                 bound.asearch((theirs, "p", "u1"), query="theirs"),
                 bound.aput((theirs, "p", "u1"), "x", {"text": "planted"})):
        with pytest.raises(ScopeForbiddenError):
            await call
    assert (await bound.aget((mine, "p", "u1"), "k")).value == {"text": "mine"}
    assert await shared.aget((theirs, "p", "u1"), "x") is None
