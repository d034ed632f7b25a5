"""Replay the final rerank on dumped pools with another scorer, without running the hops.

Reads a `benchmarks.planner_variants` pool dump (``--dump-pool``), re-reads the pooled
episodes' stored vectors from the eval store, reranks each question's pool as
`memroute.graph.final_rerank` does (own turns first, then the windows against every query)
and prints the headline recall per scorer variant (docs/evaluation.md, "A better final
scorer").

    python -m benchmarks.scorer_replay hotpotqa ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl \\
        --limit 300 --pool pool-hotpotqa.jsonl --variant base --variant '{"bridge": 0.05}'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path

import numpy as np

from memroute.evals.datasets import load_dataset
from memroute.evals.scoring import headline_metric
from memroute.evals.store import open_store
from memroute.memory.embedders import make_embedder
from memroute.graph.final_rerank import composed_queries
from memroute.memory.rerankers.base import (ContextCandidate, RerankCandidate, RerankQuery,
                                            rank_by_window)
from memroute.memory.titles import split_title
from memroute.settings import get_settings
import memroute.memory.rerankers.base as rbase

# the defaults, restored per variant
PER_TITLE, TOP, ENTITY_TOP = rbase.LINK_PER_TITLE, rbase.LINKING_TOP, rbase.ENTITY_LINKING_TOP
from benchmarks.rerank_headroom import pool_recall


def pool_candidates(records: list[dict], vectors: dict, dim: int) -> list[ContextCandidate]:
    """The final rerank's candidates of dumped pool records: each record's window (its
    episodes' texts and stored vectors) and, for a window of several, its nucleus."""
    empty = np.zeros((0, dim), np.float32)
    cands = []
    for r in records:
        parts = [vectors.get(e[0], empty) for e in r["episodes"]]
        nucleus = next((e for e in r["episodes"] if e[0] == r["uid"]), None)
        cands.append(ContextCandidate(
            r["uid"], RerankCandidate("\n".join(e[1] for e in r["episodes"]),
                                      np.vstack(parts) if parts else empty),
            tuple(e[0] for e in r["episodes"]),
            RerankCandidate(nucleus[1], vectors.get(nucleus[0], empty))
            if nucleus and len(r["episodes"]) > 1 else None))
    return cands


async def replay(args) -> None:
    settings = get_settings()
    dataset = load_dataset(args.dataset, args.data, args.limit)
    by_text = {q.question: q for q in dataset.questions}
    embedder = make_embedder(settings.embedder, threads=1, batch_size=settings.embed_batch_size)
    store = await open_store(dataset, seed=args.seed or 0,
                             embedder=embedder, reranker=settings.reranker, settings=settings)
    memory = store.memory
    try:
        pools = [json.loads(line) for line in args.pool.open()]
        variants = [{} if v == "base" else json.loads(v) for v in args.variant]
        totals = [0.0] * len(variants)
        by_type: list[dict[str, list[float]]] = [{} for _ in variants]
        n = 0
        from memroute.memory import sql
        from benchmarks import scorer_variants as final_scorer
        for entry in pools:
            question = by_text.get(entry["query"])
            if question is None:
                continue
            scope = store.scope_for(question)
            queries = list(dict.fromkeys([entry["query"], *entry["queries"]]))
            own = sorted((r for r in entry["pool"] if r["own"] is not None), key=lambda r: r["own"])
            rest = [r for r in entry["pool"] if r["own"] is None]
            k, got = 10, None
            cands = None
            if len(queries) > 1 and rest:
                uids = list({e[0] for r in rest for e in r["episodes"]})
                async with memory._pool.connection() as conn:
                    vectors = await sql.fetch_sentence_embeddings(conn, memory.schema, scope.key, uids)
                cands = pool_candidates(rest, vectors, embedder.dim)
                embeddings = await memory.embed_queries(queries)
                rq = [RerankQuery(t, e) for t, e in zip(queries, embeddings)]
            if any("entity" in v for v in variants):
                keys_of = await entity_keys_of(memory, scope, entry)
            n_question = 0.0
            for vi, variant in enumerate(variants):
                variant = dict(variant)
                if variant.get("entity_own"):  # the own turns, reordered with the entity link
                    own = rank_own(own, keys_of, variant)
                else:
                    own = sorted(own, key=lambda r: r["own"])
                left = k - len(own[:k])
                chosen = own[:k]
                if rest and left:
                    if cands is None:
                        chosen = chosen + sorted(rest, key=lambda r: -r["score"])[:left]
                    else:
                        variant = dict(variant)
                        rbase.LINK_PER_TITLE = variant.pop("per_title", PER_TITLE)
                        rbase.LINKING_TOP = variant.pop("top", TOP)
                        rbase.ENTITY_LINKING_TOP = variant.get("entity_top", ENTITY_TOP)
                        rbase.fuse_scores = fusion_with(variant.pop("second", 0.0))
                        if "prod" in variant:  # the defaults' code path: composed, link bonus
                            texts = queries + (composed_queries(queries) if variant["prod"] else [])
                            vecs = await memory.embed_queries(texts)
                            order = await rank_by_window(
                                memory.reranker, [RerankQuery(t, e) for t, e in zip(texts, vecs)],
                                cands, left, "max", variant.get("link_bonus", 0.0),
                                variant.get("entity", 0.0),
                                [keys_of(r, variant.get("entity_labels")) for r in rest]
                                if "entity" in variant else None)
                            if "title_penalty" in variant:
                                order = await rank_by_window(
                                    memory.reranker,
                                    [RerankQuery(t, e) for t, e in zip(texts, vecs)], cands,
                                    len(cands), "max", variant.get("link_bonus", 0.0))
                                order = title_diverse(order, cands, left, variant["title_penalty"],
                                                      variant.get("title_free", 1))
                            chosen = chosen + [rest[i] for i, _ in order]
                            variant = None
                        for key in ("entity", "entity_own", "entity_top", "entity_labels"):
                            if variant is not None:
                                variant.pop(key, None)
                        compose = variant.pop("compose", None) if variant is not None else None
                        if compose:
                            texts = [queries[0] + " " + " ".join(final_scorer.bridge_phrases(queries[0], q))
                                     for q in queries[1:]]
                            texts = [t for t in dict.fromkeys(texts) if t != queries[0]]
                            if texts:
                                vecs = await memory.embed_queries(texts)
                                variant["extra"] = [RerankQuery(t, e) for t, e in zip(texts, vecs)]
                        if variant is not None:
                            order = await final_scorer.rank_pool(memory.reranker, rq, cands, left,
                                                                 **variant)
                            chosen = chosen + [rest[i] for i, _ in order]
                seen = {}
                for r in chosen:
                    for e in r["episodes"]:
                        seen.setdefault(e[0], e)
                value = pool_recall(args.dataset, question, list(seen.values()))
                totals[vi] += value
                by_type[vi].setdefault(question.type, []).append(value)
            n += 1
        for variant, total, types in zip(args.variant, totals, by_type):
            print(json.dumps({"dataset": args.dataset, "variant": variant, "questions": n,
                              headline_metric(args.dataset): round(total / max(n, 1), 4),
                              "types": {t: round(sum(v) / len(v), 4)
                                        for t, v in sorted(types.items())}}))
    finally:
        await memory.close()


_NOT_BRIDGES = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT"})


async def entity_keys_of(memory, scope, entry):
    """A function of a pooled record: (its nucleus's entity keys, its window's), without the
    keys the question names (its entities and its words) and the scope's speakers."""
    from memroute.nlp import entity_key, query_entity_keys
    uids = list({e[0] for r in entry["pool"] for e in r["episodes"]})
    stored = await memory.stored_entities(scope, uids)
    skip = set(query_entity_keys(entry["query"]))
    skip |= {w.lower() for w in re.findall(r"[\w'’-]+", entry["query"])}
    skip |= {entity_key(s) for s in await memory.speakers(scope)}

    def keys(uid, labels):
        return frozenset(e.key for e in stored.get(uid, ()) if e.key not in skip
                         and e.label != "SPEAKER"
                         and (labels != "named" or e.label not in _NOT_BRIDGES))

    def of(record, labels=None):
        return (keys(record["uid"], labels),
                frozenset().union(*(keys(e[0], labels) for e in record["episodes"])))
    return of


_FUSE = rbase.fuse_scores


def fusion_with(second):
    """Max fusion plus ``second`` x each candidate's second-best query score."""
    if not second:
        return _FUSE

    def fuse(matrix, how="max"):
        matrix = np.asarray(matrix, np.float64)
        if how != "max" or matrix.shape[0] < 2:
            return _FUSE(matrix, how)
        top2 = np.sort(matrix, axis=0)[-2:]
        return top2[1] + second * top2[0]
    return fuse


def title_diverse(order, cands, k, penalty, free):
    """Greedy: each candidate loses ``penalty`` per hit of its title already chosen beyond
    ``free``."""
    titles = [split_title(c.window.text.split("\n")[0])[0] for c in cands]
    left = list(order)
    chosen, count = [], {}
    while left and len(chosen) < k:
        best = max(left, key=lambda o: o[1] - penalty * max(
            0, count.get(titles[o[0]], 0) - free + 1) if titles[o[0]] else o[1])
        left.remove(best)
        chosen.append(best)
        count[titles[best[0]]] = count.get(titles[best[0]], 0) + 1
    return chosen


def rank_own(own, keys_of, variant):
    """The own turns in their search's order, each one the best `entity_top` own windows link
    (`linked_by_entities`) moved up ``entity_own`` places."""
    from memroute.memory.rerankers.base import linked_by_entities
    own = sorted(own, key=lambda r: r["own"])
    if not own:
        return own
    cands = [ContextCandidate(r["uid"], RerankCandidate("", np.zeros((0, 1))),
                              tuple(e[0] for e in r["episodes"])) for r in own]
    labels = variant.get("entity_labels")
    scores = -np.arange(len(own), dtype=np.float64)  # the search's order
    linked = linked_by_entities(cands, [keys_of(r, labels) for r in own], scores,
                                variant.get("entity_top", ENTITY_TOP))
    total = scores + variant["entity_own"] * linked
    return [own[i] for i in sorted(range(len(own)), key=lambda i: (-total[i], i))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--pool", type=Path, required=True)
    parser.add_argument("--variant", action="append", default=None,
                        help="'base' or a JSON of `final_scorer.rank_pool` keyword arguments")
    args = parser.parse_args()
    args.variant = args.variant or ["base"]
    asyncio.run(replay(args))


if __name__ == "__main__":
    main()
