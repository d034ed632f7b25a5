"""``memory_search``: the one node that reads the store. Every route's searches run here."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Command, Send
from typing_extensions import NotRequired, TypedDict

from memroute.graph import final_rerank
from memroute.graph.context import ContextResolver
from memroute.graph.events import SearchDone, as_payload
from memroute.graph.state import (
    OWN_RANK,
    QUESTION_RANK,
    WINDOW,
    HopSearch,
    RetrievalState,
    as_record,
    node_cost,
)
from memroute.memory.filters import MENTIONS_DAY
from memroute.memory.limits import MAX_K
from memroute.memory.models import ScoredResult
from memroute.nlp import SPEAKER_LABEL, Entity, entity_key
from memroute.strategies.base import ChainSearch, Route, search_k
from memroute.strategies.chain_of_query import stop_before_judging

NODE = "memory_search"


class SearchTask(TypedDict):
    """One search, sent to ``memory_search`` with `Send` (plain data, so it checkpoints)."""

    query: str
    role: Route
    hop: int
    scope: dict[str, Any]
    k: int
    filters: dict[str, Any] | None  # the caller's: they bound the hits and their context
    # nothing produced after it is read (ISO-8601; absent: the request set none)
    as_of: NotRequired[str]
    # what only the matched turns must meet (a speaker, a window of time): their context
    # comes from the whole memory the bound leaves
    match: NotRequired[dict[str, Any]]
    # the round of searches this one belongs to (searches of one round run at once)
    round: int
    # its position among the searches of one chain hop (sent at once), 0 for the first
    slot: NotRequired[int]
    # Sent beside the split planner: its hits wait in the pool, and the planner's step goes
    # on to the final rerank (with or after the sub-queries' searches).
    beside_planner: NotRequired[bool]
    # The search was confined to one speaker's turns (`ChainJudgment.producer`; "" when it
    # was not) or to a window of time: its hits carry their rank here, and the final rerank
    # keeps that order, first (`final_rerank.own_turns_first`).
    producer: NotRequired[str]
    # confined to a window of time only (no speaker): `final_rerank.window_first`
    window: NotRequired[bool]
    # The final rerank's composed query of this one (the question and this query's bridge
    # words, `final_rerank.composed_queries`): embedded while this search reads the store.
    composed: NotRequired[str]
    # It searches the question itself, unfiltered: the final rerank keeps a share of its hits
    question_search: NotRequired[bool]


def window_match(produced_after: str = "", produced_before: str = "",
                 mentions_days: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The conditions of a window of time, all to hold: the turns produced in
    ``[produced_after, produced_before)``, or naming one of ``mentions_days``; [] for none."""
    window: list[dict[str, Any]] = []
    if produced_after:
        window.append({"produced_at": {"$gte": produced_after}})
    if produced_before:
        window.append({"produced_at": {"$lt": produced_before}})
    if mentions_days:
        said = window[0] if len(window) == 1 else {"$and": window}
        named = {MENTIONS_DAY: {"$in": list(mentions_days)}}
        window = [{"$or": [said, named]} if window else named]
    return window


def send_search(state: RetrievalState, query: str, role: Route, hop: int = 0, *,
                beside_planner: bool = False, producer: str = "", produced_after: str = "",
                produced_before: str = "", mentions_days: Sequence[str] = (),
                search_round: int | None = None, slot: int = 0) -> Send:
    """One search of ``query`` (a rewrite fetches more results: `search_k`), among
    ``producer``'s episodes only when one is given, and among those produced in
    ``[produced_after, produced_before)`` or naming one of ``mentions_days`` when given.
    ``search_round``: the round of searches it belongs to (by default a chain's hop, else
    1); ``slot``: its place among the searches one chain hop sends at once. A query other
    than the question carries its composed query (`final_rerank.composed_queries`), which
    the search embeds beside it. The request's ``filters`` and ``as_of`` bound every search
    (`memroute.memory.bounds.ReadBound`); the speaker and the window narrow only the turns
    it matches."""
    narrower: list[dict[str, Any]] = [{"producer": producer}] if producer else []
    window = window_match(produced_after, produced_before, mentions_days)
    narrower += window
    # the run's windows of time (`RetrievalState.windows`): every search stays inside them
    bounds = [m[0] if len(m) == 1 else {"$and": m} for w in state.get("windows") or []
              if (m := window_match(w.get("produced_after", ""), w.get("produced_before", ""),
                                    w.get("mentions_days", ())))]
    if bounds:
        narrower.append(bounds[0] if len(bounds) == 1 else {"$or": bounds})
    task = SearchTask(query=query, role=role, hop=hop, scope=state["scope"],
                      k=search_k(state["k"], query, state["query"], MAX_K),
                      filters=state.get("filters"),
                      round=search_round if search_round is not None else max(hop, 1))
    if state.get("as_of"):
        task["as_of"] = state["as_of"]
    if narrower:
        task["match"] = {"$and": narrower} if len(narrower) > 1 else narrower[0]
    if slot:
        task["slot"] = slot
    if beside_planner:
        task["beside_planner"] = True
    if producer or window:
        # confined to one speaker's turns or to a window of time: its order stands, first
        task["producer"] = producer
        if not producer:
            task["window"] = True
    elif query == state["query"]:
        task["question_search"] = True
    composed = (final_rerank.composed_queries([state["query"], query])
                if query != state["query"] else [])
    if composed:
        task["composed"] = composed[0]
    return Send(NODE, task)


