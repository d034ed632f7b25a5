"""The offline planner: deterministic heuristics for the agent's three decisions, no LLM.

A heuristic, documented as one (tuned only on the shared development data):

- **route** by syntax: two or more subjects under a comparison or coordination ("Which was
  founded first, A or B?", "Are A and B both ...?") -> ``split``; a nested relation (relative
  clause, passive or possessive relation chain: "the director of the film that ...") ->
  ``chain``; otherwise ``direct``. A nested relation wins over a comparison ("any explicit
  dependency chain -> ChainOfQuery").
- **split** into one sub-query per subject: the subject plus the question's relation words
  (no comparison wording).
- **judge** (ChainOfQuery) bridges on entities: capitalized and quoted phrases of the evidence
  and the titles of stored ``"Title: sentence"`` contents that the question does not name,
  scored by the rank of the evidence they occur in, higher when they occur in a sentence
  about an entity the question names. The rewrite is that entity plus the question's relation
  words, so it is grounded in the evidence. When no untried entity is left, the evidence is
  judged sufficient.

Every method returns a `PlannerResult` with zero LLM calls and never raises.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from memroute.strategies.base import (
    ChainJudgment,
    PlannerResult,
    RouteDecision,
    SplitPlan,
    Usage,
)
from memroute.strategies.entities import (
    capitalized_phrases,
    fold,
    key_terms,
    mentioned,
    split_title,
)

MAX_SUB_QUERIES = 6

_COMPARATIVE = re.compile(
    r"\b(first|earlier|earliest|older|oldest|younger|youngest|later|latest|last|before|after|"
    r"longer|longest|shorter|more|most|less|fewer|larger|largest|bigger|smaller|higher|"
    r"highest|lower|taller|tallest|both|same|either|neither|common|compared|than|"
    r"closer|farther|further|greater|better)\b", re.I)
_YES_NO = re.compile(r"^\s*(are|were|is|was|do|does|did|have|has|had|can|could|will|would)\b",
                     re.I)
_WH_OPTIONS = re.compile(r",\s*(.+?)\s*\?*\s*$")
# Relative pronouns after the first word, passive/participial relations, possessive chains.
_RELATIVE = re.compile(r"(?<!^)\b(who|whom|whose|which|that|where|when)\b\s+(?!is\s+(older|"
                       r"younger)\b)", re.I)
_PARTICIPLE = re.compile(
    r"\b\w+(ed|en|wn|ung|ote|ade|eft|ung|ilt|orn)\s+(by|in|for|from|at|with|on)\b", re.I)
_OF_CHAIN = re.compile(r"\b(the|a|an)\s+\w+(\s+\w+)?\s+of\s+(the|a|an|this|that)\s+\w+", re.I)
_POSSESSIVE = re.compile(r"\w['’]s\s+[a-z]+", re.U)

T = TypeVar("T", bound=BaseModel)


def comparison_subjects(query: str) -> list[str]:
    """The subjects a comparison or coordination names, or [] if it names fewer than two."""
    q = query.strip()
    subjects: list[str] = []
    tail = _WH_OPTIONS.search(q)
    if tail and re.search(r"\s+or\s+", tail.group(1)):
        parts = re.split(r"\s*,\s*|\s+or\s+", tail.group(1))
        subjects = [re.sub(r"^(the|a|an)\s+", "", p.strip(" ?.\"'"), flags=re.I) for p in parts]
    if len([s for s in subjects if s]) < 2:
        phrases = capitalized_phrases(q)
        joined = [p for p in phrases if re.search(
            rf"{re.escape(p)}\W*\s+(and|or|,)\s|\s(and|or|both|between)\s+(the\s+)?\W*{re.escape(p)}",
            q)]
        subjects = joined if len(joined) >= 2 else []
    subjects = [s for s in dict.fromkeys(s.strip() for s in subjects) if len(s) > 1]
    return subjects[:MAX_SUB_QUERIES] if len(subjects) >= 2 else []


def is_comparison(query: str) -> bool:
    subjects = comparison_subjects(query)
    if len(subjects) < 2:
        return False
    return bool(_COMPARATIVE.search(query) or _YES_NO.search(query) or " or " in query)


def has_nested_relation(query: str) -> bool:
    """A relation whose object is itself described by another relation."""
    q = query.strip()
    return bool(_RELATIVE.search(q) or _PARTICIPLE.search(q) or _OF_CHAIN.search(q)
                or _POSSESSIVE.search(q))


def choose_route(query: str) -> tuple[str, str]:
    nested, comparison = has_nested_relation(query), is_comparison(query)
    if nested:
        return "chain", "nested relation" + (" inside a comparison" if comparison else "")
    if comparison:
        return "split", "comparison or coordination of several subjects"
    return "direct", "single subject, no nested relation"


def relation_words(query: str, subjects: list[str]) -> list[str]:
    """The question's content words that are neither subjects nor comparison wording."""
    return [w for w in key_terms(query, drop=subjects) if not _COMPARATIVE.fullmatch(w)]


