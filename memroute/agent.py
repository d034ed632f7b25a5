"""`RetrievalAgent`: the retrieval graph behind a small async API (and a sync facade)."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from memroute.graph import (
    Event,
    Final,
    GraphPolicies,
    HopRecord,
    NodeCost,
    RetrievalContext,
    compiled_retrieval_graph,
    parse_event,
)
from memroute.graph.state import OUTPUT_KEYS, from_record
from memroute.graph.trace import request_metadata, request_tags
from memroute.memory.models import Scope, ScoredResult
from memroute.memory.rerankers import Reranker, make_reranker
from memroute.memory.store import Memory
from memroute.memory.sync import SyncMemory, memory_and_loop
from memroute.settings import MemrouteSettings
from memroute.planners import Planner, make_planner
from memroute.strategies.base import Strategy
from memroute.strategies.budget import Budget
from memroute.time.as_of import as_of_text

_COUNTS = ("llm_calls", "input_tokens", "output_tokens", "wall_ms")


@dataclass(frozen=True)
class Costs:
    """What a retrieval spent: one record per node run, summed per node and in total."""

    nodes: list[NodeCost]

    def _sum(self, records: list[NodeCost]) -> dict[str, Any]:
        total: dict[str, Any] = {key: sum(r[key] for r in records) for key in _COUNTS}
        total["estimated"] = any(r["estimated"] for r in records)
        return total

    @property
    def by_node(self) -> dict[str, dict[str, Any]]:
        names = list(dict.fromkeys(r["node"] for r in self.nodes))
        return {n: self._sum([r for r in self.nodes if r["node"] == n]) for n in names}

    @property
    def totals(self) -> dict[str, Any]:
        return self._sum(self.nodes)

    @property
    def llm_calls(self) -> int:
        return self.totals["llm_calls"]

    @property
    def decisions(self) -> dict[str, int]:
        """Planner decisions per planner of a cascade (``{"offline": 2, "llm": 1}``); empty
        when one planner made them all."""
        return dict(Counter(r["decided_by"] for r in self.nodes if r.get("decided_by")))

    def as_dict(self) -> dict[str, Any]:
        return {"nodes": [dict(r) for r in self.nodes], "by_node": self.by_node,
                "totals": self.totals, "decisions": self.decisions}


@dataclass(frozen=True)
class RetrievalResult:
    """The graph's output: evidence, the route and queries taken, costs, and why it stopped."""

    results: list[ScoredResult]
    route: str
    queries: list[str]
    costs: Costs
    stop_reason: str
    prompt_versions: dict[str, str] = field(default_factory=dict)
    sub_queries: list[str] = field(default_factory=list)
    hops: list[HopRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    route_reason: str = ""
    planner: str = ""
    search_rounds: int = 0  # rounds of searches one after another (concurrent ones: one)

    @classmethod
    def from_output(cls, output: dict[str, Any]) -> RetrievalResult:
        """From the graph's output (plain data; results become `ScoredResult`s here)."""
        return cls(results=[from_record(r) for r in output.get("results") or []],
                   route=output.get("route", ""),
                   queries=list(output.get("queries") or []),
                   costs=Costs(list(output.get("costs") or [])),
                   stop_reason=output.get("stop_reason", ""),
                   prompt_versions=dict(output.get("prompt_versions") or {}),
                   sub_queries=list(output.get("sub_queries") or []),
                   hops=list(output.get("hops") or []), notes=list(output.get("notes") or []),
                   route_reason=output.get("route_reason", ""),
                   planner=output.get("planner", ""),
                   search_rounds=int(output.get("search_rounds") or 0))

    def trace(self) -> dict[str, Any]:
        """Everything but the evidence objects, as JSON-ready data."""
        data = {k: v for k, v in asdict(self).items() if k not in ("results", "costs")}
        data["costs"] = self.costs.as_dict()
        data["result_uids"] = [r.uid for r in self.results]
        return data


# The deadline of a request whose budget sets no ``max_latency_s``: planning (LLM) steps past
# it are cancelled, and the first search and the final rerank still run (docs/agent.md).
DEFAULT_MAX_LATENCY_S = 30.0


class RetrievalAgent:
    """Routes each query (direct, SplitQuery or ChainOfQuery), searches memory, and reranks.

    ``llm``: ``None`` (the offline planner, unless ``MEMROUTE_LLM_MODEL`` is set), an
    ``openai.AsyncOpenAI`` or a LangChain ``BaseChatModel``; ``router_llm`` or
    ``router_model`` serve ToolSelect with a cheaper model. ``reranker``: ``None`` keeps the
    memory's reranker; a `Reranker` or a spec (``"offline"``, ``"flashrank"``) replaces it
    for every search and the final rerank. ``planner``: a `Planner` overrides all of the
    above; ``"offline"`` never reaches a model (whatever ``MEMROUTE_LLM_MODEL`` says),
    ``"llm"`` requires one, ``"cascade"`` asks the model only below the offline
    confidence threshold, ``"auto"`` is the rule above; ``None`` is ``MEMROUTE_PLANNER``
    (default ``auto``). ``max_latency_s``: the deadline of a request whose budget sets none
    (default `DEFAULT_MAX_LATENCY_S`, 30 s; ``None``: no default deadline).
    ``expired_items``: LangGraph store items past their ttl are found too (default: never).
    """

    def __init__(self, memory: Memory | SyncMemory, llm: Any = None,
                 reranker: Reranker | str | None = None, planner: Planner | str | None = None, *,
                 model: str | None = None, router_llm: Any = None, router_model: str | None = None,
                 settings: MemrouteSettings | None = None, max_hops: int = 3,
                 sufficient_confidence: float = 0.8,
                 rerank_mode: Literal["fused", "concat"] = "fused",
                 search_concurrency: int = 4, context: tuple[int, int] | None = None,
                 policies: GraphPolicies | None = None,
                 max_latency_s: float | None = DEFAULT_MAX_LATENCY_S,
                 expired_items: bool = False) -> None:
        memory, self.loop = memory_and_loop(memory)  # runs go where the memory's pool lives
        self.settings = settings or memory.settings
        if reranker is not None:  # a view of the same store (same pool) with another reranker
            memory = copy.copy(memory)
            memory.reranker = make_reranker(reranker) if isinstance(reranker, str) else reranker
        self.memory = memory
        llm_options = {k: v for k, v in {"model": model, "router_llm": router_llm,
                                         "router_model": router_model}.items() if v is not None}
        if planner is None or isinstance(planner, str):
            planner = make_planner(llm, settings=self.settings, choice=planner, **llm_options)
        self.planner = planner
        self.options = {"max_hops": max_hops, "sufficient_confidence": sufficient_confidence,
                        "rerank_mode": rerank_mode, "search_concurrency": search_concurrency,
                        "neighbours": context, "expired_items": expired_items}
        RetrievalContext(memory=self.memory, planner=self.planner, **self.options)  # validate
        self.policies = policies or GraphPolicies.from_settings(self.settings)
        self.graph = compiled_retrieval_graph(self.policies)
        Budget(max_latency_s=max_latency_s)  # validate
        self.max_latency_s = max_latency_s

    def context(self) -> RetrievalContext:
        """A fresh runtime context for one run (its own search-concurrency cap)."""
        return RetrievalContext(memory=self.memory, planner=self.planner, **self.options)

    def _input(self, query: str, scope: Scope | dict, k: int, filters: dict | None,
               strategy: Strategy, budget: Budget | dict | None,
               as_of: datetime | str | None = None) -> dict[str, Any]:
        """The graph's input as plain data (the graph validates it), with the agent's
        default deadline when the budget sets none."""
        budget = Budget.coerce(budget)
        if self.max_latency_s is not None and (budget is None or budget.max_latency_s is None):
            budget = replace(budget or Budget(), max_latency_s=self.max_latency_s)
        return {"query": query, "scope": scope.as_dict() if isinstance(scope, Scope) else scope,
                "k": k, "filters": filters, "strategy": strategy,
                "budget": None if budget is None else asdict(budget),
                "as_of": as_of_text(as_of)}

    def _config(self, request: dict[str, Any], config: dict | None) -> dict[str, Any]:
        """The caller's run config with the request's trace metadata and tags added."""
        config = dict(config or {})
        scope = request["scope"] if isinstance(request["scope"], dict) else {}
        strategy = request["strategy"] if isinstance(request["strategy"], str) else "auto"
        config["metadata"] = {**request_metadata(scope, request["k"], strategy,
                                                 self.planner.name),
                              **(config.get("metadata") or {})}
        config["tags"] = list(dict.fromkeys([*(config.get("tags") or []),
                                             *request_tags(strategy)]))
        return config

    async def aretrieve(self, query: str, *, scope: Scope | dict, k: int = 10,
                        filters: dict | None = None, strategy: Strategy = "auto",
                        budget: Budget | dict | None = None,
                        as_of: datetime | str | None = None,
                        config: dict | None = None) -> RetrievalResult:
        """Retrieve the top ``k`` results for ``query`` within ``scope``, as of ``as_of``
        (a datetime, ISO-8601 text or a date, `memroute.time.parse_as_of`; ``None``: now):
        "last week" is the week before it on its own calendar, and nothing produced after a
        given ``as_of`` is returned, matched turn or context. ``filters``: one filter, or a
        list of filters that must all hold. The run's trace
        carries the request (``memroute_*`` metadata, ``memroute:*`` tags), and its
        ``memroute_decision`` child run the route and stop reason too."""
        request = self._input(query, scope, k, filters, strategy, budget, as_of)
        output = await self.loop.run_as_async(self.graph.ainvoke(
            request, self._config(request, config), context=self.context()))
        return RetrievalResult.from_output(output)

    def retrieve(self, query: str, **kwargs: Any) -> RetrievalResult:
        """Sync facade of `aretrieve`: it runs on the loop the memory's pool lives on
        (`memroute._loop`)."""
        return self.loop.run_as_sync(self.aretrieve(query, **kwargs))

    async def astream(self, query: str, *, scope: Scope | dict, k: int = 10,
                      filters: dict | None = None, strategy: Strategy = "auto",
                      budget: Budget | dict | None = None,
                      as_of: datetime | str | None = None,
                      config: dict | None = None) -> AsyncIterator[Event]:
        """Progress events in order: route, sub-queries, searches, hops, then `Final`
        whose ``result`` is the `RetrievalResult` (``as_of`` as in `aretrieve`)."""
        final: Final | None = None
        values: dict[str, Any] = {}
        request = self._input(query, scope, k, filters, strategy, budget, as_of)
        async for mode, chunk in self.loop.iterate_as_async(self.graph.astream(
                request, self._config(request, config), context=self.context(),
                stream_mode=["custom", "values"])):
            if mode == "values":
                values = chunk
                continue
            event = parse_event(chunk)
            if isinstance(event, Final):
                final = event
            elif event is not None:
                yield event
        result = RetrievalResult.from_output({k: values.get(k) for k in OUTPUT_KEYS
                                              if k in values})
        yield Final(result.route, result.stop_reason, result.queries, len(result.results),
                    result) if final is None else Final(final.route, final.stop_reason,
                                                        final.queries, final.results, result)

    def stream(self, query: str, **kwargs: Any) -> Iterator[Event]:
        """Sync facade of `astream`: the events as they come, from the loop the memory's
        pool lives on."""
        return self.loop.iterate_as_sync(self.astream(query, **kwargs))