def send_planned(state: RetrievalState, search: ChainSearch, role: Route, hop: int = 0, *,
                 slot: int = 0) -> Send:
    """`send_search` of a search a planner laid out (its speaker, window and days)."""
    return send_search(state, search.query, role, hop, slot=slot, producer=search.producer,
                       produced_after=search.produced_after,
                       produced_before=search.produced_before,
                       mentions_days=search.mentions_days)


def hit_entities(result: ScoredResult, stored: dict[str, list[Entity]]) -> list[Entity]:
    """The stored entities of a hit's nucleus, who said it first when a name did (so the
    judge reads whose "my" it is), then the speakers of its context window (a question
    about a speaker often finds the other speaker's turn that names them first)."""
    own = list(stored.get(result.uid, []))
    said_by = entity_key(result.nucleus.producer)
    own.sort(key=lambda e: not (e.label == SPEAKER_LABEL and e.key == said_by))
    speakers = {e.key for e in own if e.label == SPEAKER_LABEL}
    for episode in result.episodes:
        for entity in stored.get(episode.uid or "", []):
            if entity.label == SPEAKER_LABEL and entity.key not in speakers:
                own.append(entity)
                speakers.add(entity.key)
    return own


def make_memory_search(resolve: ContextResolver):
    async def memory_search(task: SearchTask, runtime: Runtime) -> Command:
        """Search memory for one query and pool the hits by episode uid. The searches of one
        chain hop (sent at once) run concurrently; each goes on to the judge, which LangGraph
        runs once, after all of them."""
        ctx = await resolve(runtime.context)
        options = {"context": ctx.neighbours} if ctx.neighbours is not None else {}
        if task.get("composed") and final_rerank.COMPOSED_QUERIES and ctx.rerank_mode == "fused":
            # the final rerank's composed query, embedded once this search's query is, while
            # the search reads the store: off the final rerank's critical path
            ctx.memory.prefetch_queries([task["composed"]], after=task["query"])
        async with ctx.searches:
            started = time.time()
            # the chain's judge reads what the entity index stored for each hit (not after
            # the last hop, which is not judged), read by the search statement itself
            judged = (task["role"] == "chain"
                      and stop_before_judging(task["hop"], ctx.max_hops) is None)
            results = await ctx.memory.search_scored(
                task["scope"], task["query"], k=task["k"], filters=task["filters"],
                as_of=task.get("as_of"), match=task.get("match"), with_entities=judged,
                expired_items=ctx.expired_items, **options)
            stored = results.entities
            cost = node_cost(NODE, started, detail=f"{task['role']}: {task['query']}")
        pool = {}
        question = task.get("question_search", False)
        for rank, result in enumerate(results):
            record = as_record(result)
            record["extra"].update(role=task["role"], hop=task["hop"])
            if "producer" in task:
                record["extra"][OWN_RANK] = rank
                if task.get("window"):
                    record["extra"][WINDOW] = True
            elif question:
                record["extra"][QUESTION_RANK] = rank
            if result.uid in stored:
                record["extra"]["entities"] = [e.as_json() for e in hit_entities(result, stored)]
            pool[record["uid"]] = record
        update: dict[str, Any] = {"queries": [task["query"]], "pool": pool, "costs": [cost],
                                  "search_rounds": task.get("round", 1)}
        if task["role"] == "chain":
            update["hop"] = task["hop"]
            update["last_searches"] = [HopSearch(hop=task["hop"], slot=task.get("slot", 0),
                                                 query=task["query"],
                                                 hits=[r.uid for r in results])]
        runtime.stream_writer(as_payload(SearchDone(task["query"], task["role"], task["hop"],
                                                    len(results))))
        if task.get("beside_planner"):
            return Command(update=update)
        goto = "chain_judge" if task["role"] == "chain" else "final_rerank"
        return Command(update=update, goto=goto)

    return memory_search
