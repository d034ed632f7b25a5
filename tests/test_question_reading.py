"""A question is read once (`memroute.planners.offline.reading`): route and judge read the same
`QuestionReading` instead of parsing the question again."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest

from memroute.nlp import pipeline_available
from memroute.planners.offline import reading
from memroute.planners.offline.planner import OfflinePlanner

pytestmark = pytest.mark.skipif(not pipeline_available(), reason="needs the spaCy model")

QUESTION = "What did the surgeon say after my operation on the knee?"


async def test_the_event_is_read_once_per_question(monkeypatch) -> None:
    calls = []
    event_of = reading.event_of
    monkeypatch.setattr(reading, "event_of", lambda q: calls.append(q) or event_of(q))
    reading.read.cache_clear()
    planner = OfflinePlanner(use_nlp=True)
    as_of = datetime(2025, 6, 1, tzinfo=timezone.utc)
    route = await planner.route(QUESTION, as_of=as_of)
    # golden: the reason names the event that made the chain
    assert route.value.route == "chain" and "operation" in route.value.reason
    evidence = ["Operation on my knee is booked for 3 May.", "The surgeon said to rest it."]
    times = [datetime(2025, 4, 20, tzinfo=timezone.utc), datetime(2025, 5, 6, tzinfo=timezone.utc)]
    for hop in (1, 2):
        await planner.judge(QUESTION, evidence, [QUESTION], hop, evidence_times=times)
    assert calls == [QUESTION]


def test_a_reading_is_immutable() -> None:
    read = reading.read("Where does my sister's husband work now?")
    assert read.described is not None and read.asks_now and read.event is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.asks_now = False  # type: ignore[misc]
