"""The deciders behind the strategies: the `Planner` protocol, the LLM planner and the offline
planner. `make_planner` picks one from an LLM argument and the settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memroute.planners.base import Planner, PlannerResult

if TYPE_CHECKING:
    from memroute.planners.llm.planner import LLMPlanner
    from memroute.planners.offline.planner import OfflinePlanner
    from memroute.settings import MemrouteSettings

__all__ = ["LLMPlanner", "OfflinePlanner", "Planner", "PlannerResult", "make_planner"]

_LAZY = {"LLMPlanner": "memroute.planners.llm.planner",
         "OfflinePlanner": "memroute.planners.offline.planner"}


def make_planner(llm: Any = None, *, settings: MemrouteSettings, **llm_options: Any) -> Planner:
    """An `LLMPlanner` for ``llm`` (or for ``MEMROUTE_LLM_*`` when a model is configured),
    else the offline planner."""
    if llm is None and settings.llm_model:
        from memroute.planners.llm.backends import openai_client_from_settings

        llm = openai_client_from_settings(settings)
    if llm is not None:
        from memroute.planners.llm.planner import LLMPlanner

        return LLMPlanner(llm, settings=settings, **llm_options)
    from memroute.planners.offline.planner import OfflinePlanner

    return OfflinePlanner()


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memroute.planners' has no attribute {name!r}")
