"""Retrieval strategies: ToolSelect, direct, SplitQuery and ChainOfQuery.

One module each, with its rules (sub-query cleaning, the chain's stop rule, the router's
budget choice) and measured `CostProfile`; `base` declares the strategy names and the decision
schemas, `budget` what a request may spend. The deciders behind them are in
`memroute.planners`.
"""

from typing import TYPE_CHECKING, Any

__all__ = ["STRATEGIES", "Budget", "CallLimits", "ChainJudgment", "ChainSearch", "CostProfile",
           "Route", "RouteDecision", "SplitPlan", "Strategy", "Usage"]

# Names load on first use: the CLI reads `STRATEGIES` (from `names`) without pydantic.
_LAZY = {"STRATEGIES": "names", "Route": "names", "Strategy": "names", "Budget": "budget",
         "CallLimits": "budget", "ChainJudgment": "base", "ChainSearch": "base",
         "CostProfile": "base", "RouteDecision": "base", "SplitPlan": "base", "Usage": "base"}

if TYPE_CHECKING:
    from memroute.strategies.base import (
        ChainJudgment,
        ChainSearch,
        CostProfile,
        RouteDecision,
        SplitPlan,
        Usage,
    )
    from memroute.strategies.budget import Budget, CallLimits
    from memroute.strategies.names import STRATEGIES, Route, Strategy


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"memroute.strategies.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'memroute.strategies' has no attribute {name!r}")
