"""Chat backends for `StructuredLLM`: an OpenAI-compatible endpoint or a LangChain chat model."""

from __future__ import annotations

import json
from typing import Any

from memroute._log import get_logger
from pydantic import BaseModel

from memroute.errors import InvalidInputError
from memroute.settings import MemrouteSettings
from memroute.planners.llm.structured import (
    ChatBackend,
    Completion,
    FormatRejected,
    Message,
    format_tokens,
    json_schema_format,
)
from memroute.planners.llm.tokens import count_tokens

log = get_logger(__name__)

# Ways of asking an OpenAI-compatible server for JSON, most to least constrained. Servers
# differ: llama.cpp's rejects "json_schema" but takes a schema inside "json_object".
RESPONSE_FORMATS = ("json_schema", "json_object_schema", "json_object", "none")
_REJECTION_STATUS = (400, 404, 415, 422)
# What an error names when the server refuses the output format (llama-cpp-python answers
# with a 500 naming it). Any other error, a 400 "maximum context length" or a transient 5xx,
# says nothing about the format and changes nothing.
_FORMAT_WORDS = ("response_format", "response format", "json_schema", "json_object",
                 "structured output", "schema")


def _rejects_format(exc: Any) -> bool:
    """Whether an API error is the server refusing the requested output format: a 4xx or
    5xx whose message names the format."""
    if exc.status_code not in _REJECTION_STATUS and exc.status_code < 500:
        return False
    return any(w in str(exc).lower() for w in _FORMAT_WORDS)


