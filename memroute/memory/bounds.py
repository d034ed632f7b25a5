"""`ReadBound`: what a read may return, compiled where every read statement is built.

Every statement that returns episodes (a search's probe and lanes, the matched turn's context
window, a reply put in place of a question, a lookup by uid or by recency) takes a
`ReadBound` and puts its SQL in its WHERE clause, for each table alias it reads: no episode
produced after ``as_of``, none outside the ``filters``, no store item past its expiry. A read
path cannot leave it out: the statement builders have no default for it.

``filters`` are the caller's (memroute's filter dialect, `memroute.memory.filters`), each
validated and limited on its own and all of them required: a store's own conditions (its
namespace, its items' expiry) come beside a caller's filter, never inside it, so a filter
within the documented limits stays within them whatever a face adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memroute.errors import FilterError
from memroute.memory.filters import compile_filter
from memroute.memory.models import STORE_METADATA_KEYS
from memroute.time.as_of import parse_as_of

# where an item of the LangGraph store face keeps its expiry on its episode and sentences
# (Unix seconds, `memroute.memory.items.EXPIRES_KEY`; absent: never). Only the store writes
# it (`memroute.memory.models.STORE_METADATA_KEYS`).
ITEM_EXPIRES_KEY = STORE_METADATA_KEYS[2]


def filter_list(filters: Any) -> tuple[dict[str, Any], ...]:
    """``filters`` (None, one filter, or a list of filters that must all hold) as a tuple of
    non-empty filters."""
    if filters is None:
        return ()
    if isinstance(filters, dict):
        return (filters,) if filters else ()
    if isinstance(filters, (list, tuple)):
        if not all(isinstance(f, dict) or f is None for f in filters):
            raise FilterError("filters is a mapping, or a list of mappings that must all hold")
        return tuple(f for f in filters if f)
    raise FilterError(f"a filter must be a mapping, got {type(filters).__name__}")


@dataclass(frozen=True)
class ReadBound:
    """What a read may return (see the module docstring). Built once per read; its filters
    are compiled on construction, so a bad one fails before anything is read."""

    filters: tuple[dict[str, Any], ...] = ()
    as_of: datetime | None = None
    # whether store items past their expiry may be returned (a LangGraph store whose ttl
    # config sets ``omit_expired=False``)
    expired_items: bool = False

    @classmethod
    def of(cls, filters: Any = None, as_of: Any = None, *,
           expired_items: bool = False) -> ReadBound:
        """A bound from a face's arguments: ``filters`` one filter or a list of filters,
        ``as_of`` anything `memroute.time.parse_as_of` takes."""
        bound = cls(filter_list(filters), parse_as_of(as_of), expired_items)
        for condition in bound.filters:  # validated now, not when the first read runs
            compile_filter(condition, "e", sentences_table="s")
        return bound

    def narrowed(self, *filters: dict[str, Any] | None) -> ReadBound:
        """This bound with more filters, all required."""
        return ReadBound(self.filters + filter_list(list(filters)), self.as_of,
                         self.expired_items)

    def sentences(self, alias: str, match: Sequence[dict[str, Any]] = ()) -> tuple[str, list]:
        """SQL and parameters for rows ``alias`` of the sentences table (which carry their
        episode's time and metadata), with ``match``: conditions only the matched sentence
        must meet, not the episodes that come with it."""
        parts, params = self._common(alias)
        for condition in (*self.filters, *match):
            sql, extra = compile_filter(condition, alias, sentences=True)
            parts.append(sql)
            params += extra
        return " AND ".join(parts) or "TRUE", params

    def episodes(self, alias: str, sentences_table: str) -> tuple[str, list]:
        """SQL and parameters for rows ``alias`` of the episodes table (``sentences_table``:
        its schema's sentences, for the days a filter asks its sentences to name)."""
        parts, params = self._common(alias)
        for condition in self.filters:
            sql, extra = compile_filter(condition, alias, sentences_table=sentences_table)
            parts.append(sql)
            params += extra
        return " AND ".join(parts) or "TRUE", params

    def _common(self, alias: str) -> tuple[list[str], list[Any]]:
        parts: list[str] = []
        params: list[Any] = []
        if self.as_of is not None:
            parts.append(f"{alias}.produced_at <= %s")
            params.append(self.as_of)
        if not self.expired_items:
            expires = f"({alias}.metadata -> '{ITEM_EXPIRES_KEY}')"
            parts.append(f"(NOT {alias}.metadata ? '{ITEM_EXPIRES_KEY}' OR CASE WHEN "
                         f"jsonb_typeof({expires}) = 'number' THEN {expires}::float8 > "
                         "extract(epoch FROM now()) ELSE true END)")
        return parts, params


UNBOUNDED = ReadBound(expired_items=True)
"""A read of everything the scope holds (the store face's own lookups by key)."""
