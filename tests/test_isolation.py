"""Tenant isolation: scopes never leak, deletion removes every trace and nothing else."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from memroute.langgraph_store import MemrouteStore
from memroute.memory import Episode, InvalidInputError, Memory, Scope
from memroute.memory.models import coerce_scope


async def traces(memory: Memory, scope: Scope) -> dict[str, int]:
    """Rows of the scope in every table and index the store keeps."""
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT (SELECT count(*) FROM {memory.schema}.episodes WHERE scope_key = %s),"
            f" (SELECT count(*) FROM {memory.schema}.sentences WHERE scope_key = %s),"
            f" (SELECT count(*) FROM {memory.schema}.sentences WHERE scope_key = %s"
            "   AND tsv @@ plainto_tsquery('english', 'zebra'))",
            [scope.key] * 3)
        episodes, sentences, lexical = await cur.fetchone()
    return {"episodes": episodes, "sentences": sentences, "lexical": lexical}


async def test_delete_scope_removes_every_trace_and_nothing_else(memory: Memory) -> None:
    tag = uuid.uuid4().hex[:6]
    scopes = [Scope(org_id=f"del-{tag}", project_id=p, user_id="u") for p in ("a", "b")]
    for s in scopes:
        await memory.add(s, [Episode(content="The zebra escaped. It ran north.", session_id="x"),
                             Episode(content="A zebra was seen at noon.", session_id="y")])
    kept = await traces(memory, scopes[1])
    assert await memory.delete(scopes[0], session_id="x") == 1
    assert (await traces(memory, scopes[0]))["episodes"] == 1
    assert await memory.delete(scopes[0], all=True) == 1
    assert await traces(memory, scopes[0]) == {"episodes": 0, "sentences": 0, "lexical": 0}
    assert await memory.search_scored(scopes[0], "zebra", lexical=True) == []
    assert await traces(memory, scopes[1]) == kept == {"episodes": 2, "sentences": 3, "lexical": 2}


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


async def test_a_store_namespace_never_reaches_another_scope(memory: Memory) -> None:
    store = MemrouteStore(memory, strategy="direct")
    org = f"ns-{uuid.uuid4().hex[:6]}"
    user, team, other = (org, "p", "alice"), (org, "p"), (f"{org}x", "p", "alice")
    await store.aput(user, "plan", {"text": "Alice's secret plan is the zebra escape."})
    await store.aput(other, "plan", {"text": "Another org's zebra plan."})
    # The team's namespace is a scope of its own: neither search nor get reaches Alice's.
    assert await store.asearch(team, query="zebra plan") == []
    assert await store.asearch(team) == []
    assert await store.aget(team, "plan") is None
    assert await store.aget((org, "p", "bob"), "plan") is None
    hits = await store.asearch(user, query="zebra plan")
    assert [(h.namespace, h.value["text"]) for h in hits] == \
        [(user, "Alice's secret plan is the zebra escape.")]
    # A put or delete in one namespace leaves the same key elsewhere untouched.
    await store.aput((org, "p", "bob"), "plan", {"text": "Bob's plan."})
    await store.adelete((org, "p", "bob"), "plan")
    assert (await store.aget(user, "plan")).value["text"].startswith("Alice")
    assert (await store.aget(other, "plan")).value["text"] == "Another org's zebra plan."
    assert await store.alist_namespaces(prefix=(org,)) == [user]
