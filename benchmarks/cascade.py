"""The cascade planner on a shared data set with the scripted LLM: how often the LLM is
consulted, LLM calls and input tokens per question (docs/evaluation.md, "Cascade planner").

    python -m benchmarks.cascade hotpotqa ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl \\
        --limit 200 --threshold 0.7
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from pathlib import Path

from memroute.evals.runner import EvalConfig, run_eval
from memroute.evals.scripted_llm import ScriptedPlannerChat
from memroute.planners.base import PlannerResult
from memroute.planners.cascade import CascadePlanner
from memroute.planners.llm.planner import LLMPlanner
from memroute.planners.offline.planner import OfflinePlanner


class CountingCascade(CascadePlanner):
    """Counts which planner made each decision (from the record the cascade keeps)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.decided_by: Counter[str] = Counter()

    async def _decide(self, first, confidence, ask_llm) -> PlannerResult:
        result = await super()._decide(first, confidence, ask_llm)
        self.decided_by["offline" if result.raw[0].startswith("cascade: offline") else "llm"] += 1
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--threshold", type=float, default=0.7)
    parser.add_argument("--out", type=Path, default=Path("bench-out/cascade"))
    args = parser.parse_args()
    planner = CountingCascade(OfflinePlanner(), LLMPlanner(ScriptedPlannerChat()), args.threshold)
    cfg = EvalConfig(dataset=args.dataset, data=args.data, limit=args.limit,
                     strategies=["auto"], ks=[10], out=args.out)
    summary = asyncio.run(run_eval(cfg, planner=planner))
    auto, head = summary["strategies"]["auto"], summary["headline_metric"]
    decisions = sum(planner.decided_by.values())
    print(json.dumps({"dataset": args.dataset, "questions": summary["n_questions"],
                      "threshold": args.threshold, head: auto[head],
                      "decisions": dict(planner.decided_by),
                      "llm_share": planner.decided_by["llm"] / decisions if decisions else 0.0,
                      "llm_calls_per_question": auto["llm_calls"],
                      "input_tokens_per_question": auto["input_tokens"],
                      "searches_per_question": auto["queries_mean"]}))


if __name__ == "__main__":
    main()
