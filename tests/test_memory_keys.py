"""Lookups and writes by key: `Memory.get`, `Memory.upsert`, `Memory.recent`,
`Memory.list_scopes` (all scope-enforced, typed errors for bad input)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from memroute.memory import Episode, InvalidInputError, Memory, Scope, StoredEpisode
from memroute.errors import FilterError

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


@pytest.fixture
def org() -> str:
    return f"keys-{uuid.uuid4().hex[:8]}"


async def test_get_returns_stored_episodes_in_the_order_asked(memory: Memory, scope) -> None:
    await memory.add(scope, [Episode(uid="a", content="Alpha.", produced_at=T0),
                             Episode(uid="b", content="Beta.", metadata={"x": 1})])
    found = await memory.get(scope, ["b", "missing", "a", "b"])
    assert [s.episode.uid for s in found] == ["b", "a"]
    assert all(isinstance(s, StoredEpisode) and s.scope == scope for s in found)
    assert found[0].episode.metadata == {"x": 1} and found[1].episode.produced_at == T0
    assert found[0].created_at.tzinfo is not None
    assert await memory.get(scope, []) == []


async def test_upsert_replaces_content_and_sentences_atomically(memory: Memory, scope) -> None:
    await memory.upsert(scope, [Episode(uid="u", content="The cat sleeps. The cat purrs.")])
    (before,) = await memory.get(scope, ["u"])
    assert await memory.count(scope) == {"episodes": 1, "sentences": 2}
    uids = await memory.upsert(scope, [
        Episode(uid="u", content="A parrot named Kiwi talks.", producer="bot",
                metadata={"v": 2}),
        Episode(uid="w", content="Another one."),
    ])
    assert uids == ["u", "w"]
    (after,) = await memory.get(scope, ["u"])
    assert after.episode.content == "A parrot named Kiwi talks."
    assert after.episode.producer == "bot" and after.episode.metadata == {"v": 2}
    assert after.created_at == before.created_at
    assert await memory.count(scope) == {"episodes": 2, "sentences": 2}
    hit = (await memory.search_scored(scope, "Which bird can talk?", k=1))[0]
    assert hit.uid == "u" and "Kiwi" in hit.matched_sentence
    assert all("cat" not in r.text for r in await memory.search_scored(scope, "cat purrs", k=5))


async def test_upsert_keeps_the_last_of_repeated_uids(memory: Memory, scope) -> None:
    await memory.upsert(scope, [{"uid": "d", "content": "first"},
                                {"uid": "d", "content": "second"}])
    assert [s.episode.content for s in await memory.get(scope, ["d"])] == ["second"]


async def test_bad_upsert_stores_nothing(memory: Memory, scope) -> None:
    await memory.add(scope, [Episode(uid="keep", content="Kept as it was.")])
    with pytest.raises(InvalidInputError):
        await memory.upsert(scope, [{"uid": "keep", "content": "changed"},
                                    {"uid": "bad", "content": ""}])
    assert [s.episode.content for s in await memory.get(scope, ["keep", "bad"])] == \
        ["Kept as it was."]


async def test_recent_is_newest_first_filtered_and_paged(memory: Memory, scope) -> None:
    await memory.add(scope, [Episode(uid=f"r{i}", content=f"Entry {i}.",
                                     produced_at=T0 + timedelta(minutes=i),
                                     metadata={"even": i % 2 == 0}) for i in range(5)])
    assert [s.episode.uid for s in await memory.recent(scope)] == ["r4", "r3", "r2", "r1", "r0"]
    assert [s.episode.uid for s in await memory.recent(scope, filters={"even": True})] == \
        ["r4", "r2", "r0"]
    assert [s.episode.uid for s in await memory.recent(scope, limit=2, offset=1)] == ["r3", "r2"]
    with pytest.raises(FilterError):
        await memory.recent(scope, filters={"bad key!": 1})


async def test_list_scopes_by_prefix(memory: Memory, org: str) -> None:
    scopes = [Scope(org_id=org, project_id="p1", user_id="u1"),
              Scope(org_id=org, project_id="p1", user_id="u2", agent_id="a"),
              Scope(org_id=org, project_id="p2")]
    for s in scopes:
        await memory.add(s, [Episode(content="hello")])
    assert await memory.list_scopes([org]) == scopes
    assert await memory.list_scopes([org, "p1"]) == scopes[:2]
    assert await memory.list_scopes([org, "p1", "u2", "a"]) == [scopes[1]]
    assert await memory.list_scopes([org], limit=1, offset=2) == [scopes[2]]
    assert await memory.list_scopes([org, "nope"]) == []


@pytest.mark.parametrize("call", [
    lambda m, s: m.get(s, "not-a-list"), lambda m, s: m.get(s, [""]),
    lambda m, s: m.get(s, ["a\x00"]), lambda m, s: m.get(s, [3]),
    lambda m, s: m.get({"org_id": "a/b"}, ["x"]),
    lambda m, s: m.recent(s, limit=0), lambda m, s: m.recent(s, offset=-1),
    lambda m, s: m.list_scopes(["a", "b", "c", "d", "e"]), lambda m, s: m.list_scopes("acme"),
    lambda m, s: m.list_scopes(["a/b"]), lambda m, s: m.list_scopes([None]),
    lambda m, s: m.upsert(s, [{"content": "x", "uid": "u\x00"}]),
])
async def test_bad_lookups_are_typed_errors(memory: Memory, scope, call) -> None:
    with pytest.raises(InvalidInputError):
        await call(memory, scope)
