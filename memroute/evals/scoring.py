"""Score one retrieval of one question at one k (the per-question row's metrics)."""

from __future__ import annotations

from memroute.evals import metrics
from memroute.evals.datasets import Question
from memroute.memory import ScoredResult
from memroute.planners.offline.entities import split_title

WIKI_METRICS = ("sf_recall", "mm_recall", "para_recall", "all_sf")
LOCOMO_METRICS = ("evidence_recall",)


def headline_metric(dataset: str) -> str:
    """The figure a data set is judged by (MuSiQue has paragraph-level gold only)."""
    return {"locomo": "evidence_recall", "musique": "para_recall"}.get(dataset, "sf_recall")


def returned_episodes(results: list[ScoredResult], k: int) -> list:
    """The episodes a caller gets from the top k results (nuclei, plus context if any)."""
    seen: dict[str, object] = {}
    for result in results[:k]:
        for episode in result.episodes or [result.nucleus]:
            seen.setdefault(episode.uid or "", episode)
    return list(seen.values())


def _title(episode) -> str | None:
    title = episode.metadata.get("title") if episode.metadata else None
    return title if title is not None else split_title(episode.content)[0]


def score(question: Question, results: list[ScoredResult], k: int,
          conversational: bool) -> dict[str, float | None]:
    episodes = returned_episodes(results, k)
    if conversational:
        ids = [e.metadata.get("dia_id") for e in episodes if e.metadata]
        recall = metrics.evidence_recall(question.gold_ids, question.unresolved, ids)
        return {f"evidence_recall@{k}": recall}
    contents = [e.content for e in episodes]
    return {
        f"sf_recall@{k}": metrics.sf_recall(question.gold_facts, contents),
        f"mm_recall@{k}": metrics.mm_recall(question.gold_facts, contents),
        f"para_recall@{k}": metrics.para_recall(question.gold_titles,
                                                [_title(e) for e in episodes]),
        f"all_sf@{k}": metrics.all_sf(question.gold_facts, contents),
    }
