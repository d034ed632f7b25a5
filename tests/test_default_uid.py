"""An episode added without a uid gets one derived from its scope, session, producer, time and
content, so a retried add stores it once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from memroute.memory import Episode, Memory, Scope

WHEN = datetime(2024, 3, 18, 12, 16, tzinfo=timezone.utc)


async def test_a_retried_add_without_uid_is_stored_once(memory: Memory, scope: Scope) -> None:
    turn = {"content": "I adopted Pickles in May.", "session_id": "s1", "produced_at": WHEN}
    first = await memory.add(scope, [turn])
    again = await memory.add(scope, [dict(turn)])  # the same turn, sent again
    assert first == again and first[0].startswith("ep-")
    as_episode = await memory.add(scope, [Episode(**turn)])
    in_paris = WHEN.astimezone(timezone(timedelta(hours=1)))  # the same instant
    assert await memory.add(scope, [{**turn, "produced_at": in_paris}]) == first == as_episode
    assert (await memory.count(scope))["episodes"] == 1


async def test_each_part_of_an_episode_changes_its_uid(memory: Memory, scope: Scope) -> None:
    turn = {"content": "ok", "session_id": "s1", "producer": "user", "produced_at": WHEN}
    variants = [turn, {**turn, "content": "ok!"}, {**turn, "session_id": "s2"},
                {**turn, "producer": "assistant"},
                {**turn, "produced_at": WHEN + timedelta(seconds=1)}]
    uids = await memory.add(scope, variants)
    assert len(set(uids)) == 5
    other = Scope(org_id=scope.org_id, project_id=scope.project_id, user_id="someone-else")
    assert (await memory.add(other, [turn]))[0] not in uids
    # the same words twice in one call, at the same time: two turns, and a retry adds none
    twice = await memory.add(scope, [{**turn, "content": "yes"}, {**turn, "content": "yes"}])
    assert len(set(twice)) == 2
    assert await memory.add(scope, [{**turn, "content": "yes"}] * 2) == twice
    assert (await memory.count(scope))["episodes"] == 7
