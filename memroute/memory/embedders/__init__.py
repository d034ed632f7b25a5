"""Embedding providers, one module each, chosen by name with `make_embedder`."""

from __future__ import annotations

from pathlib import Path

from memroute.memory.embedders.base import Embedder, l2_normalize
from memroute.errors import ModelUnavailableError

__all__ = ["Embedder", "l2_normalize", "make_embedder"]


def make_embedder(spec: str = "minilm", *, threads: int = 1, batch_size: int = 16,
                  query_model: str = "auto", query_threads: int | None = None,
                  cache_dir: str | Path | None = None) -> Embedder:
    """An embedder by name: ``minilm`` (default), ``e5``, ``torch``, ``openai[:model]``.

    ``query_model``, ``query_threads`` and ``cache_dir``: how MiniLM embeds queries
    (`MiniLMOnnxEmbedder`); another embedder embeds queries with its own model (``"same"``
    or ``"auto"``)."""
    name, _, arg = spec.partition(":")
    if name == "minilm":
        from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder

        return MiniLMOnnxEmbedder(threads=threads, batch_size=batch_size,
                                  query_model=query_model, query_threads=query_threads,
                                  cache_dir=cache_dir)
    if query_model not in ("same", "auto"):
        raise ModelUnavailableError(
            f"query model {query_model!r} exists for the minilm embedder only, not {spec!r}: "
            "set MEMROUTE_QUERY_MODEL=same")
    if name == "e5":
        from memroute.memory.embedders.e5 import E5SmallEmbedder

        return E5SmallEmbedder(threads=threads)
    if name == "torch":
        from memroute.memory.embedders.torch_minilm import TorchMiniLMEmbedder

        return TorchMiniLMEmbedder(threads=threads, batch_size=batch_size)
    if name == "openai":
        from memroute.memory.embedders.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(arg or "text-embedding-3-small")
    raise ModelUnavailableError(f"unknown embedder {spec!r}: use minilm, e5, torch or openai[:model]")
