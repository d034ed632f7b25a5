"""Windows of time a question names: relative expressions ("last week", "yesterday", "in
March", "two days ago", "this weekend", "next Friday") resolved against the time the
question is asked (``as_of``, on its own calendar), each a span to search memory in; and
whether a question asks how things stand now (`asks_now`).

The expression is found by the parse (spaCy's DATE entities) and resolved against ``as_of``
(`memroute.time.expressions.span_of`); the window is the expression's grain around that
point: a day, a week (Monday to Sunday), a weekend, a month or a year.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from memroute.errors import ModelUnavailableError
from memroute.time.limits import MAX_WINDOW_DAYS
from memroute.nlp import parse
from memroute.time.as_of import wall_clock
from memroute.time.expressions import span_of
from memroute.reading import vocabulary as V


@dataclass(frozen=True)
class Window:
    """A span of time ``[start, end)`` that an expression of the question names, in the
    wall-clock time of the question's ``as_of`` (`memroute.time.wall_clock`: its days are
    the days of ``as_of``'s calendar)."""

    expression: str  # as the question says it ("last week")
    start: datetime
    end: datetime

    def spoken(self) -> str:
        """The window as a person names its days ("Saturday 28 or Sunday 29 June", "Friday
        27 June", "the week of 30 June", "July 2025")."""
        days = (self.end - self.start).days
        if days <= 1:
            return self.start.strftime("%A %-d %B")
        if days == 2:
            return f"{self.start.strftime('%A %-d')} or {self.end - timedelta(days=1):%A %-d %B}"
        if days == 7:
            return f"the week of {self.start:%-d %B}"
        return self.start.strftime("%B %Y")

    def days(self) -> list[str]:
        """The days a turn may name to speak of the window (ISO dates; [] past
        `MAX_WINDOW_DAYS`): its own, and for a weekend the Friday before, whose evening
        begins it ("Declan has the kids from Friday")."""
        count = (self.end - self.start).days
        if not 0 < count <= MAX_WINDOW_DAYS:
            return []
        first = self.start - timedelta(days=1) if "weekend" in self.expression.lower() \
            and count == 2 and self.start.weekday() == 5 else self.start
        return [(first + timedelta(days=n)).date().isoformat()
                for n in range((self.end - first).days)]

    def label(self) -> str:
        """"'last week' = 2024-07-01..07-07" (the last day included)."""
        last = self.end - timedelta(days=1) if self.end - self.start >= timedelta(days=1) \
            else self.start
        first = self.start.date().isoformat()
        if last.date() == self.start.date():
            return f"'{self.expression}' = {first}"
        tail = last.date().isoformat()
        tail = tail[5:] if tail[:4] == first[:4] else tail
        return f"'{self.expression}' = {first}..{tail}"


# Words that make the question ask about the future ("What do I have next Friday?").
_FUTURE = re.compile(V.FUTURE.pattern(), re.I)
# a window that ended this many years before as_of names history ("in 1958"), not the time
# a memory was told
HISTORY_YEARS = 10
# a capitalised word (not the question's first) right before an expression: it is part of a
# name ("Tears Of April")
_IN_A_NAME = re.compile(r"\S\s+[A-Z][\w'’\-]*\s+$")
_RELATIVE = re.compile(
    r"\b(?:(?:this|" + V.NEAR.alternation() + r")\s+(?:" + V.CALENDAR_UNITS.alternation() + "|"
    + "|".join(calendar.day_name) + r")|" + V.DAY_WORDS.alternation() + "|"
    r"(?:\d+|" + V.NUMBER_WORDS.alternation() + r")\s+(?:days?|weeks?|months?)"
    r"\s+ago)\b", re.I)
def time_windows(question: str, as_of: datetime) -> list[Window]:
    """Every span of time ``question`` names, resolved against ``as_of`` on its own calendar
    ("What did I book last week?" asked on 2024-07-10 -> 'last week' = 2024-07-01..07-07),
    in ``as_of``'s wall-clock time; [] when it names none or the spaCy model is missing.
    Present-tense markers ("now", "these days") name no window."""
    try:
        doc = parse(question)
    except ModelUnavailableError:
        return []
    as_of = wall_clock(as_of)
    future = bool(_FUTURE.search(question))
    out = []
    expressions = [ent.text for ent in doc.ents if ent.label_ in ("DATE", "TIME")]
    # what the parse may miss in a lower-case question ("what have we got on this weekend")
    expressions += [m.group(0) for m in _RELATIVE.finditer(question)
                    if not any(m.group(0) in e or e in m.group(0) for e in expressions)]
    for text in expressions:
        text = text.strip()
        at = question.find(text)
        if at > 0 and _IN_A_NAME.search(question[:at]) or re.search(r"\d{4}s\b", text) or (
                re.fullmatch(r"(the )?\d{1,2}(st|nd|rd|th)", text, re.I)
                and re.match(r"\s+[A-Z]", question[at + len(text):])):
            continue  # "Tears Of April", "the 1st Vice President", "the 1970s": no window
        if re.fullmatch(V.NO_WINDOW.alternation() + r"|\d{1,2}", text, re.I):
            continue
        try:
            span = span_of(text, as_of, future)
        except (OverflowError, ValueError):  # past the calendar's ends from as_of
            continue
        if span is not None and as_of - span[1] < timedelta(days=365 * HISTORY_YEARS):
            out.append(Window(text, span[0], span[1]))
    return out


def without_expression(question: str, expression: str) -> str:
    """``question`` without a time expression and the preposition before it ("What did I
    book last week?" -> "What did I book?"): the window searches for it, and a turn rarely
    says when it was said."""
    at = question.find(expression)
    if at < 0:
        return question
    before = re.sub(r"\b(?:" + V.EXPRESSION_PREPOSITIONS.alternation() + r")\s*$", "",
                    question[:at].rstrip(), flags=re.I)
    text = f"{before.rstrip()} {question[at + len(expression):].lstrip()}"
    return re.sub(r"\s+([?,.!])", r"\1", " ".join(text.split()))


_NOW = re.compile(V.NOW.pattern(), re.I)
_PAST = re.compile(V.PAST.pattern(), re.I)


def asks_now(question: str) -> bool:
    """Whether ``question`` asks how things stand now: it says so ("now", "still",
    "currently", "anymore", "these days"), or it is in the present tense and names no past
    ("Where does my brother live?", not "Where did he live before?")."""
    if _NOW.search(question):
        return True
    if _PAST.search(question):
        return False
    try:
        doc = parse(question)
    except ModelUnavailableError:
        return False
    return not any(t.tag_ in ("VBD", "VBN") and t.dep_ in ("ROOT", "aux", "auxpass")
                   for t in doc)


def newest_first(times: list[datetime | None] | None) -> list[int] | None:
    """The indices of ``times`` newest first (unknown times last, in their order); None
    without times."""
    if not times or all(t is None for t in times):
        return None
    floor = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(range(len(times)), key=lambda i: (times[i] is None, -(
        (times[i] or floor) - floor).total_seconds()))
