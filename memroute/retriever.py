"""`MemrouteRetriever`: the retrieval agent as a LangChain retriever.

Natively async, and sync too, whatever memory it wraps: the agent's graph runs on the loop
the memory's pool lives on (a `Memory`'s opening loop, a `SyncMemory`'s background loop), for
``invoke`` and ``ainvoke`` alike (`memroute._loop`). ``k``, ``filters``,
``strategy``, ``budget``, ``scope`` and ``as_of`` are fields, per-call keyword arguments
(``retriever.invoke(q, k=5)``), and configurable fields (`with_config_fields`). The graph
runs as a child run of the retriever, so traces show routing, LLM calls and searches nested.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, LangSmithRetrieverParams
from langchain_core.runnables import ConfigurableField, RunnableSerializable
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from memroute.errors import InvalidInputError
from memroute.memory.limits import MAX_K
from memroute.memory.models import (
    Episode,
    Scope,
    ScoredResult,
    ShownWindow,
    coerce_scope,
    disjoint_windows,
)
from memroute.memory.sync import memory_and_loop
from memroute.strategies.base import Strategy
from memroute.time.as_of import as_of_text

CALL_OPTIONS = ("k", "filters", "strategy", "budget", "scope", "as_of")
# LangChain's ``search_kwargs`` names (``VectorStoreRetriever``) and the fields they set
SEARCH_KWARGS = {"k": "k", "filter": "filters", "filters": "filters", "strategy": "strategy",
                 "budget": "budget", "as_of": "as_of"}


def render_turn(episode: Episode) -> str:
    """A turn as chat transcripts print it: ``[2024-03-18 12:16] user: text`` (UTC)."""
    when = episode.produced_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M")
    return f"[{when}] {episode.producer}: {episode.content}"


class MemrouteRetriever(BaseRetriever):
    """Retrieve episodes from a memroute memory through the retrieval agent.

    ``memory``: a `Memory` or a `SyncMemory`; ``invoke`` and ``ainvoke`` work with either
    (``invoke`` from inside the loop a `Memory` was opened on is an `InvalidInputError`:
    it would block the loop its work needs).
    ``agent``: a `RetrievalAgent` to use (e.g. with an LLM planner); by default one is built
    on ``memory`` with ``llm`` (``None``: the offline planner unless ``MEMROUTE_LLM_MODEL``).
    ``include_context``: page content is the matched episode with its neighbouring turns
    (the search's context window) rather than the episode alone. Within one response no
    episode's text is in two documents: a neighbour shown by a better document, or that is
    another document's episode, is left out (its uid in metadata ``shown_elsewhere``).
    ``content_format``: ``"turns"`` (default) renders each episode as a transcript line,
    ``[2024-03-18 12:16] user: text`` (time in UTC), so ``format_docs`` keeps who said what
    and when; ``"text"`` gives the bare text. Metadata ``content`` is the matched episode's
    raw text either way.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Any
    scope: Scope
    k: int = Field(default=10, ge=1, le=MAX_K)
    filters: dict[str, Any] | None = None
    strategy: Strategy = "auto"
    budget: Any = None
    # when the question is asked (`memroute.time.parse_as_of`; None: now): "last week" is the
    # week before it, and nothing produced after it is returned
    as_of: datetime | str | None = None
    agent: Any = None
    llm: Any = None
    include_context: bool = True
    content_format: Literal["turns", "text"] = "turns"

    _loop: Any = PrivateAttr(default=None)  # where the memory's pool lives (memroute._loop)

    def __init__(self, **options: Any) -> None:
        """As any retriever, plus LangChain's ``search_kwargs`` (``k``, ``filter``, and
        ``filters``, ``strategy``, ``budget``, ``as_of``). An unknown or bad option is an
        `InvalidInputError`, never silently ignored."""
        fields = type(self).model_fields
        unknown = sorted(str(name) for name in options
                         if name not in fields and name != "search_kwargs")
        if unknown:
            raise InvalidInputError(f"unknown retriever option(s) {', '.join(unknown)}; "
                                    f"use {', '.join(sorted(fields))} or search_kwargs")
        search_kwargs = options.pop("search_kwargs", None) or {}
        if not isinstance(search_kwargs, dict):
            raise InvalidInputError("search_kwargs is a dict, e.g. {'k': 4, 'filter': {...}}")
        for name, value in search_kwargs.items():
            field = SEARCH_KWARGS.get(name)
            if field is None:
                raise InvalidInputError(f"unknown search_kwargs option {name!r:.40}; "
                                        f"use {', '.join(SEARCH_KWARGS)}")
            if field in options and options[field] != value:
                raise InvalidInputError(f"{field} is given twice (and in search_kwargs)")
            options[field] = value
        try:
            super().__init__(**options)
        except ValidationError as exc:
            raise InvalidInputError(f"invalid retriever option: {exc}") from exc

    @field_validator("scope", mode="before")
    @classmethod
    def _scope(cls, value: Any) -> Scope:
        return coerce_scope(value)

    @field_validator("as_of", mode="before")
    @classmethod
    def _as_of(cls, value: Any) -> str | None:
        return as_of_text(value)  # an `InvalidInputError` (a ValueError) names what is wrong

    def model_post_init(self, context: Any, /) -> None:
        _, self._loop = memory_and_loop(self.memory)
        if self.agent is None:
            from memroute.agent import RetrievalAgent

            self.agent = RetrievalAgent(memory=self.memory, llm=self.llm)

    # -- LangChain hooks -----------------------------------------------------------------

    def _get_ls_params(self, **kwargs: Any) -> LangSmithRetrieverParams:
        memory, _ = memory_and_loop(self.memory)
        return LangSmithRetrieverParams(
            ls_retriever_name="memroute", ls_vector_store_provider="pgvector",
            ls_embedding_provider="memroute", ls_embedding_model=memory.embedder.name)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **options: Any) -> list[Document]:
        return self._loop.run_as_sync(self._retrieve(query, run_manager.get_child(), options))

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **options: Any) -> list[Document]:
        return await self._loop.run_as_async(
            self._retrieve(query, run_manager.get_child(), options))

    # -- the work ------------------------------------------------------------------------

    def _options(self, overrides: dict[str, Any]) -> dict[str, Any]:
        if "filter" in overrides:  # LangChain's name
            if "filters" in overrides:
                raise InvalidInputError("give filter or filters, not both")
            overrides = {**overrides, "filters": overrides["filter"]}
            del overrides["filter"]
        unknown = sorted(set(overrides) - set(CALL_OPTIONS))
        if unknown:
            raise InvalidInputError(
                f"unknown retriever option(s) {', '.join(unknown)}; use {', '.join(CALL_OPTIONS)}"
                " or filter")
        options = {name: getattr(self, name) for name in CALL_OPTIONS}
        options.update(overrides)
        options["scope"] = coerce_scope(options["scope"])
        return options

    async def _retrieve(self, query: str, callbacks: Any, overrides: dict[str, Any]
                        ) -> list[Document]:
        options = self._options(overrides)
        result = await self.agent.aretrieve(query, config={"callbacks": callbacks}, **options)
        return [self.to_document(r, result.route, options["scope"], window=w)
                for r, w in zip(result.results, disjoint_windows(result.results))]

    def to_document(self, result: ScoredResult, route: str, scope: Scope, *,
                    window: ShownWindow | None = None) -> Document:
        """One result as a `Document` whose id is the matched episode's uid.

        ``window`` is what this document shows of the result's context window within its
        response (`disjoint_windows`); without it, the whole window.
        """
        episode = result.nucleus
        window = window or ShownWindow(result.episodes or [episode], [])
        shown = window.episodes if self.include_context else [episode]
        render = render_turn if self.content_format == "turns" else (lambda e: e.content)
        return Document(id=result.uid, page_content="\n".join(map(render, shown)), metadata={
            "uid": result.uid,
            "content": episode.content,
            "score": result.score,
            "rerank_score": result.rerank_score,
            "vector_score": result.vector_score,
            "route": route,
            "query": result.query,
            "hop": int(result.extra.get("hop", 0)),
            "session_id": episode.session_id,
            "producer": episode.producer,
            "produced_at": episode.produced_at.isoformat(),
            "scope": scope.as_dict(),
            "matched_sentence": result.matched_sentence,
            "context_uids": [e.uid for e in result.episodes if e.uid != result.uid],
            "shown_elsewhere": window.shown_elsewhere if self.include_context else [],
            "episode_metadata": episode.metadata,
        })

    def with_config_fields(self, prefix: str = "") -> RunnableSerializable:
        """This retriever with ``k``, ``filters``, ``strategy``, ``budget``, ``scope`` and
        ``as_of``
        settable per run: ``config={"configurable": {"k": 5}}`` (ids get ``prefix``)."""
        return self.configurable_fields(**{
            name: ConfigurableField(id=f"{prefix}{name}", name=name,
                                    description=f"memroute retriever {name}")
            for name in CALL_OPTIONS})
