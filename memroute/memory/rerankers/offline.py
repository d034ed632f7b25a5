"""The offline reranker: dense similarity of the whole cluster fused with BM25 over candidates
(their text, and the titles of those filed under one)."""

from __future__ import annotations

import functools
import itertools
import re

import numpy as np

from memroute.memory.rerankers.base import RerankCandidate, RerankQuery
from memroute.memory.titles import titles_of
from memroute.reading import vocabulary as V

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = V.RERANK_STOPS.words


@functools.lru_cache(maxsize=16_384)
def _line_tokens(line: str) -> tuple[str, ...]:
    return tuple(t for t in _TOKEN.findall(line.lower()) if t not in _STOP)


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens without stop words. Line by line, cached: a cluster's text is
    its episodes one per line, and the same episodes recur across candidates and searches."""
    return [t for line in text.split("\n") for t in _line_tokens(line)]


def term_ids(texts: list[str]) -> tuple[list[list[int]], dict[str, int]]:
    """Each text's tokens as ids into one vocabulary (a text without any: the id of "_"),
    each distinct line tokenized and looked up once."""
    vocabulary: dict[str, int] = {}
    by_line: dict[str, list[int]] = {}
    documents = []
    for text in texts:
        ids: list[int] = []
        for line in text.split("\n"):
            if (line_ids := by_line.get(line)) is None:
                line_ids = by_line[line] = [vocabulary.setdefault(t, len(vocabulary))
                                            for t in _line_tokens(line)]
            ids.extend(line_ids)
        documents.append(ids or [vocabulary.setdefault("_", len(vocabulary))])
    return documents, vocabulary


def bm25_okapi(documents: list[list[int]], queries: list[list[int]], terms: int,
               k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> np.ndarray:
    """``(len(queries), len(documents))`` Okapi BM25 scores of documents and queries given as
    term ids below ``terms``; the same as rank-bm25's ``BM25Okapi(documents).get_scores(query)``
    (negative idf floored at ``epsilon`` times the mean idf), computed on the (document, term)
    pairs the documents hold, not on a documents-by-terms matrix."""
    lengths = np.array([len(doc) for doc in documents])
    n = len(documents)
    rows = np.repeat(np.arange(n), lengths)
    ids = np.fromiter(itertools.chain.from_iterable(documents), dtype=np.int64, count=len(rows))
    pairs, tf = np.unique(rows * terms + ids, return_counts=True)
    doc, term = np.divmod(pairs, terms)
    df = np.bincount(term, minlength=terms)
    present = df > 0  # every term of the vocabulary that a document holds
    idf = np.zeros(terms)
    idf[present] = np.log(n - df[present] + 0.5) - np.log(df[present] + 0.5)
    negative = present & (idf < 0)
    idf[negative] = epsilon * idf[present].mean()
    norm = k1 * (1 - b + b * lengths / lengths.mean())
    saturation = tf * (k1 + 1) / (tf + norm[doc])
    out = np.zeros((len(queries), n))
    for qi, query in enumerate(queries):
        if query:  # repeated terms count again, as in rank-bm25
            weight = np.bincount(query, minlength=terms)[term] * idf[term]
            out[qi] = np.bincount(doc, weights=weight * saturation, minlength=n)
    return out


def _minmax(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    return np.zeros_like(values) if high - low < 1e-9 else (values - low) / (high - low)


class OfflineReranker:
    """A real reranking signal without model downloads.

    Per query: the best and the mean cosine similarity between the query and the cluster's
    sentences (from the stored embeddings), plus BM25 of the cluster text over the candidate
    set, each min-max normalized and mixed with ``weights``. Candidates filed under a title
    (``"Title: text"``, e.g. a passage) also score BM25 of their title over the candidates'
    titles, with ``title_weight``: a passage's sentences after the first do not name their
    subject, its title does. Untitled candidates (conversation turns) score 0 there, so a
    store without titles ranks as without the term.

    The title bonus has diminishing returns per title: among the candidates filed under the
    same titles, the ``title_full`` scoring best without it get it whole (a fact and the
    sentence after it), each further one ``title_decay`` times the one before. A title the
    query names thus lifts its best sentences, and more of them do not push a second title
    out of the top k.
    """

    name = "offline-dense-bm25"

    def __init__(self, weights: tuple[float, float, float] = (0.6, 0.15, 0.25),
                 title_weight: float = 0.2, title_full: int = 2,
                 title_decay: float = 0.5) -> None:
        self.weights = weights
        self.title_weight = title_weight
        self.title_full = title_full
        self.title_decay = title_decay

    async def score(
        self, queries: list[RerankQuery], candidates: list[RerankCandidate]
    ) -> np.ndarray:
        if not candidates:
            return np.zeros((len(queries), 0), dtype=np.float32)
        w_max, w_mean, w_bm25 = self.weights
        lexical = _bm25([c.text for c in candidates], queries)
        titles = [titles_of(c.text) for c in candidates]
        titled = _bm25(titles, queries) if self.title_weight and any(titles) else None
        # All candidates' sentences against all queries in one product, then per candidate.
        sizes = np.array([len(c.sentence_embeddings) for c in candidates])
        present = sizes > 0
        best = np.zeros((len(queries), len(candidates)), dtype=np.float32)
        mean = np.zeros_like(best)
        if present.any():
            stacked = np.vstack([c.sentence_embeddings for c in candidates if len(c.sentence_embeddings)])
            sims = np.vstack([q.embedding for q in queries]).astype(np.float32) @ stacked.T
            starts = np.concatenate([[0], np.cumsum(sizes[present])[:-1]])
            best[:, present] = np.maximum.reduceat(sims, starts, axis=1)
            mean[:, present] = np.add.reduceat(sims, starts, axis=1) / sizes[present]
        out = np.zeros((len(queries), len(candidates)), dtype=np.float32)
        for qi in range(len(queries)):
            # Raw cosine keeps its scale across queries; BM25 is only comparable within one.
            out[qi] = w_max * best[qi] + w_mean * mean[qi] + w_bm25 * 0.5 * _minmax(lexical[qi])
            if titled is not None:
                bonus = self.title_weight * 0.5 * _minmax(titled[qi])
                out[qi] += bonus * _title_shares(titles, out[qi], self.title_full,
                                                 self.title_decay)
        return out


def _title_shares(titles: list[str], scores: np.ndarray, full: int, decay: float) -> np.ndarray:
    """Each candidate's share of its title bonus: 1 for the ``full`` best by ``scores`` among
    the candidates filed under the same titles, then ``decay``, ``decay ** 2``, ... (untitled
    candidates: 1, their bonus is 0)."""
    shares = np.ones(len(titles), dtype=np.float32)
    if decay >= 1.0:
        return shares
    seen: dict[str, int] = {}
    for i in np.argsort(-scores, kind="stable"):
        if titles[i]:
            rank = seen[titles[i]] = seen.get(titles[i], -1) + 1
            shares[i] = decay ** max(0, rank - full + 1)
    return shares


def _bm25(texts: list[str], queries: list[RerankQuery]) -> np.ndarray:
    """BM25 of each text over ``texts``, per query: ``(len(queries), len(texts))``."""
    documents, vocabulary = term_ids(texts)
    return bm25_okapi(documents, [[vocabulary[t] for t in tokenize(q.text) if t in vocabulary]
                                  for q in queries], len(vocabulary)).astype(np.float32)
