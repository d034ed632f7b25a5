"""The offline reranker: dense similarity of the whole cluster fused with BM25 over candidates
(their text, and the titles of those filed under one)."""

from __future__ import annotations

import functools
import itertools
import re
import threading

import numpy as np

from memroute.memory.rerankers.base import RerankCandidate, RerankQuery
from memroute.memory.titles import titles_of

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was "
    "were which who what when where with did does do how many much".split()
)


@functools.lru_cache(maxsize=16_384)
def _line_tokens(line: str) -> tuple[str, ...]:
    return tuple(t for t in _TOKEN.findall(line.lower()) if t not in _STOP)


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens without stop words. Line by line, cached: a cluster's text is
    its episodes one per line, and the same episodes recur across candidates and searches."""
    return [t for line in text.split("\n") for t in _line_tokens(line)]


# Process-wide term ids, so a line's ids are computed once across searches (`_line_ids`);
# past `MAX_TERMS` terms they start over (a new generation: ids of two never mix).
MAX_TERMS = 1_000_000
_terms: dict[str, int] = {}
_terms_lock = threading.Lock()
_generation = 0


def _term_id(term: str) -> int:
    found = _terms.get(term)
    if found is None:
        with _terms_lock:
            found = _terms.setdefault(term, len(_terms))
    return found


@functools.lru_cache(maxsize=16_384)
def _line_ids(line: str, generation: int) -> np.ndarray:
    """A line's tokens (`_line_tokens`) as process-wide term ids."""
    return np.fromiter(map(_term_id, _line_tokens(line)), dtype=np.int64)


def _documents(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All texts' tokens as one array of ids into their own vocabulary (a text without any
    holds the id of "_"), numbered in order of first appearance, and each text's length;
    with the process-wide ids of that vocabulary (sorted) and their local ids, to look
    query terms up (`_query_ids`)."""
    global _generation
    if len(_terms) > MAX_TERMS:
        with _terms_lock:
            if len(_terms) > MAX_TERMS:
                _terms.clear()
                _generation += 1
    generation = _generation
    empty = np.array([_term_id("_")], dtype=np.int64)
    lines: list[np.ndarray] = []
    lengths = np.empty(len(texts), dtype=np.int64)
    for i, text in enumerate(texts):
        ids = [_line_ids(line, generation) for line in text.split("\n")]
        lengths[i] = sum(map(len, ids))
        if lengths[i]:
            lines.extend(ids)
        else:
            lines.append(empty)
            lengths[i] = 1
    if generation != _generation:  # the ids started over meanwhile: number them again
        return _documents(texts)
    known, first, inverse = np.unique(np.concatenate(lines), return_index=True,
                                      return_inverse=True)
    local = np.empty(len(known), dtype=np.int64)
    local[np.argsort(first, kind="stable")] = np.arange(len(known))
    return local[inverse], lengths, known, local


def _query_ids(text: str, known: np.ndarray, local: np.ndarray) -> list[int]:
    """A query's tokens as local ids of `_documents`' vocabulary (unknown ones left out)."""
    found = [_terms.get(t, -1) for t in tokenize(text)]
    at = np.searchsorted(known, found)
    inside = at < len(known)
    return [int(local[a]) for a, f, ok in zip(at, found, inside) if ok and known[a] == f]


def term_ids(texts: list[str]) -> tuple[list[np.ndarray], dict[str, int]]:
    """Each text's tokens as ids into one vocabulary (a text without any: the id of "_"),
    numbered in order of first appearance, and that vocabulary."""
    ids, lengths, known, local = _documents(texts)
    names = {global_id: term for term, global_id in _terms.items()}
    vocabulary = {names[g]: int(i) for g, i in zip(known.tolist(), local.tolist())}
    return np.split(ids, np.cumsum(lengths)[:-1]), vocabulary


def bm25_okapi(documents: list[list[int]], queries: list[list[int]], terms: int,
               k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> np.ndarray:
    """``(len(queries), len(documents))`` Okapi BM25 scores of documents and queries given as
    term ids below ``terms``; the same as rank-bm25's ``BM25Okapi(documents).get_scores(query)``
    (negative idf floored at ``epsilon`` times the mean idf)."""
    lengths = np.fromiter(map(len, documents), dtype=np.int64, count=len(documents))
    ids = np.fromiter(itertools.chain.from_iterable(documents), dtype=np.int64,
                      count=int(lengths.sum()))
    return _bm25_arrays(ids, lengths, queries, terms, k1, b, epsilon)


def _bm25_arrays(ids: np.ndarray, lengths: np.ndarray, queries: list[list[int]], terms: int,
                 k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> np.ndarray:
    """`bm25_okapi` of the documents' ids laid end to end (``lengths`` each), on arrays: the
    distinct (document, term) cells and their counts, a dense column only per query term."""
    n = len(lengths)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    cells, counts = np.unique(rows * terms + ids, return_counts=True)
    cell_terms = cells % terms
    df = np.bincount(cell_terms, minlength=terms)
    present = df > 0  # every term of the vocabulary that a document holds
    idf = np.zeros(terms)
    idf[present] = np.log(n - df[present] + 0.5) - np.log(df[present] + 0.5)
    negative = present & (idf < 0)
    idf[negative] = epsilon * idf[present].mean()
    norm = k1 * (1 - b + b * lengths / lengths.mean())
    out = np.zeros((len(queries), n))
    for qi, query in enumerate(queries):
        if query:  # repeated terms count again, as in rank-bm25
            wanted, column = np.unique(query, return_inverse=True)
            at = np.searchsorted(wanted, cell_terms)
            hit = wanted[np.minimum(at, len(wanted) - 1)] == cell_terms
            tf = np.zeros((n, len(wanted)))
            tf[cells[hit] // terms, at[hit]] = counts[hit]
            freq = tf[:, column]
            out[qi] = (idf[query] * freq * (k1 + 1) / (freq + norm[:, None])).sum(axis=1)
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
    ids, lengths, known, local = _documents(texts)
    return _bm25_arrays(ids, lengths, [_query_ids(q.text, known, local) for q in queries],
                        len(known)).astype(np.float32)
