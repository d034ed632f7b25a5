"""Rounds of searches per auto question from two runs: recorded, or counted from the route and
queries of an older run's rows; the questions whose queries or rounds changed."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.search_rounds import compare, rounds


def row(qid: str, route: str, queries: list[str], ms: float, strategy: str = "auto",
        **extra) -> dict:
    return {"id": qid, "strategy": strategy, "route": route, "queries": queries,
            "latency_ms": ms, **extra}


def write(path: Path, rows: list[dict]) -> Path:
    path.mkdir()
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_rounds_are_recorded_or_counted_from_route_and_queries() -> None:
    assert rounds(row("a", "chain", ["q", "x", "y"], 1)) == 3
    assert rounds(row("a", "chain", ["q", "x", "y"], 1, search_rounds=2)) == 2
    assert rounds(row("a", "split", ["q", "x", "y"], 1)) == 2
    assert rounds(row("a", "direct", ["q"], 1)) == 1


def test_two_runs_compare_per_question(tmp_path: Path) -> None:
    before = write(tmp_path / "before", [
        row("1", "chain", ["q1", "A", "B"], 300), row("2", "chain", ["q2", "x"], 200),
        row("1", "direct", ["q1"], 100, strategy="direct"),
        row("2", "direct", ["q2"], 100, strategy="direct")])
    after = write(tmp_path / "after", [
        row("1", "chain", ["q1", "B", "A"], 200, search_rounds=2),
        row("2", "chain", ["q2", "y"], 200, search_rounds=2),
        row("1", "direct", ["q1"], 100, strategy="direct"),
        row("2", "direct", ["q2"], 100, strategy="direct")])
    out = compare(before, after)
    assert out["before"]["rounds"] == 2.5 and out["after"]["rounds"] == 2.0
    assert out["before"]["rounds_dist"] == {2: 1, 3: 1} and out["after"]["searches"] == 2.5
    assert out["before"]["ratio"] == 2.5 and out["after"]["ratio"] == 2.0
    # the same queries in another order are the same searches
    assert out["other_queries"] == ["2"]
    assert out["fewer_rounds"] == 1 and out["fewer_rounds_p50"] == [300.0, 200.0]
