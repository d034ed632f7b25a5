"""Score one retrieval of one question at one k (the per-question row's metrics)."""

from __future__ import annotations

from memroute.evals import metrics
from memroute.evals.datasets import Question
from memroute.memory import ScoredResult
from memroute.memory.titles import split_title

WIKI_METRICS = ("sf_recall", "mm_recall", "para_recall", "all_sf")
LOCOMO_METRICS = ("evidence_recall",)
PASSAGE_METRICS = ("passage_recall", "all_passages")
UNITS = ("sentence", "passage")


def headline_metric(dataset: str, unit: str = "sentence") -> str:
    """The figure a data set is judged by (MuSiQue has paragraph-level gold only)."""
    if unit == "passage":
        return "passage_recall"
    return {"locomo": "evidence_recall", "musique": "para_recall"}.get(dataset, "sf_recall")


def metric_names(dataset: str, ks: list[int], unit: str = "sentence") -> list[str]:
    """Every per-question metric of a run, ``name@k`` (passage unit: k = the recall cuts)."""
    base = (PASSAGE_METRICS if unit == "passage"
            else LOCOMO_METRICS if dataset == "locomo" else WIKI_METRICS)
    return [f"{m}@{k}" for k in ks for m in base]


def headline_name(dataset: str, ks: list[int], unit: str = "sentence") -> str:
    """``metric@k`` of the headline: the first k, or recall@5 for passages (the published
    figure) when 5 is among the cuts."""
    k = 5 if unit == "passage" and 5 in ks else ks[0]
    return f"{headline_metric(dataset, unit)}@{k}"


def retrieval_ks(ks: list[int], unit: str = "sentence") -> list[int]:
    """The k of each retrieval: every k for sentences; one ranked list as deep as the
    deepest cut for passages, scored at every cut."""
    return [max(ks)] if unit == "passage" else list(ks)


def score_passages(question: Question, results: list[ScoredResult],
                   cuts: list[int]) -> dict[str, float | None]:
    """The passage protocol's metrics at every cut of one ranked list of passages."""
    ranked = [r.nucleus.content for r in results]
    out: dict[str, float | None] = {}
    for k in cuts:
        out[f"passage_recall@{k}"] = metrics.passage_recall(question.gold_passages, ranked, k)
        out[f"all_passages@{k}"] = metrics.all_passages(question.gold_passages, ranked, k)
    return out


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
