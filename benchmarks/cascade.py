"""The cascade planner on a shared data set with the scripted LLM: how often the LLM is
consulted, LLM calls and input tokens per question, and (``--calibrate``) the offline planner's
calibration: each decision class and confidence against the recall of the questions it was
made for (docs/evaluation.md, "Cascade planner").

    python -m benchmarks.cascade hotpotqa ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl \\
        --limit 300 --threshold 0.7
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import defaultdict
from pathlib import Path
from statistics import mean

from memroute.evals.runner import EvalConfig, run_eval
from memroute.evals.scripted_llm import ScriptedPlannerChat
from memroute.planners.base import PlannerResult
from memroute.planners.cascade import DEFAULT_JUDGE_HOPS, DEFAULT_THRESHOLD, CascadePlanner
from memroute.planners.llm.planner import LLMPlanner
from memroute.planners.offline.planner import OfflinePlanner


def decision_class(kind: str, result: PlannerResult) -> str:
    """A decision's class for the calibration table: the route taken, or what the judge did."""
    value = result.value
    if value is None:
        return "failed"
    if kind == "route":
        return value.route
    if kind == "judge":
        return "sufficient" if value.is_sufficient else "rewrite"
    return "split"


class RecordingCascade(CascadePlanner):
    """Keeps every decision (kind, hop, class, offline confidence, who decided) by question."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log: dict[str, list[dict]] = defaultdict(list)

    async def _decide(self, kind, query, hop, first, confidence, ask_llm) -> PlannerResult:
        result = await super()._decide(kind, query, hop, first, confidence, ask_llm)
        self.log[query].append({"kind": kind, "hop": hop, "offline": decision_class(kind, first),
                                "confidence": confidence, "by": result.decided_by})
        return result


def calibration(log: dict[str, list[dict]], recall: dict[str, float]) -> list[dict]:
    """Per (decision kind, hop, offline class, offline confidence): decisions, and the mean
    recall of the questions they were made for."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for question, decisions in log.items():
        if recall.get(question) is None:
            continue  # a question without gold evidence
        for d in decisions:
            key = (d["kind"], d["hop"], d["offline"], d["confidence"])
            groups[key].append(recall[question])
    return [{"kind": k[0], "hop": k[1], "offline": k[2], "confidence": k[3], "n": len(v),
             "recall": round(mean(v), 4)} for k, v in sorted(groups.items(), key=str)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    parser.add_argument("--judge-hops", type=int, default=DEFAULT_JUDGE_HOPS,
                        help="chain hops whose judgment may go to the LLM")
    parser.add_argument("--calibrate", action="store_true",
                        help="also print the calibration table (run it with --threshold 0)")
    parser.add_argument("--out", type=Path, default=Path("bench-out/cascade"))
    args = parser.parse_args()
    planner = RecordingCascade(OfflinePlanner(), LLMPlanner(ScriptedPlannerChat()),
                               args.threshold, args.judge_hops)
    cfg = EvalConfig(dataset=args.dataset, data=args.data, limit=args.limit,
                     strategies=["auto"], ks=[10], out=args.out)
    summary = asyncio.run(run_eval(cfg, planner=planner))
    auto, head = summary["strategies"]["auto"], summary["headline_metric"]
    if args.calibrate:
        rows = [json.loads(line) for line in (args.out / "results.jsonl").open()]
        recall = {r["question"]: r["metrics"][head] for r in rows}
        for row in calibration(planner.log, recall):
            print(json.dumps(row))
    print(json.dumps({"dataset": args.dataset, "questions": summary["n_questions"],
                      "threshold": args.threshold, "judge_hops": args.judge_hops,
                      head: auto[head], "decisions_per_question": auto.get("decisions"),
                      "llm_share": auto.get("llm_decision_share"),
                      "llm_calls_per_question": auto["llm_calls"],
                      "input_tokens_per_question": auto["input_tokens"],
                      "tokens_by_node": {n: v["input"] for n, v in auto["tokens_by_node"].items()},
                      "searches_per_question": auto["queries_mean"]}))


if __name__ == "__main__":
    main()
