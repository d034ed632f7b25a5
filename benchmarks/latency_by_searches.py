"""An auto question's eval latency by its search rounds and searches, against direct's p50 in
the same run (docs/evaluation.md, "Where issue 12 ends"): whether the p50 ratio follows the
rounds of searches made one after the other.

Reads one ``memroute eval --strategy direct,auto --out DIR`` run (its ``results.jsonl``;
k = 10 rows by default) and prints, per run: direct's p50, auto's p50 ratio, and for each
(rounds, searches) the auto questions' p50 as a multiple of direct's p50::

    python -m benchmarks.latency_by_searches <eval-out>/results.jsonl [more runs ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path


def ratios_by_searches(rows: list[dict], k: int = 10) -> dict:
    """``direct_p50`` (ms), ``auto_ratio`` (auto p50 / direct p50) and ``by_searches``
    ({(rounds, searches): (questions, their p50 / direct p50)}) of one run's k-rows."""
    direct = [r["latency_ms"] for r in rows if r["strategy"] == "direct" and r["k"] == k]
    auto = [r for r in rows if r["strategy"] == "auto" and r["k"] == k]
    if not direct or not auto:
        raise ValueError(f"the run needs direct and auto rows at k = {k}")
    direct_p50 = statistics.median(direct)
    grouped: dict[tuple[int, int], list[float]] = defaultdict(list)
    for row in auto:
        grouped[row["search_rounds"], len(row["queries"])].append(row["latency_ms"])
    return {
        "direct_p50": direct_p50,
        "auto_ratio": statistics.median(r["latency_ms"] for r in auto) / direct_p50,
        "by_searches": {n: (len(times), statistics.median(times) / direct_p50)
                        for n, times in sorted(grouped.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="results.jsonl of eval runs")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    for path in args.results:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        found = ratios_by_searches(rows, args.k)
        groups = "  ".join(f"{rounds} rounds, {n} searches: {ratio:.2f}x (n={count})"
                           for (rounds, n), (count, ratio) in found["by_searches"].items())
        print(f"{path}: direct p50 {found['direct_p50']:.0f} ms, auto "
              f"{found['auto_ratio']:.2f}x | {groups}")


if __name__ == "__main__":
    main()
