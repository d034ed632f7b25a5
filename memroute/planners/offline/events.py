"""Events a question is asked around: "before my trip to Norway", "after the move", "since
my surgery", "during the camping trip".

An event is resolved like a person: "When was my trip to Norway?" is searched, the best
evidence that speaks of it gives its date (a date the sentence states, read against when it
was said, else when it was said), and that date bounds the next search: before it (from the
event's first mention), after or since it, or during it.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from memroute.errors import ModelUnavailableError
from memroute.nlp import Entity, parse
from memroute.planners.offline.entities import STOPWORDS, asks, fold
from memroute.time_expressions import nearest, utc

_EVENT = re.compile(
    r"\b(?P<relation>before|after|since|during|until|ahead of|prior to|following|on|at)\s+"
    r"(?P<event>[^?,.;!]+?)"
    r"(?=\s*(?:[?,.;!]|$|\s+(?:and|or|but|so|when|where|what|who|that|which)\b))")
# "the first weekend of August 2023", "last week": a date, not an event
_A_DATE = re.compile(r"\b(" + "|".join(calendar.month_name[1:] + calendar.day_name[:])
                     + r"|\d{4}|week|weekend|month|year)\b", re.I)
_DETERMINED = re.compile(r"^(?:my|our|the|his|her|their|[A-Z][\w'’\-]*['’]s)\s+\S")
_TIME_WORDS = frozenset("""today tonight tomorrow yesterday week weekend month year morning
    afternoon evening night lunch breakfast dinner work school noon midnight christmas easter
    monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december day days ago then that this
    time""".split())
# what makes an event of a described thing: a noun of things that happen
_EVENT_NOUNS = re.compile(
    r"\b(trip|travels?|holiday|vacation|journey|flight|visit|move|moving|surgery|operation|"
    r"procedure|appointment|wedding|honeymoon|party|birthday|funeral|graduation|interview|"
    r"exam|exams|test|race|marathon|match|game|concert|show|conference|course|retreat|"
    r"camp|camping|hike|festival|launch|meeting|break|stay|shift|treatment|injury|accident|"
    r"birth|pregnancy|move-in|renovation|recital|ceremony|reunion|break-up|breakup|"
    r"diagnosis|job|new job|semester|term|season|tour|cruise|weekend)\b", re.I)
_BEFORE = ("before", "until", "ahead of", "prior to")
_AFTER = ("after", "since", "following")
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


def event_of(question: str) -> EventRef | None:
    """The event ``question`` is asked around ("What do I need to do before my trip to
    Norway?" -> before 'my trip to Norway'), or None. A date is no event ("before Friday")."""
    for m in _EVENT.finditer(question):
        text, relation = m.group("event").strip(), m.group("relation").lower()
        if relation in ("on", "at") and relation == "on" and not (
                _DETERMINED.match(text) and _EVENT_NOUNS.search(text)):
            continue  # "on Tuesday", "on the 14th": a date; "on the camping trip": an event
        if relation == "at" and not (_DETERMINED.match(text) and _EVENT_NOUNS.search(text)):
            continue
        words = tuple(w for w in fold(text).split() if w not in STOPWORDS and len(w) >= 3
                      and not w.endswith("'s") and not w[:1].isdigit())
        if re.match(r"(he|she|they|it|him|her|them|how|what|which|who|when|where)\b", text,
                    re.I):
            continue  # "before she retired": the question's subject's life, not the user's
        if words and not set(words) <= _TIME_WORDS and not _A_DATE.search(text):
            return EventRef("during" if relation in ("on", "at") else relation, text, words)
    return None


def event_question(question: str, event: EventRef) -> str:
    """What finds when the event was: a named event asked as a question ("When was my trip
    to Norway?"; "When is ..." of what is still to come), an event told as a clause searched
    as the question tells it ("my wisdom tooth came out", "starting at the hospital")."""
    try:
        doc = parse(question)
        past = any(t.tag_ in ("VBD", "VBN") for t in doc)
        told = any(t.pos_ in ("VERB", "AUX") for t in parse(event.text))
    except ModelUnavailableError:
        past = bool(re.search(r"\b(did|was|were|had)\b", question))
        told = False
    if told or not _DETERMINED.match(event.text):
        return event.text
    upcoming = event.relation in _BEFORE and not past
    return f"When {'is' if upcoming else 'was'} {event.text}?"


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
    if event.relation in _BEFORE:  # an undated event is still to come when spoken of
        after = min(first, date) - timedelta(days=1)
        return EventSpan(date, evidence[best], after, date if known else None, known)
    if event.relation in _AFTER:
        return EventSpan(date, evidence[best], date, None, known)
    return EventSpan(date, evidence[best], date - timedelta(days=1),
                     date + timedelta(days=DURING_DAYS), known)
