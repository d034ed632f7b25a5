"""Entity extraction's CPU per sentence with ``ner``'s matrix products on blis (thinc's
default) and on numpy's BLAS (what `memroute.nlp` uses at ingestion), taking turns on the
same sentences, and how many sentences' entities differ between the two.

Sentences: the shared Wikipedia sets' (as `benchmarks.memory` reads them) and LoCoMo's turns
split into sentences. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

from thinc.api import NumpyOps

from benchmarks.memory import shared_sentences
from memroute import nlp
from memroute.memory.splitter import split_sentences


def locomo_sentences(path: Path) -> list[str]:
    return [sentence for conversation in json.loads(path.read_text())
            for key, turns in conversation["conversation"].items() if isinstance(turns, list)
            for turn in turns for sentence in split_sentences(turn["text"])]


def measure(texts: list[str], rounds: int) -> dict:
    """CPU ms per sentence of `nlp.extract_entities` per multiplication backend (medians
    over ``rounds``, the order reversed every other round) and the sentences whose
    entities differ."""
    ner = nlp.load_pipeline(nlp.INGEST).get_pipe("ner")
    backends = {"blis": NumpyOps(), "numpy": NumpyOps(use_blis=False)}
    cpu: dict[str, list[float]] = {name: [] for name in backends}
    found: dict[str, list] = {}
    try:
        for n in range(rounds):
            for name in list(backends)[::(1 if n % 2 == 0 else -1)]:
                for layer in ner.model.walk():
                    layer.ops = backends[name]
                start = time.process_time()
                found[name] = nlp.extract_entities(texts)
                cpu[name].append(1000 * (time.process_time() - start) / len(texts))
    finally:
        for layer in ner.model.walk():
            layer.ops = backends["numpy"]
    return {"sentences": len(texts),
            "cpu_ms_per_sentence": {name: statistics.median(v) for name, v in cpu.items()},
            "differing_sentences": sum(a != b for a, b in zip(found["blis"], found["numpy"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("MEMROUTE_DATA_DIR", "../shared/data"))
    parser.add_argument("--wiki", type=int, default=6000, help="Wikipedia sentences (shuffled)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    data = Path(args.data_dir)
    wiki = shared_sentences(data)
    random.Random(1).shuffle(wiki)
    sets = {"wikipedia": wiki[:args.wiki],
            "locomo": locomo_sentences(data / "locomo" / "locomo10_conv0-6.json")}
    nlp.extract_entities(sets["locomo"][:64])  # loaded and warm
    report = {name: measure(texts, args.rounds) for name, texts in sets.items()}
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    for name, fig in report.items():
        if name != "load_average":
            cpu = fig["cpu_ms_per_sentence"]
            print(f"{name:<10} {fig['sentences']:>6} sentences  CPU ms/sentence: blis "
                  f"{cpu['blis']:.2f}  numpy {cpu['numpy']:.2f}  "
                  f"({1 - cpu['numpy'] / cpu['blis']:.0%} less)  "
                  f"differing entity sets: {fig['differing_sentences']}")
    print(f"load average at the end: {report['load_average']}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
