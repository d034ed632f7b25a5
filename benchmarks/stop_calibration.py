"""How well a chain stop predicts that the third search adds nothing (docs/evaluation.md,
"Fewer searches on Wikipedia sets"). Reads three `results.jsonl` of the same questions:
``full`` (the default chain), ``stopped`` (every bridge chain stopped after its first rewrite,
the same first rewrite: ``--planner '{"bridges": 1, "pack": 1}'``) and ``rule`` (the stop
under test). Prints one JSON line: where the third search earns recall, and the rule's
precision (stopped questions whose third search added no supporting fact).

    python -m benchmarks.stop_calibration bench-out/variants/hotpotqa-full \\
        bench-out/variants/hotpotqa-stopped bench-out/variants/hotpotqa-rule \\
        --since 200 --dataset hotpotqa --data ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from memroute.evals.datasets import load_dataset



def _auto(run: Path) -> list[dict]:
    """The auto rows of a run, each with its headline recall as ``recall``."""
    headline = json.loads((run / "summary.json").read_text())["headline_metric"]
    rows = [json.loads(line) for line in (run / "results.jsonl").open()]
    return [{**r, "recall": r["metrics"][headline]} for r in rows if r["strategy"] == "auto"]


def _recall(row: dict) -> float:
    return row["recall"]


def calibrate(full: list[dict], stopped: list[dict], rule: list[dict]) -> dict:
    """Per question (by id): the third search earns when the full chain's recall beats the
    stopped one's; the rule stopped a question when it made fewer searches than the full
    chain."""
    earns, hurts, third, fired, right, by_type = 0, 0, 0, 0, 0, Counter()
    by_id = [{x["id"]: x for x in rows} for rows in (stopped, rule)]
    if any(set(ids) != {x["id"] for x in full} for ids in by_id):
        raise ValueError("the three runs hold different questions")
    for f in full:
        s, r = (ids[f["id"]] for ids in by_id)
        if f["route"] != "chain" or len(f["queries"]) < 3:
            continue
        third += 1
        gain = _recall(f) - _recall(s)
        earns += gain > 1e-9
        hurts += gain < -1e-9
        if len(r["queries"]) < len(f["queries"]):
            fired += 1
            right += gain <= 1e-9
            by_type[f["type"]] += 1
    return {"questions": len(full), "third_search": third, "third_earns": earns,
            "third_hurts": hurts, "rule_stopped": fired,
            "precision": round(right / fired, 3) if fired else None,
            "stopped_by_type": dict(by_type),
            "recall": {name: round(sum(map(_recall, rows)) / len(rows), 4)
                       for name, rows in (("full", full), ("stopped", stopped), ("rule", rule))},
            "searches": {name: round(sum(len(x["queries"]) for x in rows) / len(rows), 2)
                         for name, rows in (("full", full), ("stopped", stopped), ("rule", rule))}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("full", type=Path)
    parser.add_argument("stopped", type=Path)
    parser.add_argument("rule", type=Path)
    parser.add_argument("--since", type=int, default=None,
                        help="also report the questions from this position of the data on apart")
    parser.add_argument("--dataset", help="with --since: the data set's name")
    parser.add_argument("--data", type=Path, help="with --since: the data file")
    args = parser.parse_args()
    runs = [_auto(run) for run in (args.full, args.stopped, args.rule)]
    print(json.dumps({"slice": "all", **calibrate(*runs)}))
    if args.since is not None:
        order = [q.id for q in load_dataset(args.dataset, args.data).questions]
        late = set(order[args.since:])
        for name, keep in ((f"{args.since}-", late.__contains__),
                           (f"-{args.since}", lambda qid: qid not in late)):
            part = [[x for x in rows if keep(x["id"])] for rows in runs]
            print(json.dumps({"slice": name, **calibrate(*part)}))


if __name__ == "__main__":
    main()
