"""What the REST routes and the MCP tools work on, opened once per server process."""

from __future__ import annotations

from dataclasses import dataclass

from memroute.agent import RetrievalAgent
from memroute.memory.store import Memory
from memroute.service.keys import KeyStore
from memroute.settings import MemrouteSettings


@dataclass
class Service:
    """One memory, one agent over it (the planner the settings name), the key store."""

    memory: Memory
    agent: RetrievalAgent
    keys: KeyStore


async def open_service(settings: MemrouteSettings, *, key_cache_seconds: float = 0.0
                       ) -> Service:
    """Open the memory (migrating its schema), the agent over it and the key store (which
    keeps a verified key ``key_cache_seconds`` without asking the database again).

    The key store's pool shares the memory's server guard: a dead embedded server is
    restarted once, whichever lookup notices first, and both fail the same typed way."""
    memory = await Memory.open(settings=settings)
    try:
        keys = await KeyStore.open(memory.url, memory.schema, cache_seconds=key_cache_seconds,
                                   guard=getattr(memory._pool, "guard", None),
                                   timeout_s=settings.pool_timeout_s)
    except BaseException:
        await memory.close()
        raise
    return Service(memory=memory, agent=RetrievalAgent(memory), keys=keys)


async def close_service(service: Service) -> None:
    await service.keys.close()
    await service.memory.close()
