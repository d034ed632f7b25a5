"""The final rerank's scorer variants replayed by `benchmarks.scorer_replay`: `rank_by_window`
with credits, the rejected ones included (docs/evaluation.md, "A better final scorer")."""

from __future__ import annotations

import re

import numpy as np

from memroute.graph.final_rerank import bridge_words
from memroute.memory.rerankers.base import ContextCandidate, RerankQuery, Reranker, fuse_scores
from memroute.memory.titles import split_title

bridge_phrases = bridge_words  # the runs a rewrite adds to the question


def _name(title: str | None) -> str | None:
    """A title without its disambiguation ("Boght Corners, New York" -> "Boght Corners")."""
    if not title:
        return None
    name = re.sub(r"\s*\(.*?\)\s*$", "", title).split(",")[0].strip()
    return name if len(name) >= 4 else None


async def rank_pool(reranker: Reranker, queries: list[RerankQuery],
                    candidates: list[ContextCandidate], k: int, *, bridge: float = 0.0,
                    bridge_title: bool = False, para: float = 0.0, para_mode: str = "other",
                    extra: list[RerankQuery] | None = None, extra_weight: float = 1.0,
                    weights: list[float] | None = None, link: float = 0.0, link_top: int = 5,
                    link_mode: str = "flat", title_bridge: float = 0.0) -> list[tuple[int, float]]:
    """`rank_by_window` with optional credits; queries[0] is the question."""
    qs = list(queries) + list(extra or [])
    matrix = np.asarray(await reranker.score(qs, [c.window for c in candidates]), np.float64)
    if extra:
        matrix[len(queries):] *= extra_weight
    if weights is not None:
        matrix[:len(weights)] += np.asarray(weights)[:, None]
    windows = matrix.max(axis=0)
    own = windows.copy()
    alone = [i for i, c in enumerate(candidates) if c.nucleus is not None]
    if alone:
        m2 = np.asarray(await reranker.score(qs, [candidates[i].nucleus for i in alone]), np.float64)
        if extra:
            m2[len(queries):] *= extra_weight
        if weights is not None:
            m2[:len(weights)] += np.asarray(weights)[:, None]
        own[alone] = m2.max(axis=0)
    bonus = np.zeros(len(candidates))
    if bridge:
        phrases = [p.lower() for q in queries[1:] for p in bridge_phrases(queries[0].text, q.text)]
        for i, c in enumerate(candidates):
            text = c.window.text if not bridge_title else "\n".join(
                split_title(line)[0] or "" for line in c.window.text.split("\n"))
            text = text.lower()
            if any(p in text for p in phrases):
                bonus[i] += bridge
    if para:
        titles = [split_title(c.window.text.split("\n")[0])[0] for c in candidates]
        best_q = matrix.argmax(axis=0)
        for i, t in enumerate(titles):
            if not t:
                continue
            sib = [j for j, u in enumerate(titles) if u == t and j != i]
            if not sib:
                continue
            if para_mode == "other":  # a sibling strong against another query than mine
                vals = [matrix[q, j] for j in sib for q in range(len(queries)) if q != best_q[i]]
            else:  # question
                vals = [matrix[0, j] for j in sib]
            if vals:
                bonus[i] += para * max(0.0, max(vals) - windows[i]) if para_mode == "gap" else para * max(vals)
    if link or title_bridge:
        titles = [split_title(c.nucleus.text if c.nucleus else c.window.text.split("\n")[0])[0]
                  for c in candidates]
        names = [_name(t) for t in titles]
    if link:
        top = sorted(range(len(candidates)), key=lambda i: -windows[i])[:link_top]
        for i, name in enumerate(names):
            if not name:
                continue
            pattern = re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)", re.I)
            linkers = [j for j in top if titles[j] != titles[i]
                       and pattern.search(split_title(candidates[j].window.text)[1] or "")]
            if linkers:
                bonus[i] += link * (1.0 if link_mode == "flat" else max(windows[j] for j in linkers))
    if title_bridge:
        runs = [p.lower() for q in queries[1:] for p in bridge_phrases(queries[0].text, q.text)]
        for i, name in enumerate(names):
            if name and any(re.search(r"(?<!\w)" + re.escape(name.lower()) + r"(?!\w)", r)
                            for r in runs):
                bonus[i] += title_bridge
    windows = windows + bonus
    own = own + bonus
    at = {c.uid: i for i, c in enumerate(candidates)}
    overlapping: list[set[int]] = [set() for _ in candidates]
    for i, candidate in enumerate(candidates):
        for j in (at[u] for u in candidate.members if u in at and at[u] != i):
            overlapping[i].add(j)
            overlapping[j].add(i)
    score = windows.copy()
    for i in sorted(range(len(candidates)), key=lambda i: own[i]):
        for j in overlapping[i]:
            if own[j] > own[i]:
                score[j] = max(score[j], score[i])
    order = sorted(range(len(candidates)), key=lambda i: (-score[i], -own[i]))[:k]
    return [(i, float(score[i])) for i in order]
