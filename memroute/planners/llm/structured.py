"""The one layer every LLM call goes through: prompt in, validated pydantic object out.

`StructuredLLM.call` sends chat messages to a `ChatBackend` (an OpenAI-compatible endpoint
or a LangChain chat model, see `memroute.planners.llm.backends`), validates the reply
against a pydantic schema, re-prompts once to repair an invalid reply, and returns the
value with its `Usage` and raw text, or a typed `LLMFailure`. A backend sends at most one
HTTP request per `ChatBackend.complete`, and the remaining budget is checked before every
one, so every request is charged: format downgrades (`FormatRejected`), repairs, and a
request the deadline cut off. An error on a call's first request is raised (transient ones
are retried by the graph, which charges each attempt one call); an error after earlier
requests ends the call as ``request_failed`` carrying all of them, since an exception would
lose their charge. `is_transient` tells transient errors apart.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, Literal, Protocol, TypeVar

from memroute._log import get_logger
from pydantic import BaseModel, ValidationError

from memroute.prompts import load_prompt
from memroute.strategies.base import Usage
from memroute.planners.base import PlannerResult
from memroute.strategies.budget import CallLimits, tally_request, with_margin
from memroute.planners.llm.tokens import count_messages, count_tokens

log = get_logger(__name__)

T = TypeVar("T", bound=BaseModel)
Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}

# The call's own deadline fires this much before the graph step's (same instant otherwise),
# so a request cut off by the latency budget ends here, charged, not in the step's timeout.
_DEADLINE_MARGIN_S = 0.02
MAX_RAW_CHARS = 4000  # of an invalid reply quoted back in the repair prompt
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def json_schema_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The ``json_schema`` response format asking for ``schema`` (OpenAI's form)."""
    return {"type": "json_schema", "json_schema": {
        "name": schema.__name__, "schema": schema.model_json_schema(), "strict": False}}


@lru_cache(maxsize=64)
def format_tokens(schema: type[BaseModel]) -> int:
    """Estimated input tokens of the response format a structured call sends beside its
    messages: the JSON of its `json_schema_format` (the largest form a backend sends)."""
    return count_tokens(json.dumps(json_schema_format(schema)["json_schema"]))


def request_tokens(messages: list[Message], schema: type[BaseModel] | None,
                   backend: ChatBackend | None = None) -> int:
    """Estimated input tokens of one request: its messages and, asking for ``schema``, the
    response format ``backend`` sends (its ``response_format_tokens``, if it has one; else
    the `json_schema_format`'s)."""
    if schema is None:
        return count_messages(messages)
    sent = getattr(backend, "response_format_tokens", None)
    return count_messages(messages) + (sent(schema) if sent is not None
                                       else format_tokens(schema))


@dataclass
class Completion:
    """One model reply: its text, the parsed object if the backend parsed one, its usage."""

    text: str
    data: Any = None
    input_tokens: int | None = None
    output_tokens: int | None = None


class ChatBackend(Protocol):
    """A chat model that can be asked for JSON matching a schema, or (``schema=None``) for
    plain text."""

    model: str
    can_cap_output: bool  # whether max_tokens reaches the model

    async def complete(self, messages: list[Message], schema: type[BaseModel] | None,
                       max_tokens: int | None) -> Completion: ...


class FormatRejected(Exception):
    """The server refused a request for its output format; the backend asks another way
    next time. The request is charged; `StructuredLLM` asks again within the budget."""

    def __init__(self, kind: str, status: int) -> None:
        super().__init__(f"the server refused response_format {kind!r} (HTTP {status})")
        self.kind, self.status = kind, status


@dataclass(frozen=True)
class LLMFailure:
    """Why a call produced no value: the budget stopped it, the model's output was unusable,
    or a request failed after earlier requests of the same call."""

    kind: Literal["budget_exhausted", "invalid_output", "request_failed"]
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass
class LLMResult(Generic[T]):
    value: T | None
    usage: Usage = field(default_factory=Usage)
    raw: list[str] = field(default_factory=list)
    failure: LLMFailure | None = None

    def to_planner(self, value: Any = None) -> PlannerResult:
        """A `PlannerResult` carrying ``value`` (the validated decision) or the failure."""
        return PlannerResult(value if self.failure is None else None, self.usage, self.raw,
                             None if self.failure is None else str(self.failure))


def extract_json(text: str) -> Any:
    """The first JSON object in ``text`` (code fences and surrounding prose are ignored)."""
    cleaned = _FENCE.sub("", text.strip())
    start = cleaned.find("{")
    if start < 0:
        raise ValueError("no JSON object in the reply")
    value, _ = json.JSONDecoder().raw_decode(cleaned[start:])
    return value


def _problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}"
                         for e in exc.errors()[:4])
    return str(exc)[:300]


