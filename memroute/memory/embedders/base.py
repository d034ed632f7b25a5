"""The embedder protocol: text in, L2-normalized float32 vectors out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors. ``name`` and ``dim`` are recorded by the store.

    An embedder whose model reads a limited number of tokens may also offer
    ``token_windows(text) -> list[str]``: the write pipeline then embeds each window of a
    sentence as its own index row, so no part of a long sentence goes unembedded.
    """

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


WINDOW_OVERLAP_TOKENS = 32  # tokens two consecutive windows of a long sentence share


def windows_from_offsets(text: str, offsets: list[tuple[int, int]], max_tokens: int,
                         overlap: int = WINDOW_OVERLAP_TOKENS) -> list[str]:
    """``text`` as windows of at most ``max_tokens`` tokens (given their character
    ``offsets``), each sharing ``overlap`` tokens with the next, so every character is in a
    window; ``[text]`` when it fits whole."""
    if len(offsets) <= max_tokens:
        return [text]
    windows, stride = [], max_tokens - overlap
    for first in range(0, len(offsets) - overlap, stride):
        last = min(first + max_tokens, len(offsets)) - 1
        windows.append(text[offsets[first][0]:offsets[last][1]])
        if last == len(offsets) - 1:
            break
    return windows
