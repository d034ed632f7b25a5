"""A session `Memory` seen with query caches of its own, and an embedder that counts what it
embeds: for tests of which query texts get embedded, and when."""

from __future__ import annotations

import asyncio
import copy
from collections import OrderedDict

from memroute.memory.store import Memory


class CountingEmbedder:
    """The real embedder, recording each query text it embeds; it can take ``delay`` seconds,
    wait for ``gate`` or fail (``fail``)."""

    def __init__(self, inner, delay: float = 0.0, fail: bool = False,
                 gate: asyncio.Event | None = None) -> None:
        self.name, self.dim, self.inner = inner.name, inner.dim, inner
        self.delay, self.fail, self.gate, self.queries = delay, fail, gate, []

    async def embed_documents(self, texts):
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text):
        self.queries.append(text)
        await asyncio.sleep(self.delay)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise RuntimeError("embedder down")
        return await self.inner.embed_query(text)


def query_view(memory: Memory, embedder=None) -> Memory:
    """``memory`` (same store and pool) with empty query caches of its own (kept vectors,
    embeddings in flight, prefetches), and ``embedder`` when given: nothing the session's
    other tests embedded is found, nor leaks back."""
    view = copy.copy(memory)
    if embedder is not None:
        view.embedder = embedder
    view._query_vectors, view._embedding, view._prefetching = OrderedDict(), {}, set()
    return view
