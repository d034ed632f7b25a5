"""Offline models: the splitter, the embedder's failure modes, the rerankers."""

from __future__ import annotations

import numpy as np
import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from memroute.memory import ModelUnavailableError, make_embedder, make_reranker
from memroute.memory.embedders.minilm_onnx import MiniLMOnnxEmbedder, MiniLMWindows
from memroute.memory.rerankers import OfflineReranker, RerankCandidate, RerankQuery, fuse_scores
from memroute.memory.rerankers.offline import bm25_okapi, term_ids
from memroute.memory.splitter import split_sentences
from memroute.memory.titles import titles_of


@pytest.mark.parametrize(("text", "expected"), [
    ("Dr. Smith met J. R. R. Tolkien in the U.S. in 1950. They talked.",
     ["Dr. Smith met J. R. R. Tolkien in the U.S. in 1950.", "They talked."]),
    ('He said "Stop." Then he left! Why? Nobody knows.',
     ['He said "Stop."', "Then he left!", "Why?", "Nobody knows."]),
    ("It costs $5.50 today, e.g. for members.", ["It costs $5.50 today, e.g. for members."]),
    ("   ", []),
    ("no terminal punctuation", ["no terminal punctuation"]),
])
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_split_sentences_cuts_runaway_text() -> None:
    pieces = split_sentences("word " * 2000)
    assert len(pieces) > 1 and all(len(p) <= 2000 for p in pieces)
    assert " ".join(pieces).split() == ("word " * 2000).split()


def test_missing_model_fails_at_load(tmp_path) -> None:
    with pytest.raises(ModelUnavailableError, match="not found"):
        MiniLMOnnxEmbedder(tmp_path / "absent.onnx")


def test_corrupt_model_fails_at_load(tmp_path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\x08\x01garbage" * 100)
    with pytest.raises(ModelUnavailableError, match="cannot load"):
        MiniLMOnnxEmbedder(bad)


def test_unknown_names_are_clear() -> None:
    with pytest.raises(ModelUnavailableError, match="unknown embedder"):
        make_embedder("word2vec")
    with pytest.raises(ModelUnavailableError, match="unknown reranker"):
        make_reranker("colbert")


def test_flashrank_without_local_model_falls_back_with_a_warning() -> None:
    with structlog.testing.capture_logs() as logs:
        reranker = make_reranker("flashrank")
    assert isinstance(reranker, OfflineReranker)
    assert any(e["event"] == "reranker.fallback" and e["log_level"] == "warning" for e in logs)
    assert make_reranker("none") is None


async def test_offline_reranker_prefers_relevant_clusters(embedder) -> None:
    texts = ["The Eiffel Tower is 330 metres tall.", "Bananas are yellow.",
             "Paris hosts the Eiffel Tower, a wrought-iron tower."]
    vectors = await embedder.embed_documents(texts)
    query = RerankQuery("How tall is the Eiffel Tower?",
                        await embedder.embed_query("How tall is the Eiffel Tower?"))
    scores = await OfflineReranker().score(
        [query], [RerankCandidate(t, v[None, :]) for t, v in zip(texts, vectors)])
    assert scores.shape == (1, 3)
    assert scores[0].argmax() == 0 and scores[0].argmin() == 1


def test_embedder_batches_texts_of_like_length(embedder, monkeypatch) -> None:
    """Texts of mixed lengths go to the model in few batches of like length (as
    `like_length_batches` cuts them), with the vectors each text gets alone."""
    from memroute.memory.embedders import minilm_onnx

    texts = ["Rain.", "A grey cat sleeps.", "Paris hosts the Eiffel Tower, a tower of iron.",
             "Yes.", " ".join(["The long sentence goes on and on"] * 6), "A red car.",
             "Bananas are yellow and sweet.", "Tea."]
    alone = np.vstack([embedder.encode([t]) for t in texts])
    session = embedder._session
    shapes: list[tuple[int, int]] = []

    class Recording:
        def run(self, names, feeds):
            shapes.append(feeds["attention_mask"].shape)
            return session.run(names, feeds)

    monkeypatch.setattr(embedder, "_session", Recording())
    batched = embedder.encode(texts)
    assert np.allclose(batched, alone, atol=1e-5)
    lengths = [len(e.ids) for e in embedder._tokenizer.encode_batch(texts)]
    cut = minilm_onnx.like_length_batches(lengths, embedder.batch_size)
    assert shapes == [(len(b), max(lengths[i] for i in b)) for b in cut]
    assert 1 < len(shapes) < len(texts)


@given(st.lists(st.integers(1, 256), min_size=1, max_size=9), st.integers(1, 5))
def test_like_length_batches_cut_at_the_least_cost(lengths: list[int], batch_size: int) -> None:
    """Every text in one batch; each batch within ``batch_size`` and the attention bound; no
    cut of the sorted texts into batches costs less (all 2^(n-1) cuts tried)."""
    from itertools import combinations

    from memroute.memory.embedders.minilm_onnx import (
        MAX_BATCH_ATTENTION,
        RUN_COST_TOKENS,
        like_length_batches,
    )

    def cost(batches: list[list[int]]) -> int:
        return sum(RUN_COST_TOKENS + len(b) * max(b) for b in batches)

    def allowed(batch: list[int]) -> bool:
        return len(batch) <= batch_size and (len(batch) == 1
                                             or len(batch) * max(batch) ** 2 <= MAX_BATCH_ATTENTION)

    batches = like_length_batches(lengths, batch_size)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    widths = [[lengths[i] for i in b] for b in batches]
    assert all(allowed(b) for b in widths)
    ordered = sorted(lengths)
    cuts = [[ordered[a:b] for a, b in zip((0, *points), (*points, len(ordered)))]
            for r in range(len(ordered)) for points in combinations(range(1, len(ordered)), r)]
    assert cost(widths) == min(cost(c) for c in cuts if all(allowed(b) for b in c))


@pytest.fixture(scope="module")
def windows() -> MiniLMWindows:
    return MiniLMWindows()


@given(text=st.text(max_size=300) | st.text(st.characters(codec="utf-8"), min_size=60,
                                           max_size=260))
def test_a_texts_windows_are_its_tokens_windows(windows: MiniLMWindows, text: str) -> None:
    """The windows of any text, the short ones read without the tokenizer, are the ones its
    tokens give."""
    assert windows(text) == windows.windows(text)


def test_fuse_scores() -> None:
    matrix = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.5]])
    assert fuse_scores(matrix, "max").tolist() == [0.9, 0.8, 0.5]
    assert np.allclose(fuse_scores(matrix, "mean"), [0.55, 0.45, 0.5])
    rrf = fuse_scores(matrix, "rrf")  # ranks (1, 3) and (3, 1) tie, and beat (2, 2) at k=60
    assert rrf[0] == pytest.approx(rrf[1]) and rrf[0] > rrf[2]
    with pytest.raises(ValueError):
        fuse_scores(matrix, "median")


