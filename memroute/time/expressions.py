"""Time expressions read against a moment: "last week", "next Friday", "the 19th", "this
weekend" resolved (by dateparser's grammar, and a few rules of their own) to the span of time
they name, against the time a question is asked or a turn was said; full dates ("3 May,
2023", "October 2023"), read by one grammar of their own (`full_date`); and the days a stored
sentence names (`days_named`), kept with its entity keys so a window of time finds the turns
that speak of its days.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta, timezone

from memroute.reading import vocabulary as V

MONTHS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
MONTH_NAMES = "|".join(calendar.month_name[1:])
SOFTENERS = re.compile(r"^(?:(?:" + V.SOFTENERS.alternation() + r")\s+)+", re.I)
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
SEASONAL = re.compile(V.PARTS_OF_DAY.pattern(), re.I)


# Full dates ("3 May, 2023", "May 3rd 2023", "October 2023"): one grammar, these regexes
# (dateparser reads no full date of the fixtures they miss, and agrees on every one both read)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?(?!\d)"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?({MONTH_NAMES}),?\s+(\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b({MONTH_NAMES})\s+{_DAY},?\s+(\d{{4}})\b")
_MONTH_YEAR = re.compile(rf"\b({MONTH_NAMES}),?\s+(\d{{4}})\b")
# a full date with its preposition, for the words left to search
_STATED = re.compile(r"(?:\s*,?\s*\b(?:" + V.DATE_PREPOSITIONS.alternation()
                     + r")\s+)?(?:\bthe\s+)?(?:"
                     + "|".join(p.pattern for p in (_DAY_MONTH_YEAR, _MONTH_DAY_YEAR, _MONTH_YEAR))
                     + ")")

def full_date(text: str, whole: bool = False) -> tuple[datetime, datetime] | None:
    """The day or the month of a year (``[start, end)``, UTC) of the first full date ``text``
    states, or of ``text`` itself when ``whole``; ``None`` when it states none (a month
    without its year, a bare year, a relative date, "31 February")."""
    find = (lambda p: p.fullmatch(text.strip())) if whole else (lambda p: p.search(text))
    if m := find(_DAY_MONTH_YEAR):
        day, month, year = int(m[1]), MONTHS[m[2].lower()], int(m[3])
    elif m := find(_MONTH_DAY_YEAR):
        day, month, year = int(m[2]), MONTHS[m[1].lower()], int(m[3])
    elif m := find(_MONTH_YEAR):
        return month_span(int(m[2]), MONTHS[m[1].lower()])
    else:
        return None
    try:
        start = datetime(year, month, day, tzinfo=timezone.utc)
    except ValueError:  # "31 February"
        return None
    return start, start + timedelta(days=1)


def date_window(text: str, pad_days: int = 7) -> tuple[datetime, datetime] | None:
    """The UTC window ``[start, end)`` around the first full date ``text`` states
    (`full_date`), widened by ``pad_days`` on each side."""
    stated = full_date(text)
    if stated is None:
        return None
    pad = timedelta(days=pad_days)
    return stated[0] - pad, stated[1] + pad

def without_dates(text: str) -> str:
    """``text`` without its stated dates ("What did I find on 1 February, 2023?" -> "What
    did I find?"): a window of time searches for them, and a turn rarely repeats its date."""
    return re.sub(r"\s+([?,.!])", r"\1", " ".join(_STATED.sub("", text).split()))


def utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None \
        else moment.astimezone(timezone.utc)


def day_of(moment: datetime) -> datetime:
    return datetime(moment.year, moment.month, moment.day, tzinfo=timezone.utc)


# The calendar's units, each defined once here (and stated in docs/agent.md, "Time and
# change"); every span is [start, end) in the wall-clock days of the moment it is read against.


def month_span(year: int, month: int) -> tuple[datetime, datetime]:
    """A month: its first day to the next month's first."""
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    return start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)


