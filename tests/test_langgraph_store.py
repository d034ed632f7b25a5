"""`MemrouteStore` holds to LangGraph's documented Store semantics: every shared case runs
against LangGraph's own `InMemoryStore` (the reference) and `MemrouteStore`; then memroute's
own guarantees (tenancy, the index config, ttl, typed errors). LangGraph's own store suites
run against it in tests/langgraph_store_suite."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_store
from langgraph.prebuilt import create_react_agent
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.base import InvalidNamespaceError as LangGraphInvalidNamespaceError
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import AsyncPostgresStore
from psycopg import AsyncConnection
from langmem import create_manage_memory_tool, create_search_memory_tool

from memroute.errors import (
    FilterError,
    InvalidInputError,
    InvalidNamespaceError,
    ModelUnavailableError,
)
from memroute.langgraph_store import DEFAULT_TENANT, MAX_TTL_MINUTES, MemrouteStore
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

def fresh_tenant() -> Scope:
    return Scope(org_id=f"tenant-{uuid.uuid4().hex[:8]}", project_id="store")


@pytest.fixture
def mstore(memory: Memory) -> MemrouteStore:
    return MemrouteStore(memory, index={"fields": INDEX_FIELDS}, strategy="direct",
                         tenant=fresh_tenant())


async def test_update_re_embeds_and_replaces_sentences(mstore, memory, ns) -> None:
    await mstore.aput(ns, "pet", {"text": "My cat Miso sleeps all day. She is grey."})
    tenant = mstore.tenant  # an item's text is one episode of its tenant's scope
    assert (await memory.count(tenant))["sentences"] == 2
    created = (await mstore.aget(ns, "pet")).created_at
    await mstore.aput(ns, "pet", {"text": "My parrot Kiwi repeats every word."})
    assert (await memory.count(tenant)) == {"episodes": 1, "sentences": 1}
    hit = (await mstore.asearch(ns, query="Which bird talks?", limit=1))[0]
    assert hit.key == "pet" and "Kiwi" in hit.value["text"]
    assert (await mstore.aget(ns, "pet")).created_at == created


async def test_a_new_value_with_the_same_text_keeps_its_vectors(mstore, memory, ns,
                                                                monkeypatch) -> None:
    """Only the metadata changes (the value a filter reads): nothing is embedded again."""
    await mstore.aput(ns, "pet", {"text": "My cat Miso sleeps all day.", "age": 3})
    tenant = mstore.tenant

    async def vectors() -> list:
        async with memory._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT embedding::text FROM {memory.schema}.sentences WHERE scope_key = %s",
                [tenant.key])
            return await cur.fetchall()

    before = await vectors()

    async def no_embedding(texts):
        raise AssertionError(f"embedded again: {texts}")

    with monkeypatch.context() as patched:
        patched.setattr(memory.embedder, "embed_documents", no_embedding)
        await mstore.aput(ns, "pet", {"text": "My cat Miso sleeps all day.", "age": 4})
    assert await vectors() == before
    hits = await mstore.asearch(ns, query="Which cat sleeps?", filter={"age": 4})
    assert [(h.key, h.value["age"]) for h in hits] == [("pet", 4)]
    assert await mstore.asearch(ns, query="Which cat sleeps?", filter={"age": 3}) == []


async def test_search_without_query_is_newest_first(mstore, ns) -> None:
    for key in ("one", "two", "three"):
        await mstore.aput(ns, key, {"text": f"item {key}"})
    assert [i.key for i in await mstore.asearch(ns)] == ["three", "two", "one"]


async def test_whole_value_is_indexed_by_default(memory, ns) -> None:
    store = MemrouteStore(memory, strategy="direct")
    await store.aput(ns, "pref", {"airline": "Aurora Air", "seat": "window"})
    await store.aput(ns, "other", {"food": "salmon kibble"})
    assert (await store.asearch(ns, query="Aurora Air window seat", limit=1))[0].key == "pref"


async def test_items_are_episodes_of_the_tenant_scope(mstore, memory, ns) -> None:
    """memroute's own search reads an item as an episode of the tenant's scope; an episode
    another face wrote there is no item."""
    await mstore.aput(ns, "work", {"text": "Priya works at Tidewave Labs.", "topic": "work"})
    await memory.add(mstore.tenant, [{"uid": "m1", "content": "Priya's cat is called Miso."}])
    hits = await memory.search_scored(mstore.tenant, "Where does Priya work?", k=1)
    assert hits[0].nucleus.content == "Priya works at Tidewave Labs."
    assert [i.key for i in await mstore.asearch((), limit=10)] == ["work"]
    assert [i.key for i in await mstore.asearch((), query="Priya's cat", limit=10)] == ["work"]
    assert await mstore.alist_namespaces() == [ns]


async def test_namespaces_of_any_depth_and_prefix_search(mstore) -> None:
    """LangGraph's namespaces: any depth >= 1; a search reaches every namespace under its
    prefix, on whole labels (("user",) is no prefix of ("users",))."""
    spaces = [("users",), ("users", "maya"), ("users", "maya", "notes", "2024", "trips"),
              ("users_x",), ("user",)]
    for depth, space in enumerate(spaces):
        await mstore.aput(space, f"k{depth}", {"text": f"Note {depth} about the trip."})
    assert {i.namespace for i in await mstore.asearch(("users",), limit=10)} == set(spaces[:3])
    scored = await mstore.asearch(("users", "maya"), query="the trip", limit=10)
    assert {i.namespace for i in scored} == set(spaces[1:3])
    assert all(isinstance(i.score, float) for i in scored)
    assert await mstore.alist_namespaces(prefix=("users",), max_depth=2) == \
        [("users",), ("users", "maya")]
    assert await mstore.alist_namespaces(suffix=("trips",)) == [spaces[2]]
    assert (await mstore.aget(spaces[2], "k2")).value == {"text": "Note 2 about the trip."}


@pytest.mark.parametrize("namespace", [("a.b",), ("a", ""), ("a", 3), ("a", "b\x00"),
                                       ("a", "\ud800"), ("x" * 1025,), (), "abc"])
async def test_bad_namespaces_are_typed_errors_and_store_nothing(mstore, memory,
                                                                 namespace) -> None:
    with pytest.raises(InvalidNamespaceError) as raised:
        await mstore.abatch([PutOp(("ok",), "k", {"text": "x"}),
                             PutOp(namespace, "k", {"text": "x"})])
    assert isinstance(raised.value, InvalidInputError)  # memroute's kind of error ...
    assert isinstance(raised.value, LangGraphInvalidNamespaceError)  # ... and LangGraph's
    assert await mstore.alist_namespaces() == []
    assert (await memory.count(mstore.tenant))["episodes"] == 0


@pytest.mark.parametrize("call", ["get", "put", "delete", "search", "prefix", "suffix"])
async def test_public_methods_raise_memroute_namespace_errors(mstore, call) -> None:
    """`BaseStore`'s own checks of the labels raise memroute's error too (the CLI's and the
    service's mappings know it)."""
    bad = ("a.b",)
    calls = {"get": lambda: mstore.aget(bad, "k"), "put": lambda: mstore.aput(bad, "k", {}),
             "delete": lambda: mstore.adelete(bad, "k"), "search": lambda: mstore.asearch(bad),
             "prefix": lambda: mstore.alist_namespaces(prefix=bad),
             "suffix": lambda: mstore.alist_namespaces(suffix=bad)}
    with pytest.raises(InvalidNamespaceError):
        await calls[call]()
    with pytest.raises(InvalidNamespaceError, match="langgraph"):  # LangGraph's reserved root
        await mstore.aput(("langgraph", "x"), "k", {"text": "x"})


@pytest.mark.parametrize("key,value", [("", {"text": "x"}), ("a\x00b", {"text": "x"}),
                                       ("k" * 257, {"text": "x"}), (3, {"text": "x"}),
                                       ("k", ["not", "a", "dict"]), ("k", {"t": object()})])
async def test_bad_keys_and_values_are_typed_errors(mstore, memory, ns, key, value) -> None:
    with pytest.raises(InvalidInputError):
        await mstore.abatch([PutOp(ns, key, value)])
    assert (await memory.count(mstore.tenant))["episodes"] == 0


@pytest.mark.parametrize("bad", [
    PutOp(("x.y",), "bad", {"text": "a label with a period"}),
    GetOp(("x", ""), "k"),
    SearchOp(("x", 1)),
    ListNamespacesOp((MatchCondition("suffix", ("foo", "")),)),
    ListNamespacesOp((MatchCondition("prefix", ("foo", 1)),)),
    ListNamespacesOp((MatchCondition("infix", ("foo",)),)),
    SearchOp(("x",), filter={"n": {"$regex": "."}}),
    SearchOp(("x",), query="q", limit=600, offset=500),
    PutOp(("x",), "k", {"text": "x"}, index=["text", 3]),
])
async def test_a_bad_op_in_a_batch_writes_nothing(mstore, memory, ns, bad) -> None:
    """Every op is validated, match conditions too, before anything of the batch runs."""
    with pytest.raises(InvalidInputError):
        await mstore.abatch([PutOp(ns, "good", {"text": "fine"}), bad])
    assert await mstore.aget(ns, "good") is None
    assert (await memory.count(mstore.tenant))["episodes"] == 0


def test_sync_api_over_sync_memory(sync_memory: SyncMemory) -> None:
    store = MemrouteStore(sync_memory, index={"fields": INDEX_FIELDS}, strategy="direct")
    assert store.tenant == DEFAULT_TENANT  # built as LangGraph's stores are: no tenant named
    ns = (f"org-{uuid.uuid4().hex[:8]}", "sync")
    store.put(ns, "biscuit", PETS["biscuit"])
    store.put(ns, "flight", PETS["flight"])
    assert store.get(ns, "biscuit").value == PETS["biscuit"]
    assert store.search(ns, query="dog food", limit=1)[0].key == "biscuit"
    assert store.list_namespaces(prefix=(ns[0],)) == [ns]
    store.delete(ns, "biscuit")
    assert store.get(ns, "biscuit") is None


async def test_sync_calls_over_a_memory_run_from_other_threads(memory, ns) -> None:
    """As LangGraph's AsyncPostgresStore: a blocking call on the memory's own event loop is
    refused (it would stall the loop); from another thread it runs there."""
    mstore = MemrouteStore(memory, tenant=fresh_tenant())  # built on the memory's loop
    with pytest.raises(asyncio.InvalidStateError):
        mstore.put(ns, "k", {"text": "blocked"})
    await asyncio.to_thread(mstore.put, ns, "k", {"text": "from a thread"})
    assert (await asyncio.to_thread(mstore.get, ns, "k")).value == {"text": "from a thread"}


async def test_concurrent_calls_run_as_one_batch(mstore, ns, monkeypatch) -> None:
    batches = []
    execute = mstore._batches.execute

    async def counted(plan):
        batches.append(len(plan))
        return await execute(plan)

    monkeypatch.setattr(mstore._batches, "execute", counted)
    await asyncio.gather(*(mstore.aput(ns, f"k{i}", {"text": f"note {i}"}) for i in range(8)))
    got = await asyncio.gather(*(mstore.aget(ns, f"k{i}") for i in range(8)),
                               mstore.aget(("a.b",), "k"), return_exceptions=True)
    assert batches == [8, 8]  # the bad namespace failed its own call only, before queueing
    assert [g.value["text"] for g in got[:8]] == [f"note {i}" for i in range(8)]
    assert isinstance(got[8], InvalidNamespaceError)


class FailingQueries(Embeddings):
    """A caller's embedder (letter counts, as `Letters`) that fails on the query "boom"."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return Letters().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        if text == "boom":
            raise RuntimeError("the embedding API refused this query")
        return Letters().embed_query(text)


def merged_runs(store: MemrouteStore, monkeypatch) -> list[int]:
    """The sizes of the plans ``store`` runs from now on (merged and alone)."""
    runs: list[int] = []
    execute = store._batches.execute

    async def counted(plan):
        runs.append(len(plan))
        return await execute(plan)

    monkeypatch.setattr(store._batches, "execute", counted)
    return runs


async def test_an_op_failing_while_it_runs_fails_its_own_caller_only(memory, ns,
                                                                     monkeypatch) -> None:
    """Concurrent calls run as one batch; when one caller's op fails in it, the others get
    their results (their batches run again on their own) and only that caller the error."""
    store = MemrouteStore(memory, tenant=fresh_tenant(),
                          index={"dims": 8, "embed": FailingQueries(), "fields": ["t"]})
    await store.aput(ns, "there", {"t": "stored before"}, index=False)
    runs = merged_runs(store, monkeypatch)
    search, put, get = await asyncio.gather(
        store.asearch(ns, query="boom"), store.aput(ns, "new", {"t": "cafe"}, index=False),
        store.aget(ns, "there"), return_exceptions=True)
    assert runs[0] == 3  # one merged batch, which failed; then each caller's on its own
    assert isinstance(search, ModelUnavailableError) and "refused" in str(search)
    assert put is None and (await store.aget(ns, "new")).value == {"t": "cafe"}
    assert get.value == {"t": "stored before"}


async def test_a_filter_at_its_limits_never_fails_for_what_the_store_adds(mstore, ns,
                                                                          monkeypatch) -> None:
    """The namespace and the expiry are the store's own filters, beside the caller's: a
    filter of 64 conditions (the limit) and a prefix deeper than 64 labels search with a
    query as without, and a valid put merged with such a search is stored."""
    value = {"text": "Biscuit the dog eats salmon kibble.", **{f"f{i}": i for i in range(64)}}
    at_limit = {f"f{i}": i for i in range(64)}
    deep = tuple(f"l{i}" for i in range(70))
    await mstore.aput(ns, "dog", value)
    await mstore.aput(deep, "dog", value)
    runs = merged_runs(mstore, monkeypatch)
    found, put = await asyncio.gather(
        mstore.asearch(ns, query="What does the dog eat?", filter=at_limit),
        mstore.aput(ns, "cat", {"text": "Miso the cat sleeps all day."}))
    assert runs == [2]
    assert [i.key for i in found] == ["dog"] and put is None
    assert (await mstore.aget(ns, "cat")) is not None
    assert [i.namespace for i in await mstore.asearch(deep, query="dog food")] == [deep]
    assert [i.key for i in await mstore.asearch(deep[:66], query="dog food",
                                                filter=at_limit)] == ["dog"]


# -- the index config as LangGraph defines it ------------------------------------------------

class Letters(Embeddings):
    """A small deterministic embedder (letter counts of a-h), as a caller's own model."""

    dims = 8

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(t.lower().count(c)) + 0.01 for c in "abcdefgh"] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("embed", ["embeddings", "function", "async function"])
async def test_a_callers_embedder_gives_langgraphs_scores(memory, embed) -> None:
    """One vector per (item, field path); a score is the cosine of the query and the item's
    best field vector, exactly (every vector is scored)."""
    letters = Letters()

    async def aembed(texts: list[str]) -> list[list[float]]:
        return letters.embed_documents(texts)

    given = {"embeddings": letters, "function": letters.embed_documents,
             "async function": aembed}[embed]
    store = MemrouteStore(memory, tenant=fresh_tenant(),
                          index={"dims": 8, "embed": given, "fields": ["title", "tags[*]"]})
    docs = {"a": {"title": "bead cafe", "tags": ["dab", "hag"]},
            "b": {"title": "ggg", "tags": ["fff"], "body": "abcabc"},
            "c": {"title": "hhh ddd"}}
    for key, value in docs.items():
        await store.aput(("docs",), key, value)
    await store.aput(("docs", "raw"), "d", {"title": "bad cab"}, index=False)
    await store.aput(("docs",), "e", {"body": "no field to index"})
    found = await store.asearch(("docs",), query="a bad cab", limit=10)
    query = letters.embed_query("a bad cab")
    expected = {key: max(cosine(query, v) for v in letters.embed_documents(
        [value["title"], *value.get("tags", [])])) for key, value in docs.items()}
    assert [i.key for i in found[:3]] == sorted(expected, key=expected.get, reverse=True)
    for item in found[:3]:
        assert item.score == pytest.approx(expected[item.key], abs=1e-6)
    assert {(i.key, i.score) for i in found[3:]} == {("d", None), ("e", None)}
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT key, field_name FROM {memory.schema}.store_vectors WHERE scope_key = %s "
            "ORDER BY key, field_name", [store.tenant.key])
        assert await cur.fetchall() == [("a", "tags[*].0"), ("a", "tags[*].1"), ("a", "title"),
                                        ("b", "tags[*]"), ("b", "title"), ("c", "title")]
    assert (await memory.count(store.tenant))["episodes"] == 0  # memroute's index is unused
    # a put's own fields
    await store.aput(("docs",), "b", docs["b"], index=["body"])
    top = (await store.asearch(("docs",), query="abcabc", limit=1))[0]
    assert (top.key, top.score) == ("b", pytest.approx(1.0))