@given(st.lists(st.lists(st.sampled_from(["oslo", "fjord", "train", "sister", "rain", "piano"]),
                         max_size=12), min_size=1, max_size=30),
       st.lists(st.sampled_from(["oslo", "fjord", "train", "unseen", "rain"]), max_size=6))
def test_bm25_equals_rank_bm25(documents: list[list[str]], query: list[str]) -> None:
    """The offline reranker's array BM25 scores as rank-bm25's BM25Okapi (epsilon floor,
    repeated query terms, unknown terms) on any corpus."""
    ids, vocabulary = term_ids([" ".join(d) for d in documents])
    expected = BM25Okapi([d or ["_"] for d in documents]).get_scores(query)
    scores = bm25_okapi(ids, [[vocabulary[t] for t in query if t in vocabulary]],
                        len(vocabulary))
    assert np.allclose(scores[0], expected, rtol=1e-9, atol=1e-12)


async def test_offline_reranker_scores_each_candidate_as_alone() -> None:
    """All candidates in one product give the per-candidate max and mean, empty ones 0."""
    rng = np.random.default_rng(0)
    candidates = [RerankCandidate(f"turn {i}\nnext line {i % 3}",
                                  rng.normal(size=(i % 4, 8)).astype(np.float32))
                  for i in range(9)]
    query = RerankQuery("turn next", rng.normal(size=8).astype(np.float32))
    scores = (await OfflineReranker(weights=(1.0, 0.0, 0.0)).score([query], candidates))[0]
    assert scores.tolist() == pytest.approx(
        [float((c.sentence_embeddings @ query.embedding).max()) if len(c.sentence_embeddings)
         else 0.0 for c in candidates], abs=1e-6)
    means = (await OfflineReranker(weights=(0.0, 1.0, 0.0)).score([query], candidates))[0]
    assert means.tolist() == pytest.approx(
        [float((c.sentence_embeddings @ query.embedding).mean()) if len(c.sentence_embeddings)
         else 0.0 for c in candidates], abs=1e-6)


async def test_offline_reranker_title_lane_ranks_passages_by_their_subject() -> None:
    """A passage whose later sentences never name their subject is found by its title, with
    the same sentence vectors; untitled candidates (conversation turns) rank as without it."""
    rng = np.random.default_rng(1)
    vectors = [rng.normal(size=(3, 8)).astype(np.float32) for _ in range(3)]
    query = RerankQuery("Where was Don Werner born?", rng.normal(size=8).astype(np.float32))
    passages = ["Don Werner: He is a baseball coach. He was born in Appleton.",
                "Appleton: It is a city. Many were born there.",
                "Wisconsin: It is a state. Appleton lies in it."]
    turns = [p.split(": ", 1)[1] for p in passages]  # no title: the lane adds nothing

    async def scores(texts: list[str], title_weight: float) -> np.ndarray:
        return (await OfflineReranker(title_weight=title_weight).score(
            [query], [RerankCandidate(t, v) for t, v in zip(texts, vectors)]))[0]

    without, with_titles = await scores(passages, 0.0), await scores(passages, 0.2)
    assert with_titles[0] - without[0] == pytest.approx(0.1, abs=1e-6)  # 0.2 x 0.5 x its max
    assert with_titles[1:].tolist() == pytest.approx(without[1:].tolist(), abs=1e-6)
    assert (await scores(turns, 0.2)).tolist() == (await scores(turns, 0.0)).tolist()


def test_titles_of_reads_titles_not_conversation_turns() -> None:
    assert titles_of("Don Werner: He is a coach.\nAppleton: A city.\nDon Werner: Born 1953.") \
        == "Don Werner Appleton"
    assert titles_of("St. Louis: A city in Missouri.") == "St. Louis"
    for turn in ("Look at this. [image: a photo of a dog]", "Thanks! My advice: stay focused.",
                 "no title here", "my advice: stay calm."):
        assert titles_of(turn) == ""
