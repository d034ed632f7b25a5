"""Rounds of searches per auto question (depth), before and after, from two evaluation runs of
the same questions (docs/evaluation.md, "A chain hop sends several searches at once").

    python -m benchmarks.search_rounds <before run dir> <after run dir>

Each directory holds a ``results.jsonl`` of ``memroute eval`` or `benchmarks.planner_variants`
(``--strategy direct,auto`` for the p50 ratio). A row without ``search_rounds`` (a run of an
older tree) is counted from its route and queries: a chain searches one query per round, a
split its question and then its sub-queries. Prints one JSON line: the mean rounds and their
distribution, searches, auto and direct p50 and their ratio for each run, the questions
whose queries differ (as multisets), and the questions that lost a round with their p50.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any


def rounds(row: dict[str, Any]) -> int:
    """The row's rounds of searches (counted from its route and queries when not recorded)."""
    if row.get("search_rounds"):
        return int(row["search_rounds"])
    if row["route"] == "chain":
        return len(row["queries"])
    if row["route"] == "split":
        return 2 if len(row["queries"]) > 1 else 1
    return 1


def _rows(run: Path, strategy: str) -> dict[str, dict[str, Any]]:
    with (run / "results.jsonl").open() as lines:
        return {r["id"]: r for r in map(json.loads, lines) if r["strategy"] == strategy}


def _p50(rows: list[dict[str, Any]]) -> float | None:
    return round(statistics.median(r["latency_ms"] for r in rows), 1) if rows else None


def run_figures(run: Path) -> dict[str, Any]:
    auto, direct = list(_rows(run, "auto").values()), list(_rows(run, "direct").values())
    p50_auto, p50_direct = _p50(auto), _p50(direct)
    return {"rounds": round(statistics.mean(rounds(r) for r in auto), 3),
            "rounds_dist": dict(sorted(Counter(rounds(r) for r in auto).items())),
            "searches": round(statistics.mean(len(r["queries"]) for r in auto), 3),
            "p50_auto": p50_auto, "p50_direct": p50_direct,
            "ratio": round(p50_auto / p50_direct, 2) if p50_direct else None}


def compare(before: Path, after: Path) -> dict[str, Any]:
    """The figures of both runs and what changed per question."""
    old, new = _rows(before, "auto"), _rows(after, "auto")
    both = [i for i in new if i in old]
    fewer = [i for i in both if rounds(new[i]) < rounds(old[i])]
    return {"before": run_figures(before), "after": run_figures(after),
            "questions": len(both),
            "other_queries": [i for i in both
                              if sorted(old[i]["queries"]) != sorted(new[i]["queries"])],
            "fewer_rounds": len(fewer),
            "fewer_rounds_p50": [_p50([old[i] for i in fewer]), _p50([new[i] for i in fewer])]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    print(json.dumps(compare(args.before, args.after)))


if __name__ == "__main__":
    main()
