"""Build (or reuse) the evaluation store of a data slice, as the protocol describes.

Wikipedia sets: every sentence of every paragraph becomes an episode ``"{title}: {sentence}"``,
exact duplicates once, all in ONE scope and session, shuffled with a fixed seed, with strictly
increasing timestamps. LoCoMo: one scope per conversation, one episode per turn.

Ingestion is cached: the schema is named from a hash of the slice, the seed and the embedder,
so a later run with the same inputs reuses it, and an interrupted ingestion resumes (``add`` is
idempotent by uid and uids derive from the content).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from memroute._log import get_logger

from memroute.evals.datasets import Dataset, Question
from memroute.memory import Episode, Memory, Scope
from memroute.memory.embedders import Embedder

log = get_logger(__name__)

STORE_FORMAT = "v2"  # bump when what a store keeps changes (v2: the days sentences name)
POOLED_SESSION = "pooled"
START = datetime(2024, 1, 1, tzinfo=timezone.utc)
BATCH = 512

Progress = Callable[[int, int], None]  # (done, total)


def content_uid(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()[:32]


def pooled_episodes(dataset: Dataset, seed: int) -> list[Episode]:
    """The shuffled, deduplicated sentence episodes of a Wikipedia data set."""
    contents: dict[str, str] = {}  # content -> title, first occurrence wins
    for question in dataset.questions:
        for paragraph in question.paragraphs:
            for content in paragraph.contents():
                contents.setdefault(content, paragraph.title)
    return _shuffled(list(contents), contents, seed)


def _shuffled(order: list[str], titles: dict[str, str], seed: int) -> list[Episode]:
    """One pooled session of ``order``'s contents, shuffled with ``seed``, timestamps rising."""
    random.Random(seed).shuffle(order)
    return [
        Episode(uid=content_uid(c), content=c, producer="system", session_id=POOLED_SESSION,
                produced_at=START + timedelta(seconds=i), metadata={"title": titles[c]})
        for i, c in enumerate(order)
    ]


def passage_episodes(datasets: list[Dataset], seed: int) -> list[Episode]:
    """The passage protocol's store: every context paragraph of every question of
    ``datasets`` as one episode ``"{title}: {text}"`` (exact duplicates once), shuffled.

    The order before shuffling is sorted, so the same data sets give the same store whichever
    of them is the one evaluated."""
    contents: dict[str, str] = {}  # passage -> title
    for dataset in datasets:
        for question in dataset.questions:
            for paragraph in question.paragraphs:
                if any(s.strip() for s in paragraph.sentences):
                    contents.setdefault(paragraph.passage(), paragraph.title)
    return _shuffled(sorted(contents), contents, seed)


def conversation_episodes(dataset: Dataset, conversation: str) -> list[Episode]:
    return [
        Episode(uid=t.uid, content=t.text, producer=t.speaker, session_id=t.session_id,
                produced_at=t.produced_at, metadata={"dia_id": t.dia_id})
        for t in dataset.conversations[conversation]
    ]


def schema_name(dataset: Dataset, seed: int, embedder_name: str) -> str:
    key = f"{STORE_FORMAT}|{dataset.name}|{dataset.store_key}|{seed}|{embedder_name}"
    return f"ev_{dataset.name}_{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def passage_schema_name(datasets: list[Dataset], seed: int, embedder_name: str) -> str:
    """One schema per pool of data slices (in any order), seed and embedder."""
    parts = sorted({f"{d.name}:{d.store_key}" for d in datasets})
    key = f"{STORE_FORMAT}|passage|{'|'.join(parts)}|{seed}|{embedder_name}"
    return f"ev_passages_{hashlib.sha256(key.encode()).hexdigest()[:16]}"


@dataclass
class EvalStore:
    """An ingested store and the scope each question searches."""

    memory: Memory
    schema: str
    scopes: dict[str, Scope]  # "" -> the pooled scope, else conversation id -> scope
    episodes: int
    ingest_s: float
    reused: bool
    added: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def scope_for(self, question: Question) -> Scope:
        return self.scopes[question.conversation or ""]


def _scope(project: str, conversation: str | None) -> Scope:
    return Scope(org_id="memroute-eval", project_id=project, user_id=conversation or "pooled")


PASSAGE_PROJECT = "passages"


def planned_episodes(dataset: Dataset, seed: int) -> dict[str, list[Episode]]:
    """What the store must hold, per scope key ("" for the pooled scope)."""
    if dataset.is_conversational:
        return {c: conversation_episodes(dataset, c) for c in dataset.conversations}
    return {"": pooled_episodes(dataset, seed)}


async def build_store(dataset: Dataset, memory: Memory, seed: int,
                      progress: Progress | None = None, *,
                      pool: list[Dataset] | None = None) -> EvalStore:
    """Ingest what is missing into ``memory`` (opened on `schema_name`, or on
    `passage_schema_name` when ``pool`` is given: the passage protocol's store of ``dataset``
    and ``pool``) and describe it."""
    start = time.perf_counter()
    if pool is None:
        plan = planned_episodes(dataset, seed)
        project = dataset.name
    else:
        plan = {"": passage_episodes([dataset, *pool], seed)}
        project = PASSAGE_PROJECT
    scopes = {key: _scope(project, key or None) for key in plan}
    total = sum(len(v) for v in plan.values())
    missing: list[tuple[Scope, list[Episode]]] = []
    done = 0
    for key, episodes in plan.items():
        have = (await memory.count(scopes[key]))["episodes"]
        if have >= len(episodes):
            done += len(episodes)
        else:
            missing.append((scopes[key], episodes))
    if progress:
        progress(done, total)
    added = 0
    for scope, episodes in missing:
        batches = (episodes[i:i + BATCH] for i in range(0, len(episodes), BATCH))
        async for uids in memory.add_batches(scope, batches):
            added += len(uids)
            done += len(uids)
            if progress:
                progress(done, total)
    elapsed = time.perf_counter() - start
    log.info("eval.store", schema=memory.schema, episodes=total, added=added,
             seconds=round(elapsed, 1))
    return EvalStore(memory, memory.schema, scopes, total, elapsed, reused=not missing,
                     added=added)


async def open_store(dataset: Dataset, *, seed: int, embedder: Embedder,
                     reranker: str | None, settings, progress: Progress | None = None,
                     pool: list[Dataset] | None = None) -> EvalStore:
    """Open the cached schema for this slice and embedder, ingesting what is missing.

    ``pool`` (the passage protocol; may be empty): one episode per paragraph of ``dataset``
    and of the ``pool`` data sets, in one scope."""
    schema = (schema_name(dataset, seed, embedder.name) if pool is None
              else passage_schema_name([dataset, *pool], seed, embedder.name))
    memory = await Memory.open(schema=schema, embedder=embedder, reranker=reranker,
                               settings=settings)
    try:
        return await build_store(dataset, memory, seed, progress, pool=pool)
    except BaseException:
        await memory.close()
        raise
