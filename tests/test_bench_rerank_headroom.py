"""The final rerank's headroom: a gold fact pooled but not returned counts as cut; LoCoMo's
unresolved evidence stays a miss; unscored questions are left out."""

from __future__ import annotations

from benchmarks.rerank_headroom import headroom, pool_recall
from memroute.evals.datasets import Question


def wiki_question() -> Question:
    return Question(id="1", question="Who directed the film?", answer="X", type="bridge",
                    gold_facts=["Film: It was directed by Ann.", "Ann: Ann was born in Oslo."],
                    gold_titles=["Film", "Ann"])


def test_pooled_but_dropped_gold_counts_as_headroom() -> None:
    q = wiki_question()
    pool = {"query": q.question, "pool": [
        {"episodes": [["u1", "Film: It was directed by Ann.", None]]},
        {"episodes": [["u2", "Ann: Ann was born in Oslo.", None]]}]}
    rows = {q.question: {"metrics": {"sf_recall@10": 0.5}}}
    assert pool_recall("hotpotqa", q, [e for r in pool["pool"] for e in r["episodes"]]) == 1.0
    assert headroom("hotpotqa", [q], rows, {q.question: pool}) == {
        "questions": 1, "final": 0.5, "pool": 1.0, "headroom": 0.5, "cut_questions": 1}


def test_musique_counts_titles_and_locomo_keeps_unresolved_as_misses() -> None:
    q = wiki_question()
    assert pool_recall("musique", q, [["u", "Ann: She painted.", None]]) == 0.5
    talk = Question(id="2", question="Where did Mel go?", answer="Rome", type="single-hop",
                    gold_ids=["D1:3"], unresolved=["D9:9"])
    assert pool_recall("locomo", talk, [["u", "Mel: Rome!", "D1:3"]]) == 0.5
    rows = {talk.question: {"metrics": {"evidence_recall@10": None}}}
    assert headroom("locomo", [talk, q], rows, {})["questions"] == 0
