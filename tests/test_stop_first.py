"""The harness that measured a chain stopped at its first judgment (`benchmarks.stop_first`;
docs/evaluation.md, "Stopping after the first search"): its features, its candidates and
labels from a capture run and a direct run, and its simulation of a rule."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.stop_first import candidate_rows, features, simulate
from memroute.planners.offline.bridging import ChainHeuristics

QUESTION = "Which government position was held by the star of Kiss and Tell?"
FILM = ("Kiss and Tell (1945 film): Kiss and Tell is a 1945 comedy film starring Shirley "
        "Temple as Corliss Archer.")
STAR = [
    "Shirley Temple: Shirley Temple Black held the government position of ambassador to Ghana.",
    "Shirley Temple: Shirley Temple Black was an American actress and diplomat.",
]
RADIO = "Meet Corliss Archer: Meet Corliss Archer is a radio comedy."


def _first(evidence: list[str], scores: list | None = None) -> dict:
    return {"question": QUESTION, "previous": [QUESTION], "evidence": evidence,
            "entities": None, "sufficient": False, "scores": scores}


def test_features_see_the_bridge_page_in_the_first_hop() -> None:
    paged = features(_first([FILM, *STAR, RADIO], [[0.8, 0.7], [0.6, 0.5], [0.5, 0.4],
                                                   [0.4, 0.3]]))
    assert paged["bridge"] == "Shirley Temple" and paged["bridge_typed"]
    assert paged["bridge_paged"] and paged["bridge_items"] == 2
    assert paged["in_sight"] and paged["linked"] == 1 and paged["linked_items"] == 2
    assert paged["bridge_pred"] >= 2 and paged["pred_linked"] >= 2  # "government position"
    assert paged["top_rerank"] == 0.7 and paged["rerank10"] == 0.3
    assert paged["linked_rerank"] == 0.5
    # the film's facts name the star, but her page did not come up
    unpaged = features(_first([FILM, RADIO]))
    assert unpaged["bridge"] == "Shirley Temple"
    assert not unpaged["bridge_paged"] and unpaged["bridge_items"] == 0
    assert not unpaged["in_sight"] and unpaged["linked"] == 0
    assert "top_rerank" not in unpaged  # no pool scores recorded


def test_simulate_stops_a_candidate_at_one_search() -> None:
    rows = [{"base": 1.0, "searches": 3, "stop": 0.5, "candidate": True, "x": 1},
            {"base": 0.5, "searches": 2, "stop": 1.0, "candidate": True, "x": 0},
            {"base": 1.0, "searches": 1, "stop": 1.0}]
    assert simulate(rows, lambda r: False) == {
        "stopped": 0, "lost": 0, "recall": round(2.5 / 3, 4), "points": 0.0,
        "searches": 2.0}
    every = simulate(rows, lambda r: True)
    # the first saves two searches, the second one
    assert every["stopped"] == 2 and every["lost"] == 1 and every["searches"] == 1.0
    assert every["recall"] == round(2.5 / 3, 4) and every["points"] == 0.0
    gained = simulate(rows, lambda r: r["x"] == 0)
    assert gained["lost"] == 0 and gained["points"] == round(0.5 / 3 * 100, 2)


def test_candidates_are_chains_searched_more_than_once_labelled_by_direct(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / "summary.json").write_text(json.dumps({"headline_metric": "sf_recall@10"}))
    auto = [{"id": "a", "strategy": "auto", "route": "chain", "question": QUESTION,
             "queries": [QUESTION, "Shirley Temple government position", "x"],
             "metrics": {"sf_recall@10": 1.0}},
            {"id": "b", "strategy": "auto", "route": "direct", "question": "Who is Ann?",
             "queries": ["Who is Ann?"], "metrics": {"sf_recall@10": 0.5}}]
    (capture / "results.jsonl").write_text("\n".join(json.dumps(r) for r in auto) + "\n")
    (capture / "judge.jsonl").write_text(json.dumps(_first([FILM, RADIO])) + "\n")
    direct = tmp_path / "direct.jsonl"
    direct.write_text("\n".join(json.dumps({"id": i, "strategy": "direct", "k": 10,
                                            "metrics": {"sf_recall@10": v}})
                                for i, v in [("a", 0.5), ("b", 0.5)]) + "\n")
    rows = {r["id"]: r for r in candidate_rows(capture, direct, ChainHeuristics())}
    assert rows["a"]["candidate"] and rows["a"]["stop"] == 0.5 and rows["a"]["searches"] == 3
    assert rows["a"]["bridge"] == "Shirley Temple"
    assert "candidate" not in rows["b"]  # one search: nothing to stop
    assert simulate(list(rows.values()), lambda r: True)["points"] == -25.0
