"""The offline reranker: dense similarity of the whole cluster fused with BM25 over candidates."""

from __future__ import annotations

import re

import numpy as np
from rank_bm25 import BM25Okapi

from memroute.memory.rerankers.base import RerankCandidate, RerankQuery

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was "
    "were which who what when where with did does do how many much".split()
)


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP]


def _minmax(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    return np.zeros_like(values) if high - low < 1e-9 else (values - low) / (high - low)


class OfflineReranker:
    """A real reranking signal without model downloads.

    Per query: the best and the mean cosine similarity between the query and the cluster's
    sentences (from the stored embeddings), plus BM25 of the cluster text over the candidate
    set, each min-max normalized and mixed with ``weights``.
    """

    name = "offline-dense-bm25"

    def __init__(self, weights: tuple[float, float, float] = (0.6, 0.15, 0.25)) -> None:
        self.weights = weights

    async def score(
        self, queries: list[RerankQuery], candidates: list[RerankCandidate]
    ) -> np.ndarray:
        if not candidates:
            return np.zeros((len(queries), 0), dtype=np.float32)
        w_max, w_mean, w_bm25 = self.weights
        bm25 = BM25Okapi([tokenize(c.text) or ["_"] for c in candidates])
        out = np.zeros((len(queries), len(candidates)), dtype=np.float32)
        for qi, query in enumerate(queries):
            sims = [c.sentence_embeddings @ query.embedding for c in candidates]
            best = np.array([s.max() if s.size else 0.0 for s in sims], dtype=np.float32)
            mean = np.array([s.mean() if s.size else 0.0 for s in sims], dtype=np.float32)
            lexical = np.asarray(bm25.get_scores(tokenize(query.text)), dtype=np.float32)
            # Raw cosine keeps its scale across queries; BM25 is only comparable within one.
            out[qi] = w_max * best + w_mean * mean + w_bm25 * 0.5 * _minmax(lexical)
        return out
