"""A search's results as every face shows them: `ScoredResult` and the windows one response
shows (`disjoint_windows`). Plain dataclasses, no pydantic: the CLI prints a served search's
answer with them without loading the models (`memroute.memory.models` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memroute.memory.models import Episode


@dataclass(frozen=True)
class ScoredResult:
    """One search hit: the matched episode (nucleus), its context cluster and its scores.

    ``score`` is what results are ordered by, on every face: non-increasing down a list.
    ``rerank_score`` is the hit's own score from the last rerank that scored it; the two
    differ only where a rule placed a hit above better-scored ones (the agent's final
    rerank: `memroute.graph.final_rerank.ordered_scores`). ``vector_score`` and
    ``lexical_score`` are its lanes' scores."""

    nucleus: Episode
    episodes: list[Episode]
    matched_sentence: str
    vector_score: float
    rerank_score: float
    lexical_score: float | None = None
    reranker: str = "none"
    query: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The stored embeddings of the cluster's sentences, so a later rerank needs no store read.
    sentence_embeddings: Any = field(default=None, repr=False, compare=False)
    # The rows of ``sentence_embeddings`` that belong to the nucleus (start, stop).
    nucleus_rows: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    score: float = None  # type: ignore[assignment]  # None given: ``rerank_score``

    def __post_init__(self) -> None:
        if self.score is None:
            object.__setattr__(self, "score", self.rerank_score)

    def nucleus_embeddings(self) -> Any:
        """The stored embeddings of the nucleus's own sentences (all rows if unknown)."""
        if self.nucleus_rows is None or self.sentence_embeddings is None:
            return self.sentence_embeddings
        return self.sentence_embeddings[self.nucleus_rows[0]:self.nucleus_rows[1]]

    @property
    def uid(self) -> str:
        return self.nucleus.uid or ""

    @property
    def text(self) -> str:
        """The cluster's content, one episode per line, chronological."""
        return "\n".join(e.content for e in self.episodes)


@dataclass(frozen=True)
class ShownWindow:
    """What one document of a response shows of a result: its nucleus and the neighbours no
    other document of the response shows (chronological), and the neighbours left out."""

    episodes: list[Episode]
    shown_elsewhere: list[str]

    @property
    def text(self) -> str:
        return "\n".join(e.content for e in self.episodes)


def disjoint_windows(results: list[ScoredResult]) -> list[ShownWindow]:
    """Per result (best first), the part of its context window one response shows, so that no
    episode appears in two documents: a neighbour is left out when a better result already
    shows it or when it is another result's nucleus."""
    nuclei = {r.uid for r in results}
    shown: set[str] = set()
    windows = []
    for result in results:
        keep, elsewhere = [], []
        for episode in result.episodes or [result.nucleus]:
            if episode.uid == result.uid or (episode.uid not in shown
                                             and episode.uid not in nuclei):
                keep.append(episode)
            else:
                elsewhere.append(episode.uid or "")
        shown.update(e.uid for e in keep)
        windows.append(ShownWindow(keep, elsewhere))
    return windows
