"""Fewer searches per auto question (docs/evaluation.md, "Where the searches go"): a
comparison searches the question first and then only the subjects it missed; a chain whose
first hop already holds the bridge's own facts gets one packed rewrite; a split may search
its sub-queries alone."""

from __future__ import annotations

import uuid

from memroute import RetrievalAgent, Scope
from memroute.planners.offline.bridging import ChainHeuristics
from memroute.planners.offline.parsed import (
    bridge_in_sight,
    compared_subjects,
    judge_with_entities,
    subjects_missed,
)
from memroute.planners.offline.planner import OfflinePlanner
from memroute.strategies.base import SplitPlan

QUESTION = "Which government position was held by the star of Kiss and Tell?"
FILM = ["Kiss and Tell (1945 film): Kiss and Tell is a 1945 comedy film starring Shirley "
        "Temple as the teenage Corliss Archer.",
        "Kiss and Tell (1945 film): The film was a box office success."]
STAR = "Shirley Temple: Shirley Temple Black served as United States ambassador to Ghana."
OTHERS = ["Accra: Accra is the capital of Ghana.",
          "Walter Abel: Walter Abel was an American character actor."]

COMPARED = "Which was founded first, Oakridge College or Pinecrest University?"
OAKRIDGE = ["Oakridge College: Oakridge College was founded in 1887 in Vermont.",
            "Oakridge College: Its library holds 40,000 volumes."]
PINECREST = ["Pinecrest University: Pinecrest University was founded in 1902.",
             "Pinecrest University: Pinecrest has a rowing team."]
ELSEWHERE = ["Vermont: Vermont is a state in New England.",
             "Maple Hall: Maple Hall is a dormitory built of brick.",
             "Rowing: Rowing is a sport of racing boats with oars."]


def test_the_bridge_is_in_sight_when_a_named_titles_facts_name_another_title() -> None:
    assert bridge_in_sight(QUESTION, [*FILM, STAR])
    # the star's own facts did not come up, or nothing is filed under the question's subject
    assert not bridge_in_sight(QUESTION, [*FILM, *OTHERS])
    assert not bridge_in_sight(QUESTION, [STAR, *OTHERS])
    # conversation turns are filed under no title
    assert not bridge_in_sight("What does Clara love to eat?",
                               ["I moved to Lisbon in 2023.", "Clara loves grilled sardines."])
    # each named title needs its own link
    both = "Which film has the director who died later, Kiss and Tell or Accra?"
    assert bridge_in_sight(both, [*FILM, STAR, OTHERS[0]]) is False
    assert bridge_in_sight(both, [*FILM, STAR, OTHERS[0], "Ghana: Ghana is in Africa."])


def test_a_bridge_in_sight_gets_one_packed_rewrite() -> None:
    on = ChainHeuristics(one_rewrite_in_sight=True, keep=3)
    first = judge_with_entities(QUESTION, [*FILM, STAR], [QUESTION], on)
    assert not first.is_sufficient
    # one rewrite, so the best bridges are packed into it
    assert first.new_query.startswith("Shirley Temple") and "Corliss Archer" in first.new_query
    after = judge_with_entities(QUESTION, [*FILM, STAR, OTHERS[0]], [QUESTION, first.new_query],
                                on)
    assert after.is_sufficient
    # a single bridge written by another planner (a cascade's LLM) keeps the second rewrite
    single = judge_with_entities(QUESTION, [*FILM, STAR, OTHERS[0]],
                                 [QUESTION, "Shirley Temple government position"], on)
    assert not single.is_sufficient and single.new_query
    # not in sight: the usual two rewrites, the first one a single bridge
    usual = judge_with_entities(QUESTION, [*FILM, *OTHERS], [QUESTION], on)
    assert not usual.is_sufficient and "Corliss Archer" not in usual.new_query
    # (the bridge-found stop, a default, would end it: this checks the bridge in sight alone)
    goes_on = judge_with_entities(QUESTION, [*FILM, *OTHERS, STAR], [QUESTION, usual.new_query],
                                  ChainHeuristics(one_rewrite_in_sight=True, keep=4,
                                                  bridge_found_stop=False))
    assert not goes_on.is_sufficient
    # and off, the chain keeps its two rewrites
    off = judge_with_entities(QUESTION, [*FILM, STAR], [QUESTION],
                              ChainHeuristics(keep=3, one_rewrite_in_sight=False))
    assert "Corliss Archer" not in off.new_query


