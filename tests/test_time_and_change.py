"""Time and change (docs/agent.md, "Time and change"): every retrieval is asked as of a
time; relative expressions and events bound the search in time; the newest statement of a
changed fact comes first; a question is never the answer; the accepted answer stays."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memroute import RetrievalAgent
from memroute.errors import InvalidInputError
from memroute.nlp import dates_told_in_past
from memroute.reading.dates import as_told, windowed_searches
from memroute.reading.events import event_of, event_question
from memroute.time.events import event_span
from memroute.time.expressions import days_named
from memroute.time.windows import asks_now, time_windows
from tests.reasons import names

AS_OF = datetime(2024, 7, 10, 15, tzinfo=timezone.utc)  # a Wednesday


def day(month: int, d: int, hour: int = 12) -> datetime:
    return datetime(2024, month, d, hour, tzinfo=timezone.utc)


@pytest.mark.parametrize("question, label", [
    ("What did I book last week?", "'last week' = 2024-07-01..07-07"),
    ("What did I do yesterday?", "'yesterday' = 2024-07-09"),
    ("Who did I call two days ago?", "'two days ago' = 2024-07-08"),
    ("What did I buy last month?", "'last month' = 2024-06-01..06-30"),
    ("What did I buy in March?", "'March' = 2024-03-01..03-31"),
    ("What did I buy in December?", "'December' = 2023-12-01..12-31"),
    ("what have we got on this weekend", "'this weekend' = 2024-07-13..07-14"),
    ("What do I have next Friday?", "'next Friday' = 2024-07-12"),
    ("Who did I have lunch with on Tuesday?", "'Tuesday' = 2024-07-09"),
])
def test_a_relative_expression_resolves_against_as_of(question: str, label: str) -> None:
    assert [w.label() for w in time_windows(question, AS_OF)] == [label]


def test_present_markers_name_no_window_and_ask_about_now() -> None:
    assert time_windows("Where does my brother live now?", AS_OF) == []
    assert asks_now("Where does my brother live now?")
    assert asks_now("Who feeds the cat these days?")
    assert asks_now("Where does Ana live?")
    assert not asks_now("Where did Ana live before?")


def test_a_window_searches_the_turns_said_in_it_and_those_naming_its_days() -> None:
    past, said = windowed_searches("What did I book last week?", AS_OF)
    assert said == "'last week' = 2024-07-01..07-07"
    assert [(s.query, s.produced_after[:10], s.produced_before[:10]) for s in past] == [
        ("What have I booked?", "2024-07-01", "2024-07-08")]
    assert past[0].mentions_days == [f"2024-07-0{d}" for d in range(1, 8)]
    coming, _ = windowed_searches("What do I have next Friday?", AS_OF)
    assert coming[0].query == "What do I have Friday 12 July?"
    assert (coming[0].produced_after, coming[0].mentions_days) == ("", ["2024-07-12"])
    weekend, _ = windowed_searches("What's on this weekend?", AS_OF)
    # a weekend begins on Friday evening
    assert weekend[0].mentions_days == ["2024-07-12", "2024-07-13", "2024-07-14"]
    # a year is spoken of more than said in: no window
    assert time_windows("Which country did I visit last year?", AS_OF)
    assert windowed_searches("Which country did I visit last year?", AS_OF) == ([], "")


TUESDAY = datetime(2025, 11, 25, 13, tzinfo=timezone.utc)


@pytest.mark.parametrize("expression, past, named", [
    ("Saturday", False, ["2025-11-29"]),
    ("on Saturday", True, ["2025-11-22"]),  # "We moved on Saturday"
    ("this weekend", False, ["2025-11-29", "2025-11-30"]),
    ("last weekend", False, ["2025-11-22", "2025-11-23"]),
    ("the 19th", False, ["2025-12-19"]),
    ("the 19th", True, ["2025-11-19"]),
    ("tomorrow", False, ["2025-11-26"]),
    ("Saturday 29 November", False, ["2025-11-29"]),
    ("14 to 20 April", False, ["2026-04-14"]),  # a range: its first day
    ("six weeks", False, []),
    ("May", False, []),
    ("Saturdays", False, []),
    ("18 March 1862", False, []),
])
def test_the_days_a_sentence_names_are_read_against_when_it_was_said(
        expression: str, past: bool, named: list[str]) -> None:
    told = frozenset([expression]) if past else frozenset()
    assert [d.date().isoformat() for d in days_named([expression], TUESDAY, told)] == named


@pytest.mark.parametrize("sentence, day, past", [
    ("We moved on Saturday.", "Saturday", True),
    ("He's been in Ardmore Lodge since Saturday.", "Saturday", True),
    ("Op was Tuesday and they let me out this morning.", "Tuesday", True),
    ("Booked Saltwater in Howth for Saturday at 8.", "Saturday", False),
    ("Morag's booked the car in for its service on the 19th.", "the 19th", False),
    ("Tamsin's coming up on Sunday to collect her bike.", "Sunday", False),
    ("I'll ask the consultant on the 19th.", "the 19th", False),
    ("Not yet, the chemist on Saturday.", "Saturday", False),
])
def test_the_tense_of_a_sentence_places_a_weekday_before_or_after_it_was_said(
        sentence: str, day: str, past: bool) -> None:
    assert (day in dates_told_in_past(sentence, [day])) is past


async def test_a_window_finds_the_turns_that_name_its_days(memory, scope):
    """Plans told before a coming weekend, and deeds told after a past one, are found by the
    days they name, not by when they were said."""
    turns = [
        ((11, 18, 9), "Booked Saltwater in Howth for me and Ruairí, Saturday at 8."),
        ((11, 18, 10), "Declan has the kids from Friday."),
        ((11, 18, 11), "Nell's guitar lesson moved to Thursdays."),
        ((11, 19, 9), "What a week, the flood report is finally in."),
        ((11, 19, 10), "Happening at work: a new hydrology lead starts in January."),
        ((11, 24, 9), "Came off my bike on the coast road on Saturday, just bruises."),
        ((11, 24, 10), "The bike shop says the wheel will take a week."),
    ]
    turns = [(datetime(2025, *at, tzinfo=timezone.utc), text) for at, text in turns]
    await memory.add(scope, [{"content": text, "producer": "user", "session_id": f"s{i}",
                              "produced_at": when, "uid": f"w{i}"}
                             for i, (when, text) in enumerate(turns)])
    agent = RetrievalAgent(memory, planner="offline", context=(0, 0))
    coming = await agent.aretrieve("What's happening this weekend?", scope=scope, k=2,
                                   as_of=datetime(2025, 11, 20, 18, tzinfo=timezone.utc))
    # golden: the route's reason names the expression and the days it resolved to
    assert names(coming.route_reason, "this weekend", "2025-11-22"), coming.route_reason
    assert {r.uid for r in coming.results} == {"w0", "w1"}
    past = await agent.aretrieve("What happened last weekend?", scope=scope, k=1,
                                 as_of=datetime(2025, 11, 25, 18, tzinfo=timezone.utc))
    assert [r.uid for r in past.results] == ["w5"]  # told on the Monday after
    assert await memory.search_scored(scope, "bike", k=5, context=(0, 0), filters={
        "mentions_day": {"$in": ["2025-11-22"]}}) and all(
        r.uid in ("w0", "w5") for r in await memory.search_scored(
            scope, "bike", k=5, context=(0, 0), filters={"mentions_day": "2025-11-22"}))


@pytest.mark.parametrize("question, told", [
    ("What did I book?", "What have I booked?"),  # "book" alone reads as the noun
    ("Who did I ring?", "Who have I rung?"),
    ("what did we buy", "what have we bought"),
    ("What did I get up to?", "What have I got up to?"),
    ("Where did Tom eat?", "Where has Tom eaten?"),
    ("Did I pay the plumber?", "Have I paid the plumber?"),
    ("What did Melanie and her family see on the trip?",
     "What have Melanie and her family seen on the trip?"),
    ("Which country did James visit?", "Which country has James visited?"),
    ("What did John's teammates give him?", "What have John's teammates given him?"),
    ("When did I ring Mum?", "When did I ring Mum?"),  # the perfect takes no time
    ("What didn't I pack?", "What didn't I pack?"),
    ("What does Tom do?", "What does Tom do?"),
])
def test_a_past_question_is_searched_as_a_turn_tells_the_deed(question: str, told: str) -> None:
    assert as_told(question) == told


async def test_a_window_finds_the_deeds_a_turn_tells_in_the_past_form(memory, scope):
    turns = [(day(7, 1), "Booked the movers for the 28th, 8am."),
             (day(7, 2), "Booked Lisbon! Flights on the 14th."),
             (day(7, 3), "Finished the book club novel, loved the ending."),
             (day(7, 4), "The library wants two of my books back by Friday."),
             (day(7, 5), "Tomás lent me a book on Portuguese cooking."),
             (day(6, 5), "I gave Ana the book about Lisbon's tram lines."),
             (day(6, 9), "My book group meets on Thursdays at the café.")]
    await memory.add(scope, [{"content": text, "producer": "user", "session_id": f"s{i}",
                              "produced_at": when, "uid": f"b{i}"}
                             for i, (when, text) in enumerate(turns)])
    agent = RetrievalAgent(memory, planner="offline", context=(0, 0))
    result = await agent.aretrieve("What did I book last week?", scope=scope, k=3, as_of=AS_OF)
    assert {"b0", "b1"} <= {r.uid for r in result.results}  # the deeds, in the top k


def test_an_event_is_named_then_dated_by_the_evidence_that_speaks_of_it() -> None:
    event = event_of("What do I need to do before my trip to Norway?")
    assert (event.relation, event.text) == ("before", "my trip to Norway")
    assert event_question("What do I need to do before my trip to Norway?", event) == \
        "When is my trip to Norway?"
    assert event_of("Who did I have lunch with on Tuesday?") is None  # a date, not an event
    assert event_of("Where did we eat on the camping trip?").relation == "during"
    evidence = ["Booked the flights for the Norway trip, we fly to Oslo on 3 August!",
                "What are you packing for Norway?"]
    span = event_span(event, evidence, [day(6, 20), day(6, 21)])
    assert span.date == datetime(2024, 8, 3, tzinfo=timezone.utc)  # stated, read in June
    assert span.after < day(6, 20) and span.before == span.date


def test_an_event_is_the_one_spoken_of_lately_and_undated_it_is_still_to_come() -> None:
    event = event_of("What did I have to sort out before starting at the hospital?")
    evidence = ["Last week I visited a veterans' hospital with my aunt.",
                "I've accepted the pharmacist job at St Aldric's Hospital!",
                "Monday 5 May. Before then there's an occupational health form."]
    said = [datetime(2022, 12, 26, tzinfo=timezone.utc), day(4, 2), day(4, 2)]
    span = event_span(event, evidence[:2], said[:2])
    assert span.sentence == evidence[1] and not span.stated  # not the visit two years before
    assert span.after == datetime(2024, 4, 1, tzinfo=timezone.utc) and span.before is None
    assert "was spoken of on 2024-04-02" in span.said(event)


@pytest.fixture
async def diary(memory, scope):
    """A user's memory over a summer: bookings in several weeks, a trip, a fact that changed,
    and the assistant's own questions."""
    turns = [
        (day(5, 2), "user", "My brother Tom lives in Leeds, near the university."),
        (day(6, 10), "user", "I booked a dentist appointment for August."),
        (day(6, 20), "user", "We fly to Oslo on 3 August for our Norway trip!"),
        (day(6, 22), "user", "Before the Norway trip I need to renew my passport."),
        (day(6, 25), "assistant", "Where does Tom live now?"),
        (day(6, 28), "user", "Tom has moved to Bristol, he started at the harbour office."),
        (day(7, 2), "user", "I booked a table at Rosa's for Friday."),
        (day(7, 3), "user", "I booked the train to Leeds for Mum's birthday."),
        (day(7, 9), "user", "I booked flights to Rome for the autumn."),
        (day(8, 12), "user", "Back from Norway, the fjords were unreal."),
    ]
    await memory.add(scope, [{"content": text, "producer": who, "session_id": f"s{i}",
                              "produced_at": when, "uid": f"t{i}"}
                             for i, (when, who, text) in enumerate(turns)])
    return RetrievalAgent(memory, planner="offline", context=(0, 0))