@pytest.mark.parametrize("distance", ["inner_product", "l2"])
async def test_distance_types_as_postgres_store(memory, distance) -> None:
    letters = Letters()
    store = MemrouteStore(memory, tenant=fresh_tenant(),
                          index={"dims": 8, "embed": letters, "distance_type": distance})
    await store.aput(("d",), "x", {"t": "cafe"})
    (item,) = await store.asearch(("d",), query="bead")
    doc, query = (np.array(letters.embed_query(t)) for t in ('{"t": "cafe"}', "bead"))
    expected = float(doc @ query) if distance == "inner_product" else -float(
        np.linalg.norm(doc - query))
    assert item.score == pytest.approx(expected, abs=1e-5)


async def test_an_embedder_that_breaks_its_dims_writes_nothing(memory) -> None:
    store = MemrouteStore(memory, tenant=fresh_tenant(),
                          index={"dims": 9, "embed": Letters()})  # it returns 8
    with pytest.raises(ModelUnavailableError, match="9"):
        await store.aput(("d",), "x", {"t": "cafe"})
    assert await store.asearch(("d",)) == []


async def test_an_embedder_returning_nan_is_a_typed_error_and_writes_nothing(memory) -> None:
    def nan_vectors(texts: list[str]) -> list[list[float]]:
        return [[float("nan")] * 8 for _ in texts]

    store = MemrouteStore(memory, tenant=fresh_tenant(), index={"dims": 8, "embed": nan_vectors})
    with pytest.raises(ModelUnavailableError, match="NaN"):
        await store.aput(("d",), "x", {"t": "cafe"})
    assert await store.asearch(("d",)) == []


