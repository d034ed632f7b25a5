"""The retrieval agent as a LangGraph state machine.

``START -> tool_select -> (memory_search | split_plan -> memory_search x n |
memory_search -> chain_judge -> memory_search ...) -> final_rerank -> END``
"""

from memroute.graph.builder import GraphPolicies, build_retrieval_graph, compiled_retrieval_graph
from memroute.graph.context import RetrievalContext
from memroute.graph.events import (
    Event,
    Final,
    HopJudged,
    RouteChosen,
    SearchDone,
    SubQueries,
    parse_event,
)
from memroute.graph.state import (
    HopRecord,
    NodeCost,
    ResultRecord,
    RetrievalInput,
    RetrievalOutput,
    RetrievalState,
    as_record,
    from_record,
)

__all__ = [
    "Event",
    "Final",
    "GraphPolicies",
    "HopJudged",
    "HopRecord",
    "NodeCost",
    "ResultRecord",
    "RetrievalContext",
    "RetrievalInput",
    "RetrievalOutput",
    "RetrievalState",
    "RouteChosen",
    "SearchDone",
    "SubQueries",
    "as_record",
    "build_retrieval_graph",
    "compiled_retrieval_graph",
    "from_record",
    "parse_event",
]
