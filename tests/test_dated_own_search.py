"""A question about one speaker that states a date: one more search of that speaker's turns,
among those produced around the date (`ChainHeuristics.date_pad_days`)."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from memroute import RetrievalAgent, Scope
from memroute.nlp import SPEAKER_LABEL, Entity
from memroute.planners.offline.bridging import ChainHeuristics
from memroute.time.expressions import date_window, without_dates
from memroute.planners.offline.parsed import judge_with_entities
from memroute.planners.offline.planner import OfflinePlanner
from memroute.strategies.base import ChainSearch


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def test_a_stated_date_is_a_window_and_leaves_the_words() -> None:
    assert date_window("Who did I meet on 3 May, 2023?", 0) == (utc(2023, 5, 3), utc(2023, 5, 4))
    assert date_window("Who did I meet on May 3rd, 2023?", 2) == (utc(2023, 5, 1), utc(2023, 5, 6))
    assert date_window("What did I face in December 2023?", 0) == (utc(2023, 12, 1),
                                                                    utc(2024, 1, 1))
    # no full date: no window
    for text in ("When did I go camping in July?", "What did I do in 2023?",
                 "What did I do last week?", "May I ask what you did on 31 February, 2023?"):
        assert date_window(text) is None
    assert without_dates("What did I find on 1 February, 2023?") == "What did I find?"
    assert without_dates("What setback did I face in October 2023?") == "What setback did I face?"
    assert without_dates("When did I go camping in July?") == "When did I go camping in July?"


QUESTION = "Who did Gina have dinner with on May 3, 2023?"
TURNS = ["I had dinner with my mom, it was lovely.", "Oh nice, say hi to her!"]
STORED = [[Entity("Gina", "gina", SPEAKER_LABEL)], [Entity("Jon", "jon", SPEAKER_LABEL)]]


def test_the_dated_search_comes_after_the_own_search() -> None:
    first = judge_with_entities(QUESTION, TURNS, [QUESTION], ChainHeuristics(), STORED)
    assert first.new_query == "Who did I have dinner with on May 3, 2023?"
    assert (first.producer, first.produced_after, first.produced_before) == ("Gina", "", "")
    # the dated search does not depend on the first one's evidence: sent in the same hop
    assert first.concurrent_searches == [ChainSearch(
        query="Who did I have dinner with?", producer="Gina",
        produced_after="2023-04-26T00:00:00+00:00", produced_before="2023-05-11T00:00:00+00:00")]
    # when only the own search was sent: the dated search next
    second = judge_with_entities(QUESTION, TURNS, [QUESTION, first.new_query],
                                 ChainHeuristics(), STORED)
    assert second.new_query == "Who did I have dinner with?" and second.producer == "Gina"
    assert second.produced_after == "2023-04-26T00:00:00+00:00"
    assert second.produced_before == "2023-05-11T00:00:00+00:00"
    assert judge_with_entities(QUESTION, TURNS, [QUESTION, first.new_query, second.new_query],
                               ChainHeuristics(), STORED).is_sufficient
    # off, or no date stated: the own search alone
    off = ChainHeuristics(date_pad_days=0)
    assert judge_with_entities(QUESTION, TURNS, [QUESTION, first.new_query], off,
                               STORED).is_sufficient
    undated = "Who did Gina have dinner with?"
    assert judge_with_entities(undated, TURNS, [undated, "Who did I have dinner with?"],
                               ChainHeuristics(), STORED).is_sufficient


async def test_the_dated_search_reads_only_the_speakers_turns_of_those_days(memory) -> None:
    scope = Scope(org_id=f"dated-{uuid.uuid4().hex[:8]}", project_id="chat", user_id="u")
    sessions = {
        utc(2023, 3, 10, 18): [("Gina", "I had dinner with my old team from the bank."),
                               ("Jon", "Dinner with the team sounds fun!")],
        utc(2023, 5, 3, 18): [("Gina", "Tonight I went out to eat with my mom, she loved it."),
                              ("Jon", "That's sweet, Gina. Your mom is the best.")],
        utc(2023, 8, 20, 18): [("Gina", "I had dinner with Jon's cousin, what a night!"),
                               ("Jon", "Ha, he told me all about the dinner.")],
    }
    await memory.add(scope, [
        {"content": text, "producer": who, "session_id": f"s{s}", "produced_at": start.replace(
            minute=t)} for s, (start, turns) in enumerate(sessions.items())
        for t, (who, text) in enumerate(turns)])
    agent = RetrievalAgent(memory, planner=OfflinePlanner(), context=(0, 0))
    result = await agent.aretrieve(QUESTION, scope=scope, k=4, strategy="chain")
    assert result.queries[1:] == ["Who did I have dinner with on May 3, 2023?",
                                  "Who did I have dinner with?"]
    assert result.search_rounds == 2  # both in the second hop
    dated = [r for r in result.results if r.query == "Who did I have dinner with?"]
    assert dated and all(r.nucleus.producer == "Gina" for r in dated)
    assert all(utc(2023, 4, 26) <= r.nucleus.produced_at < utc(2023, 5, 11) for r in dated)
    assert any("my mom" in r.nucleus.content for r in result.results[:2])


def test_a_search_task_narrows_the_matched_turns_within_the_callers_bound() -> None:
    """The caller's filters and as_of bound the search (its hits and their context); the
    speaker and the window narrow only the turns it matches."""
    from memroute.graph.memory_search import send_search
    state = {"scope": {}, "k": 10, "query": QUESTION, "filters": {"session_id": "s1"},
             "as_of": "2023-05-20T09:00:00+00:00"}
    task = send_search(state, "Who did I have dinner with?", "chain", 3, producer="Gina",
                       produced_after="2023-04-26", produced_before="2023-05-11").arg
    assert task["filters"] == {"session_id": "s1"} and task["as_of"] == state["as_of"]
    assert task["match"] == {"$and": [{"producer": "Gina"},
                                      {"produced_at": {"$gte": "2023-04-26"}},
                                      {"produced_at": {"$lt": "2023-05-11"}}]}
    assert task["producer"] == "Gina"
    alone = send_search({**state, "filters": None}, "x", "chain", 2, producer="Gina").arg
    assert alone["filters"] is None and alone["match"] == {"producer": "Gina"}
    plain = send_search({**state, "filters": None, "as_of": None}, "x", "chain", 2).arg
    assert plain["filters"] is None and "match" not in plain and "as_of" not in plain