def split_query(query: str) -> list[str]:
    subjects = comparison_subjects(query)
    if len(subjects) < 2:
        return []
    relation = " ".join(relation_words(query, subjects))
    return [f"{s} {relation}".strip() for s in subjects]


# -- chain: bridge entities -----------------------------------------------------------------

_DEMONYMS = frozenset(
    """american british english french german italian spanish russian chinese japanese korean
    indian canadian australian irish scottish welsh dutch swedish norwegian danish finnish
    polish greek turkish mexican brazilian argentine austrian swiss belgian portuguese
    hungarian czech israeli egyptian african european asian soviet roman latin new christian
    catholic jewish muslim democratic republican""".split()
)


@dataclass
class BridgeCandidate:
    entity: str
    score: float


def bridge_candidates(query: str, evidence: list[str], tried: list[str]) -> list[BridgeCandidate]:
    """Entities of the evidence that the question and earlier queries do not name, best first.

    An evidence item at rank r adds 1/(r+1) to each of its phrases (x2 when its title is
    named by the question: a fact about the question's own subject points to the bridge) and
    to its title when the question does not name it.
    """
    scores: dict[str, float] = {}
    surface: dict[str, str] = {}
    seen_in = " \n ".join([query, *tried])

    def add(entity: str, weight: float) -> None:
        key = fold(entity)
        if (len(key) < 3 or key in _DEMONYMS or key.isdigit() or mentioned(entity, seen_in)):
            return
        scores[key] = scores.get(key, 0.0) + weight
        surface.setdefault(key, entity)

    for rank, text in enumerate(evidence):
        for line in text.splitlines() or [text]:
            title, sentence = split_title(line)
            weight = 1.0 / (rank + 1)
            anchored = title is not None and mentioned(title, query)
            if title is not None and not anchored:
                add(title, weight)
            for phrase in capitalized_phrases(sentence):
                if title is not None and fold(phrase) == fold(title):
                    continue
                add(phrase, weight * (2.0 if anchored else 1.0))
    ranked = sorted(scores, key=lambda k: -scores[k])
    return [BridgeCandidate(surface[k], scores[k]) for k in ranked]


def bridge_query(query: str, entity: str) -> str:
    """The bridge entity plus the question's relation words (named entities left out: the
    first hop already searched them)."""
    named = capitalized_phrases(query)
    words = [w for w in key_terms(query, drop=named) if not mentioned(w, entity)]
    return " ".join([entity, *words]).strip()


def judge_evidence(query: str, evidence: list[str], previous_queries: list[str]
                   ) -> ChainJudgment:
    indices = list(range(len(evidence)))
    candidates = bridge_candidates(query, evidence, previous_queries)
    if not candidates:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9)
    return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                         new_query=bridge_query(query, candidates[0].entity), confidence=0.4)


class OfflinePlanner:
    """Implements `memroute.strategies.base.Planner` with the heuristics above."""

    name = "offline"

    @staticmethod
    async def _run(build: Callable[[], T]) -> PlannerResult[T]:
        start = time.perf_counter()
        try:
            value = build()
            error = None
        except Exception as exc:  # a heuristic bug must not break the graph: it falls back
            value, error = None, f"offline planner failed: {type(exc).__name__}: {exc}"
        return PlannerResult(value, Usage(wall_ms=(time.perf_counter() - start) * 1000),
                             error=error)

    async def route(self, query: str) -> PlannerResult[RouteDecision]:
        def build() -> RouteDecision:
            route, reason = choose_route(query)
            return RouteDecision(route=route, reason=reason)
        return await self._run(build)

    async def split(self, query: str) -> PlannerResult[SplitPlan]:
        return await self._run(lambda: SplitPlan(sub_queries=split_query(query)))

    async def judge(self, query: str, evidence: list[str], previous_queries: list[str],
                    hop: int) -> PlannerResult[ChainJudgment]:
        return await self._run(lambda: judge_evidence(query, list(evidence),
                                                      list(previous_queries)))


_ = Awaitable  # typing re-export guard