@pytest.mark.parametrize("index", [
    {"dims": 8, "embed": "no-provider-here"},
    {"dims": 8, "embed": 42},
    {"embed": Letters()},
    {"dims": 0, "embed": Letters()},
    {"dims": 8, "embed": Letters(), "distance_type": "hamming"},
    {"dims": 8, "embed": Letters(), "fields": "text", "fieldz": ["x"]},
    {"dims": 123, "fields": ["text"]},
    {"fields": [""]},
])
def test_bad_index_configs_are_typed_errors(memory, index) -> None:
    with pytest.raises(InvalidInputError):
        MemrouteStore(memory, index=index)


async def test_ann_index_config_halfvec_keeps_half_precision_as_postgres_store(memory) -> None:
    """``vector_type: "halfvec"`` rounds the stored vectors and the query to half precision
    (what a halfvec column holds), so the scores are those of half-precision vectors."""
    letters = Letters()
    store = MemrouteStore(memory, tenant=fresh_tenant(), index={
        "dims": 8, "embed": letters, "fields": ["t"],
        "ann_index_config": {"kind": "flat", "vector_type": "halfvec"}})
    await store.aput(("d",), "x", {"t": "bead cafe"})
    async with memory._pool.connection() as conn:
        cur = await conn.execute(f"SELECT embedding FROM {memory.schema}.store_vectors "
                                 "WHERE scope_key = %s", [store.tenant.key])
        (stored,), = await cur.fetchall()
    half = np.asarray(letters.embed_query("bead cafe"), dtype=np.float16)
    assert stored.to_list() == half.astype(np.float32).tolist()
    assert not np.array_equal(half.astype(np.float64), letters.embed_query("bead cafe"))
    (item,) = await store.asearch(("d",), query="a bad cab")
    query = np.asarray(letters.embed_query("a bad cab"), dtype=np.float16)
    assert item.score == pytest.approx(cosine(query.astype(np.float64),
                                              half.astype(np.float64)), abs=1e-6)


