"""``final_rerank``: rerank the pooled evidence against the question and every query used, keep the top k."""

from __future__ import annotations

import asyncio
import math
import re
import time
from datetime import datetime, timezone
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from memroute.graph.context import ContextResolver, scope_speakers
from memroute.graph.events import Final, as_payload
from memroute.graph.state import (
    OWN_RANK,
    QUESTION_RANK,
    WINDOW,
    ResultRecord,
    RetrievalState,
    as_record,
    for_output,
    from_record,
    node_cost,
    record_time,
)
from memroute.graph.trace import record_decision
from memroute.memory.limits import MAX_LIST
from memroute.memory.models import ScoredResult, disjoint_windows
from memroute.memory.titles import titles_of
from memroute.nlp import SPEAKER_LABEL, Entity, asks_itself, entity_key
from memroute.reading.entities import STOPWORDS
from memroute.reading.question import read

NODE = "final_rerank"
_EPOCH = datetime.min.replace(tzinfo=timezone.utc)
# Each pooled result scores on its whole context window (a neighbour still never outranks
# its match): the windows around the searches' strong matches fill the top k, which on
# LoCoMo holds more evidence than crediting each matched turn (docs/research.md, "The auto
# regression on LoCoMo").
FINAL_CREDIT = "window"
# The final scorer's two credits for a chain's second-hop evidence, which is linked to the
# question through the bridge, not by its similarity to any one query (docs/research.md,
# "A better final scorer", replayed on the pools dumped at 69f1047 and run end to end):
# - each rewrite's bridge words joined to the question (`composed_queries`), scored as one
#   more query of the max fusion;
# - LINK_BONUS added to a hit whose title the best windows of another title name
#   (`linked_by_top`; 0 turns it off).
# Auto, k = 10, before -> 0.05 -> 0.07: HotpotQA 800 0.8520 -> 0.8658 -> 0.8684, HotpotQA 300
# 0.8831 -> 0.8957 -> 0.8985, 2Wiki 0.8596 -> 0.8760 -> 0.8798, MuSiQue 0.7842 -> 0.7971 ->
# 0.8037, LoCoMo 0.8475 throughout (no titles); searches unchanged.
COMPOSED_QUERIES = True
LINK_BONUS = 0.07
# The link bonus's analogue through the entity index, which conversations have and titles
# do not: ENTITY_LINK_BONUS added to a hit whose episode stores a named entity (not a date
# or an amount) that one of the `ENTITY_LINKING_TOP` (10) best windows of other episodes
# stores and the question does not name, speakers left out (`entity_link_keys`,
# `linked_by_entities`).
# Replayed on the pools dumped at 8b129a0 (docs/research.md, "The entity link"), 0 -> 0.05:
# HotpotQA 800 0.8684 -> 0.8703, HotpotQA 300 0.8985 -> 0.8977, 2Wiki 0.8798 -> 0.8805,
# MuSiQue (replay count) 0.7904 -> 0.8013, LoCoMo (replay count) 0.8459 -> 0.8483.
ENTITY_LINK_BONUS = 0.05
NOT_BRIDGES = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT",
                         SPEAKER_LABEL})
_WORD = re.compile(r"[\w'’-]+")


async def pooled_entities(memory: Any, scope: dict, uids: list[str]) -> dict[str, list[Entity]]:
    """`Memory.stored_entities` of every pooled episode: a large k's windows hold more than
    one lookup may ask for (`MAX_LIST`), so they are read in lookups of that size."""
    parts = await asyncio.gather(*(memory.stored_entities(scope, uids[i:i + MAX_LIST])
                                   for i in range(0, len(uids), MAX_LIST)))
    return {uid: entities for part in parts for uid, entities in part.items()}


def entity_link_keys(question: str, results: list[ScoredResult],
                     stored: dict[str, list[Entity]], speakers: list[str]
                     ) -> list[tuple[frozenset[str], frozenset[str]]]:
    """Per result, the entity keys its nucleus stores and the keys its whole window stores,
    each without the question's (its named spans and its words), the speakers' and those of
    `NOT_BRIDGES` labels: what may link one hit to another as a bridge."""
    skip = set(read(question).entity_keys)  # the question's reading (made before routing)
    skip |= {w.lower() for w in _WORD.findall(question)} | {entity_key(s) for s in speakers}

    def keys(uid: str | None) -> frozenset[str]:
        return frozenset(e.key for e in stored.get(uid or "", ())
                         if e.key not in skip and e.label not in NOT_BRIDGES)
    return [(keys(r.uid), frozenset().union(*(keys(e.uid) for e in r.episodes)))
            for r in results]


