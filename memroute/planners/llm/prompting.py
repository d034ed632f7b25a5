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
from datetime import datetime
from typing import TYPE_CHECKING

from memroute.time.as_of import wall_clock

if TYPE_CHECKING:
    from memroute.reading.question import QuestionReading
    from memroute.time.events import EventSpan

from memroute.reading import vocabulary as V

QUESTION_CHARS = 2000  # of the question shown to the model
QUERY_CHARS = 300  # of one earlier query shown to the judge
# Evidence shown to the judge: the first (best-ranked) items, each cut to its best line
# (docs/evaluation.md, "Cascade planner": 90 % of Wikipedia sentences fit in 240 characters).
JUDGE_ITEMS = 8
EVIDENCE_CHARS = 240
_TERM = re.compile(r"\w{3,}")
_COMMON = V.COMMON_QUESTION_WORDS.words

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


def excerpt(text: str, terms: set[str], limit: int = EVIDENCE_CHARS) -> str:
    """``text`` as data cut to ``limit`` characters around its line sharing most of ``terms``
    (in a window of conversation turns, the turn that matched rather than its neighbours)."""
    lines = [as_data(line, limit) for line in text.splitlines() if line.strip()]
    if len(lines) <= 1:
        return as_data(text, limit)
    best = max(range(len(lines)), key=lambda i: (
        len(terms & set(_TERM.findall(lines[i].casefold()))), -i))
    first = last = best
    for i in sorted(range(len(lines)), key=lambda i: (abs(i - best), i)):
        if sum(len(line) + 3 for line in lines[min(first, i):max(last, i) + 1]) - 3 > limit:
            continue
        first, last = min(first, i), max(last, i)
    return " / ".join(lines[first:last + 1])


def format_evidence(evidence: list[str], question: str = "",
                    previous: list[str] | None = None,
                    times: list[datetime | None] | None = None,
                    as_of: datetime | None = None) -> str:
    """The first `JUDGE_ITEMS` items, numbered, each an `excerpt` around the words of the
    question and the earlier queries, after the day it was said when ``times`` gives it (on
    ``as_of``'s calendar)."""
    terms = set(_TERM.findall(" ".join([question, *(previous or [])]).casefold())) - _COMMON
    times = times or []
    zone = as_of.tzinfo if as_of is not None and as_of.tzinfo is not None else None

    def said(i: int) -> str:
        when = times[i] if i < len(times) else None
        return "" if when is None else f"({when.astimezone(zone).date().isoformat()}) "
    return "\n".join(f"[{i}] {said(i)}{excerpt(text, terms)}"
                     for i, text in enumerate(evidence[:JUDGE_ITEMS])) or "(none)"


def format_asked(reading: QuestionReading, span: EventSpan | None = None) -> str:
    """When the question is asked (its ``as_of``'s day, on its own calendar), the windows of
    time it names and the event it is asked around, as its reading has them ("Wednesday
    2025-06-04; 'last week' = 2025-05-26..06-01"), and where the evidence dates that event
    (``span``)."""
    parts = []
    if reading.as_of is not None:
        day = wall_clock(reading.as_of)
        parts.append(f"{day:%A} {day.date().isoformat()}")
    if reading.windows_said:
        parts.append(reading.windows_said)
    if reading.event is not None:
        parts.append(span.said(reading.event) if span is not None else
                     f"asked {reading.event.relation} the event '{reading.event.text}'")
    return as_data("; ".join(parts), QUESTION_CHARS) or "(unknown)"


THE_QUESTION = "(the question)"  # an earlier query that was the question itself


def format_queries(queries: list[str], question: str = "") -> str:
    """The earlier queries, one per line; the question itself (searched first) as
    `THE_QUESTION`, not repeated (~20 tokens a judge request)."""
    asked = " ".join(question.split()).casefold()
    return "\n".join(f"- {THE_QUESTION}" if asked and " ".join(q.split()).casefold() == asked
                     else f"- {as_data(q, QUERY_CHARS)}" for q in queries) or "(none)"
