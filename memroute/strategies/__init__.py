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
from memroute.strategies.budget import Budget, CallLimits
from memroute.strategies.llm_planner import LLMPlanner

__all__ = ["Budget", "CallLimits", "ChainJudgment", "CostProfile", "LLMPlanner", "Planner",
           "PlannerResult", "Route", "RouteDecision", "SplitPlan", "Usage"]
