"""SplitQuery: one planner call breaks a query into 2-6 independent single-fact sub-queries.

Not splitting is the default. The graph cleans what the planner proposes
(`clean_sub_queries`), then searches the original query and every sub-query (concurrently)
and pools the evidence.
"""

from __future__ import annotations

import re

from memroute.reading import vocabulary as V
from memroute.strategies.base import CostProfile, query_key

MAX_SUB_QUERIES = 6
MAX_SUB_QUERY_CHARS = 300

# Measured (docs/evaluation.md, "Cost profiles"): accuracy is the mean headline recall@10
# over the four shared data sets; tokens are the agent benchmark's mean on 100 HotpotQA
# questions, the json_schema response format included (265 in + 11 out); time is a run with
# 4 sub-queries, LLM latency excluded.
COST_PROFILE = CostProfile(accuracy_score=0.678, token_cost=276.0, time_cost=0.097, llm_calls=1)

# Comparison or derived wording: a sub-query must ask one plain fact about one subject.
_DERIVED = re.compile(
    r"\b(compare[sd]?|" + V.COMPARISON_WORDS.alternation() + r"|vs\.?|"
    r"(" + V.THAN_COMPARATIVES.alternation() + r")\s+than"
    r"|which\s+(one\s+)?(" + V.CHOICE_VERBS.alternation() + r")\b.*\bor\b)",
    re.IGNORECASE,
)


def clean_sub_queries(query: str, candidates: list[object]) -> list[str]:
    """Stripped, non-empty, distinct single-fact sub-queries (at most 6), never the query itself."""
    seen = {query_key(query)}
    kept: list[str] = []
    for item in candidates:
        if not isinstance(item, str):
            continue
        text = " ".join(item.split())[:MAX_SUB_QUERY_CHARS].rstrip()
        key = query_key(text)
        if not key or key in seen or _DERIVED.search(text):
            continue
        seen.add(key)
        kept.append(text)
        if len(kept) == MAX_SUB_QUERIES:
            break
    return kept
