"""The entity index of the sentences table: what is stored per sentence, the entity lane of
`Memory.search_scored`, and the backfill of stores written before entities were extracted.

Each sentence stores ``entity_keys`` (the `memroute.nlp.entity_key` of every entity spaCy
finds in it, plus its producer when that names a speaker) under a GIN index, and
``entities`` (text, key, label of each). ``NULL`` means "not extracted yet"; such sentences
are simply not found by the entity lane.

The entity lane (`entity_lane_sql`): sentences of the scope whose keys overlap the query's,
most matched keys first, then nearest to the query vector; a lane of the one search
statement (`memroute.memory.sql.search_statement`), fused with the others by reciprocal rank.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime

import numpy as np
from psycopg import AsyncConnection

from memroute._log import get_logger
from memroute.errors import ModelUnavailableError
from memroute.memory.coalesce import Coalescer
from memroute.memory.bounds import ReadBound
from memroute.memory.limits import ENTITY_CANDIDATES_PER_KEY
from memroute.memory.sql import ENTITY_ORDER, Lane
from memroute.nlp import (
    SPEAKER_LABEL,
    Entity,
    dates_told_in_past,
    entity_key,
    extract_entities,
    query_entity_keys,
)
from memroute.time.expressions import (
    DAY_KEY_PREFIX,
    day_key,
    days_named,
    is_bare_day,
    names_a_day,
)

DAY_LABEL = "DAY"
"""The label of a day a sentence names (key ``day:2025-06-28``), stored among its entity
keys only."""

log = get_logger(__name__)
# Producers that are roles, not names a question could mention.
ROLE_PRODUCERS = frozenset({"user", "assistant", "system", "ai", "bot", "human", "agent",
                             "tool", "model"})


def speaker_entity(producer: str) -> Entity | None:
    """The producer as an entity when it names someone ("Caroline"), else ``None``."""
    key = entity_key(producer)
    if not key or key in ROLE_PRODUCERS or len(key) > 80:
        return None
    return Entity(producer.strip(), key, SPEAKER_LABEL)


async def _extract_in_thread(texts: list[str]) -> list[list[Entity]]:
    return await asyncio.to_thread(extract_entities, texts)


# concurrent adds' sentences go through spaCy as one batch
_extract_batched: Coalescer[str, list[list[Entity]]] = Coalescer(_extract_in_thread)


async def sentence_entities(texts: list[str], producers: list[str],
                            said_at: list[datetime | None] | None = None) -> list[list[Entity]]:
    """The entities of each sentence (spaCy NER, off the event loop; concurrent calls' in
    one batch), its speaker, and the days it names read against when it was said
    (``said_at``; `memroute.time.expressions.days_named`)."""
    found = await _extract_batched(texts) if texts else []
    out = []
    for entities, producer in zip(found, producers, strict=True):
        speaker = speaker_entity(producer)
        if speaker is not None and all(e.key != speaker.key for e in entities):
            entities = [*entities, speaker]
        out.append(entities)
    if said_at is not None:
        out = await _with_days(texts, out, said_at)
    return out


def _day_expressions(entities: list[Entity], said_at: datetime | None) -> list[str]:
    """The DATE entities of a sentence that may name a day (`names_a_day`)."""
    if said_at is None:
        return []
    return [e.text for e in entities if e.label == "DATE" and names_a_day(e.text, said_at)]


async def _with_days(texts: list[str], found: list[list[Entity]],
                     said_at: list[datetime | None]) -> list[list[Entity]]:
    """Each sentence's entities and a `DAY_LABEL` entity per day it names (off the event
    loop, when any does); a sentence naming a weekday or a day of the month alone is parsed
    for its tense (`dates_told_in_past`)."""
    expressions = [_day_expressions(e, at) for e, at in zip(found, said_at, strict=True)]
    if not any(expressions):
        return found
    return await asyncio.to_thread(_add_days, texts, found, said_at, expressions)


def _add_days(texts: list[str], found: list[list[Entity]], said_at: list[datetime | None],
              expressions: list[list[str]]) -> list[list[Entity]]:
    out = []
    for text, entities, at, named in zip(texts, found, said_at, expressions, strict=True):
        if not named:
            out.append(entities)
            continue
        bare = [x for x in named if is_bare_day(x)]
        past = dates_told_in_past(text, bare) if bare else frozenset()
        days = [Entity(day.date().isoformat(), day_key(day), DAY_LABEL)
                for day in days_named(named, at, past)]
        out.append([*entities, *days])
    return out


_warned_no_model = False
# the entity keys of recent queries: a query searched again (the same question in another
# hop, its rerank, a retried request) gets them without a trip to the worker thread
_query_keys: OrderedDict[str, list[str]] = OrderedDict()
QUERY_KEYS_KEPT = 1024
_query_keys_lock = threading.Lock()


async def query_keys(query: str, enabled: bool) -> list[str]:
    """The entity keys of a query for the entity lane: [] when the lane is off, or (with one
    warning) when the spaCy model is missing, so search still works without it."""
    global _warned_no_model
    if not enabled:
        return []
    with _query_keys_lock:  # Memories on other threads' event loops share it
        kept = _query_keys.get(query)
        if kept is not None:
            _query_keys.move_to_end(query)
            return list(kept)
    try:
        keys = await asyncio.to_thread(query_entity_keys, query)
        with _query_keys_lock:
            _query_keys[query] = keys
            while len(_query_keys) > QUERY_KEYS_KEPT:
                _query_keys.popitem(last=False)
        return list(keys)
    except ModelUnavailableError as exc:
        if not _warned_no_model:
            log.warning("memory.entity_lane_skipped", reason=str(exc))
            _warned_no_model = True
        return []


def forget_query_keys() -> None:
    """Forget the kept entity keys of recent queries (a benchmark times their parse)."""
    with _query_keys_lock:
        _query_keys.clear()


def entity_columns(entities: list[Entity]) -> tuple[list[str], str]:
    """The ``entity_keys`` and ``entities`` values of one sentence (the days it names are
    keys only: `entities_of` gives what it names)."""
    return [e.key for e in entities], json.dumps(
        [e.as_json() for e in entities if e.label != DAY_LABEL])


def entity_lane_sql(schema: str, scope_key: str, keys: list[str], embedding: np.ndarray,
                    bound: ReadBound, limit: int, *, match: Sequence[dict] = ()) -> Lane:
    """The entity lane: sentences within ``bound`` (meeting ``match``) naming any of
    ``keys``, most keys matched first, then nearest to the query (GIN index on
    ``entity_keys``).

    At most ``ENTITY_CANDIDATES_PER_KEY`` sentences per key are ranked, the first the index
    gives: a name held by more sentences of the scope (a speaker's own name in a long
    conversation, "American" in an encyclopedia) costs the lane a bounded time, and the
    vector probe still finds the nearest of the rest. A sentence's matched keys are counted
    with one containment test per key, and only the best ``limit`` are numbered."""
    where, params = bound.sentences("s", match)
    matched = " + ".join(["(c.entity_keys @> ARRAY[%s]::text[])::int"] * len(keys))
    ctes = f"""entity_candidates AS (
            SELECT DISTINCT ON (c.episode_uid, c.idx) c.*
            FROM unnest(%s::text[]) AS k(key) CROSS JOIN LATERAL (
                SELECT s.episode_uid, s.idx, s.text, s.entity_keys, s.embedding
                FROM {schema}.sentences s
                WHERE s.scope_key = %s AND s.entity_keys @> ARRAY[k.key] AND {where}
                LIMIT %s) c
        ), entity AS (
            SELECT episode_uid, text, 1 - distance AS score,
                   row_number() OVER (ORDER BY matched DESC, distance) - 1 AS rank
            FROM (SELECT c.episode_uid, c.text, {matched} AS matched,
                         c.embedding <=> %s AS distance
                  FROM entity_candidates c
                  ORDER BY matched DESC, distance
                  LIMIT %s) best
        )"""
    return Lane("entity", ENTITY_ORDER, ctes,
                [keys, scope_key, *params, ENTITY_CANDIDATES_PER_KEY, *keys, embedding, limit])


async def backfill(conn: AsyncConnection, schema: str, batch: int = 256) -> int:
    """Extract the entities of sentences stored without them, then add the days named by
    sentences stored before days were kept, ``batch`` at a time; returns how many sentences
    were filled. Safe to interrupt and rerun."""
    filled = 0
    while True:
        cur = await conn.execute(
            f"SELECT scope_key, episode_uid, idx, text, producer, produced_at "
            f"FROM {schema}.sentences "
            "WHERE entity_keys IS NULL LIMIT %s", [batch])
        rows = await cur.fetchall()
        if not rows:
            break
        found = await sentence_entities([r[3] for r in rows], [r[4] for r in rows],
                                        [r[5] for r in rows])
        async with conn.transaction(), conn.cursor() as update:
            await update.executemany(
                f"UPDATE {schema}.sentences SET entity_keys = %s, entities = %s "
                "WHERE scope_key = %s AND episode_uid = %s AND idx = %s",
                [(*entity_columns(entities), r[0], r[1], r[2])
                 for r, entities in zip(rows, found, strict=True)])
        filled += len(rows)
    return filled + await _backfill_days(conn, schema, batch)


async def _backfill_days(conn: AsyncConnection, schema: str, batch: int) -> int:
    """Add the days its DATE entities name to each sentence that has none among its keys."""
    filled, after = 0, ("", "", -1)
    while True:
        cur = await conn.execute(
            f"SELECT scope_key, episode_uid, idx, text, produced_at, entities "
            f"FROM {schema}.sentences "
            "WHERE (scope_key, episode_uid, idx) > (%s, %s, %s) AND entities @> %s::jsonb "
            "AND NOT EXISTS (SELECT 1 FROM unnest(entity_keys) AS k WHERE k LIKE %s) "
            "ORDER BY scope_key, episode_uid, idx LIMIT %s",
            [*after, json.dumps([{"label": "DATE"}]), f"{DAY_KEY_PREFIX}%", batch])
        rows = await cur.fetchall()
        if not rows:
            return filled
        after = rows[-1][:3]
        stored = [[Entity(e["text"], e["key"], e["label"]) for e in r[5]] for r in rows]
        dated = await _with_days([r[3] for r in rows], stored, [r[4] for r in rows])
        days = [[e.key for e in entities if e.label == DAY_LABEL] for entities in dated]
        updates = [(keys, *r[:3]) for r, keys in zip(rows, days, strict=True) if keys]
        if updates:
            async with conn.transaction(), conn.cursor() as update:
                await update.executemany(
                    f"UPDATE {schema}.sentences SET entity_keys = entity_keys || %s::text[] "
                    "WHERE scope_key = %s AND episode_uid = %s AND idx = %s", updates)
        filled += len(updates)


async def entities_of(conn: AsyncConnection, schema: str, scope_key: str,
                      uids: list[str]) -> dict[str, list[Entity]]:
    """The stored entities of each episode (all its sentences, each key once, speaker
    included), by uid; episodes stored without extracted entities are left out."""
    if not uids:
        return {}
    cur = await conn.execute(
        f"SELECT episode_uid, entities FROM {schema}.sentences "
        "WHERE scope_key = %s AND episode_uid = ANY(%s) AND entities IS NOT NULL "
        "ORDER BY episode_uid, idx", [scope_key, list(dict.fromkeys(uids))])
    per_episode: dict[str, list] = {}
    for uid, entities in await cur.fetchall():
        per_episode.setdefault(uid, []).append(entities)
    return episode_entities(per_episode)


def episode_entities(sentences: dict[str, list]) -> dict[str, list[Entity]]:
    """Per episode uid, the entities stored for its sentences (``entities`` column values
    in sentence order), each key once, first mention kept."""
    out: dict[str, list[Entity]] = {}
    for uid, rows in sentences.items():
        found: dict[str, Entity] = {}
        for entities in rows:
            for e in entities if isinstance(entities, list) else json.loads(entities):
                found.setdefault(e["key"], Entity(e["text"], e["key"], e["label"]))
        out[uid] = list(found.values())
    return out
