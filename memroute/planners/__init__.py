"""The deciders behind the strategies: the `Planner` protocol, the LLM planner and the offline
planner. `make_planner` picks one from an LLM argument and the settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memroute.errors import InvalidInputError
from memroute.planners.base import Planner, PlannerResult

if TYPE_CHECKING:
    from memroute.planners.cascade import CascadePlanner
    from memroute.planners.llm.planner import LLMPlanner
    from memroute.planners.offline.planner import OfflinePlanner
    from memroute.settings import MemrouteSettings

__all__ = ["CascadePlanner", "LLMPlanner", "OfflinePlanner", "Planner", "PlannerResult",
           "make_planner"]

_LAZY = {"CascadePlanner": "memroute.planners.cascade",
         "LLMPlanner": "memroute.planners.llm.planner",
         "OfflinePlanner": "memroute.planners.offline.planner"}


def make_planner(llm: Any = None, *, settings: MemrouteSettings, kind: str | None = None,
                 **llm_options: Any) -> Planner:
    """The planner of ``kind`` (default ``settings.planner``, ``MEMROUTE_PLANNER``):
    ``"auto"``: an `LLMPlanner` for ``llm`` (or for ``MEMROUTE_LLM_*`` when a model is
    configured), else the offline planner; ``"offline"``; ``"llm"`` (a model is required);
    ``"cascade"``: offline first, the LLM below ``settings.cascade_threshold``.

    Raises:
        InvalidInputError: an unknown kind, or ``llm``/``cascade`` without a model.
    """
    kind = kind or settings.planner
    if kind not in ("auto", "offline", "llm", "cascade"):
        raise InvalidInputError(f"unknown planner {kind!r}: use auto, offline, llm or cascade")
    from memroute.planners.offline.planner import OfflinePlanner

    if kind == "offline":
        return OfflinePlanner()
    if llm is None and settings.llm_model:
        from memroute.planners.llm.backends import openai_client_from_settings

        llm = openai_client_from_settings(settings)
    if llm is None:
        if kind != "auto":
            raise InvalidInputError(f"the {kind} planner needs a model: pass llm= or set "
                                    "MEMROUTE_LLM_MODEL")
        return OfflinePlanner()
    from memroute.planners.llm.planner import LLMPlanner

    model_planner = LLMPlanner(llm, settings=settings, **llm_options)
    if kind == "cascade":
        from memroute.planners.cascade import CascadePlanner

        return CascadePlanner(OfflinePlanner(), model_planner, settings.cascade_threshold)
    return model_planner


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memroute.planners' has no attribute {name!r}")
