"""What the LLM planner sends: one `PromptSpec` per decision, and text made safe to quote.

Questions, evidence and earlier queries are placed between data tags in the prompt files
(``memroute/prompts``); `as_data` normalises them (NFKC, no control or zero-width
characters), flattens them to one line and escapes angle and square brackets, so stored text
can neither close a data tag (``</evidence>``, ``＜/evidence＞``, ``<\u200b/evidence>``,
``</e vidence>``) nor imitate the ``[n]`` numbering of evidence lines.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

QUESTION_CHARS = 2000  # of the question shown to the model
EVIDENCE_CHARS = 300  # of one evidence item shown to the judge

# Brackets in data become look-alikes the prompt never uses: no tag, no "[n]" marker survives.
_ESCAPES = str.maketrans({"<": "‹", ">": "›", "[": "(", "]": ")"})
_INVISIBLE = frozenset(("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"))  # control, format (zero-width)...


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


def _visible(line: str) -> str:
    """``line`` NFKC-normalised, spaces for whitespace, without control, zero-width or
    unassigned characters."""
    normal = unicodedata.normalize("NFKC", line)
    return "".join(" " if c.isspace() else c for c in normal
                   if c.isspace() or unicodedata.category(c) not in _INVISIBLE)


def as_data(text: str, limit: int = EVIDENCE_CHARS) -> str:
    """Text made safe to place between data tags: normalised, one line, no brackets, bounded."""
    lines = (_visible(line).strip() for line in text.splitlines())
    flat = " / ".join(line for line in lines if line).translate(_ESCAPES)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def format_evidence(evidence: list[str]) -> str:
    return "\n".join(f"[{i}] {as_data(text)}" for i, text in enumerate(evidence)) or "(none)"


def format_queries(queries: list[str]) -> str:
    return "\n".join(f"- {as_data(q)}" for q in queries) or "(none)"
