"""LoCoMo figures by conversation: the conversations tuned on against the others, from a
`memroute eval locomo` run's ``results.jsonl`` (docs/evaluation.md, "Issue 12 on main after
session 8"). Question ids name their conversation (``conv-26-q0``).

    python -m benchmarks.locomo_halves <eval out dir> --tuned conv-26,conv-30,conv-41
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

RECALL = "evidence_recall@10"


def conversation(question_id: str) -> str:
    return question_id.rsplit("-q", 1)[0]


def halves(rows: list[dict], tuned: set[str]) -> dict[str, dict]:
    """Per strategy and half ("tuned", "other"): mean recall over scored questions, the same
    for multi-hop, and mean searches."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        if row["k"] == 10:
            half = "tuned" if conversation(row["id"]) in tuned else "other"
            groups[(row["strategy"], half)].append(row)

    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 4) if values else None

    out: dict[str, dict] = defaultdict(dict)
    for (strategy, half), group in sorted(groups.items()):
        scored = [r for r in group if r["metrics"][RECALL] is not None]
        out[strategy][half] = {
            "questions": len(scored),
            "recall": mean([r["metrics"][RECALL] for r in scored]),
            "multi_hop": mean([r["metrics"][RECALL] for r in scored if r["type"] == "multi-hop"]),
            "searches": mean([len(r["queries"]) for r in group]),
        }
    return dict(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a memroute eval locomo --out directory")
    parser.add_argument("--tuned", default="conv-26,conv-30,conv-41")
    args = parser.parse_args()
    rows = [json.loads(line) for line in (args.run / "results.jsonl").open()]
    print(json.dumps(halves(rows, set(args.tuned.split(","))), indent=1))


if __name__ == "__main__":
    main()
