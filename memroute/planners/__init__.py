"""The deciders behind the strategies: the `Planner` protocol, the LLM planner, the offline
planner and the cascade of both. `make_planner` picks one from an LLM argument and the
settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memroute.errors import InvalidInputError
from memroute.planners.base import Planner, PlannerResult

if TYPE_CHECKING:
    from memroute.planners.cascade import CascadePlanner
    from memroute.planners.llm.planner import LLMPlanner
    from memroute.planners.offline.planner import OfflinePlanner
    from memroute.settings import MemrouteSettings

__all__ = ["PLANNER_CHOICES", "CascadePlanner", "LLMPlanner", "OfflinePlanner", "Planner",
           "PlannerResult", "make_planner"]

PLANNER_CHOICES = ("auto", "offline", "llm", "cascade")

_LAZY = {"CascadePlanner": "memroute.planners.cascade",
         "LLMPlanner": "memroute.planners.llm.planner",
         "OfflinePlanner": "memroute.planners.offline.planner"}


def make_planner(llm: Any = None, *, settings: MemrouteSettings, choice: str | None = None,
                 **llm_options: Any) -> Planner:
    """The planner for ``choice`` (default: ``settings.planner``, ``MEMROUTE_PLANNER``).

    ``offline``: the offline planner, never a model (an ``llm`` given too is an error).
    ``llm``: an `LLMPlanner` for ``llm`` or for ``MEMROUTE_LLM_*`` (an error without either).
    ``cascade``: the offline decision first, the model below ``settings.cascade_threshold``
    and for the judgment of the first ``settings.cascade_judge_hops`` chain hops (a model is
    required). ``auto``: ``llm`` if given, else the ``MEMROUTE_LLM_*`` model if
    set, else offline. The offline planner parses questions with spaCy when
    ``settings.offline_parse`` (``MEMROUTE_OFFLINE_PARSE``) is on.
    """
    from memroute.planners.offline.planner import OfflinePlanner

    choice = settings.planner if choice is None else choice
    if choice not in PLANNER_CHOICES:
        raise InvalidInputError(f"unknown planner {choice!r:.40}: use {', '.join(PLANNER_CHOICES)}")
    offline = OfflinePlanner(use_nlp=settings.offline_parse)
    if choice == "offline":
        if llm is not None or llm_options:
            raise InvalidInputError("planner='offline' uses no model: drop the llm arguments")
        return offline
    if choice in ("llm", "cascade") and llm is None and not settings.llm_model:
        raise InvalidInputError(f"planner={choice!r} needs a model: pass llm= or set "
                                "MEMROUTE_LLM_MODEL (and MEMROUTE_LLM_BASE_URL / _API_KEY)")
    if llm is None and settings.llm_model:
        from memroute.planners.llm.backends import openai_client_from_settings

        llm = openai_client_from_settings(settings)
    if llm is None:
        return offline
    from memroute.planners.llm.planner import LLMPlanner

    model_planner = LLMPlanner(llm, settings=settings, **llm_options)
    if choice == "cascade":
        from memroute.planners.cascade import CascadePlanner

        # the cascade needs the parse-based planner's confidences
        return CascadePlanner(OfflinePlanner(use_nlp=True), model_planner,
                              settings.cascade_threshold, settings.cascade_judge_hops)
    return model_planner


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memroute.planners' has no attribute {name!r}")