def bridge_words(question: str, rewrite: str) -> list[str]:
    """The runs of ``rewrite``'s words that ``question`` does not hold and that name something
    (a capital or a digit): the bridge the rewrite searched with."""
    known = {w.lower() for w in _WORD.findall(question)}
    runs: list[list[str]] = [[]]
    for word in _WORD.findall(rewrite):
        if word.lower() in known:
            runs.append([])
        else:
            runs[-1].append(word)
    return [" ".join(run) for run in runs
            if run and any(c.isupper() or c.isdigit() for w in run for c in w)]


def composed_queries(queries: list[str]) -> list[str]:
    """The question (``queries[0]``) with each later query's bridge words appended, the ones
    that differ from every query given: a second-hop fact scores against the question and its
    bridge together."""
    question = queries[0]
    composed = (" ".join([question, *bridge_words(question, q)]) for q in queries[1:])
    return [q for q in dict.fromkeys(composed) if q not in queries]


# The share of the top k kept for the question's own search, in its order: whatever else
# the searches pooled, auto keeps what one search of the question ranks highest.
QUESTION_SHARE = 0.5


def with_question_share(ranked: list[ResultRecord], pool: list[ResultRecord],
                        places: int) -> list[ResultRecord]:
    """``ranked`` (the fused order, ``places`` long at most) with the question's own best
    hits (`QUESTION_SHARE` of ``places``, by `QUESTION_RANK`) put in where missing, in
    place of the lowest-ranked others."""
    share = math.ceil(QUESTION_SHARE * places)
    reserved = sorted((r for r in pool if QUESTION_RANK in r["extra"]),
                      key=lambda r: r["extra"][QUESTION_RANK])[:share]
    ranked_uids = {r["uid"] for r in ranked}
    missing = [r for r in reserved if r["uid"] not in ranked_uids]
    if not missing:
        return ranked
    keep = {r["uid"] for r in reserved}
    out = list(ranked[:places])
    for record in missing:
        if len(out) < places:
            out.append(record)
            continue
        drop = next(i for i in range(len(out) - 1, -1, -1) if out[i]["uid"] not in keep)
        out.pop(drop)
        out.append(record)
    return out


def with_answer(results: list[ResultRecord], pool: list[ResultRecord], answer: list[str],
                k: int) -> list[ResultRecord]:
    """``results`` with the hits the chain's judge accepted as the answer put in where
    missing, in place of the lowest-ranked others: what resolved the question is returned."""
    have = {r["uid"] for r in results}
    by_uid = {r["uid"]: r for r in pool}
    out = list(results)
    for uid in answer:
        if uid in have or uid not in by_uid:
            continue
        if len(out) >= k:
            out.pop()
        out.append(by_uid[uid])
        have.add(uid)
    return out


WINDOW_SHARE = 2  # of every three places, those of a window of time's hits
# Results whose scores lie within ANSWER_BAND of each other match the question about as
# well: among them a statement comes before a turn that only asks, and, for a question about
# now, the newer statement before the older (`answers_first`).
ANSWER_BAND = 0.05


def _asks_only(record: ResultRecord) -> bool:
    """Whether a hit's turn only asks: every sentence a question, or an exclamation of a
    word or two ("Nice! Is she still at Tidewave Labs?")."""
    text = _nucleus_text(record).strip()
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
    return any(asks_itself(s) for s in sentences) and all(
        asks_itself(s) or len(s.split()) <= 2 for s in sentences)


def _stems(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"\w+", text.casefold())
            if len(w) >= 3 and w not in STOPWORDS}


def _nucleus_text(record: ResultRecord) -> str:
    nucleus = next((e for e in record["episodes"] if e.get("uid") == record["uid"]), None)
    return (nucleus or {}).get("content", "")


