"""Title caps replayed on a dumped final ranking: a cap frees places for other documents'
hits, untitled hits (conversation turns) are never capped, a gate leaves other questions as
ranked, and the nesting depth counts the unnamed nouns above a named thing."""

from __future__ import annotations

from benchmarks.gated_caps import capped, nest_depth, replay
from memroute.evals.datasets import Question


def hit(uid: str, title: str | None, sentence: str) -> dict:
    content = f"{title}: {sentence}" if title else sentence
    metadata = {"title": title} if title else {}
    return {"uid": uid, "episodes": [{"uid": uid, "content": content, "metadata": metadata}],
            "matched_sentence": None, "vector_score": 0.5, "rerank_score": 0.5,
            "lexical_score": None, "reranker": "offline", "query": "q", "extra": {}}


RANKED = [hit("a1", "Film", "It was directed by Ann."), hit("a2", "Film", "It is long."),
          hit("a3", "Film", "It won."), hit("b1", "Ann", "Ann was born in Oslo.")]


def test_cap_moves_the_other_documents_hit_up_and_skips_untitled_hits() -> None:
    assert [r["uid"] for r in capped(RANKED, 3, None)] == ["a1", "a2", "a3"]
    assert [r["uid"] for r in capped(RANKED, 3, 2)] == ["a1", "a2", "b1"]
    turns = [hit(f"t{i}", None, f"turn {i}") for i in range(4)]
    assert [r["uid"] for r in capped(turns, 3, 1)] == ["t0", "t1", "t2"]


def test_replay_scores_paragraphs_and_applies_the_cap_only_where_the_gate_says() -> None:
    q = Question(id="1", question="Where was the director of Film born?", answer="Oslo",
                 type="2hop", gold_facts=["Film: It was directed by Ann.",
                                          "Ann: Ann was born in Oslo."],
                 gold_titles=["Film", "Ann"])
    rows = [(q, {"own": [], "ranked": RANKED})]
    assert replay("musique", rows, lambda q, row: None, k=3)["recall"] == 0.5
    capped_run = replay("musique", rows, lambda q, row: 2, k=3)
    assert capped_run["recall"] == 1.0 and capped_run["capped"] == 1
    assert replay("hotpotqa", rows, lambda q, row: 2, k=3)["recall"] == 1.0


def test_nest_depth_counts_unnamed_nouns_above_a_named_thing() -> None:
    assert nest_depth("Who is the spouse of the director of Titanic?") == 2
    assert nest_depth("Where does Karim Haddad study?") == 0


def test_locomo_rows_keep_their_conversation_and_unscored_questions_are_left_out() -> None:
    from benchmarks.gated_caps import _conversation
    from memroute.memory import Scope
    assert _conversation(Scope(org_id="o", project_id="p", user_id="conv-26")) == "conv-26"
    assert _conversation({"user_id": "pooled"}) is None
    turn = {"uid": "t1", "episodes": [{"uid": "t1", "content": "Mel: Rome!",
                                       "metadata": {"dia_id": "D1:3"}}],
            "matched_sentence": None, "vector_score": 0.5, "rerank_score": 0.5,
            "lexical_score": None, "reranker": "offline", "query": "q", "extra": {}}
    scored = Question(id="1", question="Where did Mel go?", answer="Rome", type="single-hop",
                      gold_ids=["D1:3"], conversation="conv-26")
    unscored = Question(id="2", question="Where did Mel go?", answer="Rome", type="single-hop",
                        conversation="conv-30")
    rows = [(scored, {"own": [], "ranked": [turn]}), (unscored, {"own": [], "ranked": [turn]})]
    run = replay("locomo", rows, lambda q, row: 1)
    assert run["recall"] == 1.0 and run["types"] == {"single-hop": 1.0}
