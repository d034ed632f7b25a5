"""``benchmarks.bridge_rank capture``, with each evidence item's scores (its vector and rerank
scores in the pool) added to the recorded judgments (docs/evaluation.md, "Telling a right
first bridge from a wrong one"). The planner never sees the scores; only the record does.

    python -m benchmarks.stop_capture hotpotqa $H --limit 300 --out bench-out/stop
"""

from __future__ import annotations

import contextvars
import sys

import memroute.graph.chain_judge as chain_judge
from benchmarks import bridge_rank

_SCORES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("scores", default=None)
_record_text = chain_judge.record_text


def _scored_text(record):
    text = _record_text(record)
    scores = _SCORES.get()
    if scores is None:
        scores = {}
        _SCORES.set(scores)
    scores[text] = [round(record["vector_score"], 4), round(record["rerank_score"], 4)]
    return text


class ScoreRecordingPlanner(bridge_rank.RecordingPlanner):
    async def judge(self, query, evidence, previous_queries, hop, evidence_entities=None):
        result = await super().judge(query, evidence, previous_queries, hop, evidence_entities)
        scores = _SCORES.get() or {}
        self.records[-1]["scores"] = [scores.get(t) for t in evidence]
        return result


if __name__ == "__main__":
    chain_judge.record_text = _scored_text
    bridge_rank.RecordingPlanner = ScoreRecordingPlanner
    sys.argv.insert(1, "capture")
    bridge_rank.main()
