"""What a page of a `MemrouteStore` search with a query costs, without ``embed`` (memroute's
agent ranks the items' episodes; `memroute._store_indexes.RANK_DEPTHS`).

The agent's order at k depends on k, so a page no longer ranks ``offset + limit`` results
(the old way, whose consecutive pages could repeat an item and skip another): it reads the
agent's rankings at the fixed depths up to its end, each adding what the ones before did not
rank. This times pages of 10 at offsets 0, 10 and 30 both ways, on tenants of 100 and 1,000
items (HotpotQA paragraphs, ~4 sentences each; the queries are questions about them), in one
process, the two ways alternating query by query::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \\
        .venv/bin/python -m benchmarks.store_pages --queries 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from langgraph.store.base import PutOp

import memroute._store_indexes as store_indexes
from memroute.errors import StatementTimeoutError
from memroute.langgraph_store import MemrouteStore
from memroute.memory import Memory, Scope
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
from memroute.settings import MemrouteSettings

LADDER = store_indexes.RANK_DEPTHS


def hotpot(data_dir: Path, items: int) -> tuple[list[str], list[str]]:
    """``items`` paragraphs (the contexts of the first questions, in order) and the
    questions, those about the paragraphs first."""
    paragraphs: dict[str, str] = {}
    questions = []
    with (data_dir / "hotpotqa" / "hotpotqa_dev_distractor_800.jsonl").open() as lines:
        for line in lines:
            record = json.loads(line)
            questions.append(record["question"])
            for title, sentences in zip(record["context"]["title"],
                                        record["context"]["sentences"]):
                if len(paragraphs) < items:
                    paragraphs.setdefault(title, "".join(sentences))
    return list(paragraphs.values()), questions


async def timed_page(store: MemrouteStore, query: str, offset: int, depths: tuple[int, ...]
                     ) -> tuple[float, float, bool]:
    """Wall and process CPU milliseconds of one page of 10, ranked at ``depths``, and
    whether the search statement timed out."""
    store_indexes.RANK_DEPTHS = depths
    cpu, start = time.process_time(), time.perf_counter()
    try:
        await store.asearch(("wiki",), query=query, limit=10, offset=offset)
        timed_out = False
    except StatementTimeoutError:
        timed_out = True
    finally:
        store_indexes.RANK_DEPTHS = LADDER
    return ((time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000,
            timed_out)


async def run(args: argparse.Namespace) -> None:
    home = Path(args.home or tempfile.mkdtemp(prefix="memroute-store-pages-"))
    settings = MemrouteSettings(home=home, embed_threads=1)
    memory = await Memory.open(settings=settings, embedder=MiniLMOnnxEmbedder(threads=1),
                               schema=f"pages_{os.getpid()}")
    print(f"load average {os.getloadavg()[0]:.1f}, {args.queries} queries, pages of 10")
    try:
        for size in args.sizes:
            store = MemrouteStore(memory, tenant=Scope(org_id="pages", project_id=str(size)),
                                  index={"fields": ["text"]})
            texts, questions = hotpot(Path(args.data_dir), size)
            for start in range(0, len(texts), 100):
                await store.abatch([PutOp(("wiki",), f"p{i}", {"text": text})
                                    for i, text in enumerate(texts[start:start + 100], start)])
            for q in questions[-3:]:  # warm-up: models, plans, caches
                await store.asearch(("wiki",), query=q, limit=10)
            for offset in args.offsets:
                ways = {"one ranking of offset+limit (old)": (offset + 10,),
                        f"the depths {LADDER[0]}, {LADDER[1]}, ... (new)": LADDER}
                figures: dict[str, list[tuple[float, float, bool]]] = {w: [] for w in ways}
                for n, q in enumerate(questions[:args.queries]):
                    for way in list(ways)[::1 if n % 2 == 0 else -1]:
                        figures[way].append(await timed_page(store, q, offset, ways[way]))
                for way, runs in figures.items():
                    wall, cpu, timeouts = zip(*runs)
                    print(f"{size:>5} items  offset {offset:>3}  {way:<36} p50 "
                          f"{np.median(wall):7.1f} ms  p95 {np.percentile(wall, 95):7.1f} ms  "
                          f"process CPU p50 {np.median(cpu):6.1f} ms  "
                          f"statement timeouts {sum(timeouts)}")
    finally:
        await memory.close()
    print(f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=16)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--offsets", type=int, nargs="+", default=[0, 10, 30])
    parser.add_argument("--home", help="MEMROUTE_HOME (default: a new temporary one)")
    parser.add_argument("--data-dir", default=os.environ.get("MEMROUTE_DATA_DIR", "../shared/data"))
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
