"""Entity bridging for the offline ChainOfQuery judge: which entity of the evidence to
search next, and the grounded rewrite that searches it."""

from __future__ import annotations

from dataclasses import dataclass

from memroute.memory.titles import split_title
from memroute.strategies.base import ChainJudgment
from memroute.reading.entities import (
    capitalized_phrases,
    fold,
    key_terms,
    mentioned,
)
from memroute.reading import vocabulary as V

_DEMONYMS = V.DEMONYMS.words


@dataclass
class BridgeCandidate:
    entity: str
    score: float


def bridge_candidates(query: str, evidence: list[str], tried: list[str], *,
                      fresh_from: int | None = None,
                      fresh_weight: float = 1.0) -> list[BridgeCandidate]:
    """Entities of the evidence that the question and earlier queries do not name, best first.

    An evidence item at rank r adds 1/(r+1) to each of its phrases (twice that when its
    title is named by the question: a fact about the question's own subject points to the
    bridge) and to its title when the question does not name it. A lone surname
    ("Musschenbroek") counts for the full name it ends ("Pieter van Musschenbroek") when
    both occur.
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
            weight = (fresh_weight if fresh else 1.0) / (rank + 1)
            anchored = title is not None and mentioned(title, query)
            if title is not None and not anchored:
                add(title, weight)
            for phrase in capitalized_phrases(sentence):
                if title is not None and fold(phrase) == fold(title):
                    continue
                add(phrase, weight * (2.0 if anchored else 1.0))
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


FRESH_WEIGHT = 0.2  # a later hop's new hits against the runner-up entities of earlier hops


@dataclass(frozen=True)
class ChainHeuristics:
    """The offline chain's six parameters (the rest of its rules have no knobs).

    ``expansions``: expansion searches per question, for a chain whose descriptor the parse
    cannot resolve (each searches the evidence's best untried entities with the question's
    words; the last packs ``pack`` of them); ``keep``: evidence items carried from one hop to
    the next; ``pack``: entities the last expansion searches together; ``unvouched``: weight
    of a capitalised word that no stored entity or title vouches for, when expansion ranks
    entities ("Federal", "Thanks"); ``own_turns``: whether a question naming one speaker of
    the scope also searches that speaker's own turns; ``date_pad_days``: days either side of
    a full date the question states, among which that speaker's turns get one more search
    without the date (0: no such search).
    """

    expansions: int = 2
    keep: int = 10
    pack: int = 3
    unvouched: float = 0.3
    own_turns: bool = True
    date_pad_days: int = 7


def judge_evidence(query: str, evidence: list[str], previous_queries: list[str],
                   heuristics: ChainHeuristics = ChainHeuristics()) -> ChainJudgment:
    """Expand to the best untried entities while expansions are left; otherwise sufficient.

    After the first hop the evidence is the items kept earlier, then the latest search's new
    hits; those are ranked from the top again (times ``fresh_weight``), so the next bridge
    comes from the runner-up entities of the first hop or from the latest hop."""
    h = heuristics
    indices = list(range(min(h.keep, len(evidence))))
    rewrites = max(0, len([q for q in previous_queries if q.strip()]) - 1)
    fresh_from = min(h.keep, len(evidence)) if rewrites else None
    candidates = bridge_candidates(query, evidence, previous_queries, fresh_from=fresh_from,
                                   fresh_weight=FRESH_WEIGHT) if rewrites < h.expansions else []
    if not candidates:
        return ChainJudgment(is_sufficient=True, evidence_indices=indices, confidence=0.9,
                             reason="no untried entity left to expand for "
                                    + ", ".join(key_terms(query)))
    last = rewrites + 1 == h.expansions
    entities = " ".join(c.entity for c in candidates[:h.pack if last else 1])
    return ChainJudgment(is_sufficient=False, evidence_indices=indices,
                         new_query=bridge_query(query, entities), confidence=0.4,
                         reason=f"expansion: {entities} with the question's words")
