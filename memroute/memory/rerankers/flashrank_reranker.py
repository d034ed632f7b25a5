"""flashrank's ONNX cross-encoders, when their model files are present locally."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from memroute.errors import ModelUnavailableError
from memroute.memory.rerankers.base import RerankCandidate, RerankQuery

DEFAULT_MODEL = "ms-marco-MiniLM-L-12-v2"


class FlashrankReranker:
    """A cross-encoder; raises `ModelUnavailableError` at construction if its files are missing."""

    def __init__(self, model: str = DEFAULT_MODEL, cache_dir: str | Path | None = None) -> None:
        try:
            from flashrank import Ranker
        except ImportError as exc:
            raise ModelUnavailableError("flashrank is not installed: pip install 'memroute[flashrank]'") from exc
        if cache_dir is None:
            raise ModelUnavailableError(
                "flashrank downloads its models from a hub; set MEMROUTE_FLASHRANK_CACHE_DIR to a "
                f"folder that already holds {model}/"
            )
        if not (Path(cache_dir) / model).is_dir():
            raise ModelUnavailableError(f"flashrank model {model!r} not found under {cache_dir}")
        self._ranker = Ranker(model_name=model, cache_dir=str(cache_dir))
        self.name = f"flashrank:{model}"

    def _score_one(self, query: str, texts: list[str]) -> np.ndarray:
        from flashrank import RerankRequest

        passages = [{"id": i, "text": t} for i, t in enumerate(texts)]
        ranked = self._ranker.rerank(RerankRequest(query=query, passages=passages))
        scores = np.zeros(len(texts), dtype=np.float32)
        for item in ranked:
            scores[int(item["id"])] = float(item["score"])
        return scores

    async def score(self, queries: list[RerankQuery], candidates: list[RerankCandidate]) -> np.ndarray:
        texts = [c.text for c in candidates]
        rows = [await asyncio.to_thread(self._score_one, q.text, texts) for q in queries]
        return np.vstack(rows) if rows else np.zeros((0, len(texts)), dtype=np.float32)
