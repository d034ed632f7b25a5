"""One offline-planner variant on a shared data set, auto only (or the strategies given), on
the cached store of ``memroute eval`` (docs/evaluation.md, "Fewer searches"). Prints one JSON
line per strategy: the headline recall, searches per question, p50, per type and per route.

    python -m benchmarks.planner_variants hotpotqa ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl \\
        --limit 200 --name before --planner '{"use_nlp": false, "bridges": 2}' --rewrite-factor 1

``--planner`` holds `OfflinePlanner` keyword arguments (``use_nlp``, ``attribute_route`` and
any `ChainHeuristics` field); ``--rewrite-factor`` overrides
`memroute.strategies.base.REWRITE_RESULTS_FACTOR`; ``--lane`` turns the entity lane on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import memroute.strategies.base as strategy_base
from memroute.evals.runner import EvalConfig, run_eval
from memroute.planners.offline.planner import OfflinePlanner
from memroute.settings import get_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--name", default="variant")
    parser.add_argument("--planner", default="{}", help="OfflinePlanner keyword arguments (JSON)")
    parser.add_argument("--rewrite-factor", type=int, default=None)
    parser.add_argument("--lane", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--out", type=Path, default=Path("bench-out/variants"))
    args = parser.parse_args()
    if args.rewrite_factor is not None:
        strategy_base.REWRITE_RESULTS_FACTOR = args.rewrite_factor
    settings = get_settings()
    if args.lane is not None:
        settings = settings.model_copy(update={"entity_lane": args.lane})
    cfg = EvalConfig(dataset=args.dataset, data=args.data, limit=args.limit,
                     strategies=args.strategy.split(","), ks=[10],
                     out=args.out / f"{args.dataset}-{args.name}", concurrency=3)
    summary = asyncio.run(run_eval(cfg, settings=settings,
                                   planner=OfflinePlanner(**json.loads(args.planner))))
    head = summary["headline_metric"]
    for strategy, figures in summary["strategies"].items():
        print(json.dumps({
            "dataset": args.dataset, "name": args.name, "strategy": strategy,
            "lane": settings.entity_lane, head: figures[head],
            "searches": figures.get("queries_mean"), "p50_ms": figures["latency_ms_p50"],
            "types": {t: round(x[head], 4) for t, x in figures.get("types", {}).items()},
            "routes": {r: [x["n"], round(x[head], 4)] for r, x in figures["routes"].items()},
            "stops": figures.get("stop_reasons")}))


if __name__ == "__main__":
    main()
