"""The run's decisions as trace metadata and tags, so runs can be filtered in LangSmith (or
any callback handler): the request's (strategy requested, planner, k, scope ids) on the run
a caller starts, and all of them with the route and stop reason on a ``memroute_decision``
child run that the final node records."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableLambda

from memroute.graph.state import RetrievalState

DECISION_RUN = "memroute_decision"
TAG = "memroute"
_SCOPE_IDS = ("org_id", "project_id", "user_id", "agent_id")


def request_metadata(scope: dict[str, Any], k: int, strategy: str,
                     planner: str) -> dict[str, Any]:
    """Metadata of a request, known before it runs."""
    return {"memroute_strategy_requested": strategy, "memroute_planner": planner,
            "memroute_k": k,
            **{f"memroute_{name}": scope.get(name) for name in _SCOPE_IDS}}


def request_tags(strategy: str) -> list[str]:
    return [TAG, f"memroute:strategy:{strategy}"]


def decision_metadata(state: RetrievalState, stop_reason: str) -> dict[str, Any]:
    """Metadata of a finished run: the request's, the route taken and why it stopped."""
    return {**request_metadata(state.get("scope") or {}, state.get("k", 10),
                               state.get("strategy") or "auto", state.get("planner", "")),
            "memroute_route": state.get("route", ""), "memroute_stop_reason": stop_reason}


async def record_decision(state: RetrievalState, stop_reason: str) -> None:
    """Record the run's decisions as a child run of the current node."""
    metadata = decision_metadata(state, stop_reason)
    tags = [*request_tags(metadata["memroute_strategy_requested"]),
            f"memroute:route:{metadata['memroute_route']}",
            f"memroute:stop:{stop_reason.split(':')[0]}"]
    # with ``afunc`` the child run stays on the event loop (a sync function alone is run
    # in an executor thread: a thread hop on every run, for a passthrough)
    await RunnableLambda(_passthrough, afunc=_apassthrough, name=DECISION_RUN).ainvoke(
        metadata, {"tags": tags, "metadata": metadata, "run_name": DECISION_RUN})


def _passthrough(decision: dict[str, Any]) -> dict[str, Any]:
    return decision


async def _apassthrough(decision: dict[str, Any]) -> dict[str, Any]:
    return decision
