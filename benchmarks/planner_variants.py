"""One offline-planner variant on a shared data set, auto only (or the strategies given), on
the cached store of ``memroute eval`` (docs/evaluation.md, "Fewer searches"). Prints one JSON
line per strategy: the headline recall, searches per question, p50, per type and per route.

    python -m benchmarks.planner_variants hotpotqa ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl \\
        --limit 200 --name before --planner '{"use_nlp": false, "bridges": 2}' --rewrite-factor 1

``--planner`` holds `OfflinePlanner` keyword arguments (``use_nlp``, ``attribute_route`` and
any `ChainHeuristics` field); ``--rewrite-factor`` overrides
`memroute.strategies.base.REWRITE_RESULTS_FACTOR`; ``--lane`` turns the entity lane on;
``--dump-pool`` writes each question's pool before the final rerank (read by
`benchmarks.rerank_headroom`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import memroute.graph.final_rerank as final_rerank
import memroute.strategies.base as strategy_base
from memroute.evals.runner import EvalConfig, run_eval
from memroute.planners.offline.planner import OfflinePlanner
from memroute.settings import get_settings


def dump_pools(path: Path) -> None:
    """Append each question's pool (as the final rerank receives it) to ``path``: the
    question, the queries used and every pooled record's episode contents, uid and query."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = final_rerank.record_decision

    async def dumping(state, stop_reason):
        pool = list((state.get("pool") or {}).values())
        with path.open("a") as out:
            out.write(json.dumps({
                "query": state["query"], "queries": list(state.get("queries") or []),
                "pool": [{"uid": r["uid"], "query": r["query"], "score": r["rerank_score"],
                          "own": r["extra"].get("own_rank"),
                          "episodes": [[e.get("uid"), e.get("content"),
                                        (e.get("metadata") or {}).get("dia_id")]
                                       for e in r["episodes"]]} for r in pool]}) + "\n")
        await record(state, stop_reason)

    final_rerank.record_decision = dumping


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
    parser.add_argument("--dump-pool", type=Path, default=None,
                        help="write each question's pool before the final rerank (JSONL)")
    args = parser.parse_args()
    if args.dump_pool is not None:
        dump_pools(args.dump_pool)
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
            "searches": figures.get("queries_mean"), "rounds": figures.get("search_rounds_mean"),
            "p50_ms": figures["latency_ms_p50"],
            "types": {t: round(x[head], 4) for t, x in figures.get("types", {}).items()},
            "routes": {r: [x["n"], round(x[head], 4)] for r, x in figures["routes"].items()},
            "stops": figures.get("stop_reasons")}))


if __name__ == "__main__":
    main()
