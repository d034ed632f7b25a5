"""Why LoCoMo multi-hop questions miss evidence: for each auto question of a range whose
evidence_recall@10 is below 1, which search would have found it (docs/evaluation.md,
"LoCoMo multi-hop: noun-phrase bridges and lists").

The classes, first match wins: the question went to ``split`` (two speakers); it names no
single speaker; the chain's second query searched alone in the named speaker's turns (top 10)
finds more of the evidence than auto returned; evidence lies in the other speaker's turns;
the evidence spans three or more sessions (a list beyond that search's top 10); other
(a bridge or wording no search found).

    python -m benchmarks.locomo_misses ../shared/data/locomo/locomo10_conv0-6.json \\
        /tmp/eval-locomo --start 0 --stop 300
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from pathlib import Path

from memroute.evals.datasets import load_dataset
from memroute.evals.store import open_store
from memroute.memory.embedders import make_embedder
from memroute.settings import get_settings

RECALL = "evidence_recall@10"


async def classify(data: Path, out: Path, start: int, stop: int) -> Counter:
    settings = get_settings()
    dataset = load_dataset("locomo", data)
    rows = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["strategy"] == "auto" and row["k"] == 10:
            rows[row["id"]] = row
    store = await open_store(dataset, seed=0, embedder=make_embedder(settings.embedder),
                             reranker=settings.reranker, settings=settings)
    counts: Counter = Counter()
    try:
        for q in dataset.questions[start:stop]:
            row = rows.get(q.id)
            if q.type != "multi-hop" or row is None or row["metrics"][RECALL] in (None, 1.0):
                continue
            turns = {t.dia_id: t.speaker for t in dataset.conversations[q.conversation]}
            named = sorted({s for s in turns.values() if s in q.question})
            if row["route"] == "split":
                counts["two speakers (split)"] += 1
                continue
            if len(named) != 1 or len(row["queries"]) < 2:
                counts["no single speaker named"] += 1
                continue
            hits = await store.memory.search_scored(store.scope_for(q), row["queries"][1], k=10,
                                                    filters={"producer": named[0]})
            got = {(e.metadata or {}).get("dia_id") for h in hits for e in h.episodes}
            if sum(g in got for g in q.gold_ids) / len(q.gold_ids) > row["metrics"][RECALL]:
                counts["in the speaker's own search, lost in the final rerank"] += 1
            elif any(turns.get(g) != named[0] for g in q.gold_ids):
                counts["evidence in the other speaker's turns"] += 1
            elif len({g.split(":")[0] for g in q.gold_ids}) >= 3:
                counts["a list over 3+ sessions, beyond the own search's top 10"] += 1
            else:
                counts["other (a bridge or wording no search found)"] += 1
    finally:
        await store.memory.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("out", type=Path, help="a `memroute eval locomo` output folder")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--stop", type=int, default=300)
    args = parser.parse_args()
    counts = asyncio.run(classify(args.data, args.out, args.start, args.stop))
    print(f"{sum(counts.values())} multi-hop questions below full recall")
    for name, n in counts.most_common():
        print(f"{n:4d}  {name}")


if __name__ == "__main__":
    main()
