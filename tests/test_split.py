"""Independent lookups: a split's sub-queries are whole questions (each keeps its predicate,
its constraints and its referent) and are searched alone; a comparison of two named things
searches the question first and then only the subjects it missed, at once."""

from __future__ import annotations

import uuid

from memroute import RetrievalAgent, Scope
import pytest

from memroute.planners.offline.parsed import (
    compared_subjects,
    split_by_parse,
    subjects_missed,
    whole_sub_questions,
)
from memroute.planners.offline.planner import OfflinePlanner
from memroute.planners.offline.question_syntax import comparison_subjects
from memroute.strategies.base import SplitPlan

COMPARED = "Which was founded first, Oakridge College or Pinecrest University?"
OAKRIDGE = ["Oakridge College: Oakridge College was founded in 1887 in Vermont.",
            "Oakridge College: Its library holds 40,000 volumes."]
PINECREST = ["Pinecrest University: Pinecrest University was founded in 1902.",
             "Pinecrest University: Pinecrest has a rowing team."]
ELSEWHERE = ["Vermont: Vermont is a state in New England.",
             "Maple Hall: Maple Hall is a dormitory built of brick.",
             "Rowing: Rowing is a sport of racing boats with oars."]


@pytest.mark.parametrize(("question", "subs"), [
    ("What do Pepper and Mochi eat?", ["What does Pepper eat?", "What does Mochi eat?"]),
    ("Where do Chiara and Priya Nair work?",
     ["Where does Chiara work?", "Where does Priya Nair work?"]),
    ("When are the birthdays of Helen Park and Ravi Menon?",
     ["When are the birthdays of Helen Park?", "When are the birthdays of Ravi Menon?"]),
    ("Are Oakridge College and Pinecrest University both in Vermont?",
     ["Is Oakridge College in Vermont?", "Is Pinecrest University in Vermont?"]),
])
def test_each_coordinated_subject_gets_the_whole_question(question: str, subs: list[str]) -> None:
    assert split_by_parse(question) == subs


@pytest.mark.parametrize(("question", "subs"), [
    ("Where does Karim study and where is Helga Brandt's office?",
     ["Where does Karim study?", "Where is Helga Brandt's office?"]),
    # the referent of a later clause's pronoun is the first clause's named subject
    ("Where does Priya live and where does she work?",
     ["Where does Priya live?", "Where does Priya work?"]),
    ("Where did Leonie move and what did her husband open?",
     ["Where did Leonie move?", "What did Leonie's husband open?"]),
    ("Where is the DataWorks conference held and who gives its keynote?",
     ["Where is the DataWorks conference held?", "Who gives DataWorks's keynote?"]),
])
def test_each_clause_is_its_own_question_with_its_referent(question: str,
                                                           subs: list[str]) -> None:
    assert split_by_parse(question) == subs


def test_subjects_that_do_not_stand_together_are_not_rewritten() -> None:
    # trailing options of a comparison: no whole question per subject (the sub-queries of
    # `subject_sub_queries` serve instead)
    assert whole_sub_questions("Which was founded first, A or B?", ["A", "B"]) == []
    assert whole_sub_questions("Did Oslo host the Games before Bergen?", ["Oslo", "Bergen"]) == []


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
    planner = OfflinePlanner(keep=4)
    route, queries = await _searched(memory, [*OAKRIDGE, *PINECREST, *ELSEWHERE], COMPARED,
                                     planner)
    assert route == "chain" and queries == [COMPARED]
    # Pinecrest's facts are not in the store: its sub-query is searched after the question
    route, queries = await _searched(memory, [*OAKRIDGE, *ELSEWHERE], COMPARED, planner)
    assert route == "chain" and queries == [COMPARED, compared_subjects(COMPARED)[1]]


class _OneSubQuery(OfflinePlanner):
    async def split(self, query: str, **kwargs):
        result = await super().split(query, **kwargs)
        result.value = SplitPlan(sub_queries=result.value.sub_queries[:1])
        return result


COORDINATED = "When were Oakridge College and Pinecrest University founded?"


async def test_a_split_searches_its_sub_questions_alone(memory) -> None:
    facts = [*OAKRIDGE, *PINECREST, *ELSEWHERE]
    route, queries = await _searched(memory, facts, COORDINATED, OfflinePlanner())
    assert route == "split" and sorted(queries) == sorted(split_by_parse(COORDINATED))
    # with the question's own search beside them, on request
    route, queries = await _searched(memory, facts, COORDINATED,
                                     OfflinePlanner(split_question_search=True))
    assert route == "split" and COORDINATED in queries and len(queries) == 3
    # fewer than two sub-queries left: the question is searched with it
    route, queries = await _searched(memory, facts, COORDINATED, _OneSubQuery())
    assert route == "split" and COORDINATED in queries and len(queries) == 2


@pytest.mark.parametrize(("question", "subs"), [
    ("Are Janise Yntema and Bianca Halstead from the same country?",
     ["Which country is Janise Yntema from?", "Which country is Bianca Halstead from?"]),
    ("Do Ana and Tom have the same nationality?",
     ["Which nationality does Ana have?", "Which nationality does Tom have?"]),
    ("Were Ana and Tom born in the same city?",
     ["Which city was Ana born in?", "Which city was Tom born in?"]),
    ("Are Mila and Zara in the same class?", ["Which class is Mila in?", "Which class is Zara in?"]),
])
def test_a_subjects_share_of_the_same_thing_asks_which(question: str, subs: list[str]) -> None:
    assert split_by_parse(question) == subs


def test_a_parenthesis_after_a_name_is_part_of_it() -> None:
    assert comparison_subjects("Are Hop (Film) and Faces In The Crowd (Film) from the same "
                               "country?")[0] == ["Hop (Film)", "Faces In The Crowd (Film)"]
