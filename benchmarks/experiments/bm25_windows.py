"""BM25 of the offline rerank on the windows of real context (1, 2) searches of the 100k bench
store: the documents-by-terms matrix it used against the (document, term) pairs it uses now,
and the line tokenizer against one regular-expression pass over all lines.

    MEMROUTE_HOME=<bench stores> python -m benchmarks.experiments.bm25_windows
"""

import asyncio
import re
import time

import numpy as np

from benchmarks.experiments._store import SCOPE, hotpot_questions, open_bench
from memroute.memory.rerankers import offline


def dense_bm25(documents, queries, terms, k1=1.5, b=0.75, epsilon=0.25):
    """The documents-by-terms version (before commit 7a6ca50)."""
    lengths = np.array([len(doc) for doc in documents])
    n = len(documents)
    rows = np.repeat(np.arange(n), lengths)
    ids = np.fromiter((t for doc in documents for t in doc), dtype=np.int64, count=len(rows))
    tf = np.bincount(rows * terms + ids, minlength=n * terms).reshape(n, terms)
    present = tf.any(axis=0)
    df = (tf[:, present] > 0).sum(axis=0)
    idf = np.zeros(terms)
    idf[present] = np.log(n - df + 0.5) - np.log(df + 0.5)
    negative = present & (idf < 0)
    idf[negative] = epsilon * idf[present].mean()
    norm = k1 * (1 - b + b * lengths / lengths.mean())
    out = np.zeros((len(queries), n))
    for qi, query in enumerate(queries):
        if query:
            freq = tf[:, query].astype(np.float64)
            out[qi] = (idf[query] * freq * (k1 + 1) / (freq + norm[:, None])).sum(axis=1)
    return out


_ONE_PASS = re.compile(r"[a-z0-9]+|\n")


def one_pass_term_ids(texts):
    vocabulary, by_line = {}, {}
    lines = list(dict.fromkeys(line for t in texts for line in t.split("\n")))
    current, i = [], 0
    for token in _ONE_PASS.findall("\n".join(lines).lower()):
        if token == "\n":
            by_line[lines[i]], current, i = current, [], i + 1
        elif token not in offline._STOP:
            current.append(vocabulary.setdefault(token, len(vocabulary)))
    by_line[lines[i]] = current
    return [[t for line in text.split("\n") for t in by_line[line]]
            or [vocabulary.setdefault("_", len(vocabulary))] for text in texts], vocabulary


async def main() -> None:
    memory = await open_bench()
    captured = []
    bm25 = offline._bm25
    offline._bm25 = lambda texts, queries: (captured.append((list(texts), queries)),
                                            bm25(texts, queries))[1]
    for q in hotpot_questions(60):
        await memory.search_scored(SCOPE, q, k=10, context=(1, 2), entities=False,
                                   lexical=False)
    offline._bm25 = bm25
    await memory.close()
    windows = [c for c in captured if any("\n" in t for t in c[0])]
    times: dict[str, list[float]] = {}
    worst = 0.0
    for texts, queries in windows:
        for name, tokenize in (("line tokenizer (cold)", offline.term_ids),
                               ("one pass", one_pass_term_ids)):
            offline._line_tokens.cache_clear()
            start = time.perf_counter()
            documents, vocabulary = tokenize(texts)
            times.setdefault(name, []).append(time.perf_counter() - start)
        ids = [[vocabulary[t] for t in offline.tokenize(q.text) if t in vocabulary]
               for q in queries]
        for name, score in (("dense BM25", dense_bm25), ("pairs BM25", offline.bm25_okapi)):
            start = time.perf_counter()
            scores = score(documents, ids, len(vocabulary))
            times.setdefault(name, []).append(time.perf_counter() - start)
            if name == "dense BM25":
                dense = scores
        worst = max(worst, float(np.abs(dense - scores).max()))
    for name, v in times.items():
        print(f"{name:22} p50 {1000 * np.median(v):.2f} ms over {len(v)} windows' BM25")
    print(f"largest score difference, dense against pairs: {worst:.1e}")


asyncio.run(main())
