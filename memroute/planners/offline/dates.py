"""Calendar dates a question states ("on 3 May, 2023", "in October 2023"), as a window of
time to search memory in (`ChainJudgment.produced_after` / ``produced_before``)."""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta, timezone

_MONTHS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
_MONTH = "|".join(calendar.month_name[1:])
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?(?!\d)"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH}),?\s+(\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH})\s+{_DAY},?\s+(\d{{4}})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH}),?\s+(\d{{4}})\b")
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
        day, month, year = int(m[1]), _MONTHS[m[2].lower()], int(m[3])
    elif m := _MONTH_DAY_YEAR.search(text):
        day, month, year = int(m[2]), _MONTHS[m[1].lower()], int(m[3])
    elif m := _MONTH_YEAR.search(text):
        month, year = _MONTHS[m[1].lower()], int(m[2])
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