@pytest.mark.parametrize("ann, says", [
    ({"kind": "hnsw"}, "approximate index"),
    ({"kind": "ivfflat", "nlist": 100}, "approximate index"),
    ({"vector_type": "vector", "m": 16}, "approximate index"),
    ({"vector_type": "bit"}, "vector_type"),
    ("hnsw", "mapping"),
])
def test_ann_index_config_asking_for_an_approximate_index_is_refused(memory, ann, says) -> None:
    with pytest.raises(InvalidInputError, match=says):
        MemrouteStore(memory, index={"dims": 8, "embed": Letters(), "ann_index_config": ann})


def test_ann_index_config_without_embed_asks_nothing_of_memroutes_index(memory) -> None:
    with pytest.raises(InvalidInputError, match="its own embed"):
        MemrouteStore(memory, index={"ann_index_config": {"vector_type": "halfvec"}})
    MemrouteStore(memory, index={"ann_index_config": {"kind": "flat", "vector_type": "vector"}})


def test_a_provider_string_builds_langchains_embeddings(memory, monkeypatch) -> None:
    """``embed="provider:model"`` goes through LangGraph's own `ensure_embeddings`."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    store = MemrouteStore(memory, index={"dims": 1536, "embed": "openai:text-embedding-3-small"})
    assert type(store.embeddings).__name__ == "OpenAIEmbeddings"
    assert store.index_config["embed"] == "openai:text-embedding-3-small"


# -- pages ----------------------------------------------------------------------------------

NOTES = ["Biscuit the dog eats salmon kibble.",
         "Maya flies with Aurora Air and sits by the window.",
         "My sister Priya moved to Lisbon last year.",
         "The cat Miso sleeps all day on the sofa.",
         "Maya's brother Tom works at Tidewave Labs.",
         "Rex chases the ball in the park every morning.",
         "Priya bakes sourdough bread on Sundays.",
         "Tom's daughter learns the violin.",
         "The cat Miso hides under the bed during storms.",
         "Maya booked a window seat to Lisbon for May.",
         "Biscuit's vet is on Harbour Street.",
         "Tidewave Labs builds tide sensors for the harbour."]
PAGED_QUERIES = ["What does Maya's dog chase, and where does the cat sleep?",
                 "Which airline does Maya fly and what does the dog eat?",
                 "Who is the sister of the person whose brother works at Tidewave Labs?",
                 "What does the dog do?"]


async def pages_of(store: MemrouteStore, ns, query: str, size: int, total: int) -> list[list]:
    return [[(i.key, i.score) for i in await store.asearch(ns, query=query, limit=size,
                                                           offset=offset)]
            for offset in range(0, total + size, size)]


@pytest.mark.parametrize("index", ["memroute", "embed"])
async def test_consecutive_pages_are_slices_of_one_ranking(memory, index) -> None:
    """Pages of one query give each item once, none skipped, in the order (and with the
    scores) of one large page: the scored items, then the unscored ones. (memroute's agent
    orders results differently at another k: pages past its first depth read the next.)"""
    config = ({"fields": ["text"]} if index == "memroute"
              else {"dims": 8, "embed": Letters(), "fields": ["text"]})
    store = MemrouteStore(memory, tenant=fresh_tenant(), index=config)
    ns = ("notes",)
    for i, text in enumerate(NOTES):
        await store.aput(ns, f"n{i}", {"text": text})
    await store.aput(ns, "raw1", {"text": "Biscuit chases the cat."}, index=False)
    await store.aput(ns, "raw2", {"text": "Tom flies to Lisbon."}, index=False)
    for query in PAGED_QUERIES:
        whole = [(i.key, i.score) for i in await store.asearch(ns, query=query, limit=14)]
        assert len({key for key, _ in whole}) == 14
        assert [key for key, score in whole if score is None] == ["raw2", "raw1"]
        scores = [score for _, score in whole if score is not None]
        assert scores == sorted(scores, reverse=True)  # the order is the score
        for size in (2, 3, 5):
            pages = await pages_of(store, ns, query, size, 14)
            assert [hit for page in pages for hit in page] == whole, (query, size)


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
    store = MemrouteStore(memory, index={"fields": INDEX_FIELDS}, tenant=fresh_tenant())
    await store.aput(ns, "gone", {"text": "Biscuit naps after lunch."}, ttl=1 / 60)
    await store.aput(ns, "forever", {"text": "Biscuit is a beagle."})
    await asyncio.sleep(1.2)
    assert await store.aget(ns, "gone") is None
    assert await store.alist_namespaces() == [ns]
    assert (await memory.count(store.tenant))["episodes"] == 2  # expired, unread, stored
    assert await store.asweep_ttl() >= 1  # a sweep deletes it (and other tenants' expired)
    assert (await memory.count(store.tenant))["episodes"] == 1


async def test_a_namespace_whose_items_expired_is_not_listed(memory: Memory) -> None:
    store = MemrouteStore(memory, index={"fields": INDEX_FIELDS}, tenant=fresh_tenant())
    await store.aput(("short",), "k", {"text": "gone soon"}, ttl=1 / 60)
    await store.aput(("long",), "k", {"text": "stays"})
    assert await store.alist_namespaces() == [("long",), ("short",)]
    await asyncio.sleep(1.2)
    assert await store.alist_namespaces() == [("long",)]
    assert await store.asearch(("short",), query="gone soon") == []


async def test_omit_expired_false_reads_expired_items_until_swept(memory: Memory) -> None:
    """TTLConfig's ``omit_expired=False`` (LangGraph's default; memroute's is True)."""
    store = MemrouteStore(memory, index={"fields": INDEX_FIELDS}, tenant=fresh_tenant(),
                          ttl={"omit_expired": False, "refresh_on_read": False})
    await store.aput(("n",), "k", {"text": "an expired note"}, ttl=1 / 60)
    await asyncio.sleep(1.2)
    assert (await store.aget(("n",), "k")).value == {"text": "an expired note"}
    assert [i.key for i in await store.asearch(("n",), query="expired note")] == ["k"]
    assert await store.alist_namespaces() == [("n",)]
    assert await store.asweep_ttl() >= 1
    assert await store.aget(("n",), "k") is None


