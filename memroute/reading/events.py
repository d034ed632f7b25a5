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

_RELATIONS = V.EVENT_BEFORE.phrases + V.EVENT_AFTER.phrases + V.EVENT_DURING.phrases
_EVENT = re.compile(
    r"\b(?P<relation>" + "|".join(map(re.escape, _RELATIONS)) + r")\s+"
    r"(?P<event>[^?,.;!]+?)"
    r"(?=\s*(?:[?,.;!]|$|\s+(?:" + V.CLAUSE_BREAKS.alternation() + r")\b))")
# "the first weekend of August 2023", "last week": a date, not an event
_A_DATE = re.compile(r"\b(" + "|".join(calendar.month_name[1:] + calendar.day_name[:])
                     + r"|\d{4}|" + V.CALENDAR_UNITS.alternation() + r")\b", re.I)
_DETERMINED = re.compile(r"^(?:" + V.DETERMINERS.alternation() + r"|[A-Z][\w'’\-]*['’]s)\s+\S")
_TIME_WORDS = V.TIME_WORDS.words | {n.lower() for n in (*calendar.month_name[1:],
                                                       *calendar.day_name)}
# what makes an event of a described thing: a noun of things that happen
_EVENT_NOUNS = re.compile(V.EVENT_NOUNS.pattern(), re.I)
# "before she retired": the question's subject's life, not the user's
_OTHERS = re.compile(r"(" + V.OTHERS.alternation() + r")\b", re.I)
_PAST = re.compile(r"\b(" + V.PAST_AUXILIARIES.alternation() + r")\b")


def names_no_event(text: str) -> bool:
    """Whether a clause of time tells only where someone is, not what happens ("I'm back",
    "I'm away", "we're home", "I've been here"): by the parse, no noun (but one used as an
    adverb, "home"), no number and no verb but "be". Such a clause dates nothing the memory tells: no event, no chain."""
    try:
        doc = parse(text)
    except ModelUnavailableError:
        return False
    return any(t.pos_ == "PRON" for t in doc) and not any(
        t.pos_ in ("NOUN", "PROPN", "NUM", "VERB") and t.dep_ != "advmod" for t in doc)


def _before_idle_clause(text: str) -> str | None:
    """``text`` without a clause of time that names no event ("Biscuit while I'm away" ->
    "Biscuit"), when it holds one; None when it holds none."""
    try:
        doc = parse(text)
    except ModelUnavailableError:
        return None
    mark = next((t for t in doc if t.dep_ == "mark" and t.i > 0), None)
    if mark is None or not names_no_event(text[mark.idx + len(mark.text):]):
        return None
    return text[:mark.idx].strip()


def event_of(question: str) -> EventRef | None:
    """The event ``question`` is asked around ("What do I need to do before my trip to
    Norway?" -> before 'my trip to Norway'), or None. A date is no event ("before Friday"),
    nor a clause that names none ("until I'm back", `names_no_event`), nor what such a clause
    follows unless it names or tells one ("looks after Biscuit while I'm away")."""
    for m in _EVENT.finditer(question):
        text, relation = m.group("event").strip(), m.group("relation").lower()
        if (head := _before_idle_clause(text)) is not None:
            # "looks after Biscuit while I'm away": what is left is an event only as one is
            # named ("the party") or told ("we moved")
            told = any(t.pos_ == "VERB" for t in parse(head)) if head else False
            if not told and not (_DETERMINED.match(head) and _EVENT_NOUNS.search(head)):
                continue
            text = head
        if relation in ("on", "at") and relation == "on" and not (
                _DETERMINED.match(text) and _EVENT_NOUNS.search(text)):
            continue  # "on Tuesday", "on the 14th": a date; "on the camping trip": an event
        if relation == "at" and not (_DETERMINED.match(text) and _EVENT_NOUNS.search(text)):
            continue
        words = tuple(w for w in fold(text).split() if w not in STOPWORDS and len(w) >= 3
                      and not w.endswith("'s") and not w[:1].isdigit())
        if _OTHERS.match(text):
            continue  # "before she retired": the question's subject's life, not the user's
        if words and not set(words) <= _TIME_WORDS and not _A_DATE.search(text) \
                and not names_no_event(text):
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
        past = bool(_PAST.search(question))
        told = False
    if told or not _DETERMINED.match(event.text):
        return event.text
    upcoming = event.relation in BEFORE and not past
    return f"When {'is' if upcoming else 'was'} {event.text}?"