def week_of(moment: datetime) -> tuple[datetime, datetime]:
    """A week: the Monday to Sunday holding ``moment``."""
    monday = day_of(moment) - timedelta(days=moment.weekday())
    return monday, monday + timedelta(days=7)


def weeks_from(as_of: datetime, weeks: int) -> tuple[datetime, datetime]:
    """"this week" (0), "last week" (-1), "next week" (1): the week holding ``as_of``, or the
    one ``weeks`` before or after it."""
    return week_of(as_of + timedelta(days=7 * weeks))


def named_month(month: int, as_of: datetime, future: bool) -> tuple[datetime, datetime]:
    """"in March" without a year: in a past question the latest March that has begun by
    ``as_of`` (this one when asked in March), in a question about the future the next March
    to begin after it."""
    if future:
        year = as_of.year + (month <= as_of.month)
    else:
        year = as_of.year - (month > as_of.month)
    return month_span(year, month)


def weekend_of(as_of: datetime, text: str) -> tuple[datetime, datetime]:
    """A weekend: a Saturday and its Sunday. "this weekend" is the coming one (the one under
    way on a Saturday or Sunday); "last"/"past" the one before it, "next" the one after."""
    today = day_of(as_of)
    saturday = today + timedelta(days=(5 - today.weekday()) % 7)
    if today.weekday() == 6:  # on a Sunday, "this weekend" is the one under way
        saturday = today - timedelta(days=1)
    if re.search(r"\blast\b|\bpast\b", text, re.I):
        saturday -= timedelta(days=7)
    elif re.search(r"\bnext\b", text, re.I):
        saturday += timedelta(days=7)
    return saturday, saturday + timedelta(days=2)


def resolve(expression: str, as_of: datetime, future: bool) -> datetime | None:
    """The moment dateparser's grammar reads in ``expression`` relative to ``as_of``."""
    import dateparser

    settings = {"RELATIVE_BASE": as_of.replace(tzinfo=None),
                "PREFER_DATES_FROM": "future" if future else "past",
                "RETURN_AS_TIMEZONE_AWARE": False}
    moment = dateparser.parse(expression, languages=["en"], settings=settings)
    return None if moment is None else moment.replace(tzinfo=timezone.utc)


_WEEKS = V.WEEKS


def span_of(expression: str, as_of: datetime, future: bool) -> tuple[datetime, datetime] | None:
    """The window an expression names: its moment widened to its grain."""
    text = SOFTENERS.sub("", expression.strip()).strip()
    folded = text.lower()
    if not text or SEASONAL.search(folded) and not re.search(r"\d|day|week|month", folded):
        return (day_of(as_of), day_of(as_of) + timedelta(days=1)) if re.search(
            r"this|tonight", folded) else None
    if "weekend" in folded:
        return weekend_of(as_of, folded)
    if folded in ("today", "now"):
        return day_of(as_of), day_of(as_of) + timedelta(days=1)
    if folded in _WEEKS:
        return weeks_from(as_of, _WEEKS[folded])
    if folded in MONTHS:
        return named_month(MONTHS[folded], as_of, future)
    if stated := full_date(text, whole=True):
        return stated
    if folded in ("this month",):
        return month_span(as_of.year, as_of.month)
    if folded in ("this year",):
        return datetime(as_of.year, 1, 1, tzinfo=timezone.utc), datetime(
            as_of.year + 1, 1, 1, tzinfo=timezone.utc)
    moment = resolve(text, as_of, future)
    if moment is None:
        return None
    if not future and moment > as_of and not re.search(r"\d{4}", folded):
        # "on the 14th", "in December" asked in the past tense: the last one before as_of
        if folded.rstrip("s") in WEEKDAYS or re.fullmatch(r"(on )?\w+day", folded):
            moment -= timedelta(days=7)
        elif re.search(r"\b(" + MONTH_NAMES.lower() + r")\b", folded) \
                and not re.search(r"\d", folded):
            moment = moment.replace(year=moment.year - 1)
        elif re.fullmatch(r"(the )?\d{1,2}(st|nd|rd|th)?", folded):
            month = moment.month - 1 or 12
            moment = moment.replace(year=moment.year - (month == 12), month=month)
    if "week" in folded:
        return week_of(moment)
    if "month" in folded or (re.search(r"\b(" + MONTH_NAMES.lower() + r")\b", folded)
                             and not re.search(r"\d{1,2}(st|nd|rd|th)?\b(?!\d)", folded)):
        return month_span(moment.year, moment.month)
    if "year" in folded or re.fullmatch(r"(in )?\d{4}", folded):
        return datetime(moment.year, 1, 1, tzinfo=timezone.utc), datetime(
            moment.year + 1, 1, 1, tzinfo=timezone.utc)
    return day_of(moment), day_of(moment) + timedelta(days=1)


