"""ChainOfQuery: search, then one planner call judges the evidence and writes the next query.

Each hop is a memory search followed by one combined judgment
``{is_sufficient, evidence_indices, new_query, confidence}`` (an offline judgment may add
independent ``concurrent_searches``: one hop then sends them all at once, `hop_searches`;
the hop limit counts hops, i.e. rounds of searches). The stop rule (`next_step`):
the chain stops when the evidence is sufficient with enough confidence, when the new query is
empty, repeats an earlier one or is not grounded (it names capitalized entities found neither
in the question nor in the evidence), when the deadline has passed, or at the hop limit (the
judge after the last permitted search is never asked). The graph only wires these rules.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from memroute.reading import vocabulary as V
from memroute.strategies.base import (
    MAX_HOP_QUERIES,
    ChainJudgment,
    ChainSearch,
    CostProfile,
    query_key,
)

MAX_HOPS = 3
SUFFICIENT_CONFIDENCE = 0.8
MAX_EVIDENCE = 12  # new items shown to the judge per hop
CONTINUE = "continue"
HOP_LIMIT = "hop_limit"
OUT_OF_TIME = "budget_exhausted: latency"

# Measured (docs/evaluation.md, "Cost profiles"): accuracy is the mean headline recall@10
# over the four shared data sets; tokens are the agent benchmark's mean on 100 HotpotQA
# questions, the json_schema response format included (two judge calls: 1,486 in + 106
# out); time excludes LLM latency. The judge after the last permitted search is never called.
COST_PROFILE = CostProfile(accuracy_score=0.779, token_cost=1593.0, time_cost=0.092,
                           llm_calls=MAX_HOPS - 1)

_WORD = re.compile(r"[A-Za-z0-9À-ÿ][\w'’\-]*")
# Capitalized only because they start a question or an instruction.
_NOT_ENTITIES = V.INSTRUCTIONS.words


def stop_before_judging(hop: int, max_hops: int) -> str | None:
    """`HOP_LIMIT` when no new query could be searched after this hop (the judge is not
    asked), else ``None``."""
    return HOP_LIMIT if hop >= max_hops else None


def evidence_uids(selected: list[str], last_hits: list[str], pooled: Collection[str]) -> list[str]:
    """What the judge sees: evidence it selected at earlier hops, then the latest search's new
    hits (at most `MAX_EVIDENCE`), all still in the pool."""
    kept = list(dict.fromkeys(selected))
    fresh = [u for u in last_hits if u not in kept][:MAX_EVIDENCE]
    return [u for u in kept + fresh if u in pooled]


def newly_selected(judgment: ChainJudgment, uids: list[str],
                   selected: list[str]) -> tuple[ChainJudgment, list[str]]:
    """The judgment with its evidence indices deduplicated and kept within ``uids``, and the
    uids it marks as evidence that were not ``selected`` before."""
    indices = [i for i in dict.fromkeys(judgment.evidence_indices) if 0 <= i < len(uids)]
    judgment = judgment.model_copy(update={"evidence_indices": indices})
    return judgment, [uids[i] for i in indices if uids[i] not in selected]


def next_step(judgment: ChainJudgment, question: str, previous: list[str], evidence: list[str],
              sufficient_confidence: float, seconds_left: float | None) -> str:
    """`CONTINUE` (search ``judgment.new_query`` next), or why the chain stops here."""
    if judgment.is_sufficient and judgment.confidence >= sufficient_confidence:
        return "sufficient"
    problem = rewrite_problem(judgment.new_query, question, previous, evidence)
    if problem == "repeated_query" and windowed_again(judgment, question, previous):
        problem = None
    if problem:
        return problem
    if seconds_left is not None and seconds_left <= 0:
        return OUT_OF_TIME
    return CONTINUE


def windowed_again(search: ChainJudgment | ChainSearch, question: str,
                   previous: list[str]) -> bool:
    """Whether a search of the question itself repeats none: no earlier search was the
    question (a chain that began with another query: "When was my trip?"), or this one is
    confined to a window of time (an event's: "before my trip") and asked once before."""
    query = search.new_query if isinstance(search, ChainJudgment) else search.query
    if query_key(query) != query_key(question):
        return False
    done = [query_key(q) for q in previous].count(query_key(question))
    windowed = bool(search.produced_after or search.produced_before) or (
        isinstance(search, ChainSearch) and bool(search.mentions_days))
    return done == 0 or (done == 1 and windowed)


def hop_searches(judgment: ChainJudgment, question: str, previous: list[str],
                 evidence: list[str]) -> list[ChainSearch]:
    """What the next hop searches, at once: ``judgment.new_query`` (which `next_step` let
    through) with the judgment's filters, then each of its ``concurrent_searches`` that the
    same rules let through and whose query no search kept before repeats."""
    kept = [ChainSearch(query=judgment.new_query, producer=judgment.producer,
                        produced_after=judgment.produced_after,
                        produced_before=judgment.produced_before)]
    for search in judgment.concurrent_searches[:MAX_HOP_QUERIES - 1]:
        earlier = previous + [s.query for s in kept]
        problem = rewrite_problem(search.query, question, earlier, evidence)
        if problem is None or (problem == "repeated_query"
                               and windowed_again(search, question, previous)):
            kept.append(search)
    return kept


def _words(text: str) -> set[str]:
    return {w.casefold().removesuffix("'s").removesuffix("’s") for w in _WORD.findall(text)}


def ungrounded_entities(new_query: str, grounding: list[str]) -> list[str]:
    """Capitalized words of ``new_query`` found nowhere in ``grounding`` (question, evidence).

    The first word counts only when the next one is capitalized too (then it is part of a
    name, not just the start of a sentence).
    """
    known = set().union(*(_words(text) for text in grounding)) if grounding else set()
    words = _WORD.findall(new_query)
    missing: list[str] = []
    for i, word in enumerate(words):
        if not word[:1].isupper() or word.casefold() in _NOT_ENTITIES:
            continue
        if i == 0 and not (len(words) > 1 and words[1][:1].isupper()):
            continue
        if word.casefold().removesuffix("'s").removesuffix("’s") not in known:
            missing.append(word)
    return list(dict.fromkeys(missing))


def rewrite_problem(new_query: str, question: str, previous: list[str],
                    evidence: list[str]) -> str | None:
    """Why the chain must stop instead of searching ``new_query``, or ``None`` if it may go on."""
    if not query_key(new_query):
        return "empty_query"
    if query_key(new_query) in {query_key(q) for q in [question, *previous]}:
        return "repeated_query"
    missing = ungrounded_entities(new_query, [question, *evidence])
    if missing:
        return "ungrounded_query: " + ", ".join(missing)
    return None
