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
    {"topic\n": "x"},
    {"topic": {"$in": "billing"}},
    {"topic": {"$in": []}},
    {"topic": {"$gt": True}},
    {"topic": {"$eq": {"nested": 1}}},
    {"producer": 5},
    {"produced_at": {"$gt": "yesterday"}},
    {"vip": {"$exists": "yes"}},
    {"mentions_day": {"$in": ["next Saturday"]}},
    {"mentions_day": {"$nin": ["2025-11-29"]}},
    {"mentions_day": "2025-02-30"},
    {"mentions_day": {"$in": [20251129]}},
    {"$and": []},
    {"$or": {"topic": "x"}},
    {"topic": {}},
    ["topic"],
    "topic = 'x'",
])
async def test_bad_filters_are_rejected(memory: Memory, seeded: Scope, bad) -> None:
    with pytest.raises(FilterError):
        await memory.search_scored(seeded, "order", filters=bad)


async def test_an_episode_names_the_days_its_sentences_name(memory: Memory) -> None:
    scope = Scope(org_id=f"days-{datetime.now().timestamp()}")
    tuesday = datetime(2025, 11, 25, 13, tzinfo=timezone.utc)
    await memory.add(scope, [
        Episode(uid="plan", content="Great news. Booked Saltwater for Saturday at 8.",
                produced_at=tuesday),
        Episode(uid="other", content="Nell's lesson moved to Thursdays.", produced_at=tuesday)])
    named = await memory.recent(scope, filters={"mentions_day": "2025-11-29"})
    assert [e.episode.uid for e in named] == ["plan"]
    assert await memory.recent(scope, filters={"mentions_day": "2025-11-22"}) == []
    with pytest.raises(FilterError, match="filters the sentences of a search"):
        compile_filter({"mentions_day": "2025-11-29"}, "e")


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


def _substitute(node, names: dict):
    """The same filter with other metadata key names and other values of the same types."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if isinstance(key, str) and not key.startswith("$") and key not in COLUMNS:
                key = names.setdefault(key, f"k{len(names)}")
            out[key] = _substitute(value, names)
        return out
    if isinstance(node, list):
        return [_substitute(v, names) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, (int, float)):
        return type(node)(7)
    return "zz" if isinstance(node, str) else node


COLUMNS = {"session_id", "producer", "produced_at"}


@hsettings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(_keys, _conditions, max_size=3))
def test_compiled_sql_never_depends_on_user_text(filters) -> None:
    """Any input compiles to SQL whose text is independent of metadata keys and values
    (they are all bound parameters), or raises FilterError."""
    try:
        sql, params = compile_filter(filters, "s")
    except FilterError:
        return
    assert sql.count("%s") == len(params)
    try:
        other_sql, _ = compile_filter(_substitute(filters, {}), "s")
    except FilterError:
        return  # e.g. a time column given "zz"
    assert other_sql == sql
