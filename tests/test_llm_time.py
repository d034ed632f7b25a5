"""The LLM planner reads time: its prompts say when the question is asked (and what the
question's reading makes of its time words), its judge sees each item's day, and every search
of a run stays inside the windows of time the question names, whatever the model writes.
Against the scripted OpenAI-compatible server and a real Memory."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from fake_chat import FAST, ScriptedChatModel, judge, route, split
from fake_openai import reply

from memroute import RetrievalAgent, Scope
from memroute.memory.models import ScoredResult
from memroute.nlp import pipeline_available
from memroute.planners.llm.planner import LLMPlanner

pytestmark = pytest.mark.skipif(not pipeline_available(), reason="needs the spaCy model")

AS_OF = datetime(2025, 6, 4, 9, 0, tzinfo=timezone.utc)  # a Wednesday
WEEK = (datetime(2025, 5, 26, tzinfo=timezone.utc), datetime(2025, 6, 2, tzinfo=timezone.utc))
TURNS = [  # (day, what the user said): three inside last week, four outside it
    (datetime(2025, 5, 27, 19, tzinfo=timezone.utc), "I cooked a mushroom risotto tonight."),
    (datetime(2025, 5, 29, 19, tzinfo=timezone.utc), "Cooked a big pot of chili for dinner."),
    (datetime(2025, 5, 31, 12, tzinfo=timezone.utc), "I baked sourdough bread and cooked soup."),
    (datetime(2025, 5, 10, 19, tzinfo=timezone.utc), "I cooked lentil curry for dinner."),
    (datetime(2025, 5, 18, 19, tzinfo=timezone.utc), "Cooked paella with the neighbours."),
    (datetime(2025, 6, 3, 19, tzinfo=timezone.utc), "I cooked ramen from scratch tonight."),
    (datetime(2025, 4, 20, 19, tzinfo=timezone.utc), "I cooked a roast for Easter dinner."),
]


@pytest.fixture(scope="module")
async def kitchen(memory) -> Scope:
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="kitchen")
    await memory.add(scope, [{"content": text, "producer": "user", "produced_at": at,
                              "session_id": f"s-{at:%m%d}", "uid": f"t-{i}"}
                             for i, (at, text) in enumerate(TURNS)])
    return scope


def said_in_the_week(result: ScoredResult) -> bool:
    return WEEK[0] <= result.nucleus.produced_at < WEEK[1]


def prompts(fake_openai) -> list[str]:
    return ["\n".join(m["content"] for m in r["messages"]) for r in fake_openai.requests]


async def test_a_direct_route_stays_in_the_week_the_question_names(fake_openai, memory,
                                                                    kitchen) -> None:
    fake_openai.script = [reply(route("direct"))]
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=FAST)
    result = await agent.aretrieve("What did I cook last week?", scope=kitchen, k=5,
                                   as_of=AS_OF)
    assert "2025-06-04" in prompts(fake_openai)[0]
    assert "2025-05-26..06-01" in prompts(fake_openai)[0]  # the reading's window, in words
    assert result.route == "direct" and len(result.results) == 3
    assert all(said_in_the_week(r) for r in result.results)


async def test_a_question_without_time_words_is_not_bounded(fake_openai, memory,
                                                            kitchen) -> None:
    fake_openai.script = [reply(route("direct"))]
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=FAST)
    result = await agent.aretrieve("What did I cook?", scope=kitchen, k=7, as_of=AS_OF)
    assert "2025-06-04" in prompts(fake_openai)[0]
    assert len(result.results) == len(TURNS)
    assert not all(said_in_the_week(r) for r in result.results)


async def test_the_models_hops_and_sub_queries_cannot_leave_the_window(fake_openai, memory,
                                                                       kitchen) -> None:
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=FAST)
    fake_openai.script = [reply(route("chain")),
                          reply(judge(False, "What did I cook for dinner?")),
                          reply(judge(True, "", 0.9, [0]))]
    chained = await agent.aretrieve("What did I cook last week?", scope=kitchen, k=5,
                                    as_of=AS_OF)
    assert chained.route == "chain" and len(chained.queries) == 2
    judged = prompts(fake_openai)[1]
    assert "2025-06-04" in judged
    # the judge sees each item's day: only days of the week
    days = {r.nucleus.produced_at.date().isoformat() for r in chained.results}
    assert days and all(f"({day})" in judged for day in days)
    assert all(said_in_the_week(r) for r in chained.results)

    fake_openai.requests.clear()
    fake_openai.script = [reply(route("split")),
                          reply(split("What did I cook on Easter?", "What did I cook on June 3?"))]
    split_run = await agent.aretrieve("What did I cook last week?", scope=kitchen, k=5,
                                      as_of=AS_OF)
    assert split_run.route == "split" and len(split_run.queries) == 3
    assert "2025-06-04" in prompts(fake_openai)[1]
    assert all(said_in_the_week(r) for r in split_run.results)


async def test_without_as_of_the_prompt_says_today(fake_openai, memory, kitchen) -> None:
    fake_openai.script = [reply(route("direct"))]
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=FAST)
    before = datetime.now(timezone.utc)
    await agent.aretrieve("What did I cook?", scope=kitchen, k=3)
    sent = prompts(fake_openai)[0]
    assert any(day.date().isoformat() in sent for day in (before, before + timedelta(days=1)))


async def test_the_judges_next_search_stays_in_the_window_the_event_gives() -> None:
    """"before my trip to Norway": once the evidence dates the trip, the model's next query
    searches before it (from its first mention), and the prompt says so."""
    model = ScriptedChatModel.of([judge(False, "What did I pack?")] * 2)
    planner = LLMPlanner(model)
    question = "What did I buy before my trip to Norway?"
    evidence = ["My trip to Norway starts on 12 May.", "Bought new hiking boots today."]
    times = [datetime(2025, 4, 28, tzinfo=timezone.utc), datetime(2025, 5, 5, tzinfo=timezone.utc)]
    judged = (await planner.judge(question, evidence, [question], 1, evidence_times=times,
                                  as_of=AS_OF)).value
    assert judged.new_query == "What did I pack?"
    assert judged.produced_before.startswith("2025-05-12")
    assert judged.produced_after.startswith("2025-04-27")
    assert "2025-05-12" in str(model.calls[-1])
    undated = (await planner.judge(question, evidence, [question], 1, as_of=AS_OF)).value
    assert not (undated.produced_after or undated.produced_before)


async def test_a_forced_direct_search_stays_the_plain_search(fake_openai, memory,
                                                             kitchen) -> None:
    agent = RetrievalAgent(memory, llm=fake_openai.client(), model="m", policies=FAST)
    result = await agent.aretrieve("What did I cook last week?", scope=kitchen, k=7,
                                   as_of=AS_OF, strategy="direct")
    assert fake_openai.requests == [] and len(result.results) == len(TURNS)
