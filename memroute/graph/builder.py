"""Assemble the retrieval graph; compile it once per set of policies."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from langgraph.errors import NodeTimeoutError
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import RetryPolicy, TimeoutPolicy

from memroute.errors import InvalidInputError, StoreUnavailableError
from memroute.graph import chain_judge, split_plan, tool_select
from memroute.graph.context import ContextResolver, ContextSource, RetrievalContext
from memroute.graph.final_rerank import make_final_rerank
from memroute.graph.memory_search import make_memory_search
from memroute.graph.planner_step import make_fallback
from memroute.graph.state import RetrievalInput, RetrievalOutput, RetrievalState
from memroute.planners.llm.structured import is_transient


@dataclass(frozen=True)
class GraphPolicies:
    """Timeouts and retries of the LLM nodes (per attempt), and of the search node."""

    llm_timeout_s: float = 30.0
    llm_max_attempts: int = 3
    retry_initial_interval_s: float = 0.5
    retry_max_interval_s: float = 8.0
    search_max_attempts: int = 1  # Memory already retries dropped connections

    @classmethod
    def from_settings(cls, settings) -> GraphPolicies:
        return cls(llm_timeout_s=settings.llm_timeout_s,
                   llm_max_attempts=settings.llm_max_retries + 1)


def _retry_llm(exc: Exception) -> bool:
    return isinstance(exc, NodeTimeoutError) or is_transient(exc)


def build_retrieval_graph(context: ContextSource = None,
                          policies: GraphPolicies = GraphPolicies(), *,
                          context_schema: type | None = RetrievalContext) -> StateGraph:
    """The uncompiled retrieval graph (input `RetrievalInput`, output `RetrievalOutput`).

    ``context`` is used when a run's runtime context is not a `RetrievalContext` (nor a
    host context with a ``memroute`` field): a context, or an async factory called once.
    ``context_schema`` is what LangGraph builds a run's context from when it is given a
    dict; a server passes ``{}``, so a served graph declares a schema with no required field.
    """
    resolve = ContextResolver(context)
    llm_retry = RetryPolicy(max_attempts=policies.llm_max_attempts,
                            initial_interval=policies.retry_initial_interval_s,
                            max_interval=policies.retry_max_interval_s, retry_on=_retry_llm)
    timeout = TimeoutPolicy(run_timeout=policies.llm_timeout_s)

    def fallback(node, **options) -> object:
        return make_fallback(node.NODE, node.STEP, resolve, policies.llm_max_attempts,
                             node.fall_back, **options)

    bad_request = (InvalidInputError,)  # raised to the caller, never searched around

    graph = StateGraph(RetrievalState, context_schema=context_schema,
                       input_schema=RetrievalInput, output_schema=RetrievalOutput)
    graph.add_node("tool_select", tool_select.make_tool_select(resolve), retry_policy=llm_retry,
                   timeout=timeout, error_handler=fallback(tool_select, reraise=bad_request),
                   destinations=("memory_search", "split_plan"))
    graph.add_node("split_plan", split_plan.make_split_plan(resolve), retry_policy=llm_retry,
                   timeout=timeout, error_handler=fallback(split_plan),
                   destinations=("memory_search", "final_rerank"))
    graph.add_node("memory_search", make_memory_search(resolve), input_schema=RetrievalState,
                   retry_policy=RetryPolicy(max_attempts=policies.search_max_attempts,
                                            initial_interval=0.2,
                                            retry_on=StoreUnavailableError),
                   destinations=("chain_judge", "final_rerank"))
    graph.add_node("chain_judge", chain_judge.make_chain_judge(resolve), retry_policy=llm_retry,
                   timeout=timeout, error_handler=fallback(chain_judge),
                   destinations=("memory_search", "final_rerank"))
    graph.add_node("final_rerank", make_final_rerank(resolve))
    graph.add_edge(START, "tool_select")
    graph.add_edge("final_rerank", END)
    return graph


@lru_cache(maxsize=8)
def compiled_retrieval_graph(policies: GraphPolicies = GraphPolicies()) -> CompiledStateGraph:
    """The compiled graph for ``policies``, built once; pass the context with each run."""
    return build_retrieval_graph(None, policies).compile(name="memroute")