async def test_last_week_is_the_week_before_as_of_and_named_in_the_reason(diary, scope):
    result = await diary.aretrieve("What did I book last week?", scope=scope, k=3,
                                   as_of=AS_OF)
    # golden: the route's reason names the expression and the first day of its window
    assert names(result.route_reason, "last week", "2024-07-01"), result.route_reason
    assert {"t6", "t7"} <= {r.uid for r in result.results}  # Rosa's and the train, in the top k
    # nothing outside the window but the question's own best hit
    outside = [r.uid for r in result.results
               if not day(7, 1, 0) <= r.nucleus.produced_at < day(7, 8, 0)]
    assert len(outside) <= 1, outside


async def test_nothing_produced_after_as_of_is_searched(diary, scope):
    result = await diary.aretrieve("What did I book?", scope=scope, k=10, as_of=day(7, 1))
    assert result.results and all(r.nucleus.produced_at <= day(7, 1) for r in result.results)
    with pytest.raises(InvalidInputError, match="as_of"):
        await diary.aretrieve("What did I book?", scope=scope, as_of="last Tuesday")


async def test_an_event_bounds_the_search_and_the_hop_says_so(diary, scope):
    result = await diary.aretrieve("What do I need to do before my trip to Norway?",
                                   scope=scope, k=3, as_of=day(7, 20))
    assert result.route == "chain"
    assert "When is my trip to Norway?" in result.queries
    reason = result.hops[0]["reason"]
    assert names(reason, "my trip to Norway", "2024-08-03"), reason  # golden: event and date
    uids = [r.uid for r in result.results]
    assert "t3" in uids and "t9" not in uids  # the passport, said before the trip