def answers_first(results: list[ResultRecord], newest_first: bool, question: str = "",
                  band: float = ANSWER_BAND) -> list[ResultRecord]:
    """``results`` (best first, by ``rerank_score``) with each moved above the results it
    matches about as well (``band``) that only ask a question, and, when ``newest_first``,
    above the older ones when its own turn speaks of what ``question`` asks (a word in
    common): a question is no answer, and a later statement supersedes an earlier."""
    asked_about = _stems(question)
    # passages filed under titles are stored, not told: their times say nothing of the world
    newest_first = newest_first and 2 * sum(bool(titles_of(_nucleus_text(r)))
                                            for r in results) < len(results)
    out: list[ResultRecord] = []
    for record in results:
        at = len(out)
        speaks = bool(asked_about & _stems(_nucleus_text(record)))
        for i in range(len(out) - 1, -1, -1):
            other = out[i]
            if other["rerank_score"] - record["rerank_score"] > band:
                break
            asks, asked = _asks_only(other), _asks_only(record)
            newer = (newest_first and speaks and not asked and not asks
                     and (record_time(record) or _EPOCH) > (record_time(other) or _EPOCH))
            if (asks and not asked) or newer:
                at = i
        out.insert(at, record)
    return out


def window_first(spoken: list[ResultRecord], windowed: list[ResultRecord],
                 pool: list[ResultRecord], k: int) -> list[ResultRecord]:
    """One speaker's own turns first (``spoken``), then the hits of a window of time the
    question names, in that search's order, two of every three places, the third for the
    question's own best hits (in case the window was read wrong)."""
    out = list(spoken)
    if not windowed:
        return out
    asked = iter(sorted((r for r in pool if QUESTION_RANK in r["extra"]),
                        key=lambda r: r["extra"][QUESTION_RANK]))
    seen = {r["uid"] for r in out}
    timed = iter(windowed)
    turn = 0
    while len(out) < k:
        source = timed if turn % (WINDOW_SHARE + 1) < WINDOW_SHARE else asked
        record = next((r for r in source if r["uid"] not in seen), None)
        if record is None:
            record = next((r for r in (timed if source is asked else asked)
                           if r["uid"] not in seen), None)
            if record is None:
                break
        out.append(record)
        seen.add(record["uid"])
        turn += 1
    return out


async def with_replies(memory: Any, scope: dict, results: list[ResultRecord],
                       filters: dict[str, Any] | None = None, as_of: str | None = None
                       ) -> list[ResultRecord]:
    """``results`` with each turn that only asks, or matched by its question, replaced by
    the reply that follows it in its session (another producer's next turn, within the
    retrieval's ``filters`` and ``as_of``), the question kept in its window: a question is
    no answer, and its reply usually is. A reply already returned is left where it is."""
    asking = [r["uid"] for r in results
              if _asks_only(r) or asks_itself(r["matched_sentence"])]
    if not asking:
        return results
    replies = await memory.replies(scope, asking, filters=filters, as_of=as_of)
    nuclei = {r["uid"] for r in results}
    out = []
    for record in results:
        reply = replies.get(record["uid"])
        if reply is None or reply.episode.uid in nuclei:
            out.append(record)
            continue
        uid = reply.episode.uid
        episodes = record["episodes"]
        if all(e.get("uid") != uid for e in episodes):
            episodes = [*episodes, reply.episode.model_dump(mode="json", exclude_defaults=True)]
        out.append({**record, "uid": uid, "episodes": episodes,
                    "extra": {**record["extra"], "reply_to": record["uid"]}})
        nuclei.add(uid)
    return out


def own_turns_first(pool: list[ResultRecord]) -> tuple[list[ResultRecord], list[ResultRecord]]:
    """The hits of the chain's search of one speaker's turns, in that search's order, and the
    rest of the pool. A question about one speaker is answered from their own turns: fused
    with the question's search, the other speaker's turns that name them ("Wow, Melanie!")
    outrank the evidence (LoCoMo, docs/research.md, "noun-phrase bridges and lists")."""
    own = sorted((r for r in pool if OWN_RANK in r["extra"]), key=lambda r: r["extra"][OWN_RANK])
    return own, [r for r in pool if OWN_RANK not in r["extra"]]


def ordered_scores(scores: list[float]) -> list[float]:
    """The scores results in this order are shown with: each its own, raised to the best
    score below it when a rule placed it above better-scored results (the chain's answer, a
    speaker's own turns, a window's hits, a reply), so the order is the score."""
    shown, best = [], float("-inf")
    for score in reversed(scores):
        if score == score:  # not NaN
            best = max(best, score)
        shown.append(best if best > float("-inf") else score)
    return shown[::-1]


