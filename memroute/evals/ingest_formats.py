"""The benchmark data sets as ``memroute ingest --format`` readers.

Registered in pyproject's ``memroute.ingest_formats`` entry points, so the library's ingest
finds them without importing the evaluation: the dependency points from here to it.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from memroute.evals.datasets import load_dataset
from memroute.evals.store import planned_episodes
from memroute.memory.models import Episode


def read_benchmark(name: str, path: Path, *, limit: int | None = None,
                   seed: int = 0) -> list[tuple[str | None, list[Episode]]]:
    """The episodes of a benchmark data file, laid out as the evaluation protocol stores them:
    ``(conversation, episodes)`` pairs, ``None`` for the pooled Wikipedia sets (one scope, one
    shuffled session), else the LoCoMo conversation id whose turns form one scope."""
    plan = planned_episodes(load_dataset(name, Path(path), limit=limit), seed)
    return [(key or None, episodes) for key, episodes in plan.items()]


hotpotqa = partial(read_benchmark, "hotpotqa")
two_wiki = partial(read_benchmark, "2wiki")
musique = partial(read_benchmark, "musique")
locomo = partial(read_benchmark, "locomo")
