"""The second rewrite follows the chain from the facts the first rewrite found under its bridge
(`ChainHeuristics.follow_found_bridge`; docs/evaluation.md, "Three- and four-hop chains")."""

from __future__ import annotations

import uuid

from memroute import RetrievalAgent, Scope
from memroute.planners.offline.bridging import ChainHeuristics
from memroute.planners.offline.parsed import followed_facts, judge_with_entities
from memroute.planners.offline.planner import OfflinePlanner

QUESTION = "Which river flows through the city where the author of Blue Harbour was born?"
NOVEL = ["Blue Harbour: Blue Harbour is a 1962 novel by Mara Quell, published by Penfold Press.",
         "Blue Harbour: It won the Ashcombe Prize and was adapted by Viktor Lenz."]
AUTHOR = ["Mara Quell: Mara Quell was born in Tressington, a port town.",
          "Mara Quell: She studied at Orwell College."]
RIVER = "Tressington: The River Lune flows through Tressington."
FOLLOW = {"follow_found_bridge": True, "follow_pack": 1,
          "follow_ranking": {"unvouched": 0.3, "near": 2.0}}


def test_followed_facts_are_the_new_hits_filed_under_the_bridge() -> None:
    rewrite = "Mara Quell river flows city author born"
    assert followed_facts(QUESTION, rewrite, [*AUTHOR, RIVER]) == AUTHOR
    # a title the question names is its subject, not the bridge; untitled turns never count
    assert followed_facts(QUESTION, "Blue Harbour river", NOVEL) == []
    assert followed_facts(QUESTION, rewrite, ["Mara Quell was born in Tressington."]) == []


def test_the_second_rewrite_follows_from_the_bridge_found() -> None:
    on, off = ChainHeuristics(keep=2, **FOLLOW), ChainHeuristics(keep=2)
    first = judge_with_entities(QUESTION, NOVEL, [QUESTION], on)
    assert first.new_query.startswith("Mara Quell")
    tried = [QUESTION, first.new_query]
    # the place named next to "born" in the bridge's facts, then the runner-up bridges
    followed = judge_with_entities(QUESTION, [*NOVEL, *AUTHOR], tried, on)
    assert followed.new_query.startswith("Tressington Penfold Press")
    assert "Orwell" not in followed.new_query
    assert "Tressington" not in judge_with_entities(QUESTION, [*NOVEL, *AUTHOR], tried,
                                                    off).new_query
    # the bridge's facts did not come up: today's runner-up pack
    other = ["Ashcombe Prize: The Ashcombe Prize is awarded in Tressington."]
    assert (judge_with_entities(QUESTION, [*NOVEL, *other], tried, on).new_query
            == judge_with_entities(QUESTION, [*NOVEL, *other], tried, off).new_query)


async def test_on_a_store_the_third_search_reaches_the_third_hop(memory) -> None:
    scope = Scope(org_id=f"follow-{uuid.uuid4().hex[:8]}", project_id="wiki", user_id="u")
    await memory.add(scope, [{"content": text, "producer": "system", "session_id": "s1"}
                             for text in [*NOVEL, *AUTHOR, RIVER]])
    agent = RetrievalAgent(memory, planner=OfflinePlanner(keep=2, **FOLLOW), context=(0, 0))
    result = await agent.aretrieve(QUESTION, scope=scope, k=3, strategy="chain")
    assert len(result.queries) == 3 and result.queries[2].startswith("Tressington")
    assert RIVER in [r.nucleus.content for r in result.results]
