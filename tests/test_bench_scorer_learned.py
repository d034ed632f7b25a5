"""The learned final scorer's replay (`benchmarks.scorer_learned`): the features read what the
final rerank computes, the learners find the informative feature, the replay keeps own turns
first and counts recall as the eval does, MMR demotes a near-duplicate."""

from __future__ import annotations

import numpy as np

from benchmarks.scorer_learned import (FEATURES, ascent, evaluate, features, fit_model,
                                       fit_ranknet, mmr_order, recall)
from memroute.evals.datasets import Question
from memroute.memory.rerankers.base import ContextCandidate, RerankCandidate, RerankQuery
from memroute.memory.rerankers.offline import OfflineReranker


def unit(*values: float) -> np.ndarray:
    v = np.array(values, np.float32)
    return v / np.linalg.norm(v)


def hit(uid: str, text: str, query: str, score: float) -> dict:
    return {"uid": uid, "query": query, "score": score, "own": None,
            "episodes": [[uid, text, None]]}


async def test_features_score_each_hit_as_the_final_rerank_does() -> None:
    question, rewrite = "Who directed Film X?", "Ann Lee directed"
    rq = [RerankQuery(question, unit(1, 0, 0)), RerankQuery(rewrite, unit(0, 1, 0))]
    rest = [hit("a", "Film X: It was directed by Ann Lee.", question, 0.9),
            hit("b", "Ann Lee: She was born in Oslo.", rewrite, 0.8),
            hit("c", "Bergen: A city.", rewrite, 0.3)]
    vectors = [unit(1, 0.2, 0), unit(0.1, 1, 0), unit(0, 0, 1)]
    cands = [ContextCandidate(r["uid"], RerankCandidate(r["episodes"][0][1], v[None, :]),
                              (r["uid"],)) for r, v in zip(rest, vectors)]
    keys = [(frozenset(), frozenset({"ann lee"})), (frozenset({"ann lee"}), frozenset()),
            (frozenset(), frozenset())]
    x = await features(OfflineReranker(), rq, 2, cands, rest, keys)
    col = {f: x[:, i] for i, f in enumerate(FEATURES[:x.shape[1]])}
    matrix = await OfflineReranker().score(rq, [c.window for c in cands])
    assert np.allclose(col["question"], matrix[0]) and np.allclose(col["rewrite"], matrix[1])
    assert np.allclose(col["fused"], matrix.max(axis=0))
    # "Ann Lee"'s page is named by the best window of another title; hit a's window stores
    # the key hit b stores
    assert col["title_link"].tolist() == [0, 1, 0]
    assert col["entity_link"].tolist() == [0, 1, 0]
    assert col["by_question"].tolist() == [1, 0, 0]
    assert col["search_rank"].tolist() == [0, 0, np.log(2)]  # second of the rewrite's list
    assert col["names_bridge"].tolist() == [1, 1, 0]  # "Ann Lee": the rewrite's bridge words


def wiki_rows(n: int, informative: int = 1) -> dict:
    """``n`` questions, each with one gold fact and 12 distractors; today's order (column 0)
    ranks the gold 12th, column ``informative`` ranks it first."""
    rng = np.random.default_rng(0)
    rows, questions = [], {}
    for q in range(n):
        text = f"question {q}?"
        gold = f"T{q}: gold."
        questions[text] = Question(id=str(q), question=text, answer="", type="bridge",
                                   gold_facts=[gold])
        rest = [hit(f"{q}-{i}", gold if i == 0 else f"T{q}: noise {i}.", text, 0.5)
                for i in range(13)]
        x = rng.normal(size=(13, 3))
        x[:, 0] = -np.arange(13.0)
        x[0, 0] = -11.5  # between 11th and 12th today
        x[:, informative] = rng.normal(size=13)
        x[0, informative] = 3.0
        rows.append({"index": q, "question": text, "type": "bridge", "own": [], "rest": rest,
                     "x": x, "prod": list(np.argsort(-x[:, 0], kind="stable"))})
    return {"dataset": "hotpotqa", "rows": rows, "questions": questions}


def test_the_learners_weigh_the_informative_feature_and_lift_recall() -> None:
    data = wiki_rows(30)
    assert evaluate(data)["sf_recall"] == 0.0
    for pairwise in (False, True):
        w, mu, sd = fit_model({"d": data}, [0, 1, 2], pairwise=pairwise)
        assert w[2] > abs(w[3]) and w[2] > 0
        got = evaluate(data, lambda x: (x[:, [0, 1, 2]] - mu) / sd @ w[1:])
        assert got["sf_recall"] == 1.0
    assert evaluate(data, fit_ranknet({"d": data}, [0, 1, 2], hidden=4))["sf_recall"] > 0.9
    w, mu, sd = ascent({"d": data}, [0, 1, 2])
    assert w[1] == 1.0 and w[2] > 0  # today's column fixed, the informative one raised
    assert evaluate(data, lambda x: (x[:, [0, 1, 2]] - mu) / sd @ w[1:])["sf_recall"] > 0.9


def test_own_turns_come_first_and_fill_the_top_k() -> None:
    talk = Question(id="1", question="Where did Mel go?", answer="", type="single-hop",
                    gold_ids=["D1:3", "D2:1"])
    own = [{"uid": f"o{i}", "episodes": [[f"o{i}", "Mel: hi", f"D9:{i}"]]} for i in range(9)]
    rest = [{"uid": "r0", "episodes": [["r0", "x", "D2:1"]]},
            {"uid": "r1", "episodes": [["r1", "y", "D1:3"]]}]
    assert recall("locomo", talk, own, rest, [1, 0]) == 0.5  # one place left
    assert recall("locomo", talk, own[:8], rest, [1, 0]) == 1.0


def test_mmr_demotes_a_near_duplicate_only_with_a_penalty() -> None:
    scores = np.array([1.0, 0.99, 0.5])
    sim = np.array([[1, 0.99, 0.1], [0.99, 1, 0.1], [0.1, 0.1, 1]], np.float16)
    assert mmr_order(scores, sim, 0.0) == [0, 1, 2]
    assert mmr_order(scores, sim, 1.0) == [0, 2, 1]
    assert mmr_order(scores, sim, 1.0, k=1) == [0, 1, 2]  # beyond k: by score