async def test_the_ttl_sweeper_deletes_every_tenants_expired_items(memory: Memory) -> None:
    """``start_ttl_sweeper`` sweeps the whole table (every tenant, the unbound stores' too,
    as LangGraph's PostgresStore) every ``sweep_interval_minutes`` until
    ``stop_ttl_sweeper`` (over a `Memory` both are awaited, as AsyncPostgresStore's)."""
    store = MemrouteStore(memory, index={"fields": INDEX_FIELDS}, tenant=fresh_tenant(),
                          ttl={"sweep_interval_minutes": 0.5 / 60})
    other = MemrouteStore(memory, index={"fields": INDEX_FIELDS}, tenant=fresh_tenant())
    unbound = MemrouteStore(memory, index={"fields": INDEX_FIELDS})
    ns = (f"sweep-{uuid.uuid4().hex[:8]}",)
    for each in (store, other, unbound):
        await each.aput(ns, "short", {"text": "gone soon"}, ttl=0.5 / 60)
        await each.aput(ns, "kept", {"text": "stays a while"}, ttl=10)
    task = await store.start_ttl_sweeper()
    try:
        assert isinstance(task, asyncio.Task) and not task.done()
        await asyncio.sleep(1.6)
        for each in (store, other, unbound):
            async with memory._pool.connection() as conn:
                cur = await conn.execute(
                    f"SELECT key FROM {memory.schema}.store_items WHERE scope_key = %s "
                    "AND prefix = %s", [each.tenant.key, ns[0]])
                assert [key for key, in await cur.fetchall()] == ["kept"]
        assert (await memory.count(other.tenant))["episodes"] == 1  # the expired one's went
    finally:
        assert await store.stop_ttl_sweeper() is True and task.done()
    assert await store.stop_ttl_sweeper() is True  # not running


