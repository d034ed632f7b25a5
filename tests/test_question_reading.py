"""A question is read once (`memroute.reading.question`): route, split, judge and the final
rerank read the same `QuestionReading` instead of parsing the question again."""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fake_chat import FAST, corpus_episodes

from memroute import RetrievalAgent, Scope, nlp
from memroute.nlp import KEYS, QUERY, load_pipeline, pipeline_available
from memroute.reading import question as reading
from memroute.planners.offline.planner import OfflinePlanner

pytestmark = pytest.mark.skipif(not pipeline_available(), reason="needs the spaCy model")

QUESTION = "What did the surgeon say after my operation on the knee?"


async def test_the_event_is_read_once_per_question(monkeypatch) -> None:
    calls = []
    event_of = reading.event_of
    monkeypatch.setattr(reading, "event_of", lambda q: calls.append(q) or event_of(q))
    reading.forget_readings()
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


def test_the_windows_are_read_on_as_ofs_own_calendar() -> None:
    """One instant, two calendars: "yesterday" is another day on each, so each has its reading."""
    question = "What did I buy yesterday?"
    utc = datetime(2025, 1, 14, 23, 30, tzinfo=timezone.utc)
    paris = utc.astimezone(timezone(timedelta(hours=1)))  # 00:30 on 15 January
    assert reading.read(question, utc).windows[0].mentions_days == ["2025-01-13"]
    assert reading.read(question, paris).windows[0].mentions_days == ["2025-01-14"]
    assert reading.read(question, paris) is reading.read(question, paris)


class CountingPipeline:
    """A spaCy pipeline that records every text it parses."""

    def __init__(self, pipeline: Any, parsed: list[str]) -> None:
        self._pipeline, self._parsed = pipeline, parsed

    def __call__(self, text: str, *args: Any, **kwargs: Any) -> Any:
        self._parsed.append(text)
        return self._pipeline(text, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipeline, name)


@pytest.fixture(scope="module")
async def corpus(memory) -> Scope:
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="reading")
    await memory.add(scope, corpus_episodes())
    return scope


@pytest.mark.parametrize("question, route", [
    ("When was Oakridge College founded?", "direct"),
    ("What is Oakridge College known for, and what did Mara Quinlan study?", "split"),
    ("Where was the director of Harbor Lights born?", "chain"),
])
async def test_a_full_run_parses_the_question_once(memory, corpus, monkeypatch, question,
                                                   route) -> None:
    """Every spaCy parse of a run, counted at the pipelines (the question's full parse, and
    the entity keys' parse the final rerank and the search's entity lane read): the question
    is parsed once, before routing, and its reading made once."""
    parsed: list[str] = []
    for role in (QUERY, KEYS):
        monkeypatch.setitem(nlp._pipelines, role, CountingPipeline(load_pipeline(role), parsed))
    monkeypatch.setattr(nlp, "_parses", OrderedDict())  # nothing kept from earlier tests
    readings = []
    untimed = reading._untimed.__wrapped__
    reading.forget_readings()
    monkeypatch.setattr(reading, "_untimed", functools.lru_cache(maxsize=8)(
        lambda q: readings.append(q) or untimed(q)))
    agent = RetrievalAgent(memory, planner=OfflinePlanner(), policies=FAST)
    result = await agent.aretrieve(question, scope=corpus, k=5,
                                   as_of=datetime(2025, 6, 4, tzinfo=timezone.utc))
    assert result.route == route and result.results
    assert len(result.queries) >= (1 if route == "direct" else 2)
    assert parsed.count(question) == 1, parsed
    assert readings == [question]
