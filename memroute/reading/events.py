"""Events a question is asked around: "before my trip to Norway", "after the move", "since
my surgery", "during the camping trip".

An event is resolved like a person: "When was my trip to Norway?" (`event_question`) is
searched, and the evidence dates it (`memroute.time.events.event_span`); that date bounds the
next search: before it (from the event's first mention), after or since it, or during it.
"""

from __future__ import annotations

import calendar
import re

from memroute.errors import ModelUnavailableError
from memroute.nlp import parse
from memroute.reading.entities import STOPWORDS, fold
from memroute.time.events import AFTER, BEFORE, EventRef
from memroute.reading import vocabulary as V

_EVENT = re.compile(
    r"\b(?P<relation>before|after|since|during|until|ahead of|prior to|following|on|at)\s+"
    r"(?P<event>[^?,.;!]+?)"
    r"(?=\s*(?:[?,.;!]|$|\s+(?:and|or|but|so|when|where|what|who|that|which)\b))")
# "the first weekend of August 2023", "last week": a date, not an event
_A_DATE = re.compile(r"\b(" + "|".join(calendar.month_name[1:] + calendar.day_name[:])
                     + r"|\d{4}|week|weekend|month|year)\b", re.I)
_DETERMINED = re.compile(r"^(?:my|our|the|his|her|their|[A-Z][\w'’\-]*['’]s)\s+\S")
_TIME_WORDS = V.TIME_WORDS.words | {n.lower() for n in (*calendar.month_name[1:],
                                                       *calendar.day_name)}
# what makes an event of a described thing: a noun of things that happen
_EVENT_NOUNS = re.compile(V.EVENT_NOUNS.pattern(), re.I)


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
    upcoming = event.relation in BEFORE and not past
    return f"When {'is' if upcoming else 'was'} {event.text}?"
