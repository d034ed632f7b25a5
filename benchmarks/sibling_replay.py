"""Replay the final rerank on dumped pools with the neighbours of the best hits pooled too.

Reads a `benchmarks.planner_variants --dump-pool` dump, and per question and variant adds to
the pool the neighbours of its best ``n`` hits (the other sentences filed under the hit's
title, ``"paragraph"``; the turns next to it in its session, ``"adjacent"``), read from the
eval store, then reranks as `memroute.graph.final_rerank` does with today's defaults
(composed queries, title link, entity link). Prints recall per variant, the pool's recall
with the neighbours (a perfect rerank) and the questions up / down against the base.

    python -m benchmarks.sibling_replay hotpotqa $H --pool pool.jsonl \\
        --variant '{}' --variant '{"n": 3, "which": "paragraph"}'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path

from benchmarks.rerank_headroom import pool_recall
from benchmarks.scorer_replay import pool_candidates
from memroute.evals.datasets import load_dataset
from memroute.evals.scoring import headline_metric
from memroute.evals.store import open_store
from memroute.graph.final_rerank import (COMPOSED_QUERIES, ENTITY_LINK_BONUS, LINK_BONUS,
                                         NOT_BRIDGES, composed_queries)
from memroute.memory import sql
from memroute.memory.embedders import make_embedder
from memroute.memory.rerankers.base import RerankQuery, rank_by_window
from memroute.memory.titles import split_title
from memroute.nlp import entity_key, query_entity_keys
from memroute.settings import get_settings


async def titled_siblings(memory, scope, titles: list[str]) -> dict[str, list[list]]:
    """Per title, the episodes filed under it (``[uid, content, None]``)."""
    if not titles:
        return {}
    async with memory._pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT uid, content FROM {memory.schema}.episodes WHERE scope_key = %s "
            "AND metadata->>'title' = ANY(%s::text[])", [scope.key, titles])
        rows = await cur.fetchall()
    out: dict[str, list[list]] = {}
    for uid, content in rows:
        out.setdefault(split_title(content)[0] or "", []).append([uid, content, None])
    return out


async def windows_of(memory, scope, uids: list[str], before: int, after: int):
    async with memory._pool.connection() as conn:
        return await sql.fetch_clusters(conn, memory.schema, scope.key, uids, before, after)


async def replay(args) -> None:
    settings = get_settings()
    dataset = load_dataset(args.dataset, args.data, args.limit)
    by_text = {q.question: q for q in dataset.questions}
    embedder = make_embedder(settings.embedder, threads=1, batch_size=settings.embed_batch_size)
    store = await open_store(dataset, seed=0, embedder=embedder, reranker=settings.reranker,
                             settings=settings)
    memory = store.memory
    context = (1, 2) if args.dataset == "locomo" else (0, 0)
    variants = [json.loads(v) for v in args.variant]
    totals = [0.0] * len(variants)
    pooled = [0.0] * len(variants)
    added = [0] * len(variants)
    by_type: list[dict[str, list[float]]] = [{} for _ in variants]
    per_q: list[list[float]] = [[] for _ in variants]
    speakers_of: dict[str, list[str]] = {}
    n = 0
    try:
        for entry in (json.loads(line) for line in args.pool.open()):
            question = by_text.get(entry["query"])
            if question is None:
                continue
            scope = store.scope_for(question)
            if scope.key not in speakers_of:
                speakers_of[scope.key] = await memory.speakers(scope)
            queries = list(dict.fromkeys([entry["query"], *entry["queries"]]))
            own = sorted((r for r in entry["pool"] if r["own"] is not None), key=lambda r: r["own"])
            rest = [r for r in entry["pool"] if r["own"] is None]
            skip = set(query_entity_keys(entry["query"]))
            skip |= {w.lower() for w in re.findall(r"[\w'’-]+", entry["query"])}
            skip |= {entity_key(s) for s in speakers_of[scope.key]}
            texts = queries + (composed_queries(queries) if COMPOSED_QUERIES else [])
            vecs = await memory.embed_queries(texts)
            rq = [RerankQuery(t, e) for t, e in zip(texts, vecs)]
            for vi, variant in enumerate(variants):
                chosen = own[:10]
                left = 10 - len(chosen)
                extra: list[dict] = []
                if rest and left and variant.get("n"):
                    extra = await neighbours(memory, scope, entry, rest, variant, context)
                cands_records = rest + extra
                if rest and left and len(queries) > 1:
                    uids = list({e[0] for r in cands_records for e in r["episodes"]})
                    async with memory._pool.connection() as conn:
                        vectors = await sql.fetch_sentence_embeddings(
                            conn, memory.schema, scope.key, uids)
                    stored = await memory.stored_entities(scope, uids)

                    def keys(uid):
                        return frozenset(e.key for e in stored.get(uid, ())
                                         if e.key not in skip and e.label not in NOT_BRIDGES)
                    cands = pool_candidates(cands_records, vectors, embedder.dim)
                    ek = [(keys(r["uid"]), frozenset().union(*(keys(e[0]) for e in r["episodes"])))
                          for r in cands_records]
                    order = await rank_by_window(memory.reranker, rq, cands, left, "max",
                                                 LINK_BONUS, ENTITY_LINK_BONUS, ek)
                    if variant.get("keep_titles") or variant.get("swap"):
                        base = await rank_by_window(memory.reranker, rq, cands[:len(rest)], left,
                                                    "max", LINK_BONUS, ENTITY_LINK_BONUS,
                                                    ek[:len(rest)])
                    if variant.get("bonus") or variant.get("alpha"):
                        # a neighbour scores (1 - alpha) x its own + alpha x its hit's, + bonus
                        order = await rank_by_window(memory.reranker, rq, cands, len(cands), "max",
                                                     LINK_BONUS, ENTITY_LINK_BONUS, ek)
                        score = {i: s for i, s in order}
                        at = {r["uid"]: i for i, r in enumerate(cands_records)}
                        a, b = variant.get("alpha", 0.0), variant.get("bonus", 0.0)
                        for i in range(len(rest), len(cands_records)):
                            hit = score.get(at.get(cands_records[i]["hit"]), score[i])
                            score[i] = (1 - a) * score[i] + a * hit + b - 1e-6 * i
                        order = sorted(score.items(), key=lambda o: -o[1])[:left]
                        if variant.get("keep_titles"):  # no document of the top k lost
                            order = keep_titles(order, base, cands_records, len(rest))
                        if variant.get("swap"):  # base top k; a neighbour replaces a duplicate
                            order = swap_in(score, base, cands_records, len(rest))
                    chosen = chosen + [cands_records[i] for i, _ in order]
                elif rest and left:
                    chosen = chosen + sorted(rest, key=lambda r: -r["score"])[:left]
                seen: dict[str, list] = {}
                for r in chosen:
                    for e in r["episodes"]:
                        seen.setdefault(e[0], e)
                value = pool_recall(args.dataset, question, list(seen.values()))
                totals[vi] += value
                per_q[vi].append(value)
                by_type[vi].setdefault(question.type, []).append(value)
                every = {e[0]: e for r in entry["pool"] + extra for e in r["episodes"]}
                pooled[vi] += pool_recall(args.dataset, question, list(every.values()))
                added[vi] += len(extra)
            n += 1
        for vi, variant in enumerate(args.variant):
            up = sum(a > b + 1e-9 for a, b in zip(per_q[vi], per_q[0]))
            down = sum(a < b - 1e-9 for a, b in zip(per_q[vi], per_q[0]))
            print(json.dumps({"dataset": args.dataset, "variant": variant, "questions": n,
                              headline_metric(args.dataset): round(totals[vi] / max(n, 1), 4),
                              "pool": round(pooled[vi] / max(n, 1), 4),
                              "added_per_q": round(added[vi] / max(n, 1), 1),
                              "up_down_vs_first": [up, down],
                              "types": {t: round(sum(v) / len(v), 4)
                                        for t, v in sorted(by_type[vi].items())}}), flush=True)
    finally:
        await memory.close()


def keep_titles(order, base, records, first):
    """``order`` (with neighbours, index >= ``first``) with the best hit of each title of
    ``base`` (without them) that it lost put back in place of its lowest neighbour."""
    title = lambda i: split_title(records[i]["episodes"][0][1])[0] or records[i]["uid"]
    order = list(order)
    for i, s in base:
        if title(i) in {title(j) for j, _ in order}:
            continue
        added = [o for o in order if o[0] >= first]
        if not added:
            break
        order.remove(added[-1])
        order.append((i, s))
    return sorted(order, key=lambda o: -o[1])


def swap_in(score, base, records, first):
    """The base top k; each neighbour (best first) that scores above the weakest kept hit
    whose title holds another kept place takes that place."""
    title = lambda i: split_title(records[i]["episodes"][0][1])[0] or records[i]["uid"]
    kept = [i for i, _ in base]
    for n in sorted((i for i in score if i >= first), key=lambda i: -score[i]):
        counts = {}
        for i in kept:
            counts[title(i)] = counts.get(title(i), 0) + 1
        dup = [i for i in kept if counts[title(i)] > 1 and score[i] < score[n]]
        if not dup:
            continue
        kept.remove(min(dup, key=lambda i: score[i]))
        kept.append(n)
    return [(i, score[i]) for i in kept]


async def neighbours(memory, scope, entry, rest, variant, context) -> list[dict]:
    """The pool records of the neighbours of the best ``n`` hits (by their search's score)
    that the pool does not hold."""
    best = sorted(rest, key=lambda r: -r["score"])[:variant["n"]]
    have = {r["uid"] for r in entry["pool"]}
    found: list[list] = []
    if variant.get("which", "paragraph") == "paragraph":
        titles = list(dict.fromkeys(t for t in (split_title(r["episodes"][0][1])[0]
                                                for r in best) if t))
        hit_of = {}
        for r in best:
            hit_of.setdefault(split_title(r["episodes"][0][1])[0], r["uid"])
        for title, rows in (await titled_siblings(memory, scope, titles)).items():
            if variant.get("lead"):  # only the sentence that names its own title
                rows = [e for e in rows if title.split(" (")[0].lower()
                        in split_title(e[1])[1].lower()]
            found += [[*e[:3], hit_of.get(title)] for e in rows]
    else:
        d = variant.get("d", 1)
        windows, episodes = await windows_of(memory, scope, [r["uid"] for r in best], d, d)
        for hit, uids in windows.items():
            found += [[u, episodes[u].content, episodes[u].episode().metadata.get("dia_id"), hit]
                      for u in uids]
    new = list(dict.fromkeys(e[0] for e in found if e[0] not in have))
    if not new:
        return []
    if context == (0, 0):
        rows = {e[0]: e for e in found}
        return [{"uid": u, "own": None, "score": 0.0, "hit": rows[u][3],
                 "episodes": [rows[u][:3]]} for u in new]
    hits = {e[0]: e[3] for e in found}
    windows, episodes = await windows_of(memory, scope, new, *context)
    return [{"uid": u, "own": None, "score": 0.0, "hit": hits[u],
             "episodes": [[w, episodes[w].content, episodes[w].episode().metadata.get("dia_id")]
                          for w in windows[u]]} for u in new if u in windows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--pool", type=Path, required=True)
    parser.add_argument("--variant", action="append", default=None,
                        help="JSON: n (best hits), which (paragraph|adjacent), d, bonus")
    args = parser.parse_args()
    args.variant = args.variant or ["{}"]
    asyncio.run(replay(args))


if __name__ == "__main__":
    main()
