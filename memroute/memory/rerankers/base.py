"""The reranker protocol: score candidate clusters against one or more queries."""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from memroute.memory.titles import split_title, titles_of


@dataclass(frozen=True)
class RerankQuery:
    text: str
    embedding: np.ndarray


@dataclass(frozen=True)
class RerankCandidate:
    """A cluster to score: its text and the stored embeddings of its sentences."""

    text: str
    sentence_embeddings: np.ndarray


@runtime_checkable
class Reranker(Protocol):
    """Returns a ``(len(queries), len(candidates))`` matrix of relevance scores."""

    name: str

    async def score(
        self, queries: list[RerankQuery], candidates: list[RerankCandidate]
    ) -> np.ndarray: ...


def fuse_scores(matrix: np.ndarray, how: str = "max") -> np.ndarray:
    """One score per candidate from a queries x candidates matrix.

    ``max`` keeps a candidate that answers any one query (what a sub-query or a hop is
    for); ``mean`` rewards candidates relevant to all queries; ``rrf`` fuses the ranks.
    """
    if matrix.shape[0] == 1:
        return matrix[0]
    if how == "max":
        return matrix.max(axis=0)
    if how == "mean":
        return matrix.mean(axis=0)
    if how == "rrf":
        ranks = (-matrix).argsort(axis=1).argsort(axis=1)
        return (1.0 / (60.0 + ranks + 1)).sum(axis=0)
    raise ValueError(f"unknown fusion {how!r}: use max, mean or rrf")


@dataclass(frozen=True)
class ContextCandidate:
    """A result to rank: its nucleus (uid, text, vectors) and its context window (member uids,
    text, vectors). ``nucleus`` is ``None`` when the window is the nucleus alone."""

    uid: str
    window: RerankCandidate
    members: tuple[str, ...]
    nucleus: RerankCandidate | None = None


CREDITS = ("nucleus", "window")


async def rank_in_context(reranker: Reranker, queries: list[RerankQuery],
                          candidates: list[ContextCandidate], k: int,
                          fusion: str = "max", credit: str = "nucleus",
                          link_bonus: float = 0.0, entity_bonus: float = 0.0,
                          entity_keys: list[tuple[frozenset[str], frozenset[str]]] | None = None
                          ) -> list[tuple[int, float]]:
    """The best ``k`` candidates as ``(index, score)``, best first.

    ``credit="window"``: see `rank_by_window`. ``credit="nucleus"`` (the default):
    a candidate scores the mean of its window's score and its nucleus's own. Once its window
    overlaps a better candidate's match (holds that nucleus, or its own nucleus lies in that
    window), only its nucleus's own score counts (at most the mean): its window's strength is
    that match, already ranked. Otherwise every neighbour of a strong turn would tie with it,
    and k results would show one passage k times.
    """
    if credit == "window":
        return await rank_by_window(reranker, queries, candidates, k, fusion, link_bonus,
                                    entity_bonus, entity_keys)
    if credit != "nucleus":
        raise ValueError(f"unknown credit {credit!r}: use {' or '.join(CREDITS)}")
    alone = [i for i, c in enumerate(candidates) if c.nucleus is not None]
    matrix = await reranker.score(queries, [*(c.window for c in candidates),
                                            *(candidates[i].nucleus for i in alone)])
    fused = np.asarray(fuse_scores(matrix, fusion), dtype=np.float64)
    own = fused[:len(candidates)].copy()
    own[alone] = fused[len(candidates):]
    mean = (fused[:len(candidates)] + own) / 2
    others = [set(c.members) - {c.uid} for c in candidates]
    chosen: set[str] = set()
    shown: set[str] = set()  # the members of the chosen candidates' windows

    def score(i: int) -> float:
        overlaps = candidates[i].uid in shown or not others[i].isdisjoint(chosen)
        return min(own[i], mean[i]) if overlaps else mean[i]

    heap = [(-mean[i], i) for i in range(len(candidates))]
    heapq.heapify(heap)
    ranked: list[tuple[int, float]] = []
    while heap and len(ranked) < k:  # lazy greedy: a score only ever goes down
        stale, i = heapq.heappop(heap)
        current = score(i)
        if current < -stale:
            heapq.heappush(heap, (-current, i))
            continue
        ranked.append((i, float(current)))
        chosen.add(candidates[i].uid)
        shown.update(candidates[i].members)
    return ranked


