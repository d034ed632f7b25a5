"""ToolSelect: one planner call picks the route (direct, split or chain) for a query.

The planner's pick is kept when its strategy's `CostProfile` fits the remaining budget;
otherwise the most accurate strategy that fits is taken (direct always fits). An invalid
or failed answer falls back to direct search, the cheapest safe route.
"""

from __future__ import annotations

from collections.abc import Mapping

from memroute.strategies.base import CostProfile, Route
from memroute.strategies.budget import CallLimits, profile_shortfall

# The router call's own cost, measured by the agent benchmark on 100 shared HotpotQA
# questions (o200k_base size of what is sent, the json_schema response format included:
# 477 in + 15 out; docs/evaluation.md).
COST_PROFILE = CostProfile(accuracy_score=0.0, token_cost=492.0, time_cost=0.0, llm_calls=1)


def _after(limits: CallLimits, profile: CostProfile) -> CallLimits:
    """What would be left after a step that costs ``profile``."""
    tokens = profile.token_cost

    def minus(left: int | None, amount: float) -> int | None:
        return None if left is None else max(0, int(left - amount))

    return CallLimits(minus(limits.llm_calls, profile.llm_calls),
                      minus(limits.input_tokens, tokens),
                      limits.output_tokens, limits.deadline, limits.prior_attempts)


def fitting_routes(profiles: Mapping[Route, CostProfile], limits: CallLimits) -> list[Route]:
    """Routes whose cost fits ``limits``, most accurate first."""
    fits = [r for r, p in profiles.items() if profile_shortfall(p, limits) is None]
    return sorted(fits, key=lambda r: -profiles[r].accuracy_score)


def router_skip_reason(profiles: Mapping[Route, CostProfile], router: CostProfile,
                       limits: CallLimits) -> str | None:
    """Why the router call should be skipped (no non-direct route would fit after it), or
    ``None`` when it is worth asking."""
    if profile_shortfall(router, limits) is not None:
        return f"router: {profile_shortfall(router, limits)}"
    after = _after(limits, router)
    if not [r for r in fitting_routes(profiles, after) if r != "direct"]:
        reasons = {r: profile_shortfall(p, after) for r, p in profiles.items() if r != "direct"}
        return "; ".join(f"{r}: {why}" for r, why in reasons.items())
    return None


def route_within_budget(proposed: Route, profiles: Mapping[Route, CostProfile],
                        limits: CallLimits) -> tuple[Route, str | None]:
    """The proposed route if it fits, else the most accurate fitting one, and why it changed."""
    profile = profiles.get(proposed)
    why = None if profile is None else profile_shortfall(profile, limits)
    if why is None:
        return proposed, None
    best = next(iter(fitting_routes(profiles, limits)), "direct")
    return best, f"{proposed} does not fit the budget ({why}); took {best}"
