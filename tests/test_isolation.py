"""Tenant isolation: scopes never leak, deletion removes every trace and nothing else."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from langgraph.store.base import ListNamespacesOp, MatchCondition, PutOp

from memroute.langgraph_store import MemrouteStore
from memroute.memory import Episode, InvalidInputError, Memory, Scope
from memroute.memory.models import coerce_scope


class Letters:
    """A caller's own embedder for LangGraph's vector search (letter counts)."""

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return [[float(t.count(c)) + 0.01 for c in "abcdefgh"] for t in texts]


async def traces(memory: Memory, scope: Scope) -> dict[str, int]:
    """Rows of the scope in every table and index the store keeps."""
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT (SELECT count(*) FROM {memory.schema}.episodes WHERE scope_key = %s),"
            f" (SELECT count(*) FROM {memory.schema}.sentences WHERE scope_key = %s),"
            f" (SELECT count(*) FROM {memory.schema}.sentences WHERE scope_key = %s"
            "   AND tsv @@ plainto_tsquery('english', 'zebra')),"
            f" (SELECT count(*) FROM {memory.schema}.store_items WHERE scope_key = %s),"
            f" (SELECT count(*) FROM {memory.schema}.store_vectors WHERE scope_key = %s)",
            [scope.key] * 5)
        episodes, sentences, lexical, items, vectors = await cur.fetchone()
    return {"episodes": episodes, "sentences": sentences, "lexical": lexical,
            "store items": items, "store vectors": vectors}


async def test_delete_scope_removes_every_trace_and_nothing_else(memory: Memory) -> None:
    tag = uuid.uuid4().hex[:6]
    scopes = [Scope(org_id=f"del-{tag}", project_id=p, user_id="u") for p in ("a", "b")]
    for s in scopes:
        await memory.add(s, [Episode(content="The zebra escaped. It ran north.", session_id="x"),
                             Episode(content="A zebra was seen at noon.", session_id="y")])
        await MemrouteStore(memory, tenant=s, index={"dims": 8, "embed": Letters()}).aput(
            ("notes",), "k", {"text": "the store keeps a note"})
    kept = await traces(memory, scopes[1])
    assert await memory.delete(scopes[0], session_id="x") == 1
    assert (await traces(memory, scopes[0]))["episodes"] == 1
    assert await memory.delete(scopes[0], all=True) == 1
    assert await traces(memory, scopes[0]) == {"episodes": 0, "sentences": 0, "lexical": 0,
                                               "store items": 0, "store vectors": 0}
    assert await memory.search_scored(scopes[0], "zebra", lexical=True) == []
    assert await traces(memory, scopes[1]) == kept == {"episodes": 2, "sentences": 3, "lexical": 2,
                                                       "store items": 1, "store vectors": 1}


async def test_same_uid_in_two_scopes_stays_two_episodes(memory: Memory) -> None:
    tag = uuid.uuid4().hex[:6]
    first, second = (Scope(org_id=f"uid-{tag}", project_id=p) for p in ("one", "two"))
    await memory.add(first, [Episode(uid="shared", content="Scope one says hello.")])
    await memory.add(second, [Episode(uid="shared", content="Scope two says goodbye.")])
    hit_one = (await memory.search_scored(first, "hello goodbye", k=5))[0]
    hit_two = (await memory.search_scored(second, "hello goodbye", k=5))[0]
    assert hit_one.nucleus.content == "Scope one says hello."
    assert hit_two.nucleus.content == "Scope two says goodbye."
    await memory.delete(first, uids=["shared"])
    assert (await memory.count(second))["episodes"] == 1


_ids = st.text(min_size=0, max_size=140)


@hsettings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(org=_ids, project=_ids, user=st.one_of(st.none(), _ids))
def test_scope_validation_is_total(org: str, project: str, user: str | None) -> None:
    """Any input is either a valid scope with a stable key, or an InvalidInputError."""
    try:
        scope = coerce_scope({"org_id": org, "project_id": project, "user_id": user})
    except InvalidInputError:
        return
    assert len(scope.key) == 32
    assert scope.key == Scope(org_id=org, project_id=project, user_id=user).key
    assert scope.key != Scope(org_id=org + "x", project_id=project, user_id=user).key


def test_scope_parts_cannot_collide_through_separators() -> None:
    a = Scope(org_id="a", project_id="b-c")
    b = Scope(org_id="a-b", project_id="c")
    assert a.key != b.key


@pytest.mark.parametrize("bad", [{"org_id": "x' OR '1'='1"}, {"org_id": "a/b"},
                                 {"org_id": "acme\n"}, {"org_id": "acme", "user_id": "u1\n"},
                                 {"org_id": "é" * 200}, {"org_id": None}, {}])
def test_hostile_scopes_rejected(bad) -> None:
    with pytest.raises(InvalidInputError):
        coerce_scope(bad)


async def test_lookups_by_key_stay_in_their_scope(memory: Memory) -> None:
    tag = uuid.uuid4().hex[:6]
    mine, theirs = (Scope(org_id=f"key-{tag}", project_id="p", user_id=u) for u in ("a", "b"))
    await memory.add(theirs, [Episode(uid="shared", content="Their secret plan.")])
    assert await memory.get(mine, ["shared"]) == []
    assert await memory.recent(mine) == []
    await memory.upsert(mine, [Episode(uid="shared", content="My own note.")])
    (kept,) = await memory.get(theirs, ["shared"])
    assert kept.episode.content == "Their secret plan." and kept.scope == theirs
    assert (await memory.count(theirs)) == {"episodes": 1, "sentences": 1}
    assert await memory.list_scopes([f"key-{tag}", "p", "a"]) == [mine]
    assert await memory.list_scopes([f"key-{tag}x"]) == []


# -- MemrouteStore: tenants never meet, whatever the namespace ---------------------------------

MINE = [("a",), ("a", "b"), ("b", "a", "b"), ("a_",)]
THEIRS = MINE + [("a", "a"), ("b",), ("a%", "b"), ("b", "b", "a"), ("ab",), ("a", "b", "c")]
SEARCHED = ("a", "b", "a_", "a%", "ab")  # the labels of the prefixes searched
LISTED = ("a", "b", "a_", "*")  # the labels of the prefix and suffix paths listed


def paths(labels: tuple[str, ...], longest: int) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = [()]
    for _ in range(longest):
        found += [(*p, label) for p in found if len(p) == len(found[-1]) for label in labels]
    return sorted(set(found), key=lambda p: (len(p), p))


def matches(path: tuple[str, ...], labels: tuple[str, ...], kind: str = "prefix") -> bool:
    """LangGraph's match condition: ``labels`` start (or end) with ``path``, ``*`` any one."""
    ends = labels[:len(path)] if kind == "prefix" else labels[len(labels) - len(path):]
    return len(labels) >= len(path) and all(p in ("*", n) for p, n in zip(path, ends))


