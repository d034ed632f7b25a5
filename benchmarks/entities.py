"""Entity extraction's CPU per sentence three ways, taking turns on the same sentences: spaCy's
own decoding loop with ``ner``'s matrix products on blis (thinc's default), the same loop on
numpy's BLAS, and numpy's BLAS with `memroute.ner_decoder.GreedyEntityDecoder` (what
`memroute.nlp` uses at ingestion); and how many sentences' entities differ from the first.

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


VARIANTS = {"blis": ("blis", False), "numpy": ("numpy", False), "numpy_decoder": ("numpy", True)}


def measure(texts: list[str], rounds: int) -> dict:
    """CPU ms per sentence of `nlp.extract_entities` per variant of `VARIANTS` (multiplication
    backend, `GreedyEntityDecoder` or spaCy's loop; medians over ``rounds``, the order
    reversed every other round) and the sentences whose entities differ from the first's."""
    ner = nlp.load_pipeline(nlp.INGEST).get_pipe("ner")
    decoder = nlp._decoders[nlp.INGEST]
    backends = {"blis": NumpyOps(), "numpy": NumpyOps(use_blis=False)}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    found: dict[str, list] = {}
    try:
        for n in range(rounds):
            for name in list(VARIANTS)[::(1 if n % 2 == 0 else -1)]:
                backend, decoding = VARIANTS[name]
                for layer in ner.model.walk():
                    layer.ops = backends[backend]
                nlp._decoders[nlp.INGEST] = decoder if decoding else None
                start = time.process_time()
                found[name] = nlp.extract_entities(texts)
                cpu[name].append(1000 * (time.process_time() - start) / len(texts))
    finally:
        for layer in ner.model.walk():
            layer.ops = backends["numpy"]
        nlp._decoders[nlp.INGEST] = decoder
    reference = found[next(iter(VARIANTS))]
    return {"sentences": len(texts),
            "cpu_ms_per_sentence": {name: statistics.median(v) for name, v in cpu.items()},
            "differing_sentences": {name: sum(a != b for a, b in zip(reference, found[name]))
                                    for name in list(VARIANTS)[1:]}}


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
            cpu, differ = fig["cpu_ms_per_sentence"], fig["differing_sentences"]
            print(f"{name:<10} {fig['sentences']:>6} sentences  CPU ms/sentence: spaCy's loop on "
                  f"blis {cpu['blis']:.2f}, on numpy {cpu['numpy']:.2f}; decoder on numpy "
                  f"{cpu['numpy_decoder']:.2f} ({1 - cpu['numpy_decoder'] / cpu['blis']:.0%} "
                  f"less than the first)  entity sets differing from the first: "
                  f"{differ['numpy']}, {differ['numpy_decoder']}")
    print(f"load average at the end: {report['load_average']}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
