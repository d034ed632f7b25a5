"""Direct search: the query as it is, one memory search, no LLM call.

The cheapest route, and the one every failure falls back to.
"""

from __future__ import annotations

from memroute.strategies.base import CostProfile

# Provisional until the evaluation issue measures it (docs/evaluation.md): accuracy is the
# prototype's direct sf_recall@10 on the shared HotpotQA store; time is one search.
COST_PROFILE = CostProfile(accuracy_score=0.68, token_cost=0.0, time_cost=0.05, llm_calls=0)
