"""When an event was: the evidence that speaks of an event a question is asked around ("my
trip to Norway") gives its date (a date the sentence states, read against when it was said,
else when it was said), and the window the question's relation asks about (before, after or
since, during). Which event a question names is the planner's reading
(`memroute.reading.events`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from memroute.errors import ModelUnavailableError
from memroute.nlp import Entity, asks, fold, parse
from memroute.reading import vocabulary as V
from memroute.time.expressions import nearest, utc

BEFORE = V.EVENT_BEFORE.phrases
AFTER = V.EVENT_AFTER.phrases
DURING_DAYS = 10  # an event's span when the evidence gives only its start
SPEAKING_OF = 5  # the best hits of the event's own search speak of it, whatever their words
# "the hospital", "the trip": the one spoken of lately; mentions more than a year before
# the newest are of another such event
RECENT_MENTIONS = timedelta(days=365)


@dataclass(frozen=True)
class EventRef:
    """An event the question is asked around."""

    relation: str  # "before", "after", "since", "during", ...
    text: str  # "my trip to Norway"
    words: tuple[str, ...]  # its content words, folded ("trip", "norway")


@dataclass(frozen=True)
class EventSpan:
    """Where the evidence puts an event, and the window of time the question asks about."""

    date: datetime
    sentence: str  # what dated it
    after: datetime | None  # the window asked about, [after, before)
    before: datetime | None
    stated: bool = True  # the evidence states the date (else it is when the event was spoken of)

    def said(self, event: EventRef) -> str:
        days = [d.date().isoformat() for d in (self.after, self.before) if d is not None]
        window = "..".join(days) if len(days) == 2 else (
            f"from {days[0]}" if self.after is not None else f"until {days[0]}")
        dated = "is dated" if self.stated else "was spoken of on"
        return (f"'{event.text}' {dated} {self.date.date().isoformat()} "
                f"(\"{self.sentence[:100]}\"): searching {event.relation} it, {window}")


def _stated_date(text: str, entities: list[Entity] | None, said_at: datetime) -> datetime | None:
    """A date ``text`` states, read against when it was said ("on 3 August", said in June:
    that August), or None."""
    statements = " ".join(s for s in re.split(r"(?<=[.!?])\s+", text) if not s.endswith("?"))
    spans = [e.text for e in entities or [] if e.label in ("DATE",) and e.text in statements]
    if not spans:
        try:
            spans = [e.text for e in parse(statements[:500]).ents if e.label_ == "DATE"]
        except ModelUnavailableError:
            return None
    for span in spans:
        if re.fullmatch(r"(today|now|these days|\d{4}s?)", span.strip(), re.I):
            continue
        moment = nearest(span, said_at)
        if moment is not None:
            return moment
    return None


def event_span(event: EventRef, evidence: list[str], times: list[datetime | None],
               entities: list[list[Entity] | None] | None = None) -> EventSpan | None:
    """The event's date from the evidence that speaks of it (said within `RECENT_MENTIONS`
    of the newest such item; the items with most of its words, best ranked first; a date the
    item states, else when it was said), and the window
    its relation asks about: before it (from its first mention; open-ended when no item
    states its date), after or since it, or during it (`DURING_DAYS`). None when no dated
    item speaks of it."""
    entities = entities if entities is not None and len(entities) == len(evidence) \
        else [None] * len(evidence)
    stems = {w[:5] for w in event.words}
    scored = []
    for i, (text, when) in enumerate(zip(evidence, times, strict=True)):
        if when is None or asks(text):
            continue
        hits = len(stems & {w[:5] for w in fold(text).split()})
        if hits or i < SPEAKING_OF:  # its words, or among the best hits of its own search
            stated = _stated_date(text, entities[i], utc(when))
            scored.append((-hits, stated is None, i, stated))
    if not scored:
        return None
    newest = max(utc(times[s[2]]) for s in scored)
    scored = [s for s in scored if utc(times[s[2]]) >= newest - RECENT_MENTIONS]
    _, _, best, stated = min(scored, key=lambda s: s[:3])
    said_at = utc(times[best])
    date = stated or said_at
    date = datetime(date.year, date.month, date.day, tzinfo=timezone.utc)
    first = min(utc(times[s[2]]) for s in scored)
    known = stated is not None
    if event.relation in BEFORE:  # an undated event is still to come when spoken of
        after = min(first, date) - timedelta(days=1)
        return EventSpan(date, evidence[best], after, date if known else None, known)
    if event.relation in AFTER:
        return EventSpan(date, evidence[best], date, None, known)
    return EventSpan(date, evidence[best], date - timedelta(days=1),
                     date + timedelta(days=DURING_DAYS), known)
