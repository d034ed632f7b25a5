"""What every strategy shares: the route and strategy names, the decision schemas, the one
cost record (`Usage`) and the measured `CostProfile` of each strategy.

The decisions themselves are made by a planner (`memroute.planners`), which returns these
schemas; the graph does not know which planner ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field

from memroute.memory.limits import MAX_WINDOW_DAYS
from memroute.strategies.names import STRATEGIES, Route, Strategy  # noqa: F401  (declared there)
MAX_REASON_CHARS = 500  # of a route decision's reason
MAX_PRODUCER_CHARS = 200  # of the speaker a chain's rewrite is confined to
MAX_HOP_QUERIES = 4  # searches one chain hop may send at once
# A search for a rewritten query (a sub-query, a bridge that may pack several entities)
# fetches this many times the k asked for: the final multi-query rerank cuts the pooled
# evidence to k anyway (docs/research.md, "Fewer searches, same recall").
REWRITE_RESULTS_FACTOR = 2


def search_k(k: int, query: str, question: str, limit: int) -> int:
    """Results to fetch for ``query``: ``k`` for the question itself, else
    `REWRITE_RESULTS_FACTOR` times ``k``, at most ``limit``."""
    return k if query_key(query) == query_key(question) else min(limit, REWRITE_RESULTS_FACTOR * k)


def query_key(text: str) -> str:
    """A query as compared with others: case-folded, punctuation dropped, spaces collapsed."""
    return " ".join(re.sub(r"[^\w ]+", " ", text.casefold()).split())


class ChainSearch(BaseModel):
    """One more search of a chain hop (`ChainJudgment.concurrent_searches`): a query, among
    ``producer``'s episodes when given, among those produced in
    ``[produced_after, produced_before)`` or naming one of ``mentions_days`` when given."""

    query: str
    producer: str = Field(default="", max_length=MAX_PRODUCER_CHARS)
    produced_after: str = Field(default="", max_length=40)
    produced_before: str = Field(default="", max_length=40)
    # and, besides the episodes produced in that window, the sentences that name one of these
    # days (ISO dates: a window's days, which turns told before or after it name)
    mentions_days: list[Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]] = Field(
        default_factory=list, max_length=MAX_WINDOW_DAYS)


class RouteDecision(BaseModel):
    """ToolSelect's answer."""

    route: Route
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)  # None: not stated
    # the chain's first search, when it is not the question itself: the innermost
    # sub-question of a nested question ("the performer of Green"); "" searches the question
    first_query: str = Field(default="", max_length=MAX_REASON_CHARS)
    # a split: whether the question itself is searched beside its sub-queries (False: the
    # sub-queries alone, one search less; the final rerank still scores the question)
    search_question: bool = True
    # a chain: searches its first hop sends beside the first query, at once (a named
    # speaker's own turns, when the scope's speakers are known: `Planner.route`)
    first_searches: list[ChainSearch] = Field(default_factory=list,
                                              max_length=MAX_HOP_QUERIES - 1)
    # the question asks how things stand now ("Where does my brother live now?"): of the
    # results that match it about as well, the newest statement comes first
    newest_first: bool = False


class SplitPlan(BaseModel):
    """SplitQuery's answer: independent single-fact sub-queries (may be empty: do not split)."""

    sub_queries: list[str] = Field(default_factory=list)


class ChainJudgment(BaseModel):
    """ChainOfQuery's combined sufficiency judgment and rewrite."""

    is_sufficient: bool
    evidence_indices: list[int] = Field(default_factory=list)
    new_query: str = ""
    # more searches for the same hop, independent of ``new_query``'s and of each other (each
    # subject of a comparison): sent with it, at once (an LLM judge writes none)
    concurrent_searches: list[ChainSearch] = Field(default_factory=list,
                                                   max_length=MAX_HOP_QUERIES - 1)
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    # search ``new_query`` among this producer's episodes only (a conversation's speaker);
    # "" searches them all
    producer: str = Field(default="", max_length=MAX_PRODUCER_CHARS)
    # and among episodes produced in [produced_after, produced_before) (ISO-8601; "" leaves
    # that side open): a date the question states
    produced_after: str = Field(default="", max_length=40)
    produced_before: str = Field(default="", max_length=40)
    # the evidence item that answers the question, when the judge names one (its best hit
    # is kept in the final top k: `final_rerank`)
    answer_index: int | None = None
    # what the judge saw, in a sentence ("resolved 'my brother' as Anders", "answered: ...",
    # "expansion: ..."): shown with the hop, in the stream and by --explain
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)


@dataclass
class Usage:
    """What LLM work cost: one planner call, or the sum of a request's steps (`total`).
    ``estimated`` when tokens were counted with tiktoken."""

    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    wall_ms: float = 0.0
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.llm_calls + other.llm_calls, self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens, self.wall_ms + other.wall_ms,
                     self.estimated or other.estimated)

    @classmethod
    def total(cls, records: Iterable[Mapping[str, Any]]) -> Usage:
        """The sum of cost records (mappings with these fields, e.g. the graph's `NodeCost`)."""
        return sum((cls(r["llm_calls"], r["input_tokens"], r["output_tokens"], r["wall_ms"],
                        r["estimated"]) for r in records), cls())


@dataclass(frozen=True)
class CostProfile:
    """A strategy's measured accuracy and cost, read by the router against the budget.

    ``accuracy_score``: expected sf_recall@10; ``token_cost``: mean LLM tokens (in + out) per
    question; ``time_cost``: mean wall seconds per question, LLM latency excluded;
    ``llm_calls``: the most LLM calls it can make.
    """

    accuracy_score: float
    token_cost: float
    time_cost: float
    llm_calls: int
