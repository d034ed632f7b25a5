"""The embedder protocol: text in, L2-normalized float32 vectors out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors. ``name`` and ``dim`` are recorded by the store."""

    name: str
    dim: int

    async def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Vectors for stored texts, shape ``(len(texts), dim)``."""
        ...

    async def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query, shape ``(dim,)``."""
        ...


def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
