"""Time in a question: calendar dates it states ("on 3 May, 2023", "in October 2023") and
relative expressions ("last week", "yesterday", "in March", "two days ago", "this weekend",
"next Friday") resolved against the time the question is asked (``as_of``), each a window
of time to search memory in: the turns produced in it (`ChainSearch.produced_after` /
``produced_before``) and those that name one of its days (`ChainSearch.mentions_days`).

The expression is found by the parse (spaCy's DATE entities) and resolved by dateparser's
grammar against ``as_of`` (`memroute.time_expressions`); the window is the expression's
grain around that point: a day, a week (Monday to Sunday), a weekend, a month or a year (a
year is named in no search: `windowed_searches`).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from memroute.errors import ModelUnavailableError
from memroute.nlp import parse
from memroute.strategies.base import MAX_WINDOW_DAYS, ChainSearch
from memroute.time.as_of import from_wall_clock, wall_clock
from memroute.time_expressions import MONTH_NAMES, MONTHS, span_of

_DAY = r"(\d{1,2})(?:st|nd|rd|th)?(?!\d)"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?({MONTH_NAMES}),?\s+(\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b({MONTH_NAMES})\s+{_DAY},?\s+(\d{{4}})\b")
_MONTH_YEAR = re.compile(rf"\b({MONTH_NAMES}),?\s+(\d{{4}})\b")
# a full date with its preposition, for the words left to search
_STATED = re.compile(r"(?:\s*,?\s*\b(?:on|in|during|of)\s+)?(?:\bthe\s+)?(?:"
                     + "|".join(p.pattern for p in (_DAY_MONTH_YEAR, _MONTH_DAY_YEAR, _MONTH_YEAR))
                     + ")")


def date_window(text: str, pad_days: int = 7) -> tuple[datetime, datetime] | None:
    """The UTC window ``[start, end)`` around the first full date ``text`` states (a day, or
    a month of a year), widened by ``pad_days`` on each side; ``None`` when it states none
    (a month without its year, a bare year and relative dates are no window)."""
    pad = timedelta(days=pad_days)
    if m := _DAY_MONTH_YEAR.search(text):
        day, month, year = int(m[1]), MONTHS[m[2].lower()], int(m[3])
    elif m := _MONTH_DAY_YEAR.search(text):
        day, month, year = int(m[2]), MONTHS[m[1].lower()], int(m[3])
    elif m := _MONTH_YEAR.search(text):
        month, year = MONTHS[m[1].lower()], int(m[2])
        start = datetime(year, month, 1, tzinfo=timezone.utc)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
        return start - pad, end + pad
    else:
        return None
    try:
        start = datetime(year, month, day, tzinfo=timezone.utc)
    except ValueError:  # "31 February"
        return None
    return start - pad, start + timedelta(days=1) + pad


def without_dates(text: str) -> str:
    """``text`` without its stated dates ("What did I find on 1 February, 2023?" -> "What
    did I find?"): a window of time searches for them, and a turn rarely repeats its date."""
    return re.sub(r"\s+([?,.!])", r"\1", " ".join(_STATED.sub("", text).split()))


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
_FUTURE = re.compile(r"\b(will|going to|gonna|next|upcoming|coming|tomorrow|plan|planned|"
                     r"planning|have on|'s on|is on|happening)\b", re.I)
# a window that ended this many years before as_of names history ("in 1958"), not the time
# a memory was told
HISTORY_YEARS = 10
# a capitalised word (not the question's first) right before an expression: it is part of a
# name ("Tears Of April")
_IN_A_NAME = re.compile(r"\S\s+[A-Z][\w'’\-]*\s+$")
_RELATIVE = re.compile(
    r"\b(?:(?:this|last|next|past|coming)\s+(?:weekend|week|month|year|"
    + "|".join(calendar.day_name) + r")|yesterday|today|tonight|tomorrow|"
    r"(?:\d+|a|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?:days?|weeks?|months?)"
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
        if re.fullmatch(r"(these|those) days|now|currently|the (past|future)|\d{1,2}", text,
                        re.I):
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
    before = re.sub(r"\b(?:on|in|during|over|at|for|from|since|of|earlier|later)\s*$", "",
                    question[:at].rstrip(), flags=re.I)
    text = f"{before.rstrip()} {question[at + len(expression):].lstrip()}"
    return re.sub(r"\s+([?,.!])", r"\1", " ".join(text.split()))


# the participles lemminflect gives in American English only: the form British speakers use
# as well ("What have I got up to?")
_PARTICIPLES = {"get": "got"}
# subjects that take "have", as do plural nouns and several joined by "and" (a name or "my
# sister" takes "has")
_HAVE_SUBJECTS = frozenset({"i", "we", "you", "they"})


def as_told(question: str) -> str:
    """A past question asked in the perfect, in the form turns tell a deed ("What did I book?"
    -> "What have I booked?": a turn says "Booked the movers", and "book" alone reads as the
    noun); ``question`` unchanged when it asks no "did <subject> <verb>", asks when (the
    perfect takes no time: "When did I ring?"), or the model is missing."""
    if re.match(r"\s*when\b", question, re.I):
        return question
    try:
        doc = parse(question)
    except ModelUnavailableError:
        return question
    from lemminflect import getInflection

    for did in doc:
        if did.lower_ != "did" or did.i + 2 >= len(doc):
            continue
        if did.dep_ == "aux" and did.head.tag_ in ("VB", "VBP") and did.head.i > did.i + 1:
            verb = did.head  # "What did my sister book?"
        elif doc[did.i + 1].tag_ in ("PRP", "NNP") and doc[did.i + 2].tag_ in ("VB", "NN"):
            verb = doc[did.i + 2]  # "What did I book?", where the parse reads "book" as a noun
        else:
            continue
        subject = doc[did.i + 1:verb.i]
        participle = _PARTICIPLES.get(verb.lower_) or next(
            iter(getInflection(verb.lower_, "VBN") or ()), None)
        if participle is None or any(t.dep_ == "neg" for t in subject):
            return question
        head = next((t for t in subject if t.dep_ in ("nsubj", "nsubjpass")), subject[-1])
        plural = head.lower_ in _HAVE_SUBJECTS or head.tag_ in ("NNS", "NNPS") or any(
            t.dep_ == "cc" or t.lower_ == "and" for t in subject)
        have = "have" if plural else "has"
        words = [t.text_with_ws for t in doc]
        words[did.i] = (have.capitalize() if did.text[0].isupper() else have) + did.whitespace_
        words[verb.i] = participle + verb.whitespace_
        return "".join(words)
    return question


def windowed_searches(question: str, as_of: datetime,
                      skip: str = "") -> tuple[list[ChainSearch], str]:
    """The search of each window of time the question names, and what they are in words
    ("'last week' = 2024-07-01..07-07"); ([], "") when it names none. A window holds the
    turns said in it and the turns that name one of its days (`ChainSearch.mentions_days`:
    "Moved on Saturday", told on the Monday after; "Booked Saltwater for Saturday", told
    on the Tuesday before). A past window is searched with the question `as_told`, without
    the expression ("What did I book last week?" -> "What have I booked?"); a window still
    to come ("next Friday", "this weekend") with the question naming its days ("What's on
    Saturday 28 or Sunday 29 June?"), among the turns that name them. An expression inside
    ``skip`` (a described thing: "the dentist I see on April 3") is part of it, not a
    window. Windows are read on ``as_of``'s own calendar ("yesterday" asked at 00:30 on 15
    January, +01:00, is 14 January there) and searched as the instants they span."""
    wall = wall_clock(as_of)
    searches, said = [], []
    if date_window(question) is not None:
        return [], ""  # a full date it states ("on 3 May, 2023"): searched as stated
    for window in time_windows(question, as_of):
        if skip and window.expression in skip:
            continue  # the expression is part of a description the question gives
        days = window.days()
        if not days:
            continue  # a year: turns speak of it more than they are said in it
        try:
            produced_after = from_wall_clock(window.start, as_of)
            produced_before = from_wall_clock(min(window.end, wall + timedelta(seconds=1)),
                                              as_of)
        except (OverflowError, ValueError):  # past the calendar's ends
            continue
        said.append(window.label())
        if window.start > wall:
            at = question.find(window.expression)
            named = (question[:at] + window.spoken() + question[at + len(window.expression):]
                     if at >= 0 else question)
            searches.append(ChainSearch(query=named, mentions_days=days))
            continue
        words = as_told(without_expression(question, window.expression))
        searches.append(ChainSearch(query=words if len(words.split()) >= 2 else question,
                                    produced_after=produced_after.isoformat(),
                                    produced_before=produced_before.isoformat(),
                                    mentions_days=days))
    return searches, "; ".join(said)


_NOW = re.compile(r"\b(now|still|currently|current|anymore|any more|these days|nowadays|"
                  r"at the moment|latest|newest)\b", re.I)
_PAST = re.compile(r"\b(did|was|were|had|used to|before|previously|originally|first|"
                   r"ago|last)\b", re.I)


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
