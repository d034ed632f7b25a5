"""Retrieval strategies: ToolSelect, direct, SplitQuery and ChainOfQuery.

One module each, with its rules (sub-query cleaning, the chain's stop rule, the router's
budget choice) and measured `CostProfile`; `base` declares the strategy names and the decision
schemas, `budget` what a request may spend. The deciders behind them are in
`memroute.planners`.
"""

from memroute.strategies.base import (
    STRATEGIES,
    ChainJudgment,
    ChainSearch,
    CostProfile,
    Route,
    RouteDecision,
    SplitPlan,
    Strategy,
    Usage,
)
from memroute.strategies.budget import Budget, CallLimits

__all__ = ["STRATEGIES", "Budget", "CallLimits", "ChainJudgment", "ChainSearch", "CostProfile",
           "Route", "RouteDecision", "SplitPlan", "Strategy", "Usage"]