def nearest(span: str, said_at: datetime) -> datetime | None:
    """The moment a date expression names, read against when it was said: a date without its
    year ("on 8 October") is the one nearest to then; a range ("Friday 23rd to Monday 26th",
    "23-26 May") is its start."""
    span = SOFTENERS.sub("", span.strip()).strip()
    parts = [p for p in re.split(r"\s*(?:\bto\b|–|—|-|\buntil\b|\bthrough\b)\s*", span) if p]
    if not parts:
        return None
    weekday_day = re.fullmatch(r"(?:on\s+)?(?P<weekday>" + "|".join(calendar.day_name)
                               + r")\s+(?:the\s+)?(?P<day>\d{1,2})(?:st|nd|rd|th)?",
                               parts[0], re.I)
    month = re.search(r"\b(" + MONTH_NAMES + r")\b", parts[-1], re.I)
    if weekday_day and not month:  # "Friday 23rd": the nearest month whose 23rd is a Friday
        weekday = [d.lower() for d in calendar.day_name].index(weekday_day["weekday"].lower())
        day = int(weekday_day["day"])
        for shift in sorted(range(-6, 13), key=abs):
            year, m = divmod(said_at.month - 1 + shift, 12)
            try:
                candidate = datetime(said_at.year + year, m + 1, day, tzinfo=timezone.utc)
            except ValueError:
                continue
            if candidate.weekday() == weekday:
                return candidate
    if (stated := full_date(parts[0], whole=True)) is not None:
        return stated[0] if abs(stated[0] - said_at) < timedelta(days=400) else None
    tries = [parts[0]] + ([f"{parts[0]} {month.group(1)}"] if month and month.group(1)
                          not in parts[0] else [])
    for expression in reversed(tries):
        found = [m for m in (resolve(expression, said_at, future) for future in (True, False))
                 if m is not None and abs(m - said_at) < timedelta(days=400)]
        if found:
            return min(found, key=lambda m: abs(m - said_at))
    return None


DAY_KEY_PREFIX = "day:"
"""What marks a day among a sentence's entity keys ("day:2025-06-28"); an `entity_key` has
no colon, so no name can take this form."""
_WEEKDAY = "|".join(calendar.day_name)
# an expression that names one day or a weekend (not a month, a season or a stretch of weeks)
_A_DAY = re.compile(rf"\b(?:{_WEEKDAY}|{V.DAY_WORDS.alternation()}|weekend)\b", re.I)
_STRETCH = re.compile(r"\b(?:" + V.STRETCHES.alternation() + "|"
                      + "|".join(f"{d}s" for d in calendar.day_name) + r")\b", re.I)
# a weekday or weekend named alone ("on Saturday", "this weekend"): the tense tells which one
_BARE_DAY = re.compile(rf"^(?:(?:{V.DAY_LEADS.alternation()})\s+)*"
                       rf"(?:({_WEEKDAY})|weekend)$", re.I)
_NEAR = re.compile(r"\b(" + V.NEAR.alternation() + r")\b", re.I)
_ORDINAL_DAY = re.compile(r"^(?:(?:" + V.ORDINAL_LEADS.alternation()
                          + r")\s+)*(\d{1,2})(?:st|nd|rd|th)$", re.I)


