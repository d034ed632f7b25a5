"""``as_of``, one type: the forms every face accepts and refuses, and calendar words read on
``as_of``'s own calendar."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memroute.errors import InvalidInputError
from memroute.reading.dates import windowed_searches
from memroute.time import AS_OF_RANGE, parse_as_of
from memroute.time.as_of import from_wall_clock, wall_clock

PLUS_ONE = timezone(timedelta(hours=1))


def test_the_forms_accepted() -> None:
    assert parse_as_of(None) is None
    with_offset = parse_as_of("2025-01-15T00:30:00+01:00")
    assert with_offset.utcoffset() == timedelta(hours=1)  # kept: its calendar is read
    assert parse_as_of("2025-01-15T00:30:00Z") == datetime(2025, 1, 15, 0, 30,
                                                           tzinfo=timezone.utc)
    assert parse_as_of("2025-01-15T00:30") == datetime(2025, 1, 15, 0, 30, tzinfo=timezone.utc)
    assert parse_as_of(datetime(2025, 1, 15, 0, 30)) == parse_as_of("2025-01-15T00:30")
    end_of_day = datetime(2025, 1, 15, 23, 59, 59, 999999, tzinfo=timezone.utc)
    assert parse_as_of("2025-01-15") == parse_as_of(date(2025, 1, 15)) == end_of_day


@pytest.mark.parametrize("bad", [1736899200, 1736899200.5, True, b"2025-01-15", [2025],
                                 "yesterday", "2025-13-01", "",
                                 "0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00",
                                 datetime(1, 1, 1, tzinfo=PLUS_ONE),
                                 datetime.max.replace(tzinfo=timezone.utc)])
def test_the_forms_refused_are_typed_input_errors(bad) -> None:
    with pytest.raises(InvalidInputError, match="as_of"):
        parse_as_of(bad)


@given(st.datetimes(min_value=AS_OF_RANGE[0].replace(tzinfo=None) + timedelta(days=1),
                    max_value=AS_OF_RANGE[1].replace(tzinfo=None) - timedelta(days=1),
                    timezones=st.builds(timezone, st.timedeltas(
                        min_value=timedelta(hours=-23, minutes=-59),
                        max_value=timedelta(hours=23, minutes=59)).map(
                            lambda d: timedelta(minutes=d // timedelta(minutes=1))))))
def test_an_instant_reads_back_as_itself_on_its_own_calendar(moment: datetime) -> None:
    parsed = parse_as_of(moment.isoformat())
    assert parsed == moment and parsed.utcoffset() == moment.utcoffset()
    wall = wall_clock(parsed)
    assert (wall.year, wall.month, wall.day, wall.hour) == (
        moment.year, moment.month, moment.day, moment.hour)
    assert from_wall_clock(wall, parsed) == moment


@pytest.mark.parametrize(("as_of", "day"), [
    ("2025-01-15T00:30:00+01:00", "2025-01-14"),  # 14 January in UTC too late: 23:30 on 14th
    ("2025-01-14T23:30:00-05:00", "2025-01-13"),  # already 15 January in UTC
    ("2025-01-15T12:00:00Z", "2025-01-14")])
def test_yesterday_is_the_day_before_on_as_ofs_calendar(as_of: str, day: str) -> None:
    moment = parse_as_of(as_of)
    searches, said = windowed_searches("What did I book yesterday?", moment)
    assert said == f"'yesterday' = {day}"
    start = datetime.fromisoformat(searches[0].produced_after)
    assert start == datetime.fromisoformat(day).replace(tzinfo=moment.tzinfo)
    assert searches[0].mentions_days[-1] == day


def test_windows_at_the_calendars_edge_are_no_window_not_a_crash() -> None:
    for as_of in (AS_OF_RANGE[0], AS_OF_RANGE[1]):
        for question in ("What did I do last year?", "What is on next week?",
                         "What did I do ten years ago?"):
            windowed_searches(question, as_of)  # no OverflowError


def test_as_of_text_is_printable_iso_and_its_range_reads_as_dates() -> None:
    with pytest.raises(InvalidInputError, match="ISO-8601"):
        parse_as_of("2025-01-15T12:00:00Z\x00")
    with pytest.raises(InvalidInputError, match="between 0002-01-01 and 9998-12-31"):
        parse_as_of("9999-12-31")