def test_the_ttl_sweeper_over_a_sync_memory(sync_memory: SyncMemory) -> None:
    store = MemrouteStore(sync_memory, tenant=fresh_tenant(),
                          ttl={"sweep_interval_minutes": 0.5 / 60})
    store.put(("n",), "k", {"text": "gone soon"}, ttl=0.5 / 60)
    future = store.start_ttl_sweeper()
    assert future is store.start_ttl_sweeper()  # one sweeper per store
    time.sleep(1.6)
    assert sync_memory.count(store.tenant)["episodes"] == 0
    assert store.stop_ttl_sweeper(timeout=5) is True and future.done()
    idle = MemrouteStore(sync_memory, tenant=fresh_tenant()).start_ttl_sweeper()
    assert idle.done()  # no ttl config: nothing to sweep, as LangGraph's stores


async def test_default_ttl_and_bad_ttls(memory: Memory, ns) -> None:
    store = MemrouteStore(memory, ttl={"default_ttl": 1 / 60, "refresh_on_read": False},
                          tenant=fresh_tenant())
    await store.aput(ns, "k", {"text": "gone soon"})
    await asyncio.sleep(1.5)
    assert await store.aget(ns, "k") is None
    for ttl in (-1, 0, float("nan"), float("inf"), "5"):
        with pytest.raises(InvalidInputError):
            await store.aput(ns, "bad", {"text": "x"}, ttl=ttl)
    assert (await memory.count(store.tenant))["episodes"] == 1  # the expired one, never read
    for config in ({"default_ttl": -3}, {"sweep_interval_minutes": 0}, {"omit_expired": "yes"},
                   {"default_tll": 5}, ["default_ttl"]):
        with pytest.raises(InvalidInputError):
            MemrouteStore(memory, ttl=config)


