"""The offline planner: deterministic heuristics for the agent's three decisions, no LLM.

A heuristic, documented as one, tuned only on the shared development data
(``docs/evaluation.md`` has the measurements behind each rule):

- **route**: two or more named subjects under a comparison or coordination ("Which was
  founded first, A or B?", "Are A and B both ...?") -> ``split``, unless it compares a role
  reached through each subject ("Which film has the director who died first, A or B?") or
  only describes the entity asked for ("Which actor starred in both A and B?") -> ``chain``;
  a nested relation (relative clause, passive or possessive relation chain) -> ``chain``;
  any other question that names something -> ``chain`` as well, because bridging from what
  it names was measured better than one search on every question class of the four
  benchmarks at no token cost; nothing named -> ``direct``.
- **split**: one sub-query per subject, the subject plus the question's relation words
  (no comparison wording).
- **judge** (ChainOfQuery) bridges on entities: capitalized and quoted phrases of the
  evidence and the titles of stored ``"Title: sentence"`` contents that the question does not
  name, scored by the rank of the evidence they occur in (higher in a sentence about an
  entity the question names). The first rewrite is the best entity plus the question's
  relation words; the last one packs the next few entities into one query. Rewrites only use
  words of the question and the evidence, so they are grounded. When every permitted rewrite
  was searched, or nothing untried is left, the evidence is judged sufficient.

Every method returns a `PlannerResult` with zero LLM calls and never raises.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
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

# Words that make a question compare its subjects.
_COMPARATIVE = re.compile(
    r"\b(first|earlier|earliest|older|oldest|younger|youngest|later|latest|last|before|after|"
    r"longer|longest|shorter|more|most|less|fewer|larger|largest|bigger|smaller|higher|"
    r"highest|lower|taller|tallest|compared|than|closer|farther|further|greater|better)\b",
    re.I)
# Words that ask what several subjects share.
_SHARED = re.compile(r"\b(in common|both|same|each|either|neither|also)\b", re.I)
_YES_NO = re.compile(r"^\s*(are|were|is|was|do|does|did|have|has|had|can|could|will|would)\b",
                     re.I)
# Trailing options: "..., A or B?" / "...: A, B or C".
_OPTIONS = re.compile(r"[,:]\s*(?:the\s+)?([^,:]+?(?:\s*,\s*[^,:]+?)*\s+or\s+[^,:?]+?)\s*\??\s*$",
                      re.I)
_GROUP_GAP = re.compile(r"^\W*\s*(,|and|or|&|,\s*and|,\s*or|nor)?\s*(the)?\s*\W*$", re.I)
_MASK = "SUBJECTX"
# A relative clause after the first word ("the woman who portrayed ...").
_RELATIVE = re.compile(r"(?<!^)\b(who|whom|whose|which|that|where)\s+(?!is\s+(older|younger))",
                       re.I)
# A passive or participial relation ("the film directed by ...", "a band formed in ...").
_PARTICIPLE = re.compile(
    r"\b(\w+(ed|en|wn|ung|ote|ade|eft|ilt|orn|old|ught|ound))\s+(by|in|for|from|at|with|on|"
    r"as|to)\b", re.I)
# A relation of a named thing: "the director of film X", "the father of X", "X's husband".
_RELATION_NP = re.compile(
    r"\b(the|a|an|his|her|its|their)\s+(?:[\w-]+\s+){0,3}?(of|from|for|by|behind)\s+"
    r"(?:the\s+|a\s+|an\s+)?(?:(?:film|song|album|band|book|novel|series|show|game|team|"
    r"company|group|movie|play|opera|magazine|newspaper|station|club)\s+)?[A-Z\"“'0-9]",
    re.U)
_POSSESSIVE = re.compile(
    r"(?<!\bthere)(?<!\bit)(?<!\bthat)(?<!\bwhat)(?<!\bwho)(?<!\bhe)(?<!\bshe)(?<!\bhere)"
    r"(?<!\blet)[\w)\"”]['’]s\s+(?:[a-z-]+\s+){0,2}?[a-z-]+", re.U | re.I)
_COPULA_START = re.compile(r"^\s*(what|who|which)\s+(is|was|are|were)\s+(the|a|an)\b", re.I)
# People and roles a question can reach through a named thing ("the director who died first").
_ROLES = frozenset(
    """director directors producer producers writer writers author authors composer composers
    performer performers singer singers creator creators founder founders father mother son
    daughter wife husband spouse brother sister child children parent parents grandfather
    grandmother grandson granddaughter uncle aunt nephew niece owner owners publisher
    developer designer architect coach captain star stars president leader manufacturer editor
    host presenter narrator actor actress lyricist
    screenwriter cinematographer""".split()
)
_ROLE_OF = re.compile(r"\b(has|have|had|with|whose|of)\s+(the|a|an)?\s*\w*\s*(" +
                      "|".join(sorted(_ROLES)) + r")\b", re.I)
# What a question can ask for that is a thing in its own right (its own paragraph), as
# opposed to an attribute the subjects share ("What sport ...", "What kind of ...").
_ENTITY_NOUNS = _ROLES | frozenset(
    """film films movie company band person man woman group team club album song show series
    character model musician artist politician chef rider magazine newspaper novel book
    organization university school network station channel label restaurant documentary
    program programme airline brand franchise studio""".split()
)
_ATTRIBUTE_NOUNS = frozenset("kind type sort form genre".split())
_DESCRIPTOR = re.compile(rf"\b(starring|alongside|featuring|by|with)\s+(both\s+)?(the\s+)?{_MASK}",
                         re.I)

T = TypeVar("T", bound=BaseModel)


def _phrase_spans(query: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    cursor = 0
    for phrase in capitalized_phrases(query):
        at = query.find(phrase, cursor)
        if at < 0:
            at = query.find(phrase)
        if at >= 0:
            spans.append((at, at + len(phrase), phrase))
            cursor = at + len(phrase)
    return sorted(spans)


def coordinated_groups(query: str) -> list[tuple[list[str], bool]]:
    """Runs of capitalized phrases joined by ',', 'and', 'or', '&' (a run of commas alone is
    an apposition, "Irving, Texas", not a coordination). Each run comes with whether an
    'or' joins it."""
    groups: list[tuple[list[str], bool]] = []
    current: list[tuple[int, int, str]] = []
    gaps: list[str] = []

    def close() -> None:
        joined = " ".join(gaps).lower()
        if len(current) >= 2 and re.search(r"\b(and|or|nor)\b|&", joined):
            groups.append(([p for _, _, p in current], bool(re.search(r"\bor\b", joined))))

    for span in _phrase_spans(query):
        gap = query[current[-1][1]:span[0]] if current else ""
        if current and _GROUP_GAP.match(gap) and gap.strip(" \"'“”"):
            current.append(span)
            gaps.append(gap)
            continue
        close()
        current, gaps = [span], []
    close()
    return groups


def _clean_subject(text: str) -> str:
    return re.sub(r"^(the|a|an)\s+", "", text.strip(" ?.\"'“”"), flags=re.I).strip()


def comparison_subjects(query: str) -> tuple[list[str], bool]:
    """The subjects a comparison or coordination names ([] if fewer than two), and whether
    they are alternatives ("A or B"): trailing options first, else the longest coordinated
    run of capitalized phrases."""
    q = query.strip()
    subjects: list[str] = []
    alternatives = False
    tail = _OPTIONS.search(q)
    if tail:
        parts = re.split(r"\s*,\s*(?:or\s+)?|\s+or\s+", tail.group(1))
        subjects, alternatives = [_clean_subject(p) for p in parts], True
    if len([s for s in subjects if s]) < 2:
        groups = coordinated_groups(q)
        subjects, alternatives = max(groups, key=lambda g: len(g[0])) if groups else ([], False)
    subjects = [s for s in dict.fromkeys(s.strip() for s in subjects) if len(s) > 1]
    if len(subjects) < 2:
        return [], False
    return subjects[:MAX_SUB_QUERIES], alternatives


def mask_subjects(query: str, subjects: list[str]) -> str:
    """The query with each subject (and any quotes around it) replaced by a placeholder."""
    masked = query
    for subject in sorted(subjects, key=len, reverse=True):
        masked = re.sub(rf"[\"“']?{re.escape(subject)}[\"”']?", _MASK, masked)
    return masked


def _relations(text: str) -> int:
    """How many relations of a named thing the text describes."""
    return len(_RELATION_NP.findall(text)) + len(_POSSESSIVE.findall(text))


def has_nested_relation(query: str) -> bool:
    """A relation whose object is itself reached through another relation: a relative
    clause, a passive relation, two relations of named things, or one that the question
    asks something further about ("Where was the director of film X born?")."""
    q = query.strip()
    if _RELATIVE.search(q) or _PARTICIPLE.search(q):
        return True
    count = _relations(q)
    return count >= 2 or (count == 1 and not _COPULA_START.search(q))


def compares_a_role(query: str, subjects: list[str]) -> bool:
    """A comparison of something reached through each subject ("Which film has the director
    who died first, A or B?"): a chain per subject, not a split."""
    masked = mask_subjects(query, subjects)
    return bool(_ROLE_OF.search(masked) or (
        _RELATIVE.search(masked) and {w.lower() for w in re.findall(r"[A-Za-z]+", masked)}
        & _ROLES))


def asks_for_hidden_entity(query: str, subjects: list[str]) -> bool:
    """Whether a coordination only describes the thing asked for ("Which actor starred in
    both A and B?", "the film starring A, B and C") rather than naming the subjects asked
    about ("What sport do A and B play?")."""
    masked = mask_subjects(query, subjects)
    focus = re.match(r"^\s*(?:(who|whom)\b|(?:which|what)\s+((?:[\w-]+\s+){0,2}[\w-]+))",
                     masked, re.I)
    if focus and focus.group(1):
        return True
    words = {w.lower() for w in re.findall(r"[\w-]+", focus.group(2) or "")} if focus else set()
    if words & _ENTITY_NOUNS and not words & _ATTRIBUTE_NOUNS:
        return True
    return bool(_DESCRIPTOR.search(masked)) and not _SHARED.search(masked)


def has_anchor(query: str) -> bool:
    """Whether the question names something a chain can start from (a capitalized or
    quoted phrase)."""
    return bool(capitalized_phrases(query))


def choose_route(query: str) -> tuple[str, str]:
    """The route and a short reason (see the module docstring)."""
    subjects, alternatives = comparison_subjects(query)
    nested = has_nested_relation(query)
    if subjects:
        comparative = bool(alternatives or _COMPARATIVE.search(query) or _YES_NO.search(query))
        shared = bool(_SHARED.search(query))
        if compares_a_role(query, subjects) and (comparative or shared):
            return "chain", "compares a role of its subjects (a dependency chain per subject)"
        if comparative:
            return "split", "comparison of several subjects"
        if (shared or not nested) and not asks_for_hidden_entity(query, subjects):
            return "split", "coordination of several subjects"
    if nested:
        return "chain", "nested relation"
    if subjects:
        return "chain", "the coordination describes the entity asked for"
    if has_anchor(query):
        return "chain", "a relation of a named subject: bridge to the entities it leads to"
    return "direct", "nothing named to bridge from"


def relation_words(query: str, subjects: list[str]) -> list[str]:
    """The question's content words that are neither subjects nor comparison wording."""
    masked = mask_subjects(query, subjects)
    return [w for w in key_terms(masked)
            if w != _MASK and not _COMPARATIVE.fullmatch(w) and not _SHARED.fullmatch(w)]


def split_query(query: str) -> list[str]:
    subjects, _ = comparison_subjects(query)
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


def bridge_candidates(query: str, evidence: list[str], tried: list[str], *,
                      anchor_boost: float = 2.0, title_weight: float = 1.0,
                      decay: float = 1.0, fresh_from: int | None = None,
                      fresh_weight: float = 1.0) -> list[BridgeCandidate]:
    """Entities of the evidence that the question and earlier queries do not name, best first.

    An evidence item at rank r adds 1/(r+1)^decay to each of its phrases (times
    ``anchor_boost`` when its title is named by the question: a fact about the question's own
    subject points to the bridge) and ``title_weight`` times that to its title when the
    question does not name it. A lone surname ("Musschenbroek") counts for the full name
    it ends ("Pieter van Musschenbroek") when both occur.
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

    for index, text in enumerate(evidence):
        fresh = fresh_from is not None and index >= fresh_from
        rank = index - fresh_from if fresh else index
        for line in text.splitlines() or [text]:
            title, sentence = split_title(line)
            weight = (fresh_weight if fresh else 1.0) / (rank + 1) ** decay
            anchored = title is not None and mentioned(title, query)
            if title is not None and not anchored:
                add(title, weight * title_weight)
            for phrase in capitalized_phrases(sentence):
                if title is not None and fold(phrase) == fold(title):
                    continue
                add(phrase, weight * (anchor_boost if anchored else 1.0))
    for key in [k for k in scores if " " not in k]:
        longer = [k for k in scores if k.endswith(" " + key)]
        if len(longer) == 1:
            scores[longer[0]] += scores.pop(key)
    ranked = sorted(scores, key=lambda k: -scores[k])
    return [BridgeCandidate(surface[k], scores[k]) for k in ranked]


def bridge_query(query: str, entity: str) -> str:
    """The bridge entity plus the question's relation words (named entities left out: the
    first hop already searched them)."""
    named = capitalized_phrases(query)
    words = [w for w in key_terms(query, drop=named) if not mentioned(w, entity)]
    return " ".join([entity, *words]).strip()


@dataclass(frozen=True)
class ChainHeuristics:
    """How the offline judge bridges (defaults measured on the development data).

    ``bridges``: rewrites per question (the graph's default three hops allow two);
    ``keep``: evidence items selected per hop; ``fresh_weight``: weight of the latest hop's
    new hits against the runner-up entities of earlier hops; ``pack``: entities searched
    together by the last rewrite.
    """

    bridges: int = 2
    keep: int = 10
    fresh_weight: float = 0.2
    pack: int = 3


def judge_evidence(query: str, evidence: list[str], previous_queries: list[str],
                   heuristics: ChainHeuristics = ChainHeuristics()) -> ChainJudgment:
    """Bridge to the best untried entities while rewrites are left; otherwise sufficient.

    After the first hop the evidence is the items kept earlier, then the latest search's new
    hits; those are ranked from the top again (times ``fresh_weight``), so the next bridge
    comes from the runner-up entities of the first hop or from the latest hop."""
    h = heuristics
    indices = list(range(min(h.keep, len(evidence))))
    rewrites = max(0, len([q for q in previous_queries if q.strip()]) - 1)
    fresh_from = min(h.keep, len(evidence)) if rewrites else None
    candidates = bridge_candidates(query, evidence, previous_queries, fresh_from=fresh_from,
                                   fresh_weight=h.fresh_weight) if rewrites < h.bridges else []
    if not candidates:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9)
    last = rewrites + 1 == h.bridges
    entities = " ".join(c.entity for c in candidates[:h.pack if last else 1])
    return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                         new_query=bridge_query(query, entities), confidence=0.4)


class OfflinePlanner:
    """Implements `memroute.strategies.base.Planner` with the heuristics above."""

    name = "offline"

    def __init__(self, heuristics: ChainHeuristics | None = None, **overrides: float) -> None:
        base = heuristics or ChainHeuristics()
        self.heuristics = ChainHeuristics(**{**base.__dict__, **overrides})

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
                                                      list(previous_queries), self.heuristics))

