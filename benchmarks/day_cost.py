"""One-off probe: the CPU that reading the days a sentence names adds to entity extraction,
on LoCoMo turns and HotpotQA passages (6,000 sentences each, said "now")::

    OMP_NUM_THREADS=1 python -m benchmarks.day_cost --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from pathlib import Path

from memroute.memory.entity_sql import DAY_LABEL, _day_expressions, _with_days
from memroute.memory.splitter import split_sentences
from memroute.nlp import INGEST, extract_entities, load_pipeline


def corpora(data: Path, n: int) -> dict[str, list[str]]:
    turns = []
    for conversation in json.loads((data / "locomo" / "locomo10_conv0-6.json").read_text()):
        for key, session in conversation["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                turns += [s for t in session for s in split_sentences(t["text"])]
    lines = (data / "hotpotqa" / "hotpotqa_dev_distractor_800.jsonl").read_text().splitlines()
    passages = [s for line in lines for p in json.loads(line)["context"]["sentences"] for s in p]
    return {"locomo turns": turns[:n], "hotpotqa passages": passages[:n]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--n", type=int, default=6000)
    args = parser.parse_args()
    load_pipeline(INGEST)
    now = datetime.now(timezone.utc)
    for name, texts in corpora(args.data_dir, args.n).items():
        start = time.process_time()
        found = extract_entities(texts)
        ner = time.process_time() - start
        start = time.process_time()
        dated = [e for e in found if _day_expressions(e, now)]
        out = _with_days(texts, found, [now] * len(texts))
        days = time.process_time() - start
        keys = sum(e.label == DAY_LABEL for entities in out for e in entities)
        print(f"{name}: {len(texts)} sentences, NER {1000 * ner / len(texts):.2f} ms, days "
              f"{1000 * days / len(texts):.3f} ms of CPU per sentence; {len(dated)} with a "
              f"day-like date, {keys} day keys")


if __name__ == "__main__":
    main()
