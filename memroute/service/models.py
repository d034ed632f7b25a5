"""The bodies of the REST API: the library's own `Scope`, `Episode` and `Budget`, wrapped in
requests, and results rendered without their stored vectors."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from memroute.agent import RetrievalResult
from memroute.graph.state import HopRecord
from memroute.hints import HINT_HELP
from memroute.memory.limits import MAX_ID_CHARS, MAX_K, MAX_QUERY_CHARS
from memroute.memory.models import Episode, Scope, ScoredResult
from memroute.service.bodies import (  # noqa: F401  (the request limits, with the bodies)
    MAX_EPISODES_PER_REQUEST,
    MAX_REQUEST_BYTES,
    StrictEpisode,
    invalid_fields,
)
from memroute.strategies.base import Strategy
from memroute.strategies.budget import Budget
from memroute.time.as_of import AS_OF_HELP, AsOf

def _true_or_false(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ValueError("must be true or false")


Flag = Annotated[bool, BeforeValidator(_true_or_false)]
"""A boolean: JSON's true or false, or in a query string the text ``true`` or ``false``
(``yes``, ``on``, ``1`` are refused, not read as true)."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScopeQuery(Scope):
    """A scope named in a query string: `Scope` itself (its parts, their rule, nothing else),
    read by FastAPI from the query. A parameter no route has (a typo like ``userid``) is the
    typed 422 naming it, never a wider scope."""

    @property
    def scope(self) -> Scope:
        return Scope(**self.model_dump(include=set(Scope.model_fields)))


class DeleteQuery(ScopeQuery):
    """``DELETE /v1/episodes``: the scope, and what to delete in it."""

    uid: list[Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]] | None = Field(
        default=None, description="Delete these uids (repeatable).")
    session_id: str | None = Field(default=None, description="Delete this session.")
    all: Flag = Field(default=False, description="With neither uid nor session_id: delete the "
                                                 "whole scope (must be explicit).")
    sub_scopes: Flag = Field(default=False, description="With all=true: the scopes under this "
                                                        "one too (a user's agents).")


class AddEpisodes(_Request):
    scope: Scope
    episodes: list[StrictEpisode] = Field(min_length=1, max_length=MAX_EPISODES_PER_REQUEST,
                                          description="Stored atomically; idempotent by uid.")


class Search(_Request):
    scope: Scope
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=10, ge=1, le=MAX_K, strict=True)
    filters: dict[str, Any] | None = Field(
        default=None, description="memroute's filter dialect, e.g. {\"producer\": \"user\"}.")
    as_of: AsOf = Field(default=None, description=AS_OF_HELP + " A search matches the query "
                        "as written; the agent (/v1/retrieve) also reads 'last week' against it.")


class Retrieve(Search):
    strategy: Strategy = "auto"
    budget: Budget | None = None


class Uids(BaseModel):
    uids: list[str]


class Deleted(BaseModel):
    deleted: int
    by_scope: dict[str, int] | None = Field(
        default=None, description="With all=true: episodes deleted per scope path.")


class ScopeStats(BaseModel):
    scope: Scope
    episodes: int
    sentences: int


class Hit(BaseModel):
    """One result: the matched episode, its context cluster (chronological) and its scores."""

    uid: str
    score: float = Field(description="What the results are ordered by (non-increasing).")
    rerank_score: float = Field(description="The hit's own score from the last rerank; it "
                                "differs from score where the agent placed the hit above "
                                "better-scored ones.")
    vector_score: float
    lexical_score: float | None = None
    matched_sentence: str
    nucleus: Episode
    episodes: list[Episode]
    reranker: str = Field(default="none", description="The reranker that scored the hit.")
    query: str | None = Field(default=None, description="The query that found it (the agent "
                              "may search several).")
    hop: int = Field(default=0, description="The chain hop that found it (0 otherwise).")
    role: str | None = Field(default=None, description="The agent's search that found it: "
                             "direct, split or chain (none for /v1/search).")

    @classmethod
    def of(cls, result: ScoredResult) -> Hit:
        return cls(uid=result.uid, score=result.score, rerank_score=result.rerank_score,
                   vector_score=result.vector_score,
                   lexical_score=result.lexical_score, matched_sentence=result.matched_sentence,
                   nucleus=result.nucleus, episodes=result.episodes, reranker=result.reranker,
                   query=result.query, hop=result.extra.get("hop", 0),
                   role=result.extra.get("role"))


class SearchResponse(BaseModel):
    results: list[Hit]
    timings: dict[str, float] = Field(description="Stage timings of the search, in ms.")
    reranker: str = Field(default="none", description="The reranker that ordered the results "
                          "(none: the vector lane's order).")
    hint: str | None = Field(default=None, description=HINT_HELP)


class RetrieveResponse(BaseModel):
    """The agent's evidence, and how it was found: route, queries, why it stopped, costs."""

    results: list[Hit]
    route: str
    route_reason: str
    queries: list[str]
    sub_queries: list[str]
    stop_reason: str
    hops: list[HopRecord] = Field(description="Each chain hop: its query and the judge's "
                                              "verdict (empty for direct and split).")
    search_rounds: int = Field(description="Rounds of searches one after another (a hop's "
                                           "concurrent searches are one round).")
    planner: str
    prompt_versions: dict[str, str] = Field(description="The hash of each prompt an LLM "
                                                        "planner sent (empty offline).")
    notes: list[str]
    costs: dict[str, Any] = Field(description="Per node and total: llm_calls, tokens, wall_ms.")
    hint: str | None = Field(default=None, description=HINT_HELP)

    @classmethod
    def of(cls, result: RetrievalResult, hint: str | None = None) -> RetrieveResponse:
        return cls(results=[Hit.of(r) for r in result.results], route=result.route,
                   route_reason=result.route_reason, queries=result.queries,
                   sub_queries=result.sub_queries, stop_reason=result.stop_reason,
                   hops=result.hops, search_rounds=result.search_rounds,
                   planner=result.planner, prompt_versions=result.prompt_versions,
                   notes=result.notes, costs=result.costs.as_dict(), hint=hint)


class Status(BaseModel):
    status: str
    detail: str = ""


class Health(Status):
    """Liveness (``status`` is ``ok`` while the process answers) and the memory's state."""

    state: Literal["starting", "ready", "failed"] = Field(
        description="starting: the models load and the store opens in the background "
                    "(requests wait for it); ready: open; failed: it could not open "
                    "(detail says why).")


class ErrorBody(BaseModel):
    """Every error the service returns."""

    error: str
    kind: str
