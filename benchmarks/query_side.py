"""The query side of one search, before the statement: the query's embedding and its entity
keys, which `Memory.search_scored` computes side by side (``asyncio.gather``).

Variants are alternated query by query in one process (the order flips every query), so a
change in the machine's load hits them alike; compare them as ratios within one run::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.query_side \\
        --queries 200

Prints, per variant, the wall time of one query's embedding (p50/p95) and its cosine to the
documents' model; the CPU time of the entity keys, lean and from a full parse; and the wall
time of the two together as a search runs them, against each alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

from memroute import nlp
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder

DATA = Path(__file__).resolve().parents[2] / "shared/data"


def questions(n: int) -> list[str]:
    """``n`` HotpotQA questions, then LoCoMo's (from the shared data beside the repo)."""
    hotpot = [json.loads(line)["question"] for line in
              (DATA / "hotpotqa/hotpotqa_dev_distractor_800.jsonl").open()]
    locomo = [qa["question"] for conversation in
              json.loads((DATA / "locomo/locomo10_conv0-6.json").read_text())
              for qa in conversation["qa"]]
    return (hotpot + locomo)[:n]


def stats(values: list[float]) -> str:
    return f"p50 {np.percentile(values, 50):6.2f}  p95 {np.percentile(values, 95):6.2f}"


def full_parse_keys(text: str) -> list[str]:
    """The keys from a full parse that is not kept (the parse `query_entity_keys` skips)."""
    pipeline = nlp.load_pipeline(nlp.QUERY)
    with pipeline.memory_zone():
        return nlp._keys_of(pipeline(text[:nlp.MAX_PARSED_QUERY_CHARS]))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--switch-interval-ms", type=float, default=None,
                        help="the interpreter's GIL switch interval (default: Python's, 5 ms)")
    args = parser.parse_args()
    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000)
    texts = questions(args.queries)
    embedders = {
        f"{model} x{threads}": MiniLMOnnxEmbedder(threads=threads, query_model=model,
                                                  query_threads=threads,
                                                  cache_dir=args.cache_dir)
        for model in ("same", "int8-dynamic") for threads in (1, 2)}
    for text in texts[:10]:  # warm-up: sessions, pipelines
        for embedder in embedders.values():
            await embedder.embed_query(text)
        nlp.query_entity_keys(text)
        full_parse_keys(text)

    walls: dict[str, list[float]] = {name: [] for name in embedders}
    vectors: dict[str, list[np.ndarray]] = {name: [] for name in embedders}
    for i, text in enumerate(texts):
        names = list(embedders)[:: 1 if i % 2 else -1]
        for name in names:
            start = time.perf_counter()
            vectors[name].append(await embedders[name].embed_query(text))
            walls[name].append((time.perf_counter() - start) * 1000)
    documents = embedders["same x1"].encode(texts)
    print(f"query embedding, {len(texts)} questions (wall ms, one query at a time):")
    base = np.percentile(walls["same x2"], 50)
    for name, times in walls.items():
        cosine = (np.array(vectors[name]) * documents).sum(axis=1)
        print(f"  {name:16s} {stats(times)}  x{np.percentile(times, 50) / base:.2f} of same x2"
              f"  cosine to documents' model min {cosine.min():.5f} mean {cosine.mean():.5f}")

    lean, full = [], []
    for i, text in enumerate(texts):
        for which in (("lean", "full") if i % 2 else ("full", "lean")):
            start = time.thread_time()
            keys = nlp.query_entity_keys(text) if which == "lean" else full_parse_keys(text)
            (lean if which == "lean" else full).append((time.thread_time() - start) * 1000)
            if which == "lean":
                lean_keys = keys
            else:
                full_keys = keys
        assert lean_keys == full_keys, text
    print(f"entity keys (CPU ms): lean {stats(lean)}  full parse {stats(full)}  "
          f"lean/full p50 x{np.percentile(lean, 50) / np.percentile(full, 50):.2f}")

    async def lean_keys(text: str) -> list[str]:
        return await asyncio.to_thread(nlp.query_entity_keys, text)

    async def full_keys(text: str) -> list[str]:
        return await asyncio.to_thread(full_parse_keys, text)

    # the first: the search before the lean keys and the query model (the defaults of then)
    configs = [("same x2", full_keys), ("same x2", lean_keys), ("same x1", lean_keys),
               ("int8-dynamic x1", lean_keys), ("int8-dynamic x2", lean_keys)]
    parts = {c: {"embed": [], "keys": [], "both": []} for c in configs}
    for i, text in enumerate(texts):
        for config in configs[:: 1 if i % 2 else -1]:
            name, keys = config
            embedder = embedders[name]
            for part in (("embed", "keys", "both") if i % 2 else ("both", "keys", "embed")):
                start = time.perf_counter()
                if part == "embed":
                    await embedder.embed_query(text)
                elif part == "keys":
                    await keys(text)
                else:
                    await asyncio.gather(embedder.embed_query(text), keys(text))
                parts[config][part].append((time.perf_counter() - start) * 1000)
    print("embedding and keys (wall ms), alone and together (asyncio.gather, as a search):")
    main_both = np.percentile(parts[configs[0]]["both"], 50)
    for (name, keys), times in parts.items():
        slower = np.maximum(times["embed"], times["keys"])
        label = f"{name}, {'full' if keys is full_keys else 'lean'} keys"
        print(f"  {label:27s} embed {stats(times['embed'])} | keys {stats(times['keys'])}"
              f" | both {stats(times['both'])} x{np.percentile(times['both'], 50) / main_both:.2f}"
              f" | both / slower alone p50 x{np.median(np.array(times['both']) / slower):.2f}")


if __name__ == "__main__":
    asyncio.run(main())
