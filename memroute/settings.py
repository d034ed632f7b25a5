"""Configuration from the environment (``MEMROUTE_*``) through pydantic-settings."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_home() -> Path:
    """Where memroute keeps its data when ``MEMROUTE_HOME`` is unset.

    As root, the embedded server runs as an OS user ``pgserver`` and widens the
    permissions of every parent of its data directory, so root's data lives under
    ``/var/lib/memroute`` rather than inside ``/root``.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/memroute")
    return Path(platformdirs.user_data_dir("memroute", appauthor=False))


class MemrouteSettings(BaseSettings):
    """Every setting can be given as an environment variable ``MEMROUTE_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="MEMROUTE_", env_file=".env", extra="ignore")

    home: Path = Field(default_factory=default_home)
    database_url: str | None = None
    # streaming replicas for searches and reads, space-separated (memroute.memory.replicas);
    # writes and API key checks stay on the primary (database_url, or the embedded server)
    read_database_url: str | None = None
    # a replica lagging more than this behind the primary is left out until it catches up
    read_max_lag_s: float = Field(default=5.0, gt=0)
    db_schema: str = "memroute"
    pool_min_size: int = 1
    pool_max_size: int = 8
    pool_timeout_s: float = 30.0
    maintenance_work_mem: str = "1GB"
    # read the embedded server's store into memory in the background after `Memory.open`
    # (memroute.memory.warm). Off: on a cold 1M-sentence store the reading competed with the
    # first searches for the disk (docs/benchmarks.md, "A cold store"); `memroute db warm`
    # warms on demand.
    warm_on_open: bool = False

    embedder: str = "minilm"  # minilm | e5 | openai:<model> | sentence-transformers
    reranker: str = "offline"  # offline | flashrank[:<model>] | none
    flashrank_cache_dir: Path | None = None
    embed_threads: int = Field(default_factory=lambda: min(2, os.cpu_count() or 1))
    embed_batch_size: int = 16  # MiniLM int8: 81 sentences/s at 16, 49 at 64 (padding)
    # the model MiniLM embeds queries with: "int8-dynamic" (the same int8 weights multiplied
    # in int8: about half the time per query, vectors within cosine 0.99; built once into
    # model_cache_dir), "same" as documents, or "auto": int8-dynamic unless it cannot be
    # built (then "same", with a warning); a store's vectors are the documents' model's
    query_model: Literal["auto", "same", "int8-dynamic"] = "auto"
    # None: 1 for int8-dynamic (a second thread took the query parse's core), else embed_threads
    query_embed_threads: int | None = Field(default=None, ge=1)
    model_cache_dir: Path | None = None  # None: the user cache directory's memroute/models
    query_cache_size: int = Field(default=256, ge=0)  # recent query vectors kept per Memory
    # episodes whose stored sentence vectors a Memory keeps after a search, so the graph's
    # final rerank (whose state holds no vectors) does not read the store again
    stored_vector_cache_size: int = Field(default=4096, ge=0)

    # The full-text lane (the query's rarest terms, fused with the vector lane): on, since
    # it searches only the rarest terms (about +15% per auto retrieval, idle) and raised
    # recall on every shared set (docs/research.md, "The full-text lane, cheap").
    lexical: bool = True
    # The entity index (spaCy NER per sentence at ingestion) and the entity lane of search
    # (memroute.memory.entity_sql): on, since the lane raised direct search on conversations
    # and lost nothing elsewhere (docs/research.md); the lane needs the index (stores
    # written before it: memroute db backfill-entities).
    entity_lane: bool = True
    extract_entities: bool = True
    candidates: int = 60
    # a scope of this many sentences or more is moved to a partition of its own, searched
    # through indexes of its own (vectors, full text, entity keys), after the write that takes
    # it there; a smaller one shares its bucket's partition and is searched by an exact scan
    # of its rows (memroute.memory.tiers; docs/scaling.md, "Many tenants in one store")
    scope_index_min_sentences: int = Field(default=5_000, ge=1)
    # the buckets the small scopes are hashed into, fixed when a store is created: more
    # buckets, a shorter pause of a bucket's scopes while a scope moves out of it; fewer, a
    # faster creation (each bucket is two tables and their indexes)
    scope_buckets: int = Field(default=64, ge=1, le=1000)
    # scopes moved between tiers at once, each over one connection of the pool
    scope_moves_at_once: int = Field(default=1, ge=1)
    # every statement of a search transaction; a lexical lane past it is dropped from that
    # search (a warning), any other statement raises StatementTimeoutError
    search_statement_timeout_ms: int = Field(default=2000, ge=1, le=600_000)
    rerank_fusion: Literal["max", "mean", "rrf"] = "max"

    # offline: never a model; llm: the MEMROUTE_LLM_* model (an error without one); cascade:
    # offline first, the model below cascade_threshold; auto: the model when
    # MEMROUTE_LLM_MODEL is set, else offline.
    planner: Literal["auto", "offline", "llm", "cascade"] = "auto"
    cascade_threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    # the chain hops whose judgment the cascade may ask the model for (later: offline)
    cascade_judge_hops: int = Field(default=1, ge=0, le=10)
    # the offline planner parses questions with spaCy (memroute.planners.offline.parsed);
    # on since it beat the surface heuristics on the shared sets (docs/research.md)
    offline_parse: bool = True
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str | None = None
    llm_router_model: str | None = None
    llm_timeout_s: float = 30.0
    llm_max_retries: int = 2

    openai_embedding_model: str = "text-embedding-3-small"


@lru_cache(maxsize=1)
def get_settings() -> MemrouteSettings:
    """The process-wide settings, read once from the environment."""
    return MemrouteSettings()
