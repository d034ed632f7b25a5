"""Probe (kept in git only): where ingestion's CPU goes, per sentence, on this machine.

1. One model run's cost: CPU of runs of 1-16 texts x 8-128 tokens, fit as a + b x tokens
   to relative error (``RUN_COST_TOKENS`` = a / b).
2. Least-cost model runs against the old cut at 1.2x padding: CPU per sentence for calls of
   20, 50, 160 and 500 texts, alternating repetitions in one process.
3. Words met again kept in spaCy's vocabulary, off and on: NER CPU per sentence over five
   passes of new sentences in calls of 50.
4. Sixteen tenants adding at once, with entities: CPU per sentence of this process, the
   embedded server and the NER thread, against the embedder alone and NER alone.

    MEMROUTE_HOME=<scratch> OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \\
        python -m benchmarks.ingestion_cpu --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

import memroute.memory.embedders.minilm_onnx as minilm
from memroute.memory import entity_sql
from benchmarks.memory import load_average, server_cpu_seconds, shared_sentences
from benchmarks.tenants import SESSION, T0
from memroute import nlp
from memroute.memory import Memory, Scope
from memroute.settings import MemrouteSettings


def run_cost(embedder: minilm.MiniLMOnnxEmbedder) -> dict:
    rows = []
    for n in (1, 2, 4, 8, 16):
        for width in (8, 16, 32, 64, 128):
            ids = np.full((n, width), 2000, dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if "token_type_ids" in embedder._input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            embedder._session.run(None, feeds)
            reps = max(3, 200 // (n * width // 8 + 1))
            start = time.process_time()
            for _ in range(reps):
                embedder._session.run(None, feeds)
            rows.append((n * width, 1000 * (time.process_time() - start) / reps))
    cost = np.array([c for _, c in rows])  # fit to relative error: small runs count as much
    b, a = np.polyfit([t for t, _ in rows], cost, 1, w=1 / cost)
    return {"ms_per_run": round(float(a), 2), "ms_per_token": round(float(b), 3),
            "run_cost_tokens": round(float(a / b), 1)}


def padding_cut(lengths: list[int], batch_size: int, padding: float = 1.2) -> list[list[int]]:
    """The cut before `like_length_batches`: a batch closed at 1.2x padding."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    out, start = [], 0
    while start < len(order):
        end, tokens = start + 1, lengths[order[start]]
        while end < len(order) and end - start < batch_size:
            width = lengths[order[end]]
            rows = end - start + 1
            if rows * width ** 2 > minilm.MAX_BATCH_ATTENTION or rows * width > padding * (
                    tokens + width):
                break
            tokens += width
            end += 1
        out.append(order[start:end])
        start = end
    return out


def cuts(embedder: minilm.MiniLMOnnxEmbedder, texts: list[str], reps: int) -> dict:
    least = minilm.like_length_batches
    found: dict[str, dict[int, list[float]]] = {"padding_1.2": {}, "least_cost": {}}
    try:
        for rep in range(reps):
            kinds = [("padding_1.2", padding_cut), ("least_cost", least)]
            for name, cut in kinds if rep % 2 == 0 else kinds[::-1]:
                minilm.like_length_batches = cut
                for call in (20, 50, 160, 500):
                    start = time.process_time()
                    for i in range(0, len(texts), call):
                        embedder.encode(texts[i:i + call])
                    found[name].setdefault(call, []).append(
                        1000 * (time.process_time() - start) / len(texts))
    finally:
        minilm.like_length_batches = least
    return {name: {call: round(float(np.median(v)), 2) for call, v in by_call.items()}
            for name, by_call in found.items()}


def kept_words(texts: list[str], passes: int = 5) -> dict:
    bound, out = nlp.KEPT_WORDS_MAX, {}
    try:
        for label, limit in (("off", 0), ("on", bound)):
            nlp.KEPT_WORDS_MAX, nlp._kept_words = limit, nlp._KeptWords()
            per_pass = []
            for p in range(passes):
                part = texts[p * 1920:(p + 1) * 1920]
                start = time.thread_time()
                for i in range(0, len(part), 50):
                    nlp.extract_entities(part[i:i + 50])
                per_pass.append(round(1000 * (time.thread_time() - start) / len(part), 3))
            out[label] = per_pass
    finally:
        nlp.KEPT_WORDS_MAX, nlp._kept_words = bound, nlp._KeptWords()
    return out


async def tenants(embedder: minilm.MiniLMOnnxEmbedder, texts: list[str]) -> dict:
    settings = MemrouteSettings().model_copy(update={
        "embed_threads": 2, "query_cache_size": 0, "extract_entities": True})
    memory = await Memory.open(settings=settings, schema="probe_ingestion_cpu", embedder=embedder)
    ner = [0.0]
    extract = entity_sql.extract_entities

    def timed(batch: list[str]):
        start = time.thread_time()
        try:
            return extract(batch)
        finally:
            ner[0] += time.thread_time() - start

    scopes = [Scope(org_id="probe", project_id="cpu", user_id=f"t{t}") for t in range(16)]
    chunks = [texts[i:i + SESSION] for i in range(0, len(texts), SESSION)]

    async def one(t: int) -> None:
        for n, chunk in enumerate(chunks[t::16]):
            await memory.add(scopes[t], [
                {"content": text, "session_id": f"s{n}", "uid": f"{n}-{j}",
                 "produced_at": T0 + timedelta(seconds=j)} for j, text in enumerate(chunk)])

    await memory.add(scopes[0], [{"content": texts[-1], "uid": "warm"}])
    entity_sql.extract_entities = timed
    try:
        cpu, server, wall = time.process_time(), server_cpu_seconds(settings), time.perf_counter()
        await asyncio.gather(*(one(t) for t in range(16)))
        wall = time.perf_counter() - wall
        cpu, server = time.process_time() - cpu, server_cpu_seconds(settings) - server
    finally:
        entity_sql.extract_entities = extract
        for scope in scopes:
            await memory.delete(scope, all=True)
        await memory.close()
    alone = time.process_time()
    for i in range(0, len(texts), 500):
        embedder.encode(texts[i:i + 500])
    alone = time.process_time() - alone
    ner_alone = time.thread_time()
    extract(texts)
    ner_alone = time.thread_time() - ner_alone
    per = 1000 / len(texts)
    return {"sentences": len(texts), "rate": round(len(texts) / wall, 1),
            "cores": round((cpu + server) / wall, 2),
            "ms_per_sentence": {"process": round(cpu * per, 2), "server": round(server * per, 2),
                                "ner_thread": round(ner[0] * per, 2),
                                "embedder_alone": round(alone * per, 2),
                                "ner_alone": round(ner_alone * per, 2)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data")
    args = parser.parse_args()
    texts = shared_sentences(Path(args.data_dir))
    random.Random(0).shuffle(texts)
    embedder = minilm.MiniLMOnnxEmbedder(threads=2)
    embedder.encode(texts[:50])
    nlp.extract_entities(texts[:50])
    print("load", load_average())
    print("run cost", run_cost(embedder))
    print("cuts, ms of CPU per sentence", cuts(embedder, texts[5000:6920], reps=6))
    print("kept words, NER ms of CPU per sentence per pass", kept_words(texts[10_000:19_600]))
    print("16 tenants with entities", asyncio.run(tenants(embedder, texts[20_000:21_920])))
    print("load", load_average())


if __name__ == "__main__":
    main()