def is_bare_day(expression: str) -> bool:
    """Whether ``expression`` names a weekday, a weekend or a day of the month alone ("on
    Saturday", "the weekend", "the 19th"), which the tense of its sentence places before or
    after it was said."""
    text = expression.strip()
    return bool(_BARE_DAY.match(text) or _ORDINAL_DAY.match(text))


def names_a_day(expression: str, said_at: datetime) -> bool:
    """Whether ``expression`` may name a day `days_named` keeps: a weekday, "tomorrow", a
    day of a month ("the 19th", "3 December"); not a month, a stretch of time ("six weeks",
    "the 19th century") or a date of another era."""
    text = expression.strip()
    if _STRETCH.search(text):
        return False
    if not (is_bare_day(text) or _A_DAY.search(text)
            or re.search(rf"\d{{1,2}}(?:st|nd|rd|th)?\b.*\b(?:{MONTH_NAMES})\b|"
                         rf"\b(?:{MONTH_NAMES})\b\s+\d{{1,2}}(?:st|nd|rd|th)?\b", text, re.I)):
        return False
    years = [int(y) for y in re.findall(r"\b(\d{4})\b", text)]
    return all(abs(y - said_at.year) <= 1 for y in years)


def day_key(day: datetime) -> str:
    """The entity key of a day a sentence names ("day:2025-06-28")."""
    return f"{DAY_KEY_PREFIX}{day.date().isoformat()}"


def days_named(expressions: list[str], said_at: datetime,
               told_in_past: frozenset[str] = frozenset()) -> list[datetime]:
    """The days a sentence said at ``said_at`` names through its date ``expressions``, read
    against then: "on Saturday" said on Tuesday 24 June 2025 is Saturday 28 June, or 21 June
    when the sentence tells it in the past (``told_in_past``: "We moved on Saturday"), and
    so is "the 19th"; "this weekend" is two days; a range is its first day.
    Expressions that name no day ("in May", "six weeks") give none."""
    said_at = utc(said_at)
    today = day_of(said_at)
    days: list[datetime] = []
    for expression in expressions:
        try:
            text = " ".join(expression.split())
            if not names_a_day(text, said_at):
                continue
            past = expression in told_in_past or text in told_in_past
            if "weekend" in text.lower() and _NEAR.search(text):
                start, _ = weekend_of(said_at, text)
                days += [start, start + timedelta(days=1)]
                continue
            if bare := _BARE_DAY.match(text):
                if bare.group(1):
                    shift = (WEEKDAYS[bare.group(1).lower()] - today.weekday()) % 7 or 7
                    days.append(today - timedelta(days=7 - shift) if past
                                else today + timedelta(days=shift))
                else:
                    start, _ = weekend_of(said_at, "last" if past else text)
                    days += [start, start + timedelta(days=1)]
                continue
            if ordinal := _ORDINAL_DAY.match(text):
                moment = _of_month(int(ordinal.group(1)), today, past)
            else:
                moment = nearest(text, said_at)
            if moment is not None:  # `nearest` keeps within 400 days of said_at
                days.append(day_of(moment))
        except (OverflowError, ValueError):
            continue  # a time at the ends of the calendar (year 1 or 9999)
    return list(dict.fromkeys(days))


def _of_month(day: int, today: datetime, past: bool) -> datetime | None:
    """The next date from ``today`` whose day of the month is ``day`` ("the 19th"), or the
    last one before it when the sentence tells it in the past."""
    for shift in ((0, -1, -2) if past else (0, 1, 2)):
        year, month = divmod(today.month - 1 + shift, 12)
        try:
            date = datetime(today.year + year, month + 1, day, tzinfo=timezone.utc)
        except ValueError:  # "the 31st" of a shorter month
            continue
        if (date < today) if past else (date >= today):
            return date
    return None
