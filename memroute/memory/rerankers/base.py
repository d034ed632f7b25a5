"""The reranker protocol: score candidate clusters against one or more queries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class RerankQuery:
    text: str
    embedding: np.ndarray


@dataclass(frozen=True)
class RerankCandidate:
    """A cluster to score: its text and the stored embeddings of its sentences."""

    text: str
    sentence_embeddings: np.ndarray


@runtime_checkable
class Reranker(Protocol):
    """Returns a ``(len(queries), len(candidates))`` matrix of relevance scores."""

    name: str

    async def score(
        self, queries: list[RerankQuery], candidates: list[RerankCandidate]
    ) -> np.ndarray: ...


def fuse_scores(matrix: np.ndarray, how: str = "max") -> np.ndarray:
    """One score per candidate from a queries x candidates matrix.

    ``max`` keeps a candidate that answers any one query (what a sub-query or a hop is
    for); ``mean`` rewards candidates relevant to all queries; ``rrf`` fuses the ranks.
    """
    if matrix.shape[0] == 1:
        return matrix[0]
    if how == "max":
        return matrix.max(axis=0)
    if how == "mean":
        return matrix.mean(axis=0)
    if how == "rrf":
        ranks = (-matrix).argsort(axis=1).argsort(axis=1)
        return (1.0 / (60.0 + ranks + 1)).sum(axis=0)
    raise ValueError(f"unknown fusion {how!r}: use max, mean or rrf")


async def score_in_context(reranker: Reranker, queries: list[RerankQuery],
                           windows: list[RerankCandidate], nuclei: list[RerankCandidate | None],
                           fusion: str = "max") -> np.ndarray:
    """One score per result: the mean of its context window's score and its nucleus's own
    (``None``: the window is the nucleus alone). Scoring the window alone would tie every
    neighbour whose window holds a strong match with that match itself."""
    alone = [i for i, nucleus in enumerate(nuclei) if nucleus is not None]
    matrix = await reranker.score(queries, [*windows, *(nuclei[i] for i in alone)])
    fused = np.asarray(fuse_scores(matrix, fusion), dtype=np.float32)
    scores = fused[:len(windows)].copy()
    scores[alone] = (scores[alone] + fused[len(windows):]) / 2
    return scores
