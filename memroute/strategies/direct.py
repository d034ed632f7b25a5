"""Direct search: the query as it is, one memory search, no LLM call.

The cheapest route, and the one every failure falls back to.
"""

from __future__ import annotations

from memroute.strategies.base import CostProfile

# Measured (docs/evaluation.md, "Cost profiles"): accuracy is the mean headline recall@10
# over the four shared data sets; time is the agent benchmark's mean wall per question.
COST_PROFILE = CostProfile(accuracy_score=0.669, token_cost=0.0, time_cost=0.021, llm_calls=0)