async def test_a_ttl_is_bounded_and_a_huge_one_a_typed_error(memory: Memory, ns) -> None:
    store = MemrouteStore(memory, tenant=fresh_tenant())
    for ttl in (1e300, MAX_TTL_MINUTES * 1.01, 2**63):
        with pytest.raises(InvalidInputError, match="1,000 years"):
            await store.aput(ns, "huge", {"text": "x"}, ttl=ttl)
    for config in ({"default_ttl": 1e300}, {"sweep_interval_minutes": 1e300}):
        with pytest.raises(InvalidInputError, match="1,000 years"):
            MemrouteStore(memory, ttl=config)
    await store.aput(ns, "long", {"text": "x"}, ttl=MAX_TTL_MINUTES)
    assert (await store.aget(ns, "long")).value == {"text": "x"}
    assert await store.aget(ns, "huge") is None


# -- typed errors, all-or-nothing batches, bounds ------------------------------------------

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
    assert (await memory.count(mstore.tenant))["episodes"] == 0


async def test_a_batch_is_all_or_nothing_across_namespaces(mstore, ns) -> None:
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


async def test_filters_in_memroute_dialect_and_langgraphs(mstore, ns) -> None:
    await fill(mstore, ns)
    assert {i.key for i in await mstore.asearch(ns, filter={"n": {"$in": [1, 3]}})} == \
        {"biscuit", "sister"}
    assert {i.key for i in await mstore.asearch(
        ns, query="who?", filter={"$or": [{"kind": "pet"}, {"n": {"$gte": 3}}]})} == \
        {"biscuit", "sister"}
    with pytest.raises(FilterError):
        await mstore.asearch(ns, filter={"n": {"$near": 2}})