async def rank_by_window(reranker: Reranker, queries: list[RerankQuery],
                         candidates: list[ContextCandidate], k: int,
                         fusion: str = "max", link_bonus: float = 0.0,
                         entity_bonus: float = 0.0,
                         entity_keys: list[tuple[frozenset[str], frozenset[str]]] | None = None
                         ) -> list[tuple[int, float]]:
    """The best ``k`` candidates as ``(index, score)``, best first, each scored on its whole
    window, so that the windows around strong matches fill the top k.

    The match still comes first: where two windows overlap (one holds the other's nucleus),
    the candidate whose own text scores better (its nucleus scored alone, in a second call)
    takes the other's window score if that is higher, and ranks before it on a tie. A
    neighbour thus never outranks the match it stands beside.

    ``link_bonus``: added to each candidate filed under a title that one of the
    `LINKING_TOP` best windows of another title names (`linked_by_top`).
    ``entity_bonus`` with ``entity_keys``: added to each candidate linked through the entity
    index (`linked_by_entities`).
    """
    windows = np.asarray(fuse_scores(await reranker.score(queries, [c.window for c in candidates]),
                                     fusion), dtype=np.float64)
    own = windows.copy()
    alone = [i for i, c in enumerate(candidates) if c.nucleus is not None]
    if alone:
        matrix = await reranker.score(queries, [candidates[i].nucleus for i in alone])
        own[alone] = fuse_scores(matrix, fusion)
    if link_bonus:
        bonus = link_bonus * linked_by_top(candidates, windows)
        windows, own = windows + bonus, own + bonus
    if entity_bonus and entity_keys is not None:
        bonus = entity_bonus * linked_by_entities(candidates, entity_keys, windows)
        windows, own = windows + bonus, own + bonus
    at = {c.uid: i for i, c in enumerate(candidates)}
    overlapping: list[set[int]] = [set() for _ in candidates]
    for i, candidate in enumerate(candidates):  # one's window holds the other's nucleus
        for j in (at[u] for u in candidate.members if u in at and at[u] != i):
            overlapping[i].add(j)
            overlapping[j].add(i)
    score = windows.copy()
    for i in sorted(range(len(candidates)), key=lambda i: own[i]):  # lift upwards
        for j in overlapping[i]:
            if own[j] > own[i]:
                score[j] = max(score[j], score[i])
    order = sorted(range(len(candidates)), key=lambda i: (-score[i], -own[i]))[:k]
    return [(i, float(score[i])) for i in order]


# How many of the best windows may link a title, and how many hits of one linked title get
# the bonus (docs/research.md, "A better final scorer", replayed on the pools dumped at 69f1047 with
# the composed queries and a 0.05 bonus; HotpotQA 300 / 2Wiki / MuSiQue replay): top 5, 10,
# 30 windows 0.8941 / 0.8966 / 0.8977 on HotpotQA; per title 1, 2, 3, unlimited
# 0.8952 / 0.8952 / 0.8957 / 0.8966, 0.8671 / 0.8708 / 0.8760 / 0.8798, 0.7925 / 0.7887 /
# 0.7821 / 0.7721 (MuSiQue counts paragraphs: more sentences of one linked title push others out).
LINKING_TOP = 10
LINK_PER_TITLE: int | None = 3


def linked_by_top(candidates: list[ContextCandidate], scores: np.ndarray,
                  top: int | None = None) -> np.ndarray:
    """1.0 for each candidate filed under a title ("Title: text") that the text of one of the
    ``top`` best-scoring candidates of another title names, else 0.0: the second hop's
    document, linked to the question by the evidence that names it (the settler a school is
    named after, the album a box set holds), not by its similarity to any query. Only the
    `LINK_PER_TITLE` best of one title's candidates; untitled candidates (conversation turns,
    `titles_of`) are never linked."""
    titles = [titles_of(c.nucleus.text if c.nucleus else c.window.text.split("\n", 1)[0]) or None
              for c in candidates]
    best = sorted(range(len(candidates)), key=lambda i: -scores[i])[:top or LINKING_TOP]
    texts = [(titles[j], " ".join(split_title(line)[1] for line in candidates[j].window.text.split("\n")))
             for j in best]
    linked = np.zeros(len(candidates))
    given: dict[str, int] = {}
    for i in sorted(range(len(candidates)), key=lambda i: -scores[i]):
        title = titles[i]
        name = title_name(title)
        if name is None:
            continue
        pattern = re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)", re.IGNORECASE)
        if LINK_PER_TITLE is not None and given.get(title, 0) >= LINK_PER_TITLE:
            continue
        if any(other != title and pattern.search(text) for other, text in texts):
            linked[i] = 1.0
            given[title] = given.get(title, 0) + 1
    return linked


def title_name(title: str | None) -> str | None:
    """A title without its disambiguation ("Boght Corners, New York" -> "Boght Corners",
    "Lari White (singer)" -> "Lari White"); ``None`` for no title or a name under 4 characters."""
    if not title:
        return None
    name = re.sub(r"\s*\(.*?\)\s*$", "", title).split(",")[0].strip()
    return name if len(name) >= 4 else None


# How many of the best windows may link a hit through the entity index (replayed: top 5 / 10
# on HotpotQA 800 0.8693 / 0.8703, LoCoMo 0.8473 / 0.8483; docs/research.md, "The entity link").
ENTITY_LINKING_TOP = 10


def linked_by_entities(candidates: list[ContextCandidate],
                       keys: list[tuple[frozenset[str], frozenset[str]]], scores: np.ndarray,
                       top: int | None = None) -> np.ndarray:
    """1.0 for each candidate whose own episode stores an entity key (``keys[i][0]``) that the
    window of one of the ``top`` best-scoring other candidates stores (``keys[j][1]``), else
    0.0: the conversational analogue of `linked_by_top`, through the entity index instead of
    titles. The caller leaves out the keys the question names and the speakers' (the bridge
    is what the evidence names, not the question). A window holding the candidate's own
    episode never links it."""
    best = sorted(range(len(candidates)), key=lambda i: -scores[i])[:top or ENTITY_LINKING_TOP]
    linked = np.zeros(len(candidates))
    for i, candidate in enumerate(candidates):
        own = keys[i][0]
        if own and any(j != i and candidate.uid not in candidates[j].members
                       and not own.isdisjoint(keys[j][1]) for j in best):
            linked[i] = 1.0
    return linked

