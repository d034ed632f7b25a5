"""Answer accuracy (only with an LLM): answer from the returned episodes, then judge it.

The answer model sees the question and the k returned episodes, numbered, and must answer
from them. EM and token F1 use SQuAD normalization (`memroute.evals.metrics`); the judge
label follows MemMachine's judge (adapted from Mem0's): CORRECT/WRONG, lenient on format.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
import time
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from typing import Any, Protocol

from memroute.strategies.base import Usage


@dataclass(frozen=True)
class EvalPrompt:
    name: str
    sha256: str
    system: str
    user: str

    def render(self, **values: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": string.Template(self.system).substitute(values)},
                {"role": "user", "content": string.Template(self.user).substitute(values)}]


@lru_cache(maxsize=None)
def load_eval_prompt(name: str) -> EvalPrompt:
    """``memroute/evals/prompts/<name>.md``: a ``## system`` and a ``## user`` section."""
    raw = files("memroute.evals").joinpath("prompts", f"{name}.md").read_bytes()
    text = raw.decode("utf-8")
    head, _, user = text.partition("## user\n")
    _, _, system = head.partition("## system\n")
    return EvalPrompt(name, hashlib.sha256(raw).hexdigest(), system.strip(), user.strip())


def prompt_hashes() -> dict[str, str]:
    return {f"evals/{n}": load_eval_prompt(n).sha256 for n in ("answer", "judge")}


class ChatModel(Protocol):
    """Plain chat completion: messages in, text and usage out."""

    name: str

    async def complete(self, messages: list[dict[str, str]]) -> tuple[str, Usage]: ...


def _estimate(messages: list[dict[str, str]], text: str, usage: Usage) -> Usage:
    from memroute.planners.llm.tokens import count_messages, count_tokens

    return Usage(1, count_messages(messages), count_tokens(text), usage.wall_ms, estimated=True)


class LangChainChat:
    """Any LangChain ``BaseChatModel``; tokens from ``usage_metadata`` or tiktoken."""

    def __init__(self, model: Any, name: str | None = None) -> None:
        self.model = model
        self.name = name or getattr(model, "model_name", None) or getattr(model, "model", None) \
            or type(model).__name__

    async def complete(self, messages: list[dict[str, str]]) -> tuple[str, Usage]:
        from langchain_core.messages import HumanMessage, SystemMessage

        lc = [SystemMessage(m["content"]) if m["role"] == "system" else HumanMessage(m["content"])
              for m in messages]
        start = time.perf_counter()
        reply = await self.model.ainvoke(lc)
        text = reply.content if isinstance(reply.content, str) else str(reply.content)
        usage = Usage(1, wall_ms=(time.perf_counter() - start) * 1000)
        meta = getattr(reply, "usage_metadata", None) or {}
        if meta.get("input_tokens") or meta.get("output_tokens"):
            return text, Usage(1, int(meta.get("input_tokens", 0)),
                               int(meta.get("output_tokens", 0)), usage.wall_ms)
        return text, _estimate(messages, text, usage)


class OpenAIChat:
    """An ``openai.AsyncOpenAI`` client against any OpenAI-compatible endpoint."""

    def __init__(self, client: Any, model: str) -> None:
        self.client = client
        self.name = model

    async def complete(self, messages: list[dict[str, str]]) -> tuple[str, Usage]:
        start = time.perf_counter()
        reply = await self.client.chat.completions.create(model=self.name, messages=messages)
        text = reply.choices[0].message.content or ""
        usage = Usage(1, wall_ms=(time.perf_counter() - start) * 1000)
        if reply.usage is not None:
            return text, Usage(1, reply.usage.prompt_tokens or 0,
                               reply.usage.completion_tokens or 0, usage.wall_ms)
        return text, _estimate(messages, text, usage)


def as_chat_model(llm: Any, model: str | None = None) -> ChatModel:
    """Wrap a LangChain chat model or an ``AsyncOpenAI`` client (which needs ``model``)."""
    if hasattr(llm, "complete") and hasattr(llm, "name"):
        return llm
    if hasattr(llm, "chat") and hasattr(llm.chat, "completions"):
        if not model:
            raise ValueError("an OpenAI client needs a model name (MEMROUTE_LLM_MODEL)")
        return OpenAIChat(llm, model)
    if hasattr(llm, "ainvoke"):
        return LangChainChat(llm, model)
    raise TypeError(f"cannot use {type(llm).__name__} as a chat model")


def format_memories(texts: list[str]) -> str:
    return "\n".join(f"[{i}] {t}" for i, t in enumerate(texts, 1)) or "(no memories)"


async def answer_question(chat: ChatModel, question: str, memories: list[str]
                          ) -> tuple[str, Usage]:
    messages = load_eval_prompt("answer").render(question=question,
                                                 memories=format_memories(memories))
    text, usage = await chat.complete(messages)
    return text.strip().splitlines()[0].strip() if text.strip() else "", usage


_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


def parse_label(text: str) -> bool | None:
    """True for CORRECT, False for WRONG, None when the reply names neither (or both)."""
    match = re.search(r"\{.*\}", text, re.S)
    if match:
        try:
            label = str(json.loads(match.group(0)).get("label", "")).strip().upper()
            if label in ("CORRECT", "WRONG"):
                return label == "CORRECT"
        except (json.JSONDecodeError, AttributeError):
            pass
    labels = set(_LABEL.findall(text.upper()))
    return (labels == {"CORRECT"}) if len(labels) == 1 else None


async def judge_answer(chat: ChatModel, question: str, gold: str, answer: str,
                       attempts: int = 2) -> tuple[bool | None, Usage]:
    """The judge's label (``None`` when every attempt was unreadable) and what it cost."""
    messages = load_eval_prompt("judge").render(question=question, gold=gold, answer=answer)
    total = Usage()
    for _ in range(attempts):
        text, usage = await chat.complete(messages)
        total = total + usage
        label = parse_label(text)
        if label is not None:
            return label, total
    return None, total
