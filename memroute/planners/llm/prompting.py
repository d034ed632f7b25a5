"""What the LLM planner sends: one `PromptSpec` per decision, and text made safe to quote.

Questions, evidence and earlier queries are placed between data tags in the prompt files
(``memroute/prompts``); `as_data` flattens them and strips any delimiter tag they carry, so
stored text cannot pose as instructions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

QUESTION_CHARS = 2000  # of the question shown to the model
EVIDENCE_CHARS = 300  # of one evidence item shown to the judge

_TAG = re.compile(r"</?\s*(evidence|question|previous_queries|reply)\b[^>]*>", re.IGNORECASE)


@dataclass(frozen=True)
class PromptSpec:
    """A decision's prompt file, the reply's ``max_tokens``, and the fewest output tokens a
    reply needs (a call is refused when the budget leaves fewer)."""

    name: str
    max_tokens: int
    min_output_tokens: int


ROUTE = PromptSpec("tool_select", max_tokens=96, min_output_tokens=24)
SPLIT = PromptSpec("split_query", max_tokens=320, min_output_tokens=48)
JUDGE = PromptSpec("chain_of_query", max_tokens=256, min_output_tokens=48)
PROMPTS = (ROUTE.name, SPLIT.name, JUDGE.name, "repair")  # every prompt file the planner sends


def as_data(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """Text made safe to place between data tags: one line, no delimiter tags, bounded."""
    flat = " / ".join(line.strip() for line in _TAG.sub(" ", text).splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def format_evidence(evidence: list[str]) -> str:
    return "\n".join(f"[{i}] {as_data(text)}" for i, text in enumerate(evidence)) or "(none)"


def format_queries(queries: list[str]) -> str:
    return "\n".join(f"- {as_data(q)}" for q in queries) or "(none)"
