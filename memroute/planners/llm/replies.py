"""What the model is asked to return for each decision, and how a reply becomes the
strategy's decision schema (`memroute.strategies.base`).

Replies are lenient where a model is often sloppy; the conversions clamp and filter. A
reply is untrusted input: every text it carries loses what the store cannot hold (NUL
bytes, lone surrogates: `storable`), so a bad reply never fails the request as if the
caller had sent it. Sub-queries are then cleaned once more by the graph
(`clean_sub_queries`: length, duplicates, derived wording).
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from memroute.strategies.base import (
    MAX_REASON_CHARS,
    ChainJudgment,
    Route,
    RouteDecision,
    SplitPlan,
)

MAX_NEW_QUERY_CHARS = 500
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL, and surrogates (in a str, always lone)


def storable(text: str) -> str:
    """``text`` without NUL bytes and lone surrogates, whitespace collapsed."""
    return " ".join(_UNSTORABLE.sub(" ", text).split())


def _bare_schema(schema: dict[str, Any]) -> None:
    """The schema sent to the model without the class docstring and the fields' titles:
    the prompt says what each field means, and every request pays for the schema's tokens
    (the judge's 159 tokens -> 106)."""
    schema.pop("description", None)
    for field in schema.get("properties", {}).values():
        field.pop("title", None)


class Reply(BaseModel):
    """A reply the model is asked for (its JSON schema goes out with every request)."""

    model_config = ConfigDict(json_schema_extra=_bare_schema)


class RouteReply(Reply):
    """ToolSelect's reply."""

    route: Route
    reason: str = ""


class SplitReply(Reply):
    """SplitQuery's reply."""

    sub_queries: list[str] = []


class JudgeReply(Reply):
    """ChainOfQuery's reply (lenient: `to_judgment` clamps and filters)."""

    is_sufficient: bool
    evidence_indices: list[int] = []
    new_query: str = ""
    confidence: float = 0.0


def to_decision(reply: RouteReply) -> RouteDecision:
    return RouteDecision(route=reply.route, reason=storable(reply.reason)[:MAX_REASON_CHARS])


def to_plan(reply: SplitReply) -> SplitPlan:
    return SplitPlan(sub_queries=[storable(q) for q in reply.sub_queries])


def to_judgment(reply: JudgeReply, n_evidence: int) -> ChainJudgment:
    """Out-of-range or repeated indices dropped, confidence clamped to [0, 1]."""
    indices = list(dict.fromkeys(i for i in reply.evidence_indices if 0 <= i < n_evidence))
    confidence = reply.confidence if math.isfinite(reply.confidence) else 0.0
    return ChainJudgment(is_sufficient=reply.is_sufficient, evidence_indices=indices,
                         new_query=storable(reply.new_query)[:MAX_NEW_QUERY_CHARS],
                         confidence=min(1.0, max(0.0, confidence)))