def deduplicated(results: list[ResultRecord]) -> list[ResultRecord]:
    """The results as returned: each with its ``score`` (`ordered_scores`; its own score
    stays ``rerank_score``) and the uids of its context episodes another result shows (a
    better result's context, or another result's match), so that a consumer printing
    ``episodes`` minus ``shown_elsewhere`` shows every turn once, as the retriever, the
    agent tool and the CLI do."""
    windows = disjoint_windows([from_record(r) for r in results])
    scores = ordered_scores([r["rerank_score"] for r in results])
    return [ResultRecord(**{**r, "score": score, "shown_elsewhere": window.shown_elsewhere})
            for r, window, score in zip(results, windows, scores)]


def make_final_rerank(resolve: ContextResolver):
    async def final_rerank(state: RetrievalState, runtime: Runtime) -> dict:
        """The chain's search of one speaker's turns: its order stands, first
        (`own_turns_first`). The places left: with one query, its search's order; with
        several, `Memory.rerank` against all of them and their `composed_queries` (fused per
        candidate, or MemMachine's concatenated query; ``credit="window"``, `LINK_BONUS`,
        `ENTITY_LINK_BONUS` with the pooled episodes' stored entities) on the pooled hits'
        stored vectors (re-read in one statement: state carries no vectors)."""
        ctx = await resolve(runtime.context)
        started = time.time()
        own, pool = own_turns_first(list((state.get("pool") or {}).values()))
        # the question is scored too when a chain's first search was a part of it
        queries = list(dict.fromkeys([state["query"], *(state.get("queries") or [])]))
        k = state["k"]
        results = window_first([r for r in own if not r["extra"].get(WINDOW)][:k],
                               [r for r in own if r["extra"].get(WINDOW)], pool, k)
        taken = {r["uid"] for r in results}
        pool = [r for r in pool if r["uid"] not in taken]
        left = k - len(results)
        newest = bool(state.get("newest_first"))
        if pool and left and len(queries) <= 1:
            results += answers_first(sorted(pool, key=lambda r: -r["rerank_score"]),
                                     newest, state["query"])[:left]
        elif pool and left:
            hits = [from_record(r) for r in pool]
            scored = queries + (composed_queries(queries)
                                if COMPOSED_QUERIES and ctx.rerank_mode == "fused" else [])
            keys = None
            if ENTITY_LINK_BONUS:
                # the pool's vectors and its episodes' entities, read at once
                pooled, stored, speakers = await asyncio.gather(
                    ctx.memory.with_stored_embeddings(state["scope"], hits),
                    pooled_entities(ctx.memory, state["scope"],
                                    list({e.uid for r in hits for e in r.episodes if e.uid})),
                    scope_speakers(ctx, state))
                keys = entity_link_keys(state["query"], pooled, stored, speakers)
            else:
                pooled = await ctx.memory.with_stored_embeddings(state["scope"], hits)
            ranked = await ctx.memory.rerank(pooled, scored, left, mode=ctx.rerank_mode,
                                             credit=FINAL_CREDIT, link_bonus=LINK_BONUS,
                                             entity_bonus=ENTITY_LINK_BONUS, entity_keys=keys)
            by_uid = {r["uid"]: r for r in pool}
            fused = [{**as_record(r), "extra": by_uid[r.uid]["extra"]} if r.uid in by_uid
                     else as_record(r) for r in ranked]
            results += with_question_share(answers_first(fused, newest, state["query"]), pool,
                                           left)
        results = with_answer(results, own + pool, list(state.get("answer") or []), k)
        if state.get("strategy") != "direct":  # "direct" stays the plain search
            results = await with_replies(ctx.memory, state["scope"], results,
                                         state.get("filters"), state.get("as_of"))
        results = deduplicated([for_output(r) for r in results])
        stop_reason = state.get("stop_reason") or "done"
        await record_decision(state, stop_reason)
        runtime.stream_writer(as_payload(Final(state.get("route", ""), stop_reason,
                                               list(state.get("queries") or []), len(results))))
        # The pool has served its purpose: the run's last checkpoint keeps the results only.
        return {"results": results, "stop_reason": stop_reason, "pool": Overwrite({}),
                "costs": [node_cost(NODE, started, detail=f"{len(own) + len(pool)} pooled, "
                                    f"{len(queries)} queries, {ctx.rerank_mode}")]}

    return final_rerank
