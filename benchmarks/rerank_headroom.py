"""The final rerank's headroom: gold evidence the hops pooled but the top k dropped.

Reads a `benchmarks.planner_variants` run made with ``--dump-pool`` (its results.jsonl and the
pool file) and prints, per set, the final recall, the pool's recall (the recall a perfect final
rerank would reach), their difference, and how many auto questions lost evidence in the rerank
(docs/evaluation.md, "The final rerank's headroom").

    python -m benchmarks.rerank_headroom hotpotqa ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl \\
        --limit 300 --results bench-out/variants/hotpotqa-base --pool pool-hotpotqa.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memroute.evals.datasets import Question, load_dataset
from memroute.evals.scoring import headline_metric
from memroute.memory.titles import split_title


def pool_recall(dataset: str, question: Question, episodes: list[list]) -> float:
    """The headline recall of ``episodes`` (``[uid, content, dia_id]`` rows: every pooled
    record's window), as if all were returned."""
    if dataset == "locomo":
        ids = {e[2] for e in episodes}
        total = len(question.gold_ids) + len(question.unresolved)
        return sum(g in ids for g in question.gold_ids) / total if total else 0.0
    if dataset == "musique":
        titles = {split_title(e[1])[0] for e in episodes}
        return sum(t in titles for t in question.gold_titles) / len(question.gold_titles)
    contents = {e[1] for e in episodes}
    return sum(g in contents for g in question.gold_facts) / len(question.gold_facts)


def headroom(dataset: str, questions: list[Question], rows: dict[str, dict],
             pools: dict[str, dict]) -> dict[str, float | int]:
    """Mean final recall, mean pool recall and the questions the final rerank cost evidence."""
    head = f"{headline_metric(dataset)}@10"
    n = cut = 0
    final = pooled = 0.0
    for question in questions:
        row = rows.get(question.question)
        got = None if row is None else row["metrics"].get(head)
        if got is None:  # not run, or not scored (LoCoMo: no resolvable evidence)
            continue
        n += 1
        pool = pools.get(question.question)
        best = got if pool is None else max(got, pool_recall(
            dataset, question, [e for r in pool["pool"] for e in r["episodes"]]))
        final, pooled = final + got, pooled + best
        cut += best > got + 1e-9
    if not n:
        return {"questions": 0, "final": 0.0, "pool": 0.0, "headroom": 0.0, "cut_questions": 0}
    return {"questions": n, "final": round(final / n, 4), "pool": round(pooled / n, 4),
            "headroom": round((pooled - final) / n, 4), "cut_questions": cut}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--results", type=Path, required=True, help="the run's output folder")
    parser.add_argument("--pool", type=Path, required=True, help="its --dump-pool file")
    parser.add_argument("--strategy", default="auto")
    args = parser.parse_args()
    questions = load_dataset(args.dataset, args.data, args.limit).questions
    rows = {}
    for line in (args.results / "results.jsonl").open():
        row = json.loads(line)
        if row["strategy"] == args.strategy and row["k"] == 10:
            rows[row["question"]] = row
    pools = {p["query"]: p for p in map(json.loads, args.pool.open())}
    print(json.dumps({"dataset": args.dataset, **headroom(args.dataset, questions, rows, pools)}))


if __name__ == "__main__":
    main()
