"""``as_of``: the time a question is asked, one type for every face.

Accepted on every face that takes it (library, graph input, retriever, tool, REST, MCP,
CLI; a LangGraph store is asked no time):

- a datetime or ISO-8601 text with an offset (``2025-01-15T09:00+01:00``, ``...Z``): kept
  with its offset, so calendar words ("yesterday", "last week") are read on its own calendar;
- without an offset (``2025-01-15T09:00``, a naive datetime): read as UTC;
- a bare date (``2025-01-15``): the end of that day, UTC (everything produced that day is
  visible);
- ``None``: now.

Refused with `InvalidInputError` (HTTP 422, CLI exit 2, MCP ``[InvalidInputError]``):
numbers and booleans (as ``produced_at`` refuses them), any other type, text that is not
ISO-8601, and times outside `AS_OF_RANGE` (the calendar's edges, where "last year" or an
offset would leave the years a datetime or PostgreSQL can hold).
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING, Annotated, Any

from memroute.errors import InvalidInputError

AS_OF_RANGE = (datetime(2, 1, 1, tzinfo=timezone.utc),
               datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc))
AS_OF_HELP = ("When the question is asked: ISO-8601 with an offset (2025-01-15T09:00+01:00), "
              "without one (read as UTC), or a date (2025-01-15: the end of that day, UTC); "
              "default now. Nothing produced after it is returned.")


def parse_as_of(value: Any) -> datetime | None:
    """``value`` as an aware datetime with its own offset (``None`` stays ``None``: now).

    Raises:
        InvalidInputError: a number, a boolean, another type, text that is not ISO-8601, or
            a time outside `AS_OF_RANGE`.
    """
    if value is None:
        return None
    if isinstance(value, str):
        moment = _from_text(value.strip())
    elif isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = _end_of_day(value)
    else:
        raise InvalidInputError(
            f"as_of is an ISO-8601 date-time or date (e.g. 2025-01-15T09:00:00+01:00), not "
            f"{type(value).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        instant = moment.astimezone(timezone.utc)
    except OverflowError:
        instant = None
    if instant is None or not AS_OF_RANGE[0] <= instant <= AS_OF_RANGE[1]:
        raise InvalidInputError(
            f"as_of must lie between {AS_OF_RANGE[0].date().isoformat()} and "
            f"{AS_OF_RANGE[1].date().isoformat()} (UTC), got {moment.isoformat()!r:.60}")
    return moment


def _from_text(text: str) -> datetime:
    if not (text.isascii() and text.isprintable()):
        raise InvalidInputError(f"as_of is ISO-8601 text, got {text!r:.40}")
    if len(text) <= 10:  # a date alone: "2025-01-15", "20250115", "2025-W03-3"
        try:
            return _end_of_day(date.fromisoformat(text))
        except ValueError:
            pass
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"as_of is an ISO-8601 date-time or date (e.g. "
                                f"2025-01-15T09:00:00+01:00), got {text!r:.40}") from None


def _end_of_day(day: date) -> datetime:
    return datetime.combine(day, time.max, tzinfo=timezone.utc)


def as_of_text(value: Any) -> str | None:
    """`parse_as_of`'s time as ISO-8601 text with its offset (how the graph's state holds it)."""
    moment = parse_as_of(value)
    return None if moment is None else moment.isoformat()


def wall_clock(as_of: datetime) -> datetime:
    """``as_of``'s own wall-clock time, labelled UTC: calendar arithmetic ("yesterday", "last
    week") on it names the days of ``as_of``'s calendar; `from_wall_clock` turns its results
    back into instants."""
    return as_of.replace(tzinfo=timezone.utc) if as_of.tzinfo is None else \
        as_of.replace(tzinfo=None).replace(tzinfo=timezone.utc)


def from_wall_clock(moment: datetime, as_of: datetime) -> datetime:
    """The instant of a wall-clock time of ``as_of``'s calendar (see `wall_clock`)."""
    offset = as_of.utcoffset() or timedelta(0)
    return (moment.replace(tzinfo=None) - offset).replace(tzinfo=timezone.utc)


def _validated(value: Any) -> datetime | None:
    try:
        return parse_as_of(value)
    except InvalidInputError as exc:
        raise ValueError(str(exc)) from None


def _as_of_type() -> Any:
    from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

    return Annotated[
        datetime | None,
        PlainValidator(_validated),
        PlainSerializer(lambda v: None if v is None else v.isoformat(), return_type=str | None),
        WithJsonSchema({"anyOf": [{"type": "string", "format": "date-time"},
                                  {"type": "string", "format": "date"}, {"type": "null"}],
                        "description": AS_OF_HELP}),
    ]


if TYPE_CHECKING:
    AsOf = datetime | None
    """`parse_as_of` as a pydantic field type (REST bodies, MCP arguments, the retriever)."""


def __getattr__(name: str) -> Any:
    # `AsOf` is built on first use: reading an `as_of` (the CLI) imports no pydantic.
    if name == "AsOf":
        globals()["AsOf"] = value = _as_of_type()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
