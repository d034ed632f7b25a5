"""A chain hop may send several independent searches at once (docs/evaluation.md, "A chain
hop sends several searches at once"): a comparison's subjects that the question's search
missed are searched in one hop, concurrently, and the judge reads the pooled hits of all."""

from __future__ import annotations

import uuid

from memroute import RetrievalAgent, Scope
from memroute.graph.state import HopSearch, hop_hits, latest_hop
from memroute.planners.offline.parsed import compared_subjects, judge_with_entities
from memroute.planners.offline.planner import OfflinePlanner
from memroute.strategies.base import ChainJudgment, ChainSearch
from memroute.strategies.chain_of_query import hop_searches

QUESTION = "Who has been to more countries, Caroline or Melanie?"
TURNS = [("Caroline", "I have visited Peru, Chile and Japan so far."),
         ("Melanie", "That sounds amazing, I love hearing about your trips!"),
         ("Melanie", "I have only been to Canada and Mexico myself."),
         ("Caroline", "My brother is a teacher in Ohio."),
         ("Melanie", "My kids started painting lessons last week.")]


def _search(hop: int, slot: int, query: str, hits: list[str]) -> HopSearch:
    return HopSearch(hop=hop, slot=slot, query=query, hits=hits)


def test_the_searches_of_one_hop_gather_and_a_later_hop_replaces_them() -> None:
    first = latest_hop([], [_search(1, 0, "q", ["a", "b"])])
    # the two searches of hop 2 arrive in any order: they gather in slot order
    second = latest_hop(latest_hop(first, [_search(2, 1, "y", ["c", "b", "e"])]),
                        [_search(2, 0, "x", ["b", "d"])])
    assert [s["query"] for s in second] == ["x", "y"]
    # taken in turn from each search, without repeats
    assert hop_hits(second) == ["b", "c", "d", "e"]
    assert latest_hop(second, [_search(3, 0, "z", ["f"])]) == [_search(3, 0, "z", ["f"])]


def test_the_next_hop_keeps_only_concurrent_searches_the_stop_rules_allow() -> None:
    judgment = ChainJudgment(is_sufficient=False, new_query="Caroline countries",
                             producer="Caroline",
                             concurrent_searches=[ChainSearch(query="Melanie countries"),
                                                  ChainSearch(query="Caroline countries"),
                                                  ChainSearch(query="countries of Zanzibar")])
    # a repeat of the hop's own rewrite, an ungrounded name; each keeps its own filters
    assert hop_searches(judgment, QUESTION, [QUESTION], []) == [
        ChainSearch(query="Caroline countries", producer="Caroline"),
        ChainSearch(query="Melanie countries")]
    # a repeat of an earlier query, an empty one
    judgment = judgment.model_copy(update={"concurrent_searches": [
        ChainSearch(query=QUESTION), ChainSearch(query="")]})
    assert [s.query for s in hop_searches(judgment, QUESTION, [QUESTION], [])] == [
        "Caroline countries"]


def test_the_offline_judge_sends_a_comparisons_missed_subjects_in_one_hop() -> None:
    evidence = [text for _, text in TURNS]  # turns: filed under no title, they cover no one
    subjects = compared_subjects(QUESTION)
    judged = judge_with_entities(QUESTION, evidence, [QUESTION])
    assert [judged.new_query, *(s.query for s in judged.concurrent_searches)] == subjects
    # both searched: enough
    assert judge_with_entities(QUESTION, evidence, [QUESTION, *subjects]).is_sufficient


async def _remember(memory) -> Scope:
    scope = Scope(org_id=f"fan-{uuid.uuid4().hex[:8]}", project_id="chat", user_id="u")
    await memory.add(scope, [{"content": text, "producer": who, "session_id": "s1"}
                             for who, text in TURNS])
    return scope


async def test_on_a_store_one_hop_runs_both_subject_searches_concurrently(
        memory, timed_searches) -> None:
    scope = await _remember(memory)
    events, found = timed_searches.events, timed_searches.found
    agent = RetrievalAgent(memory, planner=OfflinePlanner(), context=(0, 0))
    result = await agent.aretrieve(QUESTION, scope=scope, k=10, strategy="auto")
    subjects = compared_subjects(QUESTION)
    assert result.route == "chain" and result.queries[0] == QUESTION
    assert sorted(result.queries[1:]) == sorted(subjects)
    # both subjects' searches started before either finished
    second_hop = events[2:]
    assert [kind for kind, _ in second_hop] == ["start", "start", "end", "end"]
    assert {query for _, query in second_hop} == set(subjects)
    assert result.search_rounds == 2
    hop = result.hops[0]
    assert [hop["new_query"], *hop["new_concurrent_queries"]] == subjects
    assert [result.hops[1]["query"], *result.hops[1]["concurrent_queries"]] == subjects
    assert result.hops[1]["decision"] == "sufficient"
    assert all(found[s] for s in subjects)  # each subject's search found turns
