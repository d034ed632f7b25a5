"""The embedder alone on 960 sentences: batches of 500, sixteen tasks embedding sessions of 10 at
once, batches of 160 (3 alternating rounds). One-off measurement of issue 38."""
import asyncio, time, random
from pathlib import Path
import numpy as np
from benchmarks.memory import shared_sentences
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder
async def main():
    e = MiniLMOnnxEmbedder(threads=2)
    texts = shared_sentences(Path("../shared/data"))
    random.Random(1).shuffle(texts); texts = texts[:960]
    chunks = [texts[i:i+10] for i in range(0, 960, 10)]
    await e.embed_documents(texts[:50])
    res = {}
    for r in range(3):
        for kind in (["batch500", "concurrent16x10", "batches160"] if r % 2 == 0 else ["batches160", "concurrent16x10", "batch500"]):
            t = time.perf_counter()
            if kind == "batch500":
                for i in range(0, 960, 500): await e.embed_documents(texts[i:i+500])
            elif kind == "batches160":
                for i in range(0, 960, 160): await e.embed_documents(texts[i:i+160])
            else:
                async def one(k):
                    for c in chunks[k::16]: await e.embed_documents(c)
                await asyncio.gather(*(one(k) for k in range(16)))
            res.setdefault(kind, []).append(960 / (time.perf_counter() - t))
    for k, v in res.items(): print(k, [round(x, 1) for x in v], "median", round(float(np.median(v)), 1))
asyncio.run(main())
