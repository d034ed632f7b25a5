"""LoCoMo by conversation: rows split by the conversation their id names; unscored questions
count for searches only."""

from __future__ import annotations

from benchmarks.locomo_halves import conversation, halves


def row(qid: str, recall: float | None, kind: str = "single-hop", queries: int = 1,
        strategy: str = "auto", k: int = 10) -> dict:
    return {"id": qid, "k": k, "strategy": strategy, "type": kind,
            "queries": ["q"] * queries, "metrics": {"evidence_recall@10": recall}}


def test_rows_split_by_their_conversation() -> None:
    assert conversation("conv-26-q12") == "conv-26"
    rows = [row("conv-26-q0", 1.0, "multi-hop", 3), row("conv-26-q1", 0.5),
            row("conv-42-q0", 0.0, "multi-hop", 2), row("conv-42-q1", None, queries=2),
            row("conv-42-q2", 1.0, k=20), row("conv-42-q3", 0.25, strategy="direct")]
    out = halves(rows, {"conv-26"})
    assert out["auto"]["tuned"] == {"questions": 2, "recall": 0.75, "multi_hop": 1.0,
                                    "searches": 2.0}
    assert out["auto"]["other"] == {"questions": 1, "recall": 0.0, "multi_hop": 0.0,
                                    "searches": 2.0}
    assert out["direct"] == {"other": {"questions": 1, "recall": 0.25, "multi_hop": None,
                                       "searches": 1.0}}
