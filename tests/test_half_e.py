"""Half E of the assistant-memory fixture (`tests/assistant_memory.py`,
``fixtures/assistant_memory/half_e.json``): four memories written by someone who had not read
the rules, about two subjects with one answer, events, changed facts, relations of relations,
clauses of time and one-word answers; a tune part (e1, e2) and a check part (e3, e4, held
out: no rule is read off it). Auto against one direct search at k = 5, as half D.

The issue's targets (at least 90 % of gold turns found by auto, no question below direct, at
most 2.0 searches a question) are reported in docs/evaluation.md with the misses; what is
asserted here is what holds on both parts."""

from __future__ import annotations

import pytest

from tests import assistant_memory as am

# four padded conversations and 54 questions, each asked twice (direct and auto)
pytestmark = pytest.mark.timeout(1800)

# kinds where reading time or a relation must never cost what one direct search finds
NEVER_BELOW_DIRECT = ("attribute", "bridge", "changed", "event", "relative_time", "time_clause")
MAX_SEARCHES = 4  # a question's searches: the route's first round and its hops, at most


@pytest.fixture(scope="module")
async def outcomes(memory) -> list[am.Outcome]:
    scopes = await am.build(memory, am.HALF_E["conversations"])
    return await am.run(memory, scopes, questions=am.E_QUESTIONS)


def test_half_e_is_what_it_claims() -> None:
    assert len(am.E_QUESTIONS) >= 40
    parts = {c["id"]: c["part"] for c in am.HALF_E["conversations"]}
    assert parts == {"e1": "tune", "e2": "tune", "e3": "check", "e4": "check"}
    assert {c["half"] for c in am.HALF_E["conversations"]} == {"E"}
    turns = {c["id"]: [t for s in c["sessions"] for _, t in s["turns"]]
             for c in am.HALF_E["conversations"]}
    for q in am.E_QUESTIONS:  # each gold (and stale) substring names one turn of its memory
        assert q.get("as_of"), q["q"]
        assert all(sum(g in t for t in turns[q["conv"]]) == 1
                   for g in q["gold"] + q.get("stale", [])), q["q"]
    for part in ("tune", "check"):
        kinds = {q["kind"] for q in am.E_QUESTIONS if parts[q["conv"]] == part}
        assert {"joint", "event", "changed", "bridge", "relative_time", "time_clause",
                "one_word", "attribute"} <= kinds


@pytest.mark.parametrize("part", ["tune", "check"])
def test_half_e_auto_finds_at_least_what_direct_finds(outcomes, part: str) -> None:
    """On each part auto finds at least as many gold turns as direct, loses no question of a
    time, relation or attribute kind to it, and stays within 2.0 searches a question (none
    above `MAX_SEARCHES`)."""
    e = [o for o in am.half(outcomes, "E") if am.PARTS[o.question["conv"]] == part]
    s = am.summary(e)
    assert s["gold_turns_auto"] >= s["gold_turns_direct"], s
    lost = [o.question["q"] for o in e
            if o.kind in NEVER_BELOW_DIRECT and o.direct_turns > o.auto_turns]
    assert lost == []
    assert s["searches"] <= 2.0
    assert max(o.searches for o in e) <= MAX_SEARCHES, [(o.question["q"], o.searches)
                                                        for o in e]
