"""Retrieval strategies: ToolSelect, direct, SplitQuery and ChainOfQuery, and their planners."""

from memroute.strategies.base import (
    ChainJudgment,
    CostProfile,
    Planner,
    PlannerResult,
    Route,
    RouteDecision,
    SplitPlan,
    Usage,
)

__all__ = ["ChainJudgment", "CostProfile", "Planner", "PlannerResult", "Route", "RouteDecision",
           "SplitPlan", "Usage"]