def _merge_system(messages: list[Message]) -> list[Message]:
    """System text folded into the first user message (for chat templates that drop it)."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest:
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    return rest


class OpenAIChat:
    """An ``openai.AsyncOpenAI`` client (any OpenAI-compatible endpoint) and a model name.

    The client's own retries are off by default: the graph's retry policy owns retrying.
    Every `complete` sends exactly one HTTP request, so `StructuredLLM` charges each one.
    ``response_format`` is the first of `RESPONSE_FORMATS` the server accepts: until one
    is accepted, a request the server refuses for its format (a 4xx or 5xx whose message
    names the format) raises `FormatRejected` and the next call asks the next way; the
    downgrade is remembered for this model; any other error (a 400 "maximum context
    length", a 5xx, a timeout) changes nothing. A plain-text call
    (``schema=None``) sends none.
    """

    can_cap_output = True

    def __init__(self, client: Any, model: str, *, response_format: str = "auto",
                 merge_system: bool = False, max_tokens_param: str = "max_tokens",
                 timeout_s: float | None = None, max_retries: int = 0) -> None:
        if response_format != "auto" and response_format not in RESPONSE_FORMATS:
            raise InvalidInputError(f"response_format must be auto or one of {RESPONSE_FORMATS}")
        options: dict[str, Any] = {"max_retries": max_retries}
        if timeout_s is not None:
            options["timeout"] = timeout_s
        self.client = client.with_options(**options)
        self.model = model
        self.merge_system = merge_system
        self.max_tokens_param = max_tokens_param
        self._formats = RESPONSE_FORMATS if response_format == "auto" else (response_format,)
        self._confirmed = response_format != "auto"

    def response_format_tokens(self, schema: type[BaseModel]) -> int:
        """Estimated input tokens of the schema the next request sends in its response
        format (none for ``json_object`` and ``none``)."""
        body = self._format(self._formats[0], schema)
        sent = body and (body.get("json_schema") or body.get("schema"))
        return count_tokens(json.dumps(sent)) if sent else 0

    @staticmethod
    def _format(kind: str, schema: type[BaseModel]) -> dict[str, Any] | None:
        if kind == "json_schema":
            return json_schema_format(schema)
        if kind == "json_object_schema":
            return {"type": "json_object", "schema": schema.model_json_schema()}
        if kind == "json_object":
            return {"type": "json_object"}
        return None

    async def complete(self, messages: list[Message], schema: type[BaseModel] | None,
                       max_tokens: int | None) -> Completion:
        import openai

        kwargs: dict[str, Any] = {
            "model": self.model, "temperature": 0,
            "messages": _merge_system(messages) if self.merge_system else messages,
        }
        if max_tokens is not None:
            kwargs[self.max_tokens_param] = max_tokens
        if schema is None:
            return _completion(await self.client.chat.completions.create(**kwargs))
        kind = self._formats[0]
        response_format = self._format(kind, schema)
        extra = {"response_format": response_format} if response_format else {}
        try:
            response = await self.client.chat.completions.create(**kwargs, **extra)
        except openai.APIStatusError as exc:
            if self._confirmed or len(self._formats) == 1 or not _rejects_format(exc):
                raise
            if self._formats[0] == kind:  # a concurrent call may have moved on already
                self._formats = self._formats[1:]
            log.info("llm.response_format_rejected", model=self.model, format=kind,
                     status=exc.status_code, next=self._formats[0])
            raise FormatRejected(kind, exc.status_code) from exc
        if self._formats[0] == kind:
            self._confirmed = True
        return _completion(response)


def _completion(response: Any) -> Completion:
    usage = response.usage
    text = (response.choices[0].message.content or "") if response.choices else ""
    return Completion(text, None, getattr(usage, "prompt_tokens", None),
                      getattr(usage, "completion_tokens", None))


_MAX_TOKEN_FIELDS = ("max_tokens", "max_output_tokens", "num_predict", "max_new_tokens")


class LangChainChat:
    """Any LangChain ``BaseChatModel``.

    Uses the model's ``with_structured_output`` when it has one (tool calling or native JSON
    schema), else plain text parsed as JSON; ``schema=None`` asks for plain text.
    ``max_tokens`` reaches the model through its own output-length field, when it has one
    of `_MAX_TOKEN_FIELDS`.
    """

    def __init__(self, model: Any) -> None:
        self.chat_model = model
        self.model = str(getattr(model, "model_name", None) or getattr(model, "model", None)
                         or type(model).__name__)
        fields = getattr(type(model), "model_fields", {})
        self._cap_field = next((f for f in _MAX_TOKEN_FIELDS if f in fields), None)
        self.can_cap_output = self._cap_field is not None
        self._structured = _has_structured_output(model)

    def response_format_tokens(self, schema: type[BaseModel]) -> int:
        """Estimated input tokens of the schema ``with_structured_output`` sends (none when
        the model has no structured output: the prompt alone asks for JSON)."""
        return format_tokens(schema) if self._structured else 0

    def _capped(self, max_tokens: int | None) -> Any:
        if max_tokens is None or self._cap_field is None:
            return self.chat_model
        return self.chat_model.model_copy(update={self._cap_field: max_tokens})

    async def complete(self, messages: list[Message], schema: type[BaseModel] | None,
                       max_tokens: int | None) -> Completion:
        from langchain_core.messages import AIMessage, convert_to_messages

        chat = self._capped(max_tokens)
        lc_messages = convert_to_messages([(m["role"], m["content"]) for m in messages])
        structured = self._structured and schema is not None
        if structured:
            try:
                runnable = chat.with_structured_output(schema, include_raw=True)
            except NotImplementedError:
                self._structured = structured = False
        if structured:
            out = await runnable.ainvoke(lc_messages)
            reply, parsed = out["raw"], out.get("parsed")
        else:
            reply, parsed = await chat.ainvoke(lc_messages), None
        if not isinstance(reply, AIMessage):
            return Completion(str(reply))
        data = parsed.model_dump() if isinstance(parsed, BaseModel) else parsed
        usage = reply.usage_metadata or {}
        return Completion(_reply_text(reply), data, usage.get("input_tokens"),
                          usage.get("output_tokens"))


def _reply_text(reply: Any) -> str:
    """What the model said: its tool-call arguments, else its text."""
    if reply.tool_calls:
        return json.dumps(reply.tool_calls[0].get("args", {}))
    if reply.invalid_tool_calls:
        return str(reply.invalid_tool_calls[0].get("args") or "")
    return reply.text if isinstance(reply.text, str) else str(reply.content)


def make_backend(llm: Any, model: str | None = None, *,
                 settings: MemrouteSettings | None = None, **openai_options: Any) -> ChatBackend:
    """A backend for an ``AsyncOpenAI`` client (with ``model``), a LangChain chat model, or
    an object that already is a `ChatBackend`."""
    if hasattr(llm, "complete") and hasattr(llm, "can_cap_output"):
        return llm
    try:
        from langchain_core.language_models import BaseChatModel
    except ImportError:  # pragma: no cover
        BaseChatModel = ()  # type: ignore[assignment]
    if isinstance(llm, BaseChatModel):
        return LangChainChat(llm)
    if hasattr(llm, "chat") and hasattr(llm, "with_options"):
        name = model or (settings.llm_model if settings else None)
        if not name:
            raise InvalidInputError("an AsyncOpenAI client needs a model name: pass model= or "
                                    "set MEMROUTE_LLM_MODEL")
        if settings is not None:
            openai_options.setdefault("timeout_s", settings.llm_timeout_s)
        return OpenAIChat(llm, name, **openai_options)
    raise InvalidInputError(
        f"llm must be an openai.AsyncOpenAI, a LangChain BaseChatModel or a ChatBackend, "
        f"not {type(llm).__name__}")


def openai_client_from_settings(settings: MemrouteSettings) -> Any:
    """An ``AsyncOpenAI`` for ``MEMROUTE_LLM_BASE_URL`` / ``MEMROUTE_LLM_API_KEY``."""
    from openai import AsyncOpenAI

    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
    return AsyncOpenAI(base_url=settings.llm_base_url, api_key=key, max_retries=0,
                       timeout=settings.llm_timeout_s)


def _has_structured_output(model: Any) -> bool:
    """Whether a LangChain chat model can send a schema: `BaseChatModel`'s own
    ``with_structured_output`` needs ``bind_tools``, which the base class does not have."""
    try:
        from langchain_core.language_models import BaseChatModel
    except ImportError:
        return True
    kind = type(model)
    return not (isinstance(model, BaseChatModel)
                and kind.with_structured_output is BaseChatModel.with_structured_output
                and kind.bind_tools is BaseChatModel.bind_tools)