async def test_the_newest_statement_of_a_changed_fact_comes_first(diary, scope):
    result = await diary.aretrieve("Where does Tom live now?", scope=scope, k=3, as_of=AS_OF)
    uids = [r.uid for r in result.results]
    assert "t5" in uids and "t0" in uids
    assert uids.index("t5") < uids.index("t0")  # Bristol before Leeds


LISBON = ["Clara moved to Lisbon in 2023.", "Clara loves grilled sardines.",
          "The person who moved to Berlin loves to eat currywurst, says Tom.",
          "People in Lisbon love to eat custard tarts.", "Tom moved to Berlin in 2021.",
          "Lisbon is famous for its trams.", "Clara works as a translator.",
          "Tom's sister lives in Porto.", "Custard tarts are sold in every Lisbon bakery."]


async def test_the_resolved_answer_survives_the_final_selection(memory, scope):
    await memory.add(scope, [{"content": t, "session_id": "s"} for t in LISBON])
    agent = RetrievalAgent(memory, planner="offline", context=(0, 0))
    result = await agent.aretrieve("What does the person who moved to Lisbon love to eat?",
                                   scope=scope, k=3)
    assert "What does Clara love to eat?" in result.queries
    assert "Clara loves grilled sardines." in [r.nucleus.content for r in result.results]


