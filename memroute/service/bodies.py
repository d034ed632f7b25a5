"""The request parts both faces check the same way (REST bodies, MCP tool arguments), apart
from `memroute.service.models` so the MCP server lists its tools without importing the agent."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ConfigDict, ValidationError, field_validator
from pydantic_core import ErrorDetails

from memroute.memory.models import Episode

MAX_EPISODES_PER_REQUEST = 1000  # episodes of one add request
MAX_REQUEST_BYTES = 8 * 1024 * 1024  # body of one request (413 beyond it)


def invalid_fields(errors: list[ErrorDetails] | ValidationError, limit: int = 5) -> str:
    """What was wrong, field by field (``k: Input should be ...; episodes.0.sesion_id:
    Extra inputs are not permitted``), without the input values or pydantic's links."""
    if isinstance(errors, ValidationError):
        errors = errors.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(str(p) for p in err['loc'] if p != 'body') or 'body'}: {err['msg']}"
             for err in errors[:limit]]
    more = len(errors) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


class StrictEpisode(Episode):
    """An episode as a request gives it: an unknown field (a typo like ``sesion_id``) is
    refused, not dropped, and ``produced_at`` is an ISO 8601 string (not a number)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("produced_at", mode="before")
    @classmethod
    def _iso_text(cls, value: Any) -> Any:
        if not isinstance(value, (str, datetime)):
            raise ValueError("produced_at is an ISO 8601 date-time string, e.g. "
                             "2024-03-18T12:16:00Z")
        return value
