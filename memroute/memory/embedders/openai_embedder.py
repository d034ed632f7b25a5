"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint."""

from __future__ import annotations

import numpy as np

from memroute.memory.embedders.base import l2_normalize

_KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072,
               "text-embedding-ada-002": 1536}


class OpenAIEmbedder:
    """``text-embedding-3-small`` by default; pass ``dim`` for models it does not know."""

    def __init__(self, model: str = "text-embedding-3-small", *, client=None,
                 dim: int | None = None, batch_size: int = 256) -> None:
        if client is None:
            from openai import AsyncOpenAI

            client = AsyncOpenAI()
        self._client = client
        self.model = model
        self.name = f"openai:{model}"
        self.dim = dim or _KNOWN_DIMS.get(model, 1536)
        self.batch_size = batch_size

    async def embed_documents(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            response = await self._client.embeddings.create(
                model=self.model, input=texts[start : start + self.batch_size]
            )
            rows.extend(item.embedding for item in sorted(response.data, key=lambda d: d.index))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return l2_normalize(np.asarray(rows, dtype=np.float32))

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self.embed_documents([text]))[0]