@pytest.fixture(scope="module", params=["memroute search", "caller's embedder"])
def tenants(request, sync_memory) -> tuple[MemrouteStore, MemrouteStore]:
    """Two stores bound to two tenants: theirs holds every namespace of mine, and more."""
    index = {"dims": 8, "embed": Letters()} if request.param == "caller's embedder" else None
    tag = uuid.uuid4().hex[:6]
    mine, theirs = (MemrouteStore(sync_memory, index=index, strategy="direct",
                                  tenant=(f"tenant-{name}-{tag}", "store"))
                    for name in ("mine", "theirs"))
    for store, spaces in ((mine, MINE), (theirs, THEIRS)):
        for space in spaces:
            store.put(space, "k", {"text": f"note in {'.'.join(space)}",
                                   "tenant": store.tenant.org_id})
    return mine, theirs


def test_a_tenant_never_sees_anothers_items_through_any_prefix(tenants) -> None:
    """Every prefix (up to three labels, LIKE's metacharacters among them), with and without
    a query: the items under it in the store's own tenant, and nothing else."""
    for store, spaces in zip(tenants, (MINE, THEIRS)):
        for prefix in paths(SEARCHED, 3):
            expected = {s for s in spaces if s[:len(prefix)] == prefix}
            listed = store.search(prefix, limit=100)
            assert {i.namespace for i in listed} == expected, prefix
            assert {i.value["tenant"] for i in listed} <= {store.tenant.org_id}
            if len(prefix) <= 2:
                scored = store.search(prefix, query="a note", limit=100)
                assert {i.namespace for i in scored} == expected, prefix
                assert {i.value["tenant"] for i in scored} <= {store.tenant.org_id}


def test_a_tenant_never_lists_anothers_namespaces(tenants) -> None:
    """Every prefix, suffix (up to two labels, wildcards among them) and depth."""
    for store, spaces in zip(tenants, (MINE, THEIRS)):
        combinations = [(p, s, d) for p in paths(LISTED, 2) for s in paths(LISTED, 2)
                        for d in (None, 1, 2, 3)]
        ops = [ListNamespacesOp(tuple(MatchCondition(kind, path) for kind, path in
                                      (("prefix", p), ("suffix", s)) if path), d, 1000, 0)
               for p, s, d in combinations]
        for (prefix, suffix, depth), listed in zip(combinations, store.batch(ops)):
            expected = sorted({s[:depth] if depth else s for s in spaces
                               if matches(prefix, s) and matches(suffix, s, "suffix")})
            assert listed == expected, (prefix, suffix, depth)


_label = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=".\x00"),
                 min_size=1, max_size=4)


@hsettings(max_examples=40, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mine=st.lists(st.lists(_label, min_size=1, max_size=3).map(tuple), min_size=1,
                     max_size=3),
       theirs=st.lists(st.lists(_label, min_size=1, max_size=3).map(tuple), min_size=1,
                       max_size=3))
def test_any_labels_stay_in_their_tenant(sync_memory, mine, theirs) -> None:
    """Arbitrary labels (LIKE's `%`, `_` and `\\` among them): another tenant's namespaces,
    and every prefix of them, reach nothing of theirs from my store."""
    tag = uuid.uuid4().hex[:6]
    stores = [MemrouteStore(sync_memory, index={"dims": 8, "embed": Letters()},
                            tenant=f"hyp-{name}-{tag}") for name in ("mine", "theirs")]
    for store, spaces in zip(stores, (mine, theirs)):
        store.batch([PutOp(space, "k", {"owner": store.tenant.org_id}) for space in spaces])
    me = stores[0]
    for space in theirs:
        for depth in range(len(space) + 1):
            prefix = space[:depth]
            for found in (me.search(prefix, limit=100), me.search(prefix, query="x", limit=100)):
                assert {i.value["owner"] for i in found} <= {me.tenant.org_id}
                assert {i.namespace for i in found} == {s for s in mine
                                                        if s[:depth] == prefix}
            assert set(me.list_namespaces(prefix=prefix or None, limit=1000)) == {
                s for s in mine if matches(prefix, s)}
            assert set(me.list_namespaces(suffix=prefix or None, limit=1000)) == {
                s for s in mine if matches(prefix, s, "suffix")}
