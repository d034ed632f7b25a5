"""What the model is asked to return for each decision, and how a reply becomes the
strategy's decision schema (`memroute.strategies.base`).

Replies are lenient where a model is often sloppy; the conversions clamp and filter.
Sub-queries are passed on as proposed: the graph cleans them once (`clean_sub_queries`).
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from memroute.strategies.base import (
    MAX_REASON_CHARS,
    ChainJudgment,
    Route,
    RouteDecision,
    SplitPlan,
)

MAX_NEW_QUERY_CHARS = 500


class RouteReply(BaseModel):
    """ToolSelect's reply."""

    route: Route
    reason: str = ""


class SplitReply(BaseModel):
    """SplitQuery's reply."""

    sub_queries: list[str] = []


class JudgeReply(BaseModel):
    """ChainOfQuery's reply (lenient: `to_judgment` clamps and filters)."""

    is_sufficient: bool
    evidence_indices: list[int] = []
    new_query: str = ""
    confidence: float = 0.0


def to_decision(reply: RouteReply) -> RouteDecision:
    return RouteDecision(route=reply.route, reason=reply.reason.strip()[:MAX_REASON_CHARS])


def to_plan(reply: SplitReply) -> SplitPlan:
    return SplitPlan(sub_queries=list(reply.sub_queries))


def to_judgment(reply: JudgeReply, n_evidence: int) -> ChainJudgment:
    """Out-of-range or repeated indices dropped, confidence clamped to [0, 1]."""
    indices = list(dict.fromkeys(i for i in reply.evidence_indices if 0 <= i < n_evidence))
    confidence = reply.confidence if math.isfinite(reply.confidence) else 0.0
    return ChainJudgment(is_sufficient=reply.is_sufficient, evidence_indices=indices,
                         new_query=" ".join(reply.new_query.split())[:MAX_NEW_QUERY_CHARS],
                         confidence=min(1.0, max(0.0, confidence)))
