"""An embedder whose concurrent `embed_documents` calls run as one batch (`Coalescer`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from memroute.memory.coalesce import Coalescer
from memroute.memory.embedders.base import Embedder


class CoalescingEmbedder:
    """``inner`` with its concurrent ``embed_documents`` calls coalesced into one batch
    (many small adds at once: sixteen tenants' sessions of ten sentences embedded as one
    batch of 160). Queries and every other attribute are ``inner``'s own."""

    def __init__(self, inner: Embedder, **coalescing: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._documents: Coalescer[str, np.ndarray] = Coalescer(inner.embed_documents,
                                                               **coalescing)

    async def embed_documents(self, texts: list[str]) -> np.ndarray:
        return await self._documents(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        return await self.inner.embed_query(text)

    def __getattr__(self, attribute: str) -> Any:  # token_windows, query_name, ...
        if attribute == "inner":  # not set yet
            raise AttributeError(attribute)
        return getattr(self.inner, attribute)