async def test_the_retriever_and_the_tool_are_asked_as_of_a_time(diary, memory, scope):
    from memroute import MemrouteRetriever
    from memroute.tools import memory_search_tool

    retriever = MemrouteRetriever(memory=memory, scope=scope, k=10, as_of=day(7, 1))
    docs = await retriever.ainvoke("What did I book?")
    assert docs and all(d.metadata["produced_at"] <= day(7, 1).isoformat() for d in docs)
    later = await retriever.ainvoke("What did I book?", as_of=AS_OF.isoformat())
    assert "t8" not in {d.id for d in docs} and {"t6", "t7"} <= {d.id for d in later}
    tool = memory_search_tool(memory, scope, as_of=day(7, 1))
    text = await tool.ainvoke({"query": "What did I book?"})
    assert "Rosa" not in text and "dentist" in text


def diary_agent(memory) -> RetrievalAgent:
    return RetrievalAgent(memory, planner="offline", context=(0, 0))


async def test_a_turn_that_only_asks_gives_its_place_to_the_reply(memory, scope):
    turns = [("user", "Isla's swimming is moving to Thursdays, 5pm, from this week."),
             ("assistant", "All noted. Who's taking her on Thursdays?"),
             ("user", "Me, I finish at half three on Thursdays now."),
             ("user", "Did you book the car's MOT?"),
             ("user", "And the boiler service too?")]
    await memory.add(scope, [{"content": text, "producer": who, "session_id": "s1",
                              "produced_at": day(5, 11, 9 + i), "uid": f"r{i}"}
                             for i, (who, text) in enumerate(turns)])
    replies = await memory.replies(scope, ["r1", "r3", "r4"])
    # the same producer's next turn, and none after the last: no reply
    assert {asked: r.episode.uid for asked, r in replies.items()} == {"r1": "r2"}
    # a reply the retrieval's filters or as_of leave out is none
    assert await memory.replies(scope, ["r1"], filters={"producer": "assistant"}) == {}
    before = await diary_agent(memory).aretrieve(
        "Who takes Isla to swimming on Thursdays?", scope=scope, k=2,
        as_of=day(5, 11, 10) + timedelta(minutes=30))
    assert "r2" not in [r.uid for r in before.results]
    agent = RetrievalAgent(memory, planner="offline", context=(0, 0))
    result = await agent.aretrieve("Who takes Isla to swimming on Thursdays?", scope=scope, k=2)
    reply = next(r for r in result.results if r.uid == "r2")
    assert [e.uid for e in reply.episodes] == ["r1", "r2"]  # the question kept as its context
    assert "r1" not in [r.uid for r in result.results]


async def test_a_store_written_before_days_were_kept_gets_them_from_the_backfill(memory, scope):
    tuesday = datetime(2025, 11, 25, 13, tzinfo=timezone.utc)
    await memory.add(scope, [
        {"content": "Booked Saltwater in Howth for Saturday at 8.", "produced_at": tuesday,
         "uid": "plan"},
        {"content": "Nell's lesson moved to Thursdays.", "produced_at": tuesday, "uid": "other"}])
    saturday = {"mentions_day": "2025-11-29"}
    assert [r.uid for r in await memory.search_scored(scope, "plans", filters=saturday)] == [
        "plan"]
    async with memory._pool.connection() as conn:  # as an older version stored them
        await conn.execute(
            f"UPDATE {memory.schema}.sentences SET entity_keys = ARRAY(SELECT k FROM "
            "unnest(entity_keys) AS k WHERE k NOT LIKE 'day:%%') WHERE scope_key = %s",
            [scope.key])
    assert await memory.search_scored(scope, "plans", filters=saturday) == []
    assert await memory.backfill_entities() >= 1
    assert [r.uid for r in await memory.search_scored(scope, "plans", filters=saturday)] == [
        "plan"]
    assert await memory.backfill_entities() == 0
