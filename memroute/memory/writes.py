"""The write pipeline behind `Memory.add` and `Memory.upsert`: validate, skip stored uids
(add) or replace them (upsert), split (a sentence longer than the embedder reads becomes
overlapping windows, one index row each), embed, then write everything in one transaction."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from memroute._log import get_logger
from memroute.errors import InvalidInputError, ModelUnavailableError
from memroute.memory.embedders import Embedder
from memroute.memory.entity_sql import entity_columns, sentence_entities
from memroute.memory.limits import MAX_CHARS_PER_CALL, MAX_EPISODES_PER_CALL
from memroute.memory.models import (
    Episode,
    Scope,
    coerce_episode,
    json_text,
    reserved_metadata_problem,
    with_default_uids,
)
from memroute.memory.retry import with_retry
from memroute.memory.tiers import STATE_SQL, ScopeTiers, state_params
from memroute.memory.splitter import split_sentences
from memroute.nlp import Entity

log = get_logger(__name__)
_warned_no_entities = False
# the sentences table's columns as `EpisodeWriter` copies them (binary COPY)
SENTENCE_COPY_TYPES = ["text", "text", "int4", "text", "vector", "text", "text", "timestamptz",
                       "jsonb", "text[]", "jsonb"]


def _json(text: str) -> Jsonb:
    """A JSON text as a jsonb value of a binary COPY (not encoded again)."""
    return Jsonb(text, dumps=str)


async def _none() -> None:
    return None


async def _entities_or_none(texts: list[str], producers: list[str],
                            said_at: list[datetime | None]) -> list[list[Entity]] | None:
    """The sentences' entities, or ``None`` (with one warning) when the spaCy model is
    missing: the episodes are stored anyway and `memroute db backfill-entities` adds them."""
    global _warned_no_entities
    try:
        return await sentence_entities(texts, producers, said_at)
    except ModelUnavailableError as exc:
        if not _warned_no_entities:
            log.warning("memory.entities_skipped", reason=str(exc))
            _warned_no_entities = True
        return None


@dataclass
class PreparedAdd:
    """An `add` between embedding and writing."""

    scope: Scope
    uids: list[str]
    new: list[Episode] = field(default_factory=list)
    sentences: list[tuple[Episode, int, str]] = field(default_factory=list)
    vectors: np.ndarray | None = None
    entities: list[list[Entity]] | None = None  # None: not extracted (backfilled later)
    skipped: int = 0
    replace: bool = False  # upsert: stored uids get the new content and sentences
    # after the write: the scope's sentences (counted up to the bound) and whether it has a
    # leaf of its own (None: it has none), for `ScopeTiers.after_write`
    scope_state: tuple[int, bool | None] | None = None


@dataclass(frozen=True)
class EpisodeWriter:
    """Writes episodes and their embedded sentences into one schema of the store."""

    pool: AsyncConnectionPool
    schema: str
    embedder: Embedder
    extract_entities: bool = False
    # told the scope's `PreparedAdd.scope_state` once a write is committed, unless it knows
    # the scope has a leaf of its own
    scope_tiers: ScopeTiers | None = None

    async def add(self, scope: Scope, episodes: list[Episode | dict]) -> list[str]:
        prepared = await self.prepare(scope, episodes)
        await self.commit(prepared)
        return prepared.uids

    async def upsert(self, scope: Scope, episodes: list[Episode | dict]) -> list[str]:
        """Like `add`, but a stored uid is replaced: its row takes the new fields (its
        ``created_at`` stays) and its sentences are re-embedded, in one transaction. The last
        of several episodes with one uid wins."""
        prepared = await self.prepare(scope, episodes, replace=True)
        await self.commit(prepared)
        return prepared.uids

    async def add_batches(self, scope: Scope, batches: Iterable[list[Episode | dict]]
                          ) -> AsyncIterator[list[str]]:
        """Each batch like `add`, the next one embedded while the previous one is written."""
        remaining = iter(batches)
        first = next(remaining, None)
        preparing = None if first is None else asyncio.ensure_future(self.prepare(scope, first))
        try:
            while preparing is not None:
                prepared = await preparing
                following = next(remaining, None)
                preparing = None if following is None else asyncio.ensure_future(
                    self.prepare(scope, following))
                await self.commit(prepared)
                yield prepared.uids
        finally:
            if preparing is not None and not preparing.done():
                preparing.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await preparing

    async def prepare(self, scope: Scope, episodes: list[Episode | dict], *,
                      replace: bool = False, store_items: bool = False) -> PreparedAdd:
        """Validate, skip the uids stored already (unless ``replace``), split and embed;
        nothing is written. Only the store face's own writes (``store_items``) may name its
        metadata keys (`memroute.memory.models.STORE_METADATA_KEYS`)."""
        if not isinstance(episodes, (list, tuple)):
            raise InvalidInputError("episodes must be a list")
        if len(episodes) > MAX_EPISODES_PER_CALL:
            raise InvalidInputError(
                f"{len(episodes)} episodes in one call; the limit is {MAX_EPISODES_PER_CALL} "
                "(one transaction): use add_batches for more")
        items = with_default_uids(scope, [coerce_episode(e, i) for i, e in enumerate(episodes)])
        if not store_items:
            for position, episode in enumerate(items):
                if problem := reserved_metadata_problem(episode.metadata):
                    raise InvalidInputError(f"episode #{position}: {problem}")
        if (chars := sum(len(e.content) for e in items)) > MAX_CHARS_PER_CALL:
            raise InvalidInputError(
                f"{chars} characters of content in one call; the limit is {MAX_CHARS_PER_CALL}:"
                " use add_batches with smaller batches")
        prepared = PreparedAdd(scope, [e.uid for e in items], replace=replace)
        unique: dict[str, Episode] = {}
        for episode in items:
            if replace:
                unique.pop(episode.uid, None)
                unique[episode.uid] = episode
            else:
                unique.setdefault(episode.uid, episode)
        if not unique:
            return prepared
        if replace:
            prepared.new = list(unique.values())
            return await self._embed(prepared)

        async def existing_uids() -> set[str]:
            async with self.pool.connection() as conn:
                cur = await conn.execute(
                    f"SELECT uid FROM {self.schema}.episodes "
                    "WHERE scope_key = %s AND uid = ANY(%s::text[])",
                    [scope.key, list(unique)],
                )
                return {row[0] for row in await cur.fetchall()}

        existing = await with_retry(existing_uids, "add")
        prepared.skipped = len(existing)
        prepared.new = [e for uid, e in unique.items() if uid not in existing]
        if not prepared.new:
            return prepared
        return await self._embed(prepared)

    async def _embed(self, prepared: PreparedAdd) -> PreparedAdd:
        windows = getattr(self.embedder, "token_windows", None) or (lambda text: [text])
        prepared.sentences = [
            (e, i, text) for e in prepared.new
            for i, text in enumerate(w for sentence in split_sentences(e.content)
                                     for w in windows(sentence))]
        texts = [t for _, _, t in prepared.sentences]
        vectors, prepared.entities = await asyncio.gather(
            self.embedder.embed_documents(texts),
            _entities_or_none(texts, [e.producer for e, _, _ in prepared.sentences],
                              [e.produced_at for e, _, _ in prepared.sentences])
            if self.extract_entities else _none())
        if getattr(vectors, "shape", None) != (len(prepared.sentences), self.embedder.dim):
            raise ModelUnavailableError(
                f"embedder {self.embedder.name} returned {getattr(vectors, 'shape', None)} "
                f"for {len(prepared.sentences)} sentences of dimension {self.embedder.dim}; "
                "nothing stored"
            )
        if not np.isfinite(vectors).all():
            raise ModelUnavailableError(
                f"embedder {self.embedder.name} returned NaN or infinite values for "
                f"{int((~np.isfinite(vectors).all(axis=1)).sum())} of "
                f"{len(prepared.sentences)} sentences; nothing stored")
        prepared.vectors = vectors
        return prepared

    async def commit(self, prepared: PreparedAdd) -> None:
        """Write a prepared add (retried as a whole: it is idempotent by uid)."""
        if not prepared.new:
            return
        await with_retry(lambda: self._write(prepared), "add")
        self.after_commit(prepared)
        log.debug("memory.add", episodes=len(prepared.new), sentences=len(prepared.sentences),
                  skipped=prepared.skipped)

    def after_commit(self, prepared: PreparedAdd) -> None:
        """Once a `write_in` of ``prepared`` is committed: a scope it took to the bound is
        moved to a leaf of its own in the background (`ScopeTiers.after_write`)."""
        if self.scope_tiers is not None and prepared.scope_state is not None:
            self.scope_tiers.after_write(prepared.scope.key, *prepared.scope_state)

    async def _write(self, prepared: PreparedAdd) -> None:
        async with self.pool.connection() as conn, conn.transaction():
            await self.write_in(conn, prepared)

    async def write_in(self, conn: AsyncConnection, prepared: PreparedAdd) -> None:
        """Write a prepared add on ``conn``, inside the transaction its caller holds (the
        store items of `memory.items` and their episodes commit together)."""
        if not prepared.new:
            return
        s, scope = self.schema, prepared.scope
        await conn.execute("DROP TABLE IF EXISTS pg_temp._memroute_new")
        await conn.execute(
            "CREATE TEMP TABLE _memroute_new (ord int, uid text, session_id text, producer text, "
            "produced_at timestamptz, content text, metadata jsonb) ON COMMIT DROP"
        )
        async with conn.cursor().copy(
            "COPY _memroute_new (ord, uid, session_id, producer, produced_at, content, metadata) "
            "FROM STDIN"
        ) as copy:
            metadata = {e.uid: json_text(e.metadata) for e in prepared.new}
            for i, e in enumerate(prepared.new):
                await copy.write_row([i, e.uid, e.session_id, e.producer, e.produced_at,
                                      e.content, metadata[e.uid]])
        cur = await conn.execute(
            f"""
            INSERT INTO {s}.episodes (scope_key, org_id, project_id, user_id, agent_id, uid,
                                      session_id, producer, produced_at, content, metadata)
            SELECT %s, %s, %s, %s, %s, uid, session_id, producer, produced_at, content, metadata
            FROM _memroute_new ORDER BY ord
            ON CONFLICT (scope_key, uid) DO {self._on_conflict(prepared)}
            RETURNING uid
            """,
            [scope.key, scope.org_id, scope.project_id, scope.user_id, scope.agent_id],
        )
        inserted = {row[0] for row in await cur.fetchall()}
        if prepared.replace:  # the replaced episodes' old sentences go in this transaction
            await conn.execute(
                f"DELETE FROM {s}.sentences WHERE scope_key = %s "
                "AND episode_uid = ANY(%s::text[])", [scope.key, list(inserted)])
        # binary: a vector as text took ~0.2 ms of this process's CPU per sentence to
        # format (8 KB of decimals) and the server more to parse
        async with conn.cursor().copy(
            f"COPY {s}.sentences (scope_key, episode_uid, idx, text, embedding, session_id, "
            "producer, produced_at, metadata, entity_keys, entities) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(SENTENCE_COPY_TYPES)
            entities = prepared.entities or [None] * len(prepared.sentences)
            for (e, idx, text), vector, found in zip(prepared.sentences, prepared.vectors,
                                                     entities, strict=True):
                if e.uid in inserted:  # a concurrent add of the same uid wrote its own
                    keys, details = (None, None) if found is None else entity_columns(found)
                    await copy.write_row([scope.key, e.uid, idx, text, vector, e.session_id,
                                          e.producer, e.produced_at, _json(metadata[e.uid]), keys,
                                          None if details is None else _json(details)])
        tiers = self.scope_tiers
        if tiers is not None and not tiers.known_placed(scope.key):
            cur = await conn.execute(STATE_SQL.format(schema=s), state_params(
                s, scope.key, tiers.min_sentences))
            prepared.scope_state = await cur.fetchone()

    @staticmethod
    def _on_conflict(prepared: PreparedAdd) -> str:
        if not prepared.replace:
            return "NOTHING"
        return ("UPDATE SET session_id = EXCLUDED.session_id, producer = EXCLUDED.producer, "
                "produced_at = EXCLUDED.produced_at, content = EXCLUDED.content, "
                "metadata = EXCLUDED.metadata")
