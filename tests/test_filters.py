"""The filter dialect: every operator against the real store, and rejection of bad filters."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from memroute.memory import Episode, FilterError, Memory, Scope
from memroute.memory.filters import compile_filter

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
ROWS = [
    ("e0", "s1", "user", {"topic": "billing", "priority": 1, "vip": True, "tags": {"lang": "en"}}),
    ("e1", "s1", "assistant", {"topic": "billing", "priority": 3}),
    ("e2", "s2", "user", {"topic": "refund", "priority": 2, "vip": False}),
    ("e3", "s2", "assistant", {"topic": "shipping", "priority": "high"}),
    ("e4", "s3", "user", {}),
]


@pytest.fixture
async def seeded(memory: Memory, scope: Scope) -> Scope:
    await memory.add(scope, [
        Episode(uid=u, session_id=s, producer=p, metadata=m, produced_at=T0 + timedelta(days=i),
                content=f"Customer note {u} about an order.")
        for i, (u, s, p, m) in enumerate(ROWS)
    ])
    return scope


CASES = [
    ({"topic": "billing"}, {"e0", "e1"}),
    ({"topic": {"$eq": "refund"}}, {"e2"}),
    ({"topic": {"$ne": "billing"}}, {"e2", "e3", "e4"}),
    ({"topic": {"$in": ["refund", "shipping"]}}, {"e2", "e3"}),
    ({"topic": {"$nin": ["billing"]}}, {"e2", "e3", "e4"}),
    ({"priority": {"$gt": 1}}, {"e1", "e2"}),
    ({"priority": {"$gte": 2}}, {"e1", "e2"}),
    ({"priority": {"$lt": 2}}, {"e0"}),
    ({"priority": {"$lte": 2}}, {"e0", "e2"}),
    ({"vip": {"$exists": True}}, {"e0", "e2"}),
    ({"vip": {"$exists": False}}, {"e1", "e3", "e4"}),
    ({"vip": True}, {"e0"}),
    ({"tags.lang": "en"}, {"e0"}),
    ({"producer": "assistant"}, {"e1", "e3"}),
    ({"session_id": {"$in": ["s2", "s3"]}}, {"e2", "e3", "e4"}),
    ({"produced_at": {"$gte": (T0 + timedelta(days=3)).isoformat()}}, {"e3", "e4"}),
    ({"produced_at": {"$lt": T0 + timedelta(days=1)}}, {"e0"}),
    ({"$or": [{"topic": "refund"}, {"producer": "assistant"}]}, {"e1", "e2", "e3"}),
    ({"$and": [{"topic": "billing"}, {"priority": {"$gt": 2}}]}, {"e1"}),
    ({"session_id": "s1", "producer": "user"}, {"e0"}),
    ({}, {"e0", "e1", "e2", "e3", "e4"}),
]


@pytest.mark.parametrize(("filters", "expected"), CASES)
async def test_operator(memory: Memory, seeded: Scope, filters, expected) -> None:
    hits = await memory.search_scored(seeded, "customer order note", k=10, filters=filters,
                                      context=(0, 0))
    assert {h.nucleus.uid for h in hits} == expected


@pytest.mark.parametrize("bad", [
    {"topic": {"$regex": "x"}},
    {"$not": {"topic": "x"}},
    {"topic; DROP TABLE episodes": "x"},
    {"a'b": 1},
    {"topic": {"$in": "billing"}},
    {"topic": {"$in": []}},
    {"topic": {"$gt": True}},
    {"topic": {"$eq": {"nested": 1}}},
    {"producer": 5},
    {"produced_at": {"$gt": "yesterday"}},
    {"vip": {"$exists": "yes"}},
    {"$and": []},
    {"$or": {"topic": "x"}},
    {"topic": {}},
    ["topic"],
    "topic = 'x'",
])
async def test_bad_filters_are_rejected(memory: Memory, seeded: Scope, bad) -> None:
    with pytest.raises(FilterError):
        await memory.search_scored(seeded, "order", filters=bad)


def test_deep_nesting_is_rejected() -> None:
    node: dict = {"topic": "x"}
    for _ in range(20):
        node = {"$and": [node]}
    with pytest.raises(FilterError, match="deeper"):
        compile_filter(node, "s")


_keys = st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=20)
_values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=20))
_conditions = st.one_of(_values, st.dictionaries(st.sampled_from(
    ["$eq", "$ne", "$gt", "$lt", "$in", "$exists", "$bogus", "x"]), _values, max_size=2))


@hsettings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(_keys, _conditions, max_size=3))
def test_compiled_filters_never_embed_values(filters) -> None:
    """Whatever the input, it compiles to SQL without any user text in it, or a FilterError."""
    try:
        sql, params = compile_filter(filters, "s")
    except FilterError:
        return
    for key in filters:
        if key:
            assert key not in sql or key in {"s", "metadata", "producer", "session_id",
                                             "produced_at"}
    assert sql.count("%s") == len(params)
