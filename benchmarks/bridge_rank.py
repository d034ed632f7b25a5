"""Where the gold bridge ranks among a chain's first-hop bridge candidates, offline.

Two steps (docs/evaluation.md, "The first bridge"):

- ``capture``: one auto run of a shared set (the eval's store and settings, like
  `benchmarks.planner_variants`) with a planner that records every chain judgment's inputs
  (question, evidence texts, the entities the index stored for them, earlier queries) and
  its output, to ``judge.jsonl`` beside the run's ``results.jsonl``/``summary.json``;
- ``score``: for each first-hop judgment of a question with a supporting paragraph whose
  title the question does not name (the gold bridge; Wikipedia sets only), rank the bridge
  candidates with each variant, without searching again, and report where the first gold
  bridge ranks (hit@1, hit@4 = the first rewrite plus the packed second, MRR).

Gold is read here only, never by the planner.

    python -m benchmarks.bridge_rank capture hotpotqa $H --limit 300 --out bench-out/bridge
    python -m benchmarks.bridge_rank score hotpotqa $H --limit 300 --out bench-out/bridge \\
        --variants '{"base": {}, "vouched": {"unvouched": 0.3}}'

A variant is a dict of `BridgeRanking` fields (``{}`` is today's ranking).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from memroute.evals.datasets import load_dataset
from memroute.nlp import Entity
from memroute.planners.offline.bridging import BridgeRanking, ChainHeuristics
from memroute.planners.offline.entities import fold, mentioned
from memroute.planners.offline.parsed import _without_named_possessives, rank_bridges
from memroute.planners.offline.question_parse import read_question
from memroute.planners.offline.question_syntax import has_nested_relation
from memroute.planners.offline.planner import OfflinePlanner


class RecordingPlanner(OfflinePlanner):
    """The offline planner, recording each chain judgment's inputs and output."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.records: list[dict[str, Any]] = []

    async def judge(self, query, evidence, previous_queries, hop, evidence_entities=None):
        result = await super().judge(query, evidence, previous_queries, hop, evidence_entities)
        value = result.value
        self.records.append({
            "question": query, "hop": hop, "previous": list(previous_queries),
            "evidence": list(evidence),
            "entities": (None if evidence_entities is None else
                         [None if ents is None else [e.as_json() for e in ents]
                          for ents in evidence_entities]),
            "new_query": None if value is None else value.new_query,
            "sufficient": None if value is None else value.is_sufficient})
        return result


def capture(args: argparse.Namespace) -> None:
    from memroute.evals.runner import EvalConfig, run_eval
    from memroute.settings import get_settings

    out = args.out / args.dataset
    planner = RecordingPlanner(**json.loads(args.planner))
    cfg = EvalConfig(dataset=args.dataset, data=args.data, limit=args.limit,
                     strategies=["auto"], ks=[10], out=out, concurrency=3)
    summary = asyncio.run(run_eval(cfg, settings=get_settings(), planner=planner))
    with (out / "judge.jsonl").open("w", encoding="utf-8") as sink:
        for record in planner.records:
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
    head = summary["headline_metric"]
    auto = summary["strategies"]["auto"]
    print(json.dumps({"dataset": args.dataset, head: auto[head],
                      "searches": auto.get("queries_mean"), "judgments": len(planner.records),
                      "types": {t: round(x[head], 4) for t, x in auto.get("types", {}).items()}}))


def _bare(title: str) -> str:
    return fold(re.sub(r"\s*\([^)]*\)\s*$", "", title))


def is_bridge(candidate: str, title: str) -> bool:
    """Whether a candidate names a gold title ("Kiss and Tell" for "Kiss and Tell (1945
    film)"; a surname alone for a person's page counts too)."""
    c, t = _bare(candidate), _bare(title)
    return bool(c) and (c == t or (" " not in c and t.endswith(" " + c)))


def _entities(raw: list | None) -> list[list[Entity] | None] | None:
    if raw is None:
        return None
    return [None if ents is None else [Entity(**e) for e in ents] for ents in raw]


def score(args: argparse.Namespace) -> None:
    dataset = load_dataset(args.dataset, args.data, args.limit)
    gold = {q.question: q for q in dataset.questions}
    records = [json.loads(line) for line in
               (args.out / args.dataset / "judge.jsonl").open(encoding="utf-8")]
    first = [r for r in records if len(r["previous"]) == 1 and r["question"] in gold]
    variants = json.loads(args.variants)
    heuristics = ChainHeuristics()
    rows: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
    for r in first:
        q = gold[r["question"]]
        hidden = [t for t in q.gold_titles if not mentioned(t, q.question)]
        if not hidden:
            continue
        qp = read_question(q.question)
        attribute = (bool(qp.named) and not qp.hidden_head and not has_nested_relation(
            _without_named_possessives(q.question, qp)))
        kind = "attribute (1 rewrite)" if attribute else "bridge (2 rewrites)"
        found = any(any(is_bridge(t, line.split(":", 1)[0]) for t in hidden)
                    for text in r["evidence"] for line in text.splitlines())
        for name, fields in variants.items():
            ranking = BridgeRanking(**fields)
            ranked = [c.entity for c in rank_bridges(
                r["question"], r["evidence"], r["previous"],
                replace(heuristics, ranking=ranking), _entities(r["entities"]))]
            rank = next((i for i, c in enumerate(ranked) if any(is_bridge(c, t) for t in hidden)),
                        None)
            for group in ("all", q.type, kind, "in evidence" if found else "not in evidence"):
                rows[name].setdefault(group, []).append(-1 if rank is None else rank)
            if args.show and name == args.show:
                print(json.dumps({"q": q.question, "hidden": hidden, "rank": rank,
                                  "top": ranked[:6]}, ensure_ascii=False))
    for name, groups in rows.items():
        out = {"variant": name}
        for group, ranks in groups.items():
            n = len(ranks)
            out[group] = {"n": n,
                          "hit1": round(sum(r == 0 for r in ranks) / n, 3),
                          "hit4": round(sum(0 <= r < 4 for r in ranks) / n, 3),
                          "mrr": round(sum(1 / (r + 1) for r in ranks if r >= 0) / n, 3)}
        print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["capture", "score"])
    parser.add_argument("dataset")
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench-out/bridge"))
    parser.add_argument("--planner", default="{}", help="OfflinePlanner keyword arguments (JSON)")
    parser.add_argument("--variants", default='{"base": {}}',
                        help="name -> BridgeRanking fields (JSON)")
    parser.add_argument("--show", default="", help="print each question's ranking of a variant")
    args = parser.parse_args()
    (capture if args.step == "capture" else score)(args)


if __name__ == "__main__":
    main()
