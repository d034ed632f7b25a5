"""The chain stops after its first bridge when that search brought up the bridge's own facts
(`ChainHeuristics.bridge_found_stop`, on by default; docs/evaluation.md, "Fewer searches on
Wikipedia sets" and "Fewer searches after the better final scorer")."""

from __future__ import annotations

import uuid

from memroute import RetrievalAgent, Scope
from memroute.planners.offline.bridging import ChainHeuristics
from memroute.planners.offline.parsed import bridge_found, judge_with_entities
from memroute.planners.offline.planner import OfflinePlanner

QUESTION = "Which government position was held by the star of Kiss and Tell?"
FILM = ["Kiss and Tell (1945 film): Kiss and Tell is a 1945 comedy film starring Shirley "
        "Temple as the teenage Corliss Archer.",
        "Kiss and Tell (1945 film): The film was a box office success."]
STAR = "Shirley Temple: Shirley Temple Black served as United States ambassador to Ghana."
# the same fact, not filed under the bridge: its own facts did not come up
ABOUT_STAR = "Corliss Archer: Shirley Temple Black later served as ambassador to Ghana."
OTHERS = ["Accra: Accra is the capital of Ghana.",
          "Ghana: Ghana is a country in West Africa.",
          "Walter Abel: Walter Abel was an American character actor."]


def test_bridge_found_reads_the_titles_of_the_new_hits() -> None:
    bridge = "Shirley Temple government position held star"
    assert bridge_found(QUESTION, bridge, FILM, [STAR], True)
    assert not bridge_found(QUESTION, bridge, FILM, [ABOUT_STAR], True)  # another title's
    assert not bridge_found(QUESTION, bridge, FILM, ["Shirley Temple Black was an ambassador."],
                            True)
    # a title the question names is the question's subject, not the bridge
    assert not bridge_found(QUESTION, "Kiss and Tell star", FILM, [FILM[1]], True)
    # the first hop found nothing filed under the question's subject: not settled
    assert not bridge_found(QUESTION, bridge, OTHERS, [STAR], True)
    # a role of each of two named subjects: each needs its bridge found
    asked = "Which film has the director who died later, Kiss and Tell or Accra?"
    both = [*FILM, OTHERS[0]]
    assert not bridge_found(asked, "Shirley Temple director died", both, [STAR], True)
    assert bridge_found(asked, "Shirley Temple director died", both, [STAR], False)
    assert bridge_found(asked, "Shirley Temple Ghana director died", both, [STAR, OTHERS[1]],
                        True)


def test_the_judge_stops_only_after_the_first_rewrite_found_its_bridge() -> None:
    stop = ChainHeuristics(bridge_found_stop=True, keep=2)
    first = judge_with_entities(QUESTION, FILM, [QUESTION], stop)
    assert not first.is_sufficient and first.new_query.startswith("Shirley Temple")
    tried = [QUESTION, first.new_query]
    found = judge_with_entities(QUESTION, [*FILM, STAR], tried, stop)
    assert found.is_sufficient and found.confidence >= 0.8
    missing = judge_with_entities(QUESTION, [*FILM, ABOUT_STAR], tried, stop)
    assert not missing.is_sufficient and missing.new_query
    off = judge_with_entities(QUESTION, [*FILM, STAR], tried,
                              ChainHeuristics(keep=2, bridge_found_stop=False))
    assert not off.is_sufficient and off.new_query


async def _chain(memory, facts: list[str], **heuristics) -> list[str]:
    scope = Scope(org_id=f"stop-{uuid.uuid4().hex[:8]}", project_id="wiki", user_id="u")
    await memory.add(scope, [{"content": text, "producer": "system", "session_id": "s1"}
                             for text in facts])
    agent = RetrievalAgent(memory, planner=OfflinePlanner(keep=2, **heuristics),
                           context=(0, 0))
    result = await agent.aretrieve(QUESTION, scope=scope, k=2, strategy="chain")
    return result.queries


async def test_on_a_store_the_chain_takes_two_searches_when_the_bridge_came_up(memory) -> None:
    queries = await _chain(memory, [*FILM, STAR, *OTHERS], bridge_found_stop=True)
    assert len(queries) == 2 and queries[1].startswith("Shirley Temple")
    # without the bridge's own facts in the store, the runner-up bridges are searched
    assert len(await _chain(memory, [*FILM, ABOUT_STAR, *OTHERS], bridge_found_stop=True)) == 3
    # and with the stop off
    assert len(await _chain(memory, [*FILM, STAR, *OTHERS], bridge_found_stop=False)) == 3
    # the stop is a default (docs/evaluation.md, "Fewer searches after the better final scorer")
    assert len(await _chain(memory, [*FILM, STAR, *OTHERS])) == 2


def test_a_role_of_two_named_subjects_bridges_from_each_in_one_rewrite() -> None:
    asked = "Which film has the director who died later, The More The Merrier or Sleep, My Love?"
    hop1 = ["The More the Merrier: The More the Merrier is a 1943 comedy film directed by "
            "George Stevens and starring Jean Arthur.",
            "Sleep, My Love: Sleep, My Love is a 1948 film noir directed by Douglas Sirk, "
            "starring Claudette Colbert.",
            "Sleep, My Love: It stars Claudette Colbert and Robert Cummings."]
    both = judge_with_entities(asked, hop1, [asked], ChainHeuristics())
    # the director of each, not the star named twice
    assert both.new_query.startswith("George Stevens Douglas Sirk")
    assert "director" in both.new_query
    one = judge_with_entities(asked, hop1, [asked], ChainHeuristics(bridge_per_subject=False))
    assert not ("George Stevens" in one.new_query and "Douglas Sirk" in one.new_query)
    # one named title only: the usual single bridge
    single = judge_with_entities(asked, hop1[:1], [asked], ChainHeuristics())
    assert "Douglas Sirk" not in single.new_query