@pytest.mark.parametrize("index", ["memroute", "embed"])
async def test_floats_come_back_floats(memory: Memory, index) -> None:
    """jsonb keeps numbers as decimals: a float Python prints with an exponent (1e16 and up)
    came back an int (1.79e308 as 309 digits). A value's floats, and an episode's metadata's,
    come back floats; ints stay ints; filters compare them as numbers."""
    config = ({"fields": ["text"]} if index == "memroute"
              else {"dims": 8, "embed": Letters(), "fields": ["text"]})
    store = MemrouteStore(memory, tenant=fresh_tenant(), index=config)
    value = {"text": "Big numbers.", "max": 1.79e308, "e20": 1e20, "neg": -1e16, "tiny": 1e-300,
             "int": 10**20, "one": 1.0, "nested": [{"x": 2.5e30}], "said": "1e+20"}
    await store.aput(("n",), "k", value)
    for item in [await store.aget(("n",), "k"), *await store.asearch(("n",)),
                 *await store.asearch(("n",), query="big numbers")]:
        assert item.value == value
        assert [type(item.value[k]) for k in ("max", "e20", "neg", "int", "one")] == \
            [float, float, float, int, float]
        assert type(item.value["nested"][0]["x"]) is float
    for condition in ({"e20": 1e20}, {"max": {"$gt": 1e308}}, {"int": {"$gte": 1e20}}):
        assert [i.key for i in await store.asearch(("n",), query="big numbers",
                                                   filter=condition)] == ["k"]
    scope = fresh_tenant()
    await memory.add(scope, [{"uid": "e", "content": "An episode.", "metadata": value}])
    (episode,) = await memory.get(scope, ["e"])
    assert episode.episode.metadata == value and type(episode.episode.metadata["e20"]) is float


# -- tenants ----------------------------------------------------------------------------------

async def test_stores_of_two_tenants_share_nothing(memory: Memory) -> None:
    """The same namespace and key in two tenants are two items; erasing a tenant's scope
    (`Memory.delete(all=True)`) takes its items along and nothing else."""
    mine, theirs = (MemrouteStore(memory, index={"fields": INDEX_FIELDS}, tenant=fresh_tenant())
                    for _ in range(2))
    await mine.aput(("notes", "u1"), "k", {"text": "mine"})
    await theirs.aput(("notes", "u1"), "k", {"text": "theirs"})
    await theirs.aput(("notes", "u2"), "x", {"text": "theirs only"})
    assert (await mine.aget(("notes", "u1"), "k")).value == {"text": "mine"}
    assert await mine.aget(("notes", "u2"), "x") is None
    assert await mine.alist_namespaces() == [("notes", "u1")]
    assert [i.value["text"] for i in await mine.asearch((), query="theirs only")] == ["mine"]
    await mine.adelete(("notes", "u1"), "k")
    assert (await theirs.aget(("notes", "u1"), "k")).value == {"text": "theirs"}
    await memory.delete(theirs.tenant, all=True)
    assert await theirs.alist_namespaces() == []
    assert await theirs.asearch(()) == []


async def test_unbound_stores_share_the_reserved_tenant_no_store_may_name(memory: Memory,
                                                                        ns) -> None:
    """Every store built without a tenant on one schema shares `DEFAULT_TENANT`; its org is
    reserved: a store naming it, or a scope under it, is refused."""
    one, two = MemrouteStore(memory), MemrouteStore(memory)
    assert one.tenant == two.tenant == DEFAULT_TENANT
    await one.aput(ns, "shared", {"text": "seen by every unbound store"})
    assert (await two.aget(ns, "shared")).value == {"text": "seen by every unbound store"}
    for named in (DEFAULT_TENANT.org_id, (DEFAULT_TENANT.org_id, "p"), DEFAULT_TENANT,
                  {"org_id": DEFAULT_TENANT.org_id, "project_id": "p", "user_id": "u"}):
        with pytest.raises(InvalidInputError, match="reserved"):
            MemrouteStore(memory, tenant=named)
    assert await MemrouteStore(memory, tenant=fresh_tenant()).aget(ns, "shared") is None


def test_a_tenant_is_a_scope(memory: Memory) -> None:
    assert MemrouteStore(memory, tenant="acme").tenant == Scope(org_id="acme")
    assert MemrouteStore(memory, tenant=("acme", "crm", "maya")).tenant == \
        Scope(org_id="acme", project_id="crm", user_id="maya")
    assert MemrouteStore(memory, tenant={"org_id": "acme"}).tenant == Scope(org_id="acme")
    for bad in ("", "a/b", ("a", "b", "c", "d", "e"), 3, {"org": "x"}):
        with pytest.raises(InvalidInputError):
            MemrouteStore(memory, tenant=bad)
