"""Per-request budgets, and what one planner step may still spend of them.

``Budget`` fields left ``None`` are unlimited. LLM calls and tokens are hard ceilings: every
step checks before it spends, a call is refused when its estimated prompt (tiktoken, plus a
safety margin) would not fit, and the model's ``max_tokens`` is set to what is left of the
output budget. ``max_latency_s`` bounds the planning steps (an LLM call past the deadline is
cancelled); the first memory search and the final rerank always run, so a request always
returns evidence.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, fields
from typing import Annotated, Any

from pydantic import Field, with_config

from memroute.errors import InvalidInputError
from memroute.strategies.base import CostProfile, Usage

# An estimate is inflated by this much before it is checked against an input-token ceiling,
# since the model's tokenizer and chat template may count a little more than o200k_base.
INPUT_MARGIN_RATIO = 1.10
INPUT_MARGIN_TOKENS = 16


def with_margin(estimated_input_tokens: int) -> int:
    """An estimated prompt size, padded for the model's own tokenizer and template."""
    return math.ceil(estimated_input_tokens * INPUT_MARGIN_RATIO) + INPUT_MARGIN_TOKENS


def _finite(value: int | float) -> bool:
    """Whether ``value`` is a finite number a float can hold (NaN, ±inf and an integer past
    float's range are not: a deadline cannot be computed from them)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


# The bounds of a budget's fields, as the JSON schemas of the REST and MCP faces state them
# (`Budget.__post_init__` enforces the same for every caller).
Count = Annotated[int | None, Field(ge=0, strict=True)]
Seconds = Annotated[float | None, Field(ge=0, allow_inf_nan=False, strict=True)]


@with_config(extra="forbid")
@dataclass(frozen=True)
class Budget:
    """What one request may spend. ``None`` means unlimited."""

    max_llm_calls: Count = None
    max_input_tokens: Count = None
    max_output_tokens: Count = None
    max_latency_s: Seconds = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            integral = f.name != "max_latency_s"
            bad = (isinstance(value, bool) or not isinstance(value, (int, float))
                   or (integral and not isinstance(value, int))
                   or (not integral and not _finite(value)) or value < 0)
            if bad:
                kind = "a non-negative integer" if integral else "a finite non-negative number"
                raise InvalidInputError(
                    f"Budget.{f.name} must be {kind} or None, got {value!r:.40}")

    @classmethod
    def coerce(cls, value: Budget | dict[str, Any] | None) -> Budget | None:
        """A `Budget` from a budget, a mapping of its fields, or ``None``."""
        if value is None or isinstance(value, Budget):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {f.name for f in fields(cls)}
            if unknown:
                raise InvalidInputError(f"unknown budget fields: {sorted(unknown)}")
            return cls(**value)
        raise InvalidInputError(f"budget must be a Budget or a dict, not {type(value).__name__}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _left(limit: float | None, used: float) -> float | None:
    return None if limit is None else max(0, limit - used)


@dataclass(frozen=True)
class CallLimits:
    """What one planner step may still spend; ``None`` is unlimited.

    ``deadline`` is a ``time.time()`` instant. ``prior_attempts`` counts the requests
    earlier attempts of the same step sent (at least one per attempt; the step was retried
    after a transient error or a timeout): each is charged one call and the prompt's
    estimated input tokens, since a timed-out request may have been billed.
    """

    llm_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    deadline: float | None = None
    prior_attempts: int = 0

    @classmethod
    def remaining(cls, budget: Budget | None, spent: Usage, started_at: float,
                  prior_attempts: int = 0) -> CallLimits:
        """What is left of ``budget`` after ``spent`` (a request's LLM usage so far)."""
        if budget is None:
            return cls(prior_attempts=prior_attempts)
        return cls(
            llm_calls=_left(budget.max_llm_calls, spent.llm_calls),
            input_tokens=_left(budget.max_input_tokens, spent.input_tokens),
            output_tokens=_left(budget.max_output_tokens, spent.output_tokens),
            deadline=None if budget.max_latency_s is None else started_at + budget.max_latency_s,
            prior_attempts=prior_attempts,
        )

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.time()

    def shortfall(self, *, calls: int = 1, input_tokens: int = 0,
                  min_output_tokens: int = 1) -> str | None:
        """The first resource that cannot cover a step, or ``None`` when it fits."""
        if self.llm_calls is not None and calls > self.llm_calls:
            return f"llm_calls ({self.llm_calls} left)"
        if self.input_tokens is not None and input_tokens > self.input_tokens:
            return f"input_tokens (~{input_tokens} needed, {self.input_tokens} left)"
        if self.output_tokens is not None and min_output_tokens > self.output_tokens:
            return f"output_tokens ({self.output_tokens} left)"
        left = self.seconds_left()
        if left is not None and left <= 0:
            return "latency"
        return None


def profile_shortfall(profile: CostProfile, limits: CallLimits) -> str | None:
    """Why a strategy's measured cost does not fit what is left, or ``None`` when it fits."""
    if limits.llm_calls is not None and profile.llm_calls > limits.llm_calls:
        return f"llm_calls ({profile.llm_calls} needed, {limits.llm_calls} left)"
    # Prompts are most of a step's tokens; output ceilings are enforced per call (max_tokens).
    if limits.input_tokens is not None and profile.token_cost > limits.input_tokens:
        return f"input_tokens (~{profile.token_cost:.0f} needed, {limits.input_tokens} left)"
    left = limits.seconds_left()
    if left is not None and profile.time_cost > left:
        return f"latency (~{profile.time_cost:.2f}s needed, {left:.2f}s left)"
    return None


@dataclass
class RequestTally:
    """The requests one planner step sent to a model, over all its attempts. It lives
    outside the attempt, so a request cut off when the graph cancels the attempt (its node
    timeout) is still charged."""

    sent: int = 0


_TALLY: ContextVar[RequestTally | None] = ContextVar("memroute_request_tally", default=None)


def tally_request() -> None:
    """Count one request sent, in the tally of the planner step running (if any)."""
    tally = _TALLY.get()
    if tally is not None:
        tally.sent += 1


@contextmanager
def tallying(tally: RequestTally) -> Iterator[RequestTally]:
    """Requests sent inside this block count in ``tally``."""
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)
