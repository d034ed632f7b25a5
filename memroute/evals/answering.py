"""Answer accuracy (only with an LLM): answer from the returned episodes, then judge it.

The answer model sees the question and the k returned episodes, numbered, and must answer
from them. EM and token F1 use SQuAD normalization (`memroute.evals.metrics`); the judge
label follows MemMachine's judge (adapted from Mem0's): CORRECT/WRONG, lenient on format.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memroute.planners.llm.backends import make_backend
from memroute.planners.llm.structured import ChatBackend, complete_text
from memroute.prompts import Prompt, load_prompt
from memroute.settings import MemrouteSettings
from memroute.strategies.base import Usage

PROMPTS = "memroute.evals.prompts"


def eval_prompt(name: str) -> Prompt:
    """``memroute/evals/prompts/<name>.md``, through the library's prompt loader."""
    return load_prompt(name, package=PROMPTS)


def prompt_hashes() -> dict[str, str]:
    return {f"evals/{n}": eval_prompt(n).sha256 for n in ("answer", "judge")}


def answer_backend(llm: Any, settings: MemrouteSettings) -> ChatBackend:
    """The library's backend for ``llm`` (an ``AsyncOpenAI`` client, a LangChain chat model
    or a `ChatBackend`); an OpenAI client keeps ``MEMROUTE_LLM_MAX_RETRIES`` retries, since
    no graph retries the answer and judge calls."""
    return make_backend(llm, settings.llm_model, settings=settings,
                        max_retries=settings.llm_max_retries)


def format_memories(texts: list[str]) -> str:
    return "\n".join(f"[{i}] {t}" for i, t in enumerate(texts, 1)) or "(no memories)"


async def answer_question(chat: ChatBackend, question: str, memories: list[str]
                          ) -> tuple[str, Usage]:
    messages = eval_prompt("answer").render(question=question,
                                            memories=format_memories(memories))
    text, usage = await complete_text(chat, messages)
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


async def judge_answer(chat: ChatBackend, question: str, gold: str, answer: str,
                       attempts: int = 2) -> tuple[bool | None, Usage]:
    """The judge's label (``None`` when every attempt was unreadable) and what it cost."""
    messages = eval_prompt("judge").render(question=question, gold=gold, answer=answer)
    total = Usage()
    for _ in range(attempts):
        text, usage = await complete_text(chat, messages)
        total = total + usage
        label = parse_label(text)
        if label is not None:
            return label, total
    return None, total
