"""Nested questions search their innermost sub-question first (read from the dependency
parse), and the title lane's bonus has diminishing returns per title."""

from __future__ import annotations

import numpy as np
import pytest

from memroute import RetrievalAgent, Scope
from memroute.memory.rerankers import OfflineReranker, RerankCandidate, RerankQuery
from memroute.planners.offline.planner import OfflinePlanner
from memroute.planners.offline.question_parse import read_question


@pytest.mark.parametrize(("question", "innermost"), [
    # a role of a named thing, through a preposition
    ("Who is the spouse of the performer of Green Meadows?", "the performer of Green Meadows"),
    # a relative clause nested in another description: the deepest one
    ("What is the capital of the county that shares a border with the county where "
     "Oskar Lindqvist was born?", "the county where Oskar Lindqvist was born"),
    ("When did the city where the author of The Salt Orchard died become a capital?",
     "the author of The Salt Orchard"),
    # conversations: people, pets and places described through a named one
    ("What does the person who moved to Lisbon love to eat?", "the person who moved to Lisbon"),
    ("Where does the sister of Clara's husband work?", "the sister of Clara's husband"),
    ("What is the name of the dog that Maria adopted last spring?",
     "the dog that Maria adopted last spring"),
])
def test_innermost_sub_question_of_nested_questions(question: str, innermost: str) -> None:
    assert read_question(question).innermost == innermost


@pytest.mark.parametrize("question", [
    "When is Yasmin's birthday?",  # a named subject's attribute: nothing nested
    # a possessive role is the named speaker's own attribute in a conversation
    "When did Melanie's friend adopt a child?",
    "What happened to Melanie's son on their road trip?",
    "Who is the performer of Green Meadows?",  # the description is the whole question
    "Where does Karim study and where is Helga Brandt's office?",
    "What did we talk about yesterday?",  # nothing named
])
def test_no_innermost_sub_question_when_nothing_is_nested(question: str) -> None:
    assert read_question(question).innermost == ""


async def test_the_chain_route_carries_the_innermost_sub_question() -> None:
    question = "Who is the spouse of the performer of Green Meadows?"
    decision = (await OfflinePlanner(innermost_first=True).route(question)).value
    assert decision.route == "chain" and decision.first_query == "the performer of Green Meadows"
    off = (await OfflinePlanner().route(question)).value  # the default: the whole question
    assert off.route == "chain" and off.first_query == ""
    direct = (await OfflinePlanner(innermost_first=True).route(
        "What did we talk about yesterday?")).value
    assert direct.first_query == ""


async def test_auto_searches_the_innermost_sub_question_first(memory) -> None:
    """End to end: the first hop finds the performer, the bridge from it finds the spouse,
    and the final rerank scores the question too."""
    scope = Scope(org_id="innermost", project_id="p", user_id="u")
    await memory.add(scope, [
        {"content": "Green Meadows is the debut album of Tessa Marlow.", "producer": "system"},
        {"content": "Tessa Marlow married the drummer Jonah Pike in 2015.", "producer": "system"},
        {"content": "Green Meadows park has a pond and two tennis courts.", "producer": "system"},
        {"content": "The spouse of a performer often travels with the band.", "producer": "system"},
    ])
    agent = RetrievalAgent(memory, planner=OfflinePlanner(innermost_first=True))
    result = await agent.aretrieve("Who is the spouse of the performer of Green Meadows?",
                                   scope=scope, k=3)
    assert result.route == "chain"
    assert result.queries[0] == "the performer of Green Meadows"
    assert len(result.queries) <= 3
    contents = [r.nucleus.content for r in result.results]
    assert "Tessa Marlow married the drummer Jonah Pike in 2015." in contents


async def test_title_bonus_diminishes_per_title() -> None:
    """Four sentences of the named title among other titles: the title's best two get the
    whole bonus, the next ones half and a quarter, so other titles keep their places."""
    rng = np.random.default_rng(3)
    query = RerankQuery("Who performed Green Meadows?", rng.normal(size=8).astype(np.float32))
    texts = ["Green Meadows: It is an album.", "Green Meadows: It was recorded in Oslo.",
             "Green Meadows: It has ten songs.", "Green Meadows: It sold well.",
             "Tessa Marlow: She performed an album.",
             *(f"{t}: It is a place." for t in ("Oslo", "Appleton", "Bergen", "Lisbon", "Porto",
                                               "Turin", "Ghent", "Graz"))]
    vectors = [rng.normal(size=(1, 8)).astype(np.float32) for _ in texts]
    candidates = [RerankCandidate(t, v) for t, v in zip(texts, vectors)]

    async def scores(**kwargs) -> np.ndarray:
        return (await OfflineReranker(**kwargs).score([query], candidates))[0]

    base = await scores(title_weight=0.0)
    whole = await scores(title_weight=0.2, title_decay=1.0)
    halved = await scores(title_weight=0.2, title_full=2, title_decay=0.5)
    assert (whole[:4] - base[:4]).tolist() == pytest.approx([0.1] * 4, abs=1e-6)
    order = np.argsort(-base[:4])  # the title's sentences by their score without the bonus
    assert (halved[order] - base[order]).tolist() == pytest.approx([0.1, 0.1, 0.05, 0.025],
                                                                   abs=1e-6)
    assert halved[4:].tolist() == pytest.approx(whole[4:].tolist(), abs=1e-6)  # other titles
    # untitled candidates (conversation turns) rank as without the lane, whatever the decay
    turns = [RerankCandidate(t.split(": ", 1)[1], v) for t, v in zip(texts, vectors)]
    plain = (await OfflineReranker(title_weight=0.0).score([query], turns))[0]
    assert (await OfflineReranker(title_decay=0.5).score([query], turns))[0].tolist() \
        == pytest.approx(plain.tolist(), abs=1e-6)
