"""Rerankers, one module each, chosen by name with `make_reranker`."""

from __future__ import annotations

from memroute._log import get_logger

from memroute.errors import ModelUnavailableError
from memroute.memory.rerankers.base import (
    RerankCandidate,
    Reranker,
    RerankQuery,
    fuse_scores,
)
from memroute.memory.rerankers.offline import OfflineReranker

__all__ = ["OfflineReranker", "RerankCandidate", "RerankQuery", "Reranker", "fuse_scores",
           "make_reranker"]

log = get_logger(__name__)


def make_reranker(spec: str = "offline", *, cache_dir: str | None = None) -> Reranker | None:
    """``offline`` (default), ``flashrank[:model]`` (falls back to offline with a warning), ``none``."""
    name, _, arg = spec.partition(":")
    if name == "none":
        return None
    if name == "offline":
        return OfflineReranker()
    if name == "flashrank":
        from memroute.memory.rerankers.flashrank_reranker import DEFAULT_MODEL, FlashrankReranker

        try:
            return FlashrankReranker(arg or DEFAULT_MODEL, cache_dir=cache_dir)
        except ModelUnavailableError as exc:
            log.warning("reranker.fallback", wanted=spec, using=OfflineReranker.name, reason=str(exc))
            return OfflineReranker()
    raise ModelUnavailableError(f"unknown reranker {spec!r}: use offline, flashrank[:model] or none")
