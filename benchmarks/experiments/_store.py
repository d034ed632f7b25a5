"""The 100k bench store (built by `benchmarks.memory` in the same ``MEMROUTE_HOME``)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.memory import questions
from memroute.memory import Memory, Scope
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.settings import MemrouteSettings

DATA = Path("../shared/data")
SCHEMA, SCOPE = "bench_v2_100000", Scope(org_id="bench", project_id="100000")


async def open_bench(threads: int = 2) -> Memory:
    settings = MemrouteSettings().model_copy(update={"embed_threads": threads,
                                                     "db_schema": "bench",
                                                     "query_cache_size": 0})
    return await Memory.open(settings=settings, schema=SCHEMA,
                             embedder=MiniLMOnnxEmbedder(threads=threads, query_model="auto"))


def hotpot_questions(n: int) -> list[str]:
    return questions(DATA, n)
