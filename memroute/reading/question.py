"""A question's one reading (`read`): its parse, the thing it describes, the event it is asked
around, whether it asks how things stand now, what it names, and, for the time it is asked,
the windows of time it names. Made once, before routing (`memroute.graph.tool_select`), and
read by every node and planner: none parses the question again.

Readings are kept by question text (and by the instant and offset of ``as_of``), so the graph's
state carries only the question and ``as_of`` and stays checkpointable.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from memroute.errors import ModelUnavailableError
from memroute.nlp import query_entity_keys
from memroute.reading.dates import windowed_searches
from memroute.reading.descriptors import Descriptor, descriptor
from memroute.reading.events import event_of
from memroute.reading.parse import QuestionParse, read_question
from memroute.strategies.base import ChainSearch
from memroute.time.events import EventRef
from memroute.time.windows import asks_now

READINGS_KEPT = 1024  # questions whose reading is kept


@dataclass(frozen=True)
class QuestionReading:
    """What a question says, read once."""

    text: str
    parse: QuestionParse | None  # None without the spaCy model
    described: Descriptor | None  # the innermost thing it describes but does not name
    event: EventRef | None  # the event it is asked around ("before my trip to Norway")
    asks_now: bool  # it asks how things stand now ("now", "still", the present tense)
    entity_keys: tuple[str, ...]  # the `entity_key` of everything it names
    as_of: datetime | None = None  # when it is asked: the windows below are read against it
    # the search of each window of time it names ("last week"), and what they are in words
    windows: tuple[ChainSearch, ...] = ()
    windows_said: str = ""


@lru_cache(maxsize=READINGS_KEPT)
def _untimed(question: str) -> QuestionReading:
    try:
        parse: QuestionParse | None = read_question(question)
        keys = tuple(query_entity_keys(question))  # from the parse just made
    except ModelUnavailableError:
        parse, keys = None, ()
    try:
        described = descriptor(question, parse.named if parse else ())
    except ModelUnavailableError:
        described = None
    return QuestionReading(question, parse, described, event_of(question), asks_now(question),
                           keys)


@lru_cache(maxsize=READINGS_KEPT)
def _timed(question: str, stamp: str, zone: str, as_of: datetime) -> QuestionReading:
    """(``stamp`` and ``zone`` key the cache: equal instants on other calendars, or in zones
    with other rules, name other days.)"""
    reading = _untimed(question)
    described = reading.described
    windows, said = windowed_searches(question, as_of, skip=described.text if described else "")
    return dataclasses.replace(reading, as_of=as_of, windows=tuple(windows), windows_said=said)


def read(question: str, as_of: datetime | None = None) -> QuestionReading:
    """The reading of ``question``, with the windows of time it names read against ``as_of``
    when given (kept: each node and decision about the same question reads the same one)."""
    return (_untimed(question) if as_of is None
            else _timed(question, as_of.isoformat(), repr(as_of.tzinfo), as_of))


def forget_readings() -> None:
    """Drop the kept readings (tests that count how often a question is read)."""
    _untimed.cache_clear()
    _timed.cache_clear()
    read_question.cache_clear()