def test_a_comparison_searches_only_the_subjects_the_question_missed() -> None:
    subs = compared_subjects(COMPARED)
    assert len(subs) == 2 and subs[0].startswith("Oakridge College")
    assert subjects_missed(COMPARED, [*OAKRIDGE, *PINECREST], subs, [COMPARED]) == []
    assert subjects_missed(COMPARED, [*OAKRIDGE, *ELSEWHERE], subs, [COMPARED]) == [subs[1]]
    assert subjects_missed(COMPARED, ELSEWHERE, subs, [COMPARED, subs[0]]) == [subs[1]]
    # facts filed under a subject that do not name it ("Its library ...") do not cover it:
    # the page came up, not its own statement of what the subject is
    assert subjects_missed(COMPARED, [OAKRIDGE[1], *PINECREST], subs, [COMPARED]) == [subs[0]]
    assert subjects_missed(COMPARED, ["Oakridge College: Oakridge College", *PINECREST], subs,
                           [COMPARED]) == [subs[0]]
    # turns name their subjects but are filed under no title: both are searched
    assert subjects_missed(COMPARED, ["Oakridge College was founded in 1887."], subs,
                           [COMPARED]) == subs
    # coordinated clauses, a role of each subject, one subject: no comparison of two
    assert compared_subjects("Where does Karim study and where is Helga Brandt's office?") == []
    assert compared_subjects("Which film has the director who died first, Green or Blue?") == []
    assert compared_subjects("When was Oakridge College founded?") == []
    # sub-queries a split would drop (comparison wording) leave no two subjects
    assert compared_subjects("What did Jon and Gina compare their journeys to?") == []


async def _searched(memory, facts: list[str], question: str, planner: OfflinePlanner,
                    strategy: str = "auto") -> tuple[str, list[str]]:
    scope = Scope(org_id=f"few-{uuid.uuid4().hex[:8]}", project_id="wiki", user_id="u")
    await memory.add(scope, [{"content": text, "producer": "system", "session_id": "s1"}
                             for text in facts])
    agent = RetrievalAgent(memory, planner=planner, context=(0, 0))
    result = await agent.aretrieve(question, scope=scope, k=4, strategy=strategy)
    return result.route, result.queries


async def test_on_a_store_a_comparison_takes_one_search_per_missing_subject(memory) -> None:
    planner = OfflinePlanner(subjects_after_search=True, keep=4)
    route, queries = await _searched(memory, [*OAKRIDGE, *PINECREST, *ELSEWHERE], COMPARED,
                                     planner)
    assert route == "chain" and queries == [COMPARED]
    # Pinecrest's facts are not in the store: its sub-query is searched after the question
    route, queries = await _searched(memory, [*OAKRIDGE, *ELSEWHERE], COMPARED, planner)
    assert route == "chain" and queries == [COMPARED, compared_subjects(COMPARED)[1]]
    # off: the split searches the question and both subjects
    route, queries = await _searched(memory, [*OAKRIDGE, *PINECREST, *ELSEWHERE], COMPARED,
                                     OfflinePlanner(subjects_after_search=False))
    assert route == "split" and len(queries) == 3


async def test_on_a_store_a_bridge_in_sight_takes_two_searches(memory) -> None:
    facts = [*FILM, STAR, *OTHERS]
    _, queries = await _searched(memory, facts, QUESTION,
                                 OfflinePlanner(one_rewrite_in_sight=True, keep=4), "chain")
    assert len(queries) == 2 and queries[1].startswith("Shirley Temple")
    _, queries = await _searched(memory, facts, QUESTION,
                                 OfflinePlanner(keep=4, one_rewrite_in_sight=False), "chain")
    assert len(queries) == 3


class _OneSubQuery(OfflinePlanner):
    async def split(self, query: str):
        result = await super().split(query)
        result.value = SplitPlan(sub_queries=result.value.sub_queries[:1])
        return result


async def test_a_split_can_search_its_sub_queries_alone(memory) -> None:
    facts = [*OAKRIDGE, *PINECREST, *ELSEWHERE]
    route, queries = await _searched(memory, facts, COMPARED, OfflinePlanner(
        split_question_search=False, subjects_after_search=False))
    assert route == "split" and sorted(queries) == sorted(compared_subjects(COMPARED))
    # fewer than two sub-queries left: the question is searched with it
    route, queries = await _searched(memory, facts, COMPARED, _OneSubQuery(
        split_question_search=False, subjects_after_search=False))
    assert route == "split" and COMPARED in queries and len(queries) == 2
