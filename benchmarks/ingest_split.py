"""Where ingestion with entities' time goes, one writer, batches of 500: the embedder alone,
spaCy's extraction alone, both side by side (as `EpisodeWriter.prepare` runs them), each
`prepare` and its write apart, and `Memory.add_batches` (pipelined), without and with
entities: wall and CPU (this process and the embedded server) per sentence, each printed when
done. A one-off tool (issue 48): ``python -m benchmarks.ingest_split [N] [ROUNDS]`` with a
private ``MEMROUTE_HOME`` and ``MEMROUTE_DATA_DIR``.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.memory import _fresh_ingest_memory, episodes_for, server_cpu_seconds, \
    shared_sentences
from memroute.memory import Scope
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.memory.entity_sql import sentence_entities
from memroute.memory.splitter import split_sentences
from memroute.settings import MemrouteSettings

BATCH = 500


async def main(n: int, rounds: int) -> None:
    texts = shared_sentences(Path(os.environ.get("MEMROUTE_DATA_DIR", "../shared/data")))
    random.Random(0).shuffle(texts)
    texts = [t for t in texts[:3 * n] if split_sentences(t) == [t]][:n]
    n = len(texts)
    embedder = MiniLMOnnxEmbedder(threads=2)
    settings = MemrouteSettings().model_copy(update={"embed_threads": 2, "db_schema": "bench"})
    batches = [texts[i:i + BATCH] for i in range(0, n, BATCH)]
    scope = Scope(org_id="bench", project_id="ingest")

    def extract(batch: list[str]):
        return sentence_entities(batch, ["system"] * len(batch))

    await embedder.embed_documents(batches[0][:20])
    for batch in batches:  # the models loaded, the repeated words kept
        await extract(batch)
    figures: dict[str, list[tuple[float, float]]] = {}

    async def timed(name: str, run) -> None:
        wall, cpu = time.perf_counter(), time.process_time() + server_cpu_seconds(settings)
        await run()
        wall = (time.perf_counter() - wall) * 1000 / n
        cpu = (time.process_time() + server_cpu_seconds(settings) - cpu) * 1000 / n
        figures.setdefault(name, []).append((wall, cpu))
        print(f"{name:<28} wall {wall:7.2f}  cpu {cpu:6.2f} ms per sentence  "
              f"{1000 / wall:7.1f}/s", flush=True)

    for _ in range(rounds):
        async def embed_only() -> None:
            for batch in batches:
                await embedder.embed_documents(batch)

        async def extract_only() -> None:
            for batch in batches:
                await extract(batch)

        async def side_by_side() -> None:
            for batch in batches:
                await asyncio.gather(embedder.embed_documents(batch), extract(batch))

        await timed("embedder alone", embed_only)
        await timed("extraction alone", extract_only)
        await timed("both side by side", side_by_side)
        for entities in (False, True):
            kind = settings.model_copy(update={"extract_entities": entities})
            memory = await _fresh_ingest_memory(kind, embedder)
            episodes = [episodes_for(texts[i:i + BATCH], i) for i in range(0, n, BATCH)]
            prepared = []

            async def prepare() -> None:
                for batch in episodes:
                    prepared.append(await memory._writer.prepare(scope, batch))

            async def write() -> None:
                for one in prepared:
                    await memory._writer.commit(one)

            await timed(f"prepare, entities {entities}", prepare)
            await timed(f"write, entities {entities}", write)
            await memory.close()
            memory = await _fresh_ingest_memory(kind, embedder)

            async def pipelined() -> None:
                async for _ in memory.add_batches(scope, episodes):
                    pass

            await timed(f"add_batches, entities {entities}", pipelined)
            await memory.close()
    print("medians:")
    for name, values in figures.items():
        wall, cpu = (float(np.median([v[i] for v in values])) for i in (0, 1))
        print(f"{name:<28} wall {wall:7.2f}  cpu {cpu:6.2f} ms per sentence")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000,
                     int(sys.argv[2]) if len(sys.argv) > 2 else 1))