def is_transient(exc: BaseException) -> bool:
    """Rate limits, 5xx, timeouts and dropped connections: worth retrying."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a dependency
        openai = None
    if openai is not None and isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError,
                                               openai.RateLimitError, openai.InternalServerError)):
        return True
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int) and (status in (408, 409, 429) or status >= 500):
        return True
    import httpx

    return isinstance(exc, httpx.TransportError)


class StructuredLLM:
    """Calls one backend for schema-validated objects, within call limits."""

    def __init__(self, backend: ChatBackend, *, repair: bool = True) -> None:
        self.backend = backend
        self.repair = repair

    @property
    def model(self) -> str:
        return self.backend.model

    async def call(self, messages: list[Message], schema: type[T], *, limits: CallLimits,
                   max_tokens: int, min_output_tokens: int = 1) -> LLMResult[T]:
        """Ask for ``schema``; one repair re-prompt if the reply is invalid.

        Earlier attempts of the same step (``limits.prior_attempts``) are charged a call and
        the prompt's estimated input tokens each. Raises only transient or unexpected errors.
        """
        estimate = request_tokens(messages, schema, self.backend)
        prior = limits.prior_attempts
        usage = Usage(llm_calls=prior, input_tokens=prior * estimate, estimated=prior > 0)
        raw: list[str] = []
        attempt_messages = messages
        sent = 0  # requests of this call
        attempt = 0
        while attempt < (2 if self.repair else 1):
            if attempt:
                estimate = request_tokens(attempt_messages, schema, self.backend)
            short = self._shortfall(limits, usage, estimate, min_output_tokens)
            if short:
                what = "repair re-prompt skipped, " if attempt else ""
                return LLMResult(None, usage, raw, LLMFailure("budget_exhausted", what + short))
            cap = max_tokens if limits.output_tokens is None else min(
                max_tokens, limits.output_tokens - usage.output_tokens)
            started = time.perf_counter()
            sent += 1
            tally_request()  # charged even if the graph cancels this attempt mid-request
            try:
                completion = await self._complete(attempt_messages, schema, cap, limits)
            except _DeadlinePassed:
                usage = usage + _unanswered(estimate, started)
                failure = LLMFailure("budget_exhausted",
                                     "latency (deadline passed during the call)")
                return LLMResult(None, usage, raw, failure)
            except FormatRejected:
                usage = usage + _unanswered(estimate, started)
                continue  # the same attempt, asked the backend's next way
            except Exception as exc:
                if sent == 1:
                    raise
                usage = usage + _unanswered(estimate, started)
                detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
                return LLMResult(None, usage, raw, LLMFailure("request_failed", detail))
            usage = usage + completion_usage(completion, estimate, time.perf_counter() - started)
            raw.append(completion.text)
            try:
                data = (completion.data if completion.data is not None
                        else extract_json(completion.text))
                return LLMResult(schema.model_validate(data), usage, raw)
            except (ValueError, ValidationError) as exc:
                problem = _problem(exc)
            log.info("llm.invalid_output", model=self.model, schema=schema.__name__,
                     attempt=attempt, problem=problem)
            attempt_messages = messages + load_prompt("repair").render(
                reply=completion.text[:MAX_RAW_CHARS].replace("</reply>", ""), error=problem)
            attempt += 1
        return LLMResult(None, usage, raw, LLMFailure("invalid_output", problem))

    def _shortfall(self, limits: CallLimits, usage: Usage, estimate: int,
                   min_output_tokens: int) -> str | None:
        short = limits.shortfall(calls=usage.llm_calls + 1,
                                 input_tokens=usage.input_tokens + with_margin(estimate),
                                 min_output_tokens=usage.output_tokens + min_output_tokens)
        if short is None and limits.output_tokens is not None and not self.backend.can_cap_output:
            return f"output_tokens (model {self.model!r} takes no max_tokens, so the ceiling " \
                   "cannot be enforced)"
        return short

    async def _complete(self, messages: list[Message], schema: type[BaseModel], cap: int,
                        limits: CallLimits) -> Completion:
        left = limits.seconds_left()
        if left is None:
            return await self.backend.complete(messages, schema, cap)
        try:
            async with asyncio.timeout(max(left - _DEADLINE_MARGIN_S, 0.0)) as deadline:
                return await self.backend.complete(messages, schema, cap)
        except TimeoutError:
            if deadline.expired():
                raise _DeadlinePassed from None
            raise


def _unanswered(input_estimate: int, started: float) -> Usage:
    """A request that brought no usable reply: one call, its prompt's padded estimate."""
    return Usage(1, with_margin(input_estimate), 0, (time.perf_counter() - started) * 1000, True)


def completion_usage(completion: Completion, input_estimate: int, seconds: float) -> Usage:
    """One call's `Usage`: the backend's token counts, else estimates (marked as such)."""
    estimated = completion.input_tokens is None or completion.output_tokens is None
    return Usage(
        llm_calls=1,
        input_tokens=(input_estimate if completion.input_tokens is None
                      else completion.input_tokens),
        output_tokens=(count_tokens(completion.text) if completion.output_tokens is None
                       else completion.output_tokens),
        wall_ms=seconds * 1000,
        estimated=estimated,
    )


async def complete_text(backend: ChatBackend, messages: list[Message],
                        max_tokens: int | None = None) -> tuple[str, Usage]:
    """A plain-text reply (no schema, no repair, no budget) and what it cost."""
    started = time.perf_counter()
    completion = await backend.complete(messages, None, max_tokens)
    return completion.text, completion_usage(completion, request_tokens(messages, None),
                                             time.perf_counter() - started)


class _DeadlinePassed(Exception):
    """The request's latency budget ran out while a call was in flight."""
