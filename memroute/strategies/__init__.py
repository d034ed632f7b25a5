"""Retrieval strategies: ToolSelect, direct, SplitQuery and ChainOfQuery.

One module each, with its decision schema, validator, stop rule and measured `CostProfile`;
`budget` holds what a request may spend. The deciders behind them are in `memroute.planners`.
"""

from memroute.strategies.base import (
    ChainJudgment,
    CostProfile,
    Route,
    RouteDecision,
    SplitPlan,
    Usage,
)
from memroute.strategies.budget import Budget, CallLimits

__all__ = ["Budget", "CallLimits", "ChainJudgment", "CostProfile", "Route", "RouteDecision",
           "SplitPlan", "Usage"]
