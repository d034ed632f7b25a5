"""What the REST routes and the MCP tools work on, opened once per server process: in the
background (`ServiceOpener`), so a server answers its first messages before the models load."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from memroute.errors import MemrouteError, StoreUnavailableError

if TYPE_CHECKING:
    from memroute.agent import RetrievalAgent
    from memroute.memory.store import Memory
    from memroute.service.keys import KeyStore
    from memroute.settings import MemrouteSettings

OpenState = Literal["starting", "ready", "failed"]


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
    restarted once, whichever lookup notices first, and both fail the same typed way.
    The modules and the models load in worker threads, so the event loop goes on answering
    meanwhile; what the memory would load at its first use loads here too."""
    for module in ("memroute.memory.store", "memroute.agent", "memroute.service.keys"):
        await asyncio.to_thread(importlib.import_module, module)
    from memroute.agent import RetrievalAgent
    from memroute.memory.store import Memory
    from memroute.service.keys import KeyStore

    memory = await Memory.open(settings=settings)
    try:
        await asyncio.to_thread(_load_models, memory)
        keys = await KeyStore.open(memory.url, memory.schema, cache_seconds=key_cache_seconds,
                                   guard=getattr(memory._pool, "guard", None),
                                   timeout_s=settings.pool_timeout_s)
    except BaseException:
        await memory.close()
        raise
    return Service(memory=memory, agent=RetrievalAgent(memory), keys=keys)


def _load_models(memory: Memory) -> None:
    """What the memory loads on first use, now (the service opens in the background): the
    embedder's documents' session and the entity lane's spaCy pipeline (a missing model is
    the lane's warning at the first search, as in the library)."""
    from memroute import nlp
    from memroute.errors import ModelUnavailableError

    load = getattr(memory.embedder, "load", None)
    if load is not None:
        load()
    if memory.settings.entity_lane:
        try:
            nlp.load_pipeline(nlp.KEYS)
        except ModelUnavailableError:
            pass


async def close_service(service: Service) -> None:
    await service.keys.close()
    await service.memory.close()


class ServiceOpener:
    """Opens a `Service` in the background, once: `state` is ``starting``, ``ready`` or
    ``failed``; `get` waits for the service (only while it is starting) or raises why it
    failed, as a `MemrouteError` (another error becomes a `StoreUnavailableError`)."""

    def __init__(self, opening: Callable[[], Awaitable[Service]]) -> None:
        self._opening = opening
        self._task: asyncio.Task[Service] | None = None

    def start(self) -> None:
        """Begin opening (on the running loop); later calls do nothing."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._opening())

    @property
    def state(self) -> OpenState:
        if self._task is None or not self._task.done():
            return "starting"
        return "failed" if self._task.cancelled() or self._task.exception() else "ready"

    @property
    def error(self) -> MemrouteError | None:
        """Why the opening failed (``None`` while starting or once ready)."""
        if self.state != "failed":
            return None
        assert self._task is not None
        if self._task.cancelled():
            return StoreUnavailableError("the service was closed while it was opening")
        exc = self._task.exception()
        if isinstance(exc, MemrouteError):
            return exc
        return StoreUnavailableError(
            f"the service could not open: {type(exc).__name__}: {' '.join(str(exc).split())}")

    async def get(self) -> Service:
        """The open service, waiting for it while it opens."""
        self.start()
        assert self._task is not None
        await asyncio.wait([self._task])  # a caller's cancellation never cancels the opening
        if (error := self.error) is not None:
            raise error
        return self._task.result()

    async def wait(self) -> OpenState:
        """Wait until the opening is done, either way; its `state`."""
        self.start()
        assert self._task is not None
        await asyncio.wait([self._task])
        return self.state

    async def close(self) -> None:
        """Close the service, or stop its opening."""
        if self._task is None:
            return
        if not self._task.done():
            self._task.cancel()
        await asyncio.wait([self._task])
        if self.state == "ready":
            await close_service(self._task.result())
