"""The offline reranker's title bonus: a named title's sentences gain, less for each one
after its best two, so other titles keep their places."""

from __future__ import annotations

import numpy as np
import pytest

from memroute.memory.rerankers import OfflineReranker, RerankCandidate, RerankQuery


async def test_title_bonus_diminishes_per_title() -> None:
    """Four sentences of the named title among other titles: the title's best two get the
    whole bonus, the next ones half and a quarter, so other titles keep their places."""
    rng = np.random.default_rng(3)
    query = RerankQuery("Who performed Green Meadows?", rng.normal(size=8).astype(np.float32))
    texts = ["Green Meadows: It is an album.", "Green Meadows: It was recorded in Oslo.",
             "Green Meadows: It has ten songs.", "Green Meadows: It sold well.",
             "Tessa Marlow: She performed an album.",
             *(f"{t}: It is a place." for t in ("Oslo", "Appleton", "Bergen", "Lisbon", "Porto",
                                               "Turin", "Ghent", "Graz"))]
    vectors = [rng.normal(size=(1, 8)).astype(np.float32) for _ in texts]
    candidates = [RerankCandidate(t, v) for t, v in zip(texts, vectors)]

    async def scores(**kwargs) -> np.ndarray:
        return (await OfflineReranker(**kwargs).score([query], candidates))[0]

    base = await scores(title_weight=0.0)
    whole = await scores(title_weight=0.2, title_decay=1.0)
    halved = await scores(title_weight=0.2, title_full=2, title_decay=0.5)
    assert (whole[:4] - base[:4]).tolist() == pytest.approx([0.1] * 4, abs=1e-6)
    order = np.argsort(-base[:4])  # the title's sentences by their score without the bonus
    assert (halved[order] - base[order]).tolist() == pytest.approx([0.1, 0.1, 0.05, 0.025],
                                                                   abs=1e-6)
    assert halved[4:].tolist() == pytest.approx(whole[4:].tolist(), abs=1e-6)  # other titles
    # untitled candidates (conversation turns) rank as without the lane, whatever the decay
    turns = [RerankCandidate(t.split(": ", 1)[1], v) for t, v in zip(texts, vectors)]
    plain = (await OfflineReranker(title_weight=0.0).score([query], turns))[0]
    assert (await OfflineReranker(title_decay=0.5).score([query], turns))[0].tolist() \
        == pytest.approx(plain.tolist(), abs=1e-6)
