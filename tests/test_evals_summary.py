"""The evaluation summary's cost by stop and its count of questions below direct, on rows
made by hand."""

from __future__ import annotations

from memroute.evals.summary import render_markdown, summarize

META = {"dataset": "hotpotqa", "n_questions": 2, "seed": 0, "data_sha256": "0" * 64,
        "unit": "sentence", "headline_metric": "sf_recall@3",
        "config": {"embedder": "e", "reranker": "r", "planner": "offline"},
        "store": {"episodes": 4}, "ks": [3]}


def row(qid: str, strategy: str, recall: float, queries: int, stop: str, route: str,
        qtype: str = "bridge") -> dict:
    return {"id": qid, "type": qtype, "strategy": strategy, "k": 3, "route": route,
            "queries": ["q"] * queries, "search_rounds": queries, "stop_reason": stop,
            "costs": {}, "latency_ms": 10.0, "metrics": {"sf_recall@3": recall}}


def test_searches_by_stop_and_questions_below_direct() -> None:
    rows = [row("a", "direct", 1.0, 1, "done", "direct"),
            row("b", "direct", 0.5, 1, "done", "direct", "comparison"),
            row("a", "auto", 0.5, 3, "hop_limit", "chain"),
            row("b", "auto", 1.0, 2, "sufficient", "chain", "comparison")]
    summary = summarize(rows, dataset="hotpotqa", strategies=["direct", "auto"], ks=[3],
                        meta=META)
    auto = summary["strategies"]["auto"]
    assert auto["searches_by_stop"] == {"hop_limit": {"n": 1, "searches": 3.0},
                                        "sufficient": {"n": 1, "searches": 2.0}}
    assert summary["strategies"]["direct"]["searches_by_stop"] == {
        "done (direct)": {"n": 2, "searches": 1.0}}
    assert auto["types"]["bridge"]["searches"] == 3.0
    assert summary["below_direct"] == {"auto": {"sf_recall@3": 1}}  # a: 0.5 < 1.0
    text = render_markdown(summary)
    assert "| auto | hop_limit | 1 | 3.00 |" in text
    assert "| auto | 1 |" in text.split("## Questions recalled less than by direct")[1]
    # no direct run: nothing to compare with
    assert summarize(rows[2:], dataset="hotpotqa", strategies=["auto"], ks=[3],
                     meta=META)["below_direct"] == {}
