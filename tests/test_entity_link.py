"""The final rerank's entity link: a hit gains `ENTITY_LINK_BONUS` when its episode stores a
named entity (the bridge) that one of the best windows of another episode stores and the
question does not name; on the real embedded PostgreSQL + pgvector, the real MiniLM embedder
and the real spaCy entity index of stored conversation turns."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import numpy as np

from memroute.graph.final_rerank import ENTITY_LINK_BONUS, entity_link_keys
from memroute.memory import Episode, Memory, Scope
from memroute.memory.rerankers.base import ContextCandidate, RerankCandidate, linked_by_entities

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
QUESTION = "Where does the brother of the person who moved to Lisbon work?"
TURNS = [  # (speaker, text)
    ("Clara", "I moved to Lisbon in 2023 with my brother Marco."),
    ("Tom", "Marco works at Siemens in Munich, Clara told me."),
    ("Tom", "People in Lisbon love custard tarts."),
    ("Clara", "Tom, I saw the tarts in 2023 too."),
]


def candidate(uid: str, members: tuple[str, ...] | None = None) -> ContextCandidate:
    return ContextCandidate(uid, RerankCandidate("", np.zeros((0, 4), np.float32)),
                            members or (uid,))


def test_a_hit_is_linked_only_by_a_best_window_of_another_episode() -> None:
    pool = [candidate("a"), candidate("b"), candidate("c"), candidate("d", ("c", "d"))]
    keys = [(frozenset({"marco"}), frozenset({"marco"})),
            (frozenset({"marco", "siemens"}), frozenset({"marco", "siemens"})),
            (frozenset({"siemens"}), frozenset({"siemens"})),
            (frozenset({"munich"}), frozenset({"siemens", "munich"}))]
    linked = linked_by_entities(pool, keys, np.array([0.9, 0.8, 0.3, 0.2]), top=2)
    # a and b link each other through "marco"; c through b's "siemens"; d's "munich" is in
    # no best window
    assert linked.tolist() == [1.0, 1.0, 1.0, 0.0]
    # d alone the best: its window's "siemens" links b, but never c, the episode it holds
    linked = linked_by_entities(pool, keys, np.array([0.1, 0.2, 0.3, 0.9]), top=1)
    assert linked.tolist() == [0.0, 1.0, 0.0, 0.0]


async def test_the_bridge_turn_gains_the_bonus_through_the_entity_index(memory: Memory) -> None:
    """Stored turns (one session each: no window holds another): "Marco" (named by the
    Lisbon turn, not by the question) links the Siemens turn, which gains exactly the bonus; the question's "Lisbon", the dates and the speakers
    link nothing, so the custard tarts turn keeps its score."""
    scope = Scope(org_id=f"org-{uuid.uuid4().hex[:8]}", project_id="tests", user_id="u1")
    await memory.add(scope, [Episode(content=text, producer=speaker, session_id=f"s{i}",
                                     uid=f"t{i}", produced_at=T0 + timedelta(minutes=i))
                             for i, (speaker, text) in enumerate(TURNS)])
    pooled = await memory.with_stored_embeddings(
        scope, await memory.search_scored(scope, QUESTION, k=len(TURNS)))
    stored = await memory.stored_entities(scope, [e.uid for r in pooled for e in r.episodes])
    keys = dict(zip((r.uid for r in pooled),
                    entity_link_keys(QUESTION, pooled, stored, await memory.speakers(scope))))
    assert keys["t0"][0] == {"marco"}  # Lisbon (the question's), 2023 (a date) and Clara dropped
    assert keys["t1"][0] == {"marco", "siemens", "munich"}
    assert keys["t2"][0] == frozenset() and keys["t3"][0] == frozenset()
    queries, k = [QUESTION, "brother work"], len(TURNS)
    plain = {r.uid: r.rerank_score for r in await memory.rerank(
        pooled, queries, k, credit="window")}
    linked = {r.uid: r.rerank_score for r in await memory.rerank(
        pooled, queries, k, credit="window", entity_bonus=ENTITY_LINK_BONUS,
        entity_keys=list(keys[r.uid] for r in pooled))}
    assert abs(linked["t1"] - plain["t1"] - ENTITY_LINK_BONUS) < 1e-5
    assert linked["t2"] == plain["t2"] and linked["t3"] == plain["t3"]
