"""List questions about one speaker on an invented multi-session conversation: the items are
told in the speaker's own turns across sessions, while the other speaker's replies name the
speaker ("Wow, Nadia!"). The search of the speaker's own turns must decide the top k."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from memroute import RetrievalAgent, Scope
from memroute.graph.final_rerank import own_turns_first
from memroute.graph.state import OWN_RANK, merge_pool

SESSIONS = [
    [("Nadia", "Hi Oskar! Guess what, I started cello lessons last month and I practise "
               "every evening."),
     ("Oskar", "Wow Nadia, that is amazing! Music suits you, Nadia. How do you find the time?"),
     ("Nadia", "I get up early and squeeze it in before work."),
     ("Oskar", "Nadia, you always manage to surprise me. Tell me more next time!")],
    [("Oskar", "Hey Nadia! How was your trip, Nadia? I saw the photos."),
     ("Nadia", "Lisbon was lovely, we walked up to the castle and ate grilled sardines every "
               "night."),
     ("Oskar", "Nadia, you really know how to travel. I am jealous, Nadia!"),
     ("Nadia", "My neighbour's cat kept me company while I unpacked.")],
    [("Nadia", "I picked up the harmonica again, the one my grandfather gave me."),
     ("Oskar", "Nadia, that's so sweet! You are full of talents, Nadia."),
     ("Oskar", "My sister moved to Bergen, so I will visit her soon."),
     ("Nadia", "Say hi to her from me!")],
    [("Oskar", "Nadia! Long time no see. What have you been up to, Nadia?"),
     ("Nadia", "I spent a long weekend in Krakow with my cousins, the old town was beautiful."),
     ("Oskar", "Nadia, that sounds wonderful. You deserve a break, Nadia."),
     ("Nadia", "Thanks! Work was hectic before that.")],
    [("Nadia", "I joined a choir at the community centre, we sing on Thursdays."),
     ("Oskar", "Nadia, your voice must be lovely. Proud of you, Nadia!"),
     ("Nadia", "We have a concert in spring, you should come."),
     ("Oskar", "I will be there, Nadia, promise.")],
]
LIST_QUESTIONS = [
    ("What instruments does Nadia play?", ["cello lessons", "harmonica again"]),
    ("Which cities has Nadia visited?", ["Lisbon was lovely", "weekend in Krakow"]),
    ("What musical activities does Nadia do?",
     ["cello lessons", "harmonica again", "joined a choir"]),
]
K = 4  # of 20 turns; a result counts by its matched turn (not its neighbours)


@pytest.fixture(scope="module")
async def scope(memory) -> Scope:
    scope = Scope(org_id=f"lists-{uuid.uuid4().hex[:8]}", project_id="chat", user_id="nadia")
    start = datetime(2024, 3, 1, 18, 0)
    await memory.add(scope, [
        {"content": text, "producer": speaker, "session_id": f"s{s + 1}",
         "produced_at": start + timedelta(days=7 * s, seconds=t)}
        for s, turns in enumerate(SESSIONS) for t, (speaker, text) in enumerate(turns)])
    return scope


@pytest.mark.parametrize(("question", "gold"), LIST_QUESTIONS)
async def test_list_items_told_across_sessions_are_all_returned(memory, scope, question,
                                                                gold) -> None:
    # neighbours on (as on LoCoMo): the judge learns the speakers from the hits' windows
    agent = RetrievalAgent(memory, context=(1, 2))
    result = await agent.aretrieve(question, scope=scope, k=K)
    returned = [r.nucleus.content for r in result.results]
    # direct, with the speaker's own turns searched beside the question
    assert result.route == "direct" and len(result.queries) == 2, result.queries
    assert all(any(g in text for text in returned) for g in gold), (result.queries, returned)


def _record(uid: str, score: float, **extra: object) -> dict:
    return {"uid": uid, "episodes": [], "matched_sentence": "", "vector_score": score,
            "rerank_score": score, "lexical_score": None, "reranker": "none", "query": "",
            "extra": dict(extra)}


def test_a_speakers_search_rank_survives_pooling_and_orders_the_top() -> None:
    first = {"a": _record("a", 0.9), "b": _record("b", 0.8)}
    own = {"b": _record("b", 0.3, **{OWN_RANK: 1}), "c": _record("c", 0.2, **{OWN_RANK: 0})}
    pool = merge_pool(first, own)
    assert pool["b"]["rerank_score"] == 0.8 and pool["b"]["extra"][OWN_RANK] == 1
    ranked, rest = own_turns_first(list(pool.values()))
    assert [r["uid"] for r in ranked] == ["c", "b"] and [r["uid"] for r in rest] == ["a"]
