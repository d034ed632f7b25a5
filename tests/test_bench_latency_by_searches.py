"""`benchmarks.latency_by_searches`: auto's eval latency grouped by its searches."""

from __future__ import annotations

import pytest

from benchmarks.latency_by_searches import ratios_by_searches


def _row(strategy: str, ms: float, searches: int = 1, k: int = 10, rounds: int = 0) -> dict:
    return {"strategy": strategy, "k": k, "latency_ms": ms, "queries": ["q"] * searches,
            "search_rounds": rounds or searches}


def test_groups_auto_by_searches_against_direct_p50() -> None:
    rows = [_row("direct", ms) for ms in (90, 100, 110)] + [
        _row("auto", 95, 1), _row("auto", 190, 2), _row("auto", 210, 2),
        _row("auto", 300, 3), _row("auto", 120, 2, rounds=1), _row("auto", 5000, 3, k=20)]
    found = ratios_by_searches(rows)
    assert found["direct_p50"] == 100
    assert found["auto_ratio"] == pytest.approx(1.9)  # median of 95, 120, 190, 210, 300
    assert found["by_searches"] == {(1, 1): (1, 0.95), (1, 2): (1, 1.2), (2, 2): (2, 2.0),
                                    (3, 3): (1, 3.0)}


def test_a_run_without_direct_rows_is_refused() -> None:
    with pytest.raises(ValueError, match="direct and auto"):
        ratios_by_searches([_row("auto", 100)])
