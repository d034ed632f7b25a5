"""Typed progress events of a retrieval, streamed through LangGraph's custom stream mode.

Nodes write plain dicts (``{"event": "route", ...}``) so that any LangGraph consumer can
read them; `parse_event` turns one into its typed form.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class RouteChosen:
    route: str
    reason: str
    source: str  # "override" | "planner" | "budget" | "fallback"
    event: str = "route"


@dataclass(frozen=True)
class SubQueries:
    queries: list[str]
    event: str = "sub_queries"


@dataclass(frozen=True)
class SearchDone:
    query: str
    role: str  # "direct" | "split" | "chain"
    hop: int
    hits: int
    event: str = "search"


@dataclass(frozen=True)
class HopJudged:
    hop: int
    query: str
    is_sufficient: bool | None
    confidence: float | None
    new_query: str
    decision: str  # "continue" or the stop reason
    concurrent_queries: list[str] = field(default_factory=list)  # searched with ``query``
    new_concurrent_queries: list[str] = field(default_factory=list)  # sent with ``new_query``
    reason: str = ""  # the judge's account of its verdict
    event: str = "hop"


@dataclass(frozen=True)
class Final:
    route: str
    stop_reason: str
    queries: list[str]
    results: int
    result: Any = None  # the full RetrievalResult, when streamed through RetrievalAgent
    event: str = "final"


Event = RouteChosen | SubQueries | SearchDone | HopJudged | Final
_TYPES = {cls.event: cls for cls in (RouteChosen, SubQueries, SearchDone, HopJudged, Final)}


def as_payload(event: Event) -> dict[str, Any]:
    """The dict a node writes to the custom stream."""
    return {f.name: getattr(event, f.name) for f in fields(event) if f.name != "result"}


def parse_event(payload: dict[str, Any]) -> Event | None:
    """The typed event for a streamed dict, or ``None`` if it is not one of memroute's."""
    cls = _TYPES.get(payload.get("event")) if isinstance(payload, dict) else None
    if cls is None:
        return None
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in payload.items() if k in names})
