"""The retrieval graph's state: a narrow input, a narrow output, and the working fields.

State carries data only; dependencies (memory, planner, options) travel in the runtime
context (`memroute.graph.context.RetrievalContext`). Everything here, and in every `Send`
payload, is plain JSON-ready data (str, int, float, bool, None, dict, list): it checkpoints
under ``LANGGRAPH_STRICT_MSGPACK=true`` with any saver and serves as JSON. A search hit is a
`ResultRecord` (no vectors: the final rerank re-reads the stored ones); `as_record` and
`from_record` convert at the edges.
"""

from __future__ import annotations

import operator
import time
from datetime import datetime, timezone
from itertools import zip_longest
from typing import Annotated, Any

from pydantic import Field
from typing_extensions import NotRequired, Required, TypedDict

from memroute.memory.models import Episode, Scope, ScoredResult
from memroute.nlp import Entity
from memroute.strategies.base import Strategy, Usage
from memroute.strategies.budget import Budget
from memroute.time.as_of import AS_OF_HELP


class ResultRecord(TypedDict):
    """A `ScoredResult` as plain data: ``uid`` is the nucleus's, one of ``episodes`` (each an
    `Episode` in JSON form, chronological, fields at their default left out). No vectors."""

    uid: str
    episodes: list[dict[str, Any]]
    matched_sentence: str
    vector_score: float
    rerank_score: float
    lexical_score: float | None
    reranker: str
    query: str | None
    extra: dict[str, Any]
    # in the graph's output only (final_rerank): ``score`` (what the results are ordered
    # by, `ScoredResult.score`), and the uids of ``episodes`` another result of the same
    # response shows (as its match or in its context)
    score: NotRequired[float]
    shown_elsewhere: NotRequired[list[str]]


def as_record(result: ScoredResult) -> ResultRecord:
    """The plain-data form of a search hit (its vectors dropped)."""
    return ResultRecord(uid=result.uid,
                        episodes=[e.model_dump(mode="json", exclude_defaults=True)
                                  for e in result.episodes],
                        matched_sentence=result.matched_sentence,
                        vector_score=float(result.vector_score),
                        rerank_score=float(result.rerank_score),
                        lexical_score=None if result.lexical_score is None
                        else float(result.lexical_score),
                        reranker=result.reranker, query=result.query, extra=dict(result.extra))


def from_record(record: ResultRecord) -> ScoredResult:
    """The `ScoredResult` of a record (without sentence embeddings)."""
    episodes = [Episode.model_validate(e) for e in record["episodes"]]
    nucleus = next(e for e in episodes if e.uid == record["uid"])
    return ScoredResult(nucleus=nucleus, episodes=episodes,
                        matched_sentence=record["matched_sentence"],
                        vector_score=record["vector_score"],
                        rerank_score=record["rerank_score"], score=record.get("score"),
                        lexical_score=record["lexical_score"], reranker=record["reranker"],
                        query=record["query"], extra=dict(record["extra"]))


def record_text(record: ResultRecord) -> str:
    """The cluster's content, one episode per line (as `ScoredResult.text`)."""
    return "\n".join(e["content"] for e in record["episodes"])


def record_time(record: ResultRecord) -> datetime | None:
    """When a hit's nucleus was produced (None when the record does not say)."""
    nucleus = next((e for e in record["episodes"] if e.get("uid") == record["uid"]), None)
    produced = (nucleus or {}).get("produced_at")
    try:
        return datetime.fromisoformat(produced) if isinstance(produced, str) else None
    except ValueError:
        return None


def stored_entities(record: ResultRecord) -> list[Entity] | None:
    """The entities the index stored for a hit's nucleus (``memory_search`` adds them to the
    chain's hits), or ``None`` when it holds none."""
    found = record["extra"].get("entities")
    return None if found is None else [Entity(**e) for e in found]


def for_output(record: ResultRecord) -> ResultRecord:
    """A result as returned: without the stored entities the chain's judge read."""
    if "entities" not in record["extra"]:
        return record
    extra = {k: v for k, v in record["extra"].items() if k != "entities"}
    return ResultRecord(**{**record, "extra": extra})


OWN_RANK = "own_rank"
"""A hit's rank in the chain's search of one speaker's turns (in a record's ``extra``)."""
QUESTION_RANK = "question_rank"
"""A hit's rank in the search of the question itself (in a record's ``extra``)."""
WINDOW = "window"
"""A hit of a search confined to a window of time (in a record's ``extra``, with its
`OWN_RANK`)."""


def merge_pool(left: dict[str, ResultRecord] | None,
               right: dict[str, ResultRecord] | None) -> dict[str, ResultRecord]:
    """Pool evidence by episode uid, keeping the better-scored copy (the earlier one on ties)
    and the best `OWN_RANK` and `QUESTION_RANK` either copy carries."""
    merged = dict(left or {})
    for uid, result in (right or {}).items():
        kept = merged.get(uid)
        if kept is None or result["rerank_score"] > kept["rerank_score"]:
            merged[uid] = result
        if kept is not None:
            for key in (OWN_RANK, QUESTION_RANK):
                ranks = [r["extra"][key] for r in (kept, result) if key in r["extra"]]
                if ranks and merged[uid]["extra"].get(key) != min(ranks):
                    merged[uid] = {**merged[uid], "extra": {**merged[uid]["extra"],
                                                            key: min(ranks)}}
    return merged


class HopSearch(TypedDict):
    """One search of a chain hop: its query, its position among the hop's concurrent
    searches (``slot``) and the uids it found, best first."""

    hop: int
    slot: int
    query: str
    hits: list[str]


