"""A learned final scorer, replayed on dumped pools (docs/evaluation.md, "A learned final
scorer").

``extract``: per question of a `benchmarks.planner_variants --dump-pool` file, each pooled
hit's features (the scores the final rerank computes, the link indicators as today's bonuses
fire, the search that pooled it) and the order today's scorer (`rank_by_window` with the
defaults of `memroute.graph.final_rerank`) gives, written to a pickle:

    python -m benchmarks.scorer_learned extract hotpotqa $H --limit 300 \\
        --pool pool-base-hotpotqa.jsonl --out feats-h300.pkl

``fit``: a pointwise logistic model (numpy, standardised features, L2) fit on some sets'
hits, labelled by gold (`pool_recall`'s matching); each set's recall when the model's score
ranks the pool (own turns first, as today), against today's order on the same pool
(``--pairwise``, ``--band``, ``--ascent`` and ``--mmr``: the other learners tried):

    python -m benchmarks.scorer_learned fit --fit h300=feats-h300.pkl,w=feats-2wiki.pkl \\
        --check hold=feats-h800.pkl:301-800,m=feats-musique.pkl,l=feats-locomo.pkl

``diagnose``: per set, the best reordering of today's top 15 and each feature's AUC near
the cut.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
from pathlib import Path

import numpy as np

from benchmarks.rerank_headroom import pool_recall
from benchmarks.scorer_replay import entity_keys_of, pool_candidates
from benchmarks.stop_logistic import fit_logistic
from memroute.evals.datasets import load_dataset
from memroute.evals.scoring import headline_metric
from memroute.evals.store import open_store
from memroute.graph import final_rerank as fr
from memroute.memory.embedders import make_embedder
from memroute.memory.rerankers.base import (ContextCandidate, RerankQuery,
                                            fuse_scores, linked_by_entities, linked_by_top,
                                            rank_by_window)
from memroute.settings import get_settings

FEATURES = ("fused", "question", "rewrite", "composed", "second", "nucleus", "gap", "rank",
            "title_link", "entity_link", "search_score", "search_rank", "by_question",
            "names_bridge", "windows", "best_row_rank", "row_gap", "question_rank",
            "composed_rank", "mean_rows", "today")


async def extract(args) -> None:
    """Write each question's features, pool and today's order to ``args.out``."""
    settings = get_settings()
    dataset = load_dataset(args.dataset, args.data, args.limit)
    index = {q.question: i for i, q in enumerate(dataset.questions)}
    embedder = make_embedder(settings.embedder, threads=1, batch_size=settings.embed_batch_size)
    store = await open_store(dataset, seed=0, embedder=embedder, reranker=settings.reranker,
                             settings=settings)
    memory = store.memory
    out = []
    from memroute.memory import sql
    try:
        for entry in map(json.loads, args.pool.open()):
            if entry["query"] not in index:
                continue
            question = dataset.questions[index[entry["query"]]]
            scope = store.scope_for(question)
            queries = list(dict.fromkeys([entry["query"], *entry["queries"]]))
            own = sorted((r for r in entry["pool"] if r["own"] is not None), key=lambda r: r["own"])
            rest = [r for r in entry["pool"] if r["own"] is None]
            row = {"index": index[entry["query"]], "question": entry["query"],
                   "type": question.type, "own": own, "rest": rest, "x": None,
                   "prod": sorted(range(len(rest)), key=lambda i: -rest[i]["score"])}
            if len(queries) > 1 and rest:
                uids = list({e[0] for r in rest for e in r["episodes"]})
                async with memory._pool.connection() as conn:
                    vectors = await sql.fetch_sentence_embeddings(conn, memory.schema,
                                                                  scope.key, uids)
                cands = pool_candidates(rest, vectors, embedder.dim)
                composed = fr.composed_queries(queries)
                texts = queries + composed
                vecs = await memory.embed_queries(texts)
                rq = [RerankQuery(t, e) for t, e in zip(texts, vecs)]
                keys_of = await entity_keys_of(memory, scope, entry)
                keys = [keys_of(r, "named") for r in rest]
                order = await rank_by_window(memory.reranker, rq, cands, len(cands), "max",
                                             fr.LINK_BONUS, fr.ENTITY_LINK_BONUS, keys)
                row["prod"] = [i for i, _ in order]
                today = np.zeros(len(cands))
                for i, value in order:
                    today[i] = value
                row["sim"] = similarities(cands)
                row["x"] = np.c_[await features(memory.reranker, rq, len(queries), cands, rest,
                                                keys), today]
            out.append(row)
    finally:
        await memory.close()
    with args.out.open("wb") as f:
        pickle.dump({"dataset": args.dataset, "rows": out,
                     "questions": {q.question: q for q in dataset.questions}}, f)
    print(json.dumps({"dataset": args.dataset, "questions": len(out),
                      "scored": sum(r["x"] is not None for r in out)}))


async def features(reranker, rq: list[RerankQuery], n_queries: int,
                   cands: list[ContextCandidate], rest: list[dict], keys) -> np.ndarray:
    """The ``len(FEATURES)`` columns per candidate (see `FEATURES`): window scores against
    all texts fused by max, the question alone, its best rewrite, its best composed query,
    the second best text; the nucleus alone; the gap to the pool's best and the rank in the
    pool by the fused score; the title and entity link indicators as `rank_by_window` fires
    them; the pooling search's own score and rank in its list and whether it was the
    question's; whether the window names a rewrite's bridge words; how many episodes it holds."""
    matrix = np.asarray(await reranker.score(rq, [c.window for c in cands]), np.float64)
    fused = fuse_scores(matrix, "max")
    nucleus = fused.copy()
    alone = [i for i, c in enumerate(cands) if c.nucleus is not None]
    if alone:
        nucleus[alone] = fuse_scores(np.asarray(
            await reranker.score(rq, [cands[i].nucleus for i in alone]), np.float64), "max")
    question = matrix[0]
    rewrite = matrix[1:n_queries].max(axis=0) if n_queries > 1 else question
    composed = matrix[n_queries:].max(axis=0) if len(rq) > n_queries else rewrite
    second = np.sort(matrix, axis=0)[-2] if len(rq) > 1 else fused
    gap = fused - fused.max()
    rank = np.log1p((-fused).argsort().argsort())
    title_link = linked_by_top(cands, fused)
    entity_link = linked_by_entities(cands, keys, fused + fr.LINK_BONUS * title_link)
    search_score = np.array([r["score"] for r in rest])
    by_query: dict[str, list[int]] = {}
    for i, r in enumerate(rest):
        by_query.setdefault(r["query"], []).append(i)
    search_rank = np.zeros(len(rest))
    for members in by_query.values():
        for place, i in enumerate(sorted(members, key=lambda i: -rest[i]["score"])):
            search_rank[i] = np.log1p(place)
    by_question = np.array([float(r["query"] == rq[0].text) for r in rest])
    bridges = [b.lower() for q in rq[1:n_queries] for b in fr.bridge_words(rq[0].text, q.text)]
    names_bridge = np.array([float(any(b in c.window.text.lower() for b in bridges))
                             for c in cands])
    windows = np.log([len(r["episodes"]) for r in rest])
    row_ranks = (-matrix).argsort(axis=1).argsort(axis=1)
    best_row_rank = np.log1p(row_ranks.min(axis=0))
    row_gap = (matrix - matrix.max(axis=1, keepdims=True)).max(axis=0)
    question_rank = np.log1p(row_ranks[0])
    composed_rank = (np.log1p(row_ranks[n_queries:].min(axis=0)) if len(rq) > n_queries
                     else np.log1p(row_ranks[1:].min(axis=0)))
    mean_rows = matrix.mean(axis=0)
    return np.c_[fused, question, rewrite, composed, second, nucleus, gap, rank, title_link,
                 entity_link, search_score, search_rank, by_question, names_bridge, windows,
                 best_row_rank, row_gap, question_rank, composed_rank, mean_rows]


def similarities(cands: list[ContextCandidate]) -> np.ndarray:
    """The cosine similarity of each pair of candidates' windows (their sentences' mean
    vectors), float16: what a redundancy penalty (MMR) reads."""
    vecs = np.vstack([c.window.sentence_embeddings.mean(axis=0)
                      if len(c.window.sentence_embeddings) else
                      np.zeros(c.window.sentence_embeddings.shape[1], np.float32)
                      for c in cands]).astype(np.float64)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-9
    return (vecs @ vecs.T).astype(np.float16)


def mmr_order(scores: np.ndarray, sim: np.ndarray, penalty: float, k: int = 10) -> list[int]:
    """Maximal marginal relevance: greedily the candidate whose score minus ``penalty`` x its
    highest similarity to those already chosen is best, for the first ``k``; the rest by score."""
    left = list(np.argsort(-scores, kind="stable"))
    chosen: list[int] = []
    while left and len(chosen) < k:
        best = max(left, key=lambda i: scores[i] - penalty * max(
            (float(sim[i, j]) for j in chosen), default=0.0))
        left.remove(best)
        chosen.append(best)
    return chosen + left


def labels(dataset: str, question, rest: list[dict]) -> np.ndarray:
    """1 for each pooled hit whose window holds gold evidence (`pool_recall` > 0), else 0."""
    return np.array([float(pool_recall(dataset, question, r["episodes"]) > 0) for r in rest])


def recall(dataset: str, question, own: list[dict], rest: list[dict], order, k: int = 10):
    """The headline recall of own turns first, then ``rest`` in ``order``, cut at k."""
    chosen = own[:k] + [rest[i] for i in list(order)[:k - len(own[:k])]]
    seen: dict = {}
    for r in chosen:
        for e in r["episodes"]:
            seen.setdefault(e[0], e)
    return pool_recall(dataset, question, list(seen.values()))


def load(spec: str) -> dict[str, dict]:
    """``name=path[:from-to]`` pairs: a pickle of `extract` (its rows, its questions by
    text), optionally only its questions ``from``-``to`` (1-based, in the data file's order)."""
    out = {}
    for part in filter(None, spec.split(",")):
        name, path = part.split("=", 1)
        span = None
        if ":" in path:
            path, span = path.split(":")
        with open(path, "rb") as f:
            data = pickle.load(f)
        if span:
            lo, hi = map(int, span.split("-"))
            data["rows"] = [r for r in data["rows"] if lo <= r["index"] + 1 <= hi]
        out[name] = data
    return out


def scored_rows(data: dict):
    """The rows the final rerank scores (several queries, a pool besides own turns), each
    with its question and gold labels."""
    for row in data["rows"]:
        if row["x"] is not None:
            question = data["questions"][row["question"]]
            yield row, question, labels(data["dataset"], question, row["rest"])


def fit_model(sets: dict[str, dict], columns: list[int], l2: float = 0.01,
              pairwise: bool = False, band: int | None = None):
    """Weights (bias first), means and deviations of a logistic model over ``columns``:
    pointwise (each hit against its gold label) or pairwise (a gold hit minus a non-gold
    hit of one question); with ``band``, only the hits today's order ranks in the pool's
    top ``band`` (the cut's neighbourhood, where a reordering changes the top 10)."""
    xs, ys = [], []
    for data in sets.values():
        for row, _, y in scored_rows(data):
            x = row["x"][:, columns]
            if band:
                keep = np.array(row["prod"][:band])
                x, y = x[keep], y[keep]
            if pairwise:
                pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
                if len(pos) and len(neg):
                    d = (x[pos][:, None, :] - x[neg][None, :, :]).reshape(-1, len(columns))
                    xs.append(np.r_[d, -d])
                    ys.append(np.r_[np.ones(len(d)), np.zeros(len(d))])
            else:
                xs.append(x)
                ys.append(y)
    return fit_logistic(np.vstack(xs), np.concatenate(ys), steps=2000, rate=1.0, l2=l2,
                        center=not pairwise)


def evaluate(data: dict, score=None, mmr: float = 0.0) -> dict:
    """The set's recall and per-type recall with today's order (``score`` None) or ordered
    by ``score`` of a row's features, reordered by `mmr_order` with a penalty ``mmr``
    (LoCoMo: questions without evidence left out, as the eval does)."""
    total, types, n = 0.0, {}, 0
    for row in data["rows"]:
        question = data["questions"][row["question"]]
        if data["dataset"] == "locomo" and not (question.gold_ids or question.unresolved):
            continue
        order = row["prod"]
        if score is not None and row["x"] is not None:
            s = np.asarray(score(row["x"]), np.float64)
            order = sorted(range(len(s)), key=lambda i: -s[i])
            if mmr:
                order = mmr_order(s, row["sim"], mmr, 10 - len(row["own"][:10]))
        value = recall(data["dataset"], question, row["own"], row["rest"], order)
        total += value
        n += 1
        types.setdefault(question.type, []).append(value)
    return {headline_metric(data["dataset"]): round(total / max(n, 1), 4), "n": n,
            "types": {t: round(sum(v) / len(v), 4) for t, v in sorted(types.items())}}


def fit_ranknet(sets: dict[str, dict], columns: list[int], hidden: int = 16,
               band: int | None = 20, steps: int = 600, l2: float = 1e-3, seed: int = 0):
    """A RankNet (one tanh layer of ``hidden`` units, numpy, Adam) on the pairs of a gold
    and a non-gold hit of one question among today's top ``band``: the nonlinear check of
    what the features hold. Returns a scorer of a row's feature matrix."""
    pos_x, neg_x, allx = [], [], []
    for data in sets.values():
        for row, _, y in scored_rows(data):
            keep = np.array(row["prod"][:band]) if band else np.arange(len(y))
            x, yy = row["x"][keep][:, columns], y[keep]
            allx.append(x)
            pos, neg = np.flatnonzero(yy == 1), np.flatnonzero(yy == 0)
            for p in pos:
                for m in neg:
                    pos_x.append(x[p])
                    neg_x.append(x[m])
    allx = np.vstack(allx)
    mu, sd = allx.mean(0), allx.std(0) + 1e-9
    a, b = (np.array(pos_x) - mu) / sd, (np.array(neg_x) - mu) / sd
    rng = np.random.default_rng(seed)
    params = [rng.normal(0, 0.3, (len(columns), hidden)), np.zeros(hidden),
              rng.normal(0, 0.3, hidden)]
    moments = [[np.zeros_like(q), np.zeros_like(q)] for q in params]

    def forward(z, w1, b1, w2):
        h = np.tanh(z @ w1 + b1)
        return h, h @ w2
    for t in range(1, steps + 1):
        w1, b1, w2 = params
        ha, sa = forward(a, w1, b1, w2)
        hb, sb = forward(b, w1, b1, w2)
        g = -1 / (1 + np.exp(np.clip(sa - sb, -30, 30))) / len(a)  # d loss / d (sa - sb)
        gw2 = ha.T @ g - hb.T @ g + l2 * w2
        da, db = np.outer(g, w2) * (1 - ha ** 2), np.outer(g, w2) * (1 - hb ** 2)
        gw1 = a.T @ da - b.T @ db + l2 * w1
        gb1 = da.sum(0) - db.sum(0)
        for q, grad, m in zip(params, (gw1, gb1, gw2), moments):
            m[0] = 0.9 * m[0] + 0.1 * grad
            m[1] = 0.999 * m[1] + 0.001 * grad ** 2
            q -= 0.01 * (m[0] / (1 - 0.9 ** t)) / (np.sqrt(m[1] / (1 - 0.999 ** t)) + 1e-8)
    w1, b1, w2 = params
    return lambda x: forward((x[:, columns] - mu) / sd, w1, b1, w2)[1]


GRID = (-1, -0.5, -0.3, -0.2, -0.1, -0.05, 0, 0.05, 0.1, 0.2, 0.3, 0.5, 1)


def ascent(sets: dict[str, dict], columns: list[int], rounds: int = 3):
    """Coordinate ascent on the fitted sets' summed recall (RankLib's CoordinateAscent):
    standardised weights, the first column's fixed at 1, each other's tried on `GRID` in
    turn (smallest first) and kept where the recall is strictly higher."""
    x = np.vstack([r["x"][:, columns] for d in sets.values() for r in d["rows"]
                   if r["x"] is not None])
    mu, sd = x.mean(0), x.std(0) + 1e-9
    w = np.zeros(len(columns) + 1)
    w[1] = 1.0

    def total(weights):
        return sum(evaluate(d, lambda xx: (xx[:, columns] - mu) / sd @ weights[1:])
                   [headline_metric(d["dataset"])] for d in sets.values())
    best = total(w)
    for _ in range(rounds):
        changed = False
        for j in range(2, len(w)):
            for value in sorted(GRID, key=abs):
                trial = w.copy()
                trial[j] = value
                got = total(trial)
                if got > best + 1e-9:
                    best, w, changed = got, trial, True
        if not changed:
            break
    return w, mu, sd


def fit(args) -> None:
    names = args.features.split(",")
    columns = [FEATURES.index(f) for f in names]
    fitted, checked = load(args.fit), load(args.check)
    if args.ranknet:
        score = fit_ranknet(fitted, columns, args.ranknet, args.band or 20)
        print(json.dumps({"features": names, "ranknet": args.ranknet, "band": args.band or 20}))
        for name, data in {**fitted, **checked}.items():
            print(json.dumps({"set": name, "fit": name in fitted, "today": evaluate(data),
                              "learned": evaluate(data, score, args.mmr)}))
        return
    if args.ascent:
        w, mu, sd = ascent(fitted, columns)
    else:
        w, mu, sd = fit_model(fitted, columns, args.l2, args.pairwise, args.band)
    print(json.dumps({"features": names, "standardised": np.round(w[1:], 3).tolist(),
                      "raw": np.round(w[1:] / sd, 4).tolist(), "l2": args.l2,
                      "pairwise": args.pairwise, "band": args.band, "ascent": args.ascent}))
    for name, data in {**fitted, **checked}.items():
        model = evaluate(data, lambda x: (x[:, columns] - mu) / sd @ w[1:], args.mmr)
        print(json.dumps({"set": name, "fit": name in fitted, "today": evaluate(data),
                          "learned": model}))


def diagnose(args) -> None:
    """Per set: today's recall, the recall of the best reordering of today's top 15 (gold
    first: what any scorer that only reorders near the cut could reach), per feature the
    AUC of gold against non-gold hits among today's ranks 6-20 of one question, and over the
    swaps a better scorer must make (a gold hit today ranks in the 5 places after the cut
    against one of the 3 weakest non-gold hits it keeps) how often the feature is higher
    for the gold hit."""
    for name, data in load(args.sets).items():
        pairs = {f: [0.0, 0] for f in FEATURES}
        swaps, n_swaps = np.zeros(len(FEATURES)), 0
        base = evaluate(data)
        best = n = 0.0
        for row in data["rows"]:
            question = data["questions"][row["question"]]
            if data["dataset"] == "locomo" and not (question.gold_ids or question.unresolved):
                continue
            n += 1
            today = recall(data["dataset"], question, row["own"], row["rest"], row["prod"])
            if row["x"] is None:
                best += today
                continue
            y = labels(data["dataset"], question, row["rest"])
            top = sorted(row["prod"][:15], key=lambda i: -y[i]) + row["prod"][15:]
            best += max(today, recall(data["dataset"], question, row["own"], row["rest"], top))
            k = 10 - len(row["own"][:10])
            for p in (i for i in row["prod"][k:k + 5] if y[i]):
                for m in [i for i in row["prod"][:k] if not y[i]][-3:]:
                    d = row["x"][p] - row["x"][m]
                    swaps += (d > 0) + 0.5 * (d == 0)
                    n_swaps += 1
            band = row["prod"][5:20]
            for j, f in enumerate(FEATURES):
                for p in (i for i in band if y[i]):
                    for m in (i for i in band if not y[i]):
                        a, b = row["x"][p, j], row["x"][m, j]
                        pairs[f][0] += (a > b) + 0.5 * (a == b)
                        pairs[f][1] += 1
        print(json.dumps({"set": name, "today": base[headline_metric(data["dataset"])],
                          "best_reorder_top15": round(best / max(n, 1), 4),
                          "auc_ranks_6_20": {f: round(v / max(c, 1), 2)
                                             for f, (v, c) in pairs.items()},
                          "swaps": n_swaps,
                          "cut_gold_higher": {f: round(v / max(n_swaps, 1), 2)
                                              for f, v in zip(FEATURES, swaps)}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract")
    ex.add_argument("dataset")
    ex.add_argument("data", type=Path)
    ex.add_argument("--limit", type=int, default=None)
    ex.add_argument("--pool", type=Path, required=True)
    ex.add_argument("--out", type=Path, required=True)
    fi = sub.add_parser("fit")
    fi.add_argument("--fit", required=True, help="name=features.pkl[:from-to],...")
    fi.add_argument("--check", default="")
    fi.add_argument("--features", default="fused,question,rewrite,composed,title_link,"
                                           "entity_link,search_rank,names_bridge")
    fi.add_argument("--l2", type=float, default=0.01)
    fi.add_argument("--pairwise", action="store_true")
    fi.add_argument("--band", type=int, default=None,
                    help="fit on the hits today's order ranks in the pool's top BAND only")
    fi.add_argument("--ranknet", type=int, default=0,
                    help="fit a RankNet with this many hidden units instead (band 20 unless given)")
    fi.add_argument("--mmr", type=float, default=0.0,
                    help="rank by maximal marginal relevance with this redundancy penalty")
    fi.add_argument("--ascent", action="store_true",
                    help="coordinate ascent on recall instead of a logistic fit")
    dg = sub.add_parser("diagnose")
    dg.add_argument("sets", help="name=features.pkl[:from-to],...")
    args = parser.parse_args()
    if args.command == "extract":
        asyncio.run(extract(args))
    elif args.command == "fit":
        fit(args)
    else:
        diagnose(args)


if __name__ == "__main__":
    main()
