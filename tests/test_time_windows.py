"""Properties of the windows of time a question names (`memroute.time`; docs/agent.md, "Time
and change"): across month, year, leap-day and UTC-offset boundaries, each window holds or
leaves out the moment it is asked (``as_of``, on its own calendar) as its words say."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memroute.nlp import pipeline_available
from memroute.time.as_of import wall_clock
from memroute.time.expressions import days_named, full_date, named_month, week_of, weekend_of
from memroute.time.windows import Window, time_windows

pytestmark = pytest.mark.skipif(not pipeline_available(), reason="needs the spaCy model")

# offsets from -12:00 to +14:00 in quarter hours; times from 1990 to 2090
OFFSETS = st.integers(min_value=-48, max_value=56).map(
    lambda q: timezone(timedelta(minutes=15 * q)))
AS_OF = st.builds(lambda moment, tz: moment.replace(tzinfo=tz),
                  st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1)),
                  OFFSETS)
# the edges: a leap day, the last minutes of a year far west, the first of a year far east
EDGES = [datetime(2024, 2, 29, 23, 59, tzinfo=timezone.utc),
         datetime(2024, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-5))),
         datetime(2025, 1, 1, 0, 15, tzinfo=timezone(timedelta(hours=14))),
         datetime(2025, 3, 31, 23, 59, tzinfo=timezone(timedelta(hours=-12))),
         datetime(2028, 3, 1, 0, 0, tzinfo=timezone(timedelta(hours=9, minutes=30)))]


def edges(test):
    for moment in EDGES:
        test = example(as_of=moment)(test)
    return settings(max_examples=60, deadline=None)(test)


def window(question: str, as_of: datetime) -> Window:
    windows = time_windows(question, as_of)
    assert len(windows) == 1, (question, as_of, windows)
    return windows[0]


def holds(w: Window | tuple[datetime, datetime], as_of: datetime) -> bool:
    start, end = (w.start, w.end) if isinstance(w, Window) else w
    return start <= wall_clock(as_of) < end


@given(as_of=AS_OF)
@edges
def test_this_week_holds_as_of_and_last_week_does_not(as_of: datetime) -> None:
    this, last = window("What did I do this week?", as_of), window("What did I do last week?",
                                                                    as_of)
    nxt = window("What will I do next week?", as_of)
    assert holds(this, as_of) and not holds(last, as_of) and not holds(nxt, as_of)
    for w in (this, last, nxt):  # a week: Monday to Sunday
        assert w.start.weekday() == 0 and w.end - w.start == timedelta(days=7)
    assert last.end == this.start and nxt.start == this.end


@given(as_of=AS_OF)
@edges
def test_yesterday_is_the_day_before_as_ofs_own_day(as_of: datetime) -> None:
    today, yesterday = window("What did I do today?", as_of), window(
        "What did I do yesterday?", as_of)
    assert holds(today, as_of) and not holds(yesterday, as_of)
    assert yesterday.end == today.start == wall_clock(as_of).replace(hour=0, minute=0, second=0,
                                                                      microsecond=0)


@given(as_of=AS_OF)
@edges
def test_a_weekend_is_a_saturday_and_its_sunday(as_of: datetime) -> None:
    this = window("What have we got on this weekend?", as_of)
    last = window("What did we do last weekend?", as_of)
    for w in (this, last):
        assert w.start.weekday() == 5 and w.end - w.start == timedelta(days=2)
    assert holds(this, as_of) == (wall_clock(as_of).weekday() >= 5)
    assert not holds(last, as_of) and last.end <= wall_clock(as_of)
    assert this.start - last.start == timedelta(days=7)
    assert weekend_of(wall_clock(as_of), "next weekend")[0] == this.start + timedelta(days=7)


@given(as_of=AS_OF, month=st.integers(min_value=1, max_value=12))
@settings(max_examples=60, deadline=None)
@example(as_of=EDGES[0], month=3)
@example(as_of=EDGES[3], month=3)  # the last minute of March, far west
@example(as_of=datetime(2024, 1, 30, 9, tzinfo=timezone.utc), month=2)  # a shorter month next
@example(as_of=datetime(2024, 2, 29, 9, tzinfo=timezone.utc), month=2)
def test_in_march_is_the_march_the_tense_points_to(as_of: datetime, month: int) -> None:
    name = calendar.month_name[month]
    past = window(f"What did I buy in {name}?", as_of)
    future = window(f"What will I do in {name}?", as_of)
    wall = wall_clock(as_of)
    for w in (past, future):  # a month: its first day to the next month's
        assert w.start.day == 1 and w.start.month == month and w.end.day == 1
    if wall.month == month:  # asked in March: the past question's March is this one
        assert holds(past, as_of)
    else:
        assert past.end <= wall and wall - past.start < timedelta(days=366)
    assert future.start > wall and future.start - wall <= timedelta(days=366)
    assert (past.start, past.end) == named_month(month, wall, future=False)


@given(day=st.dates(min_value=datetime(1990, 1, 1).date(), max_value=datetime(2090, 1, 1).date()))
@example(day=datetime(2024, 2, 29).date())
def test_a_full_date_is_its_day_in_each_form(day) -> None:
    name = calendar.month_name[day.month]
    start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
    for text in (f"{day.day} {name} {day.year}", f"{name} {day.day}, {day.year}",
                 f"the {day.day}th of {name}, {day.year}"):
        assert full_date(text) == (start, start + timedelta(days=1)), text
    month = full_date(f"in {name} {day.year}")
    assert month is not None and month[0] <= start < month[1] and month[0].day == 1


def test_a_day_that_is_not_in_the_calendar_is_no_date() -> None:
    assert full_date("29 February 2023") is None and full_date("31 April 2024") is None
    assert full_date("29 February 2024") is not None


@given(as_of=AS_OF)
@edges
def test_a_bare_weekday_is_after_a_plan_and_before_a_deed(as_of: datetime) -> None:
    """"on Saturday" said at ``as_of``: the Saturday after it, or the last one when the
    sentence tells it in the past (days a turn names are read on UTC's calendar)."""
    ahead = days_named(["on Saturday"], as_of)
    behind = days_named(["on Saturday"], as_of, told_in_past=frozenset({"on Saturday"}))
    utc = as_of.astimezone(timezone.utc)
    said = datetime(utc.year, utc.month, utc.day, tzinfo=timezone.utc)
    assert [d.weekday() for d in ahead + behind] == [5, 5]
    assert said < ahead[0] <= said + timedelta(days=7)
    assert said - timedelta(days=7) < behind[0] <= said  # said on a Saturday: that day
    assert week_of(ahead[0])[0] <= ahead[0]