def latest_hop(left: list[HopSearch] | None, right: list[HopSearch] | None) -> list[HopSearch]:
    """The searches of the latest hop: a later hop's replace the earlier ones, the searches
    of one hop (sent at once) gather, in slot order."""
    kept = list(left or [])
    for search in right or []:
        if kept and search["hop"] > kept[0]["hop"]:
            kept = []
        if not kept or search["hop"] == kept[0]["hop"]:
            kept.append(search)
    return sorted(kept, key=lambda s: s["slot"])


def hop_hits(searches: list[HopSearch]) -> list[str]:
    """The uids of a hop's searches, best first, taken in turn from each search (so every
    query's best hits are among the first), without repeats."""
    ranked = [s["hits"] for s in sorted(searches, key=lambda s: s["slot"])]
    merged = (u for rank in zip_longest(*ranked) for u in rank if u is not None)
    return list(dict.fromkeys(merged))


def highest(left: int | None, right: int | None) -> int:
    """The larger count (concurrent searches of one round write the same one)."""
    return max(left or 0, right or 0)


def merge_dict(left: dict[str, str] | None, right: dict[str, str] | None) -> dict[str, str]:
    return {**(left or {}), **(right or {})}


class NodeCost(TypedDict):
    """What one node run spent. Times are ``time.time()`` instants (seconds)."""

    node: str
    llm_calls: int
    input_tokens: int
    output_tokens: int
    wall_ms: float
    estimated: bool
    started_at: float
    ended_at: float
    detail: NotRequired[str]
    raw: NotRequired[list[str]]  # an LLM step's raw model outputs (truncated), for the trace
    decided_by: NotRequired[str]  # which planner of a cascade made the step's decision


RAW_CHARS = 2000  # of one raw model output kept in a cost record


def node_cost(node: str, started_at: float, usage: Usage | None = None,
              detail: str | None = None, raw: list[str] | None = None,
              decided_by: str | None = None) -> NodeCost:
    """The cost record of a node run that began at ``started_at`` and ends now."""
    usage = usage or Usage()
    ended = time.time()
    record = NodeCost(node=node, llm_calls=usage.llm_calls, input_tokens=usage.input_tokens,
                      output_tokens=usage.output_tokens, wall_ms=(ended - started_at) * 1000,
                      estimated=usage.estimated, started_at=started_at, ended_at=ended)
    if detail:
        record["detail"] = detail
    if raw:
        record["raw"] = [text[:RAW_CHARS] for text in raw]
    if decided_by:
        record["decided_by"] = decided_by
    return record


class HopRecord(TypedDict):
    """One ChainOfQuery hop: the query searched and the judge's verdict on the evidence."""

    hop: int
    query: str
    is_sufficient: bool | None
    confidence: float | None
    evidence_indices: list[int]
    new_query: str
    decision: str  # "continue" or the stop reason
    concurrent_queries: NotRequired[list[str]]  # searched at once with ``query``, this hop
    new_concurrent_queries: NotRequired[list[str]]  # to search at once with ``new_query``
    reason: NotRequired[str]  # the judge's account of its verdict (`ChainJudgment.reason`)


class RetrievalInput(TypedDict, total=False):
    """What a caller passes in."""

    query: Required[str]
    scope: Required[Scope | dict[str, Any]]  # a dict in state, once validated
    k: int
    filters: dict[str, Any] | None
    strategy: Strategy
    budget: Budget | dict[str, Any] | None  # a dict of its fields in state, once validated
    # the time the question is asked (ISO-8601; a datetime is accepted as input): relative
    # expressions resolve against it, and nothing produced after it is searched; None: now
    as_of: Annotated[str | datetime | None, Field(description=AS_OF_HELP + " 'Last week' or "
                                                  "'yesterday' in the query is read against it.")]


class RetrievalOutput(TypedDict, total=False):
    """What a caller gets back."""

    results: list[ResultRecord]  # top k after the final rerank
    route: str  # "direct" | "split" | "chain"
    route_reason: str
    queries: Annotated[list[str], operator.add]  # every query that hit memory, in order
    sub_queries: list[str]
    hops: Annotated[list[HopRecord], operator.add]
    # rounds of searches one after another (a hop's concurrent searches are one round; the
    # question's search beside the split planner is one, the sub-queries' the next)
    search_rounds: Annotated[int, highest]
    costs: Annotated[list[NodeCost], operator.add]
    stop_reason: str
    notes: Annotated[list[str], operator.add]  # fallbacks and budget decisions, in order
    prompt_versions: Annotated[dict[str, str], merge_dict]
    planner: str


class RetrievalState(RetrievalInput, RetrievalOutput, total=False):
    """Input, output and the working fields of one retrieval."""

    started_at: float  # time.time() when tool_select began
    pool: Annotated[dict[str, ResultRecord], merge_pool]
    hop: Annotated[int, highest]  # ChainOfQuery hops (rounds of searches) done so far
    last_searches: Annotated[list[HopSearch], latest_hop]  # the latest hop's searches
    selected: Annotated[list[str], operator.add]  # uids the chain judge marked as evidence
    answer: list[str]  # the uid the chain judge accepted as the answer (kept in the top k)
    newest_first: bool  # the planner read the question as asking about now (`final_rerank`)
    # the windows of time every search of the run is confined to (`ChainSearch` fields: the
    # windows the question names, for a planner that `confines_to_windows`)
    windows: list[dict[str, Any]]
    question_searched: bool  # a split: the question's own search was sent beside the planner


OUTPUT_KEYS = tuple(RetrievalOutput.__annotations__)


def reference_time(state: RetrievalState) -> datetime:
    """The time the question is asked: the request's ``as_of`` (with its own offset), else
    now."""
    as_of = state.get("as_of")
    return datetime.fromisoformat(as_of) if isinstance(as_of, str) else datetime.now(timezone.utc)

