"""One call's size is capped with a typed error naming the limit
(nothing written), and a sentence longer than the embedder reads is embedded as overlapping
windows, so a word at its very end is found; results still show each episode once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.synthetic import random_words, vocabulary
from memroute.errors import InvalidInputError
from memroute.memory import Episode, Memory, Scope
from memroute.memory.embedders.minilm_onnx import MAX_TOKENS
from memroute.memory.limits import MAX_CHARS_PER_CALL, MAX_EPISODES_PER_CALL
from memroute.memory.splitter import split_sentences

ENDING = "the violet submarine surfaced beside the old lighthouse at dawn"


async def test_more_episodes_than_one_call_takes_are_refused(memory: Memory,
                                                             scope: Scope) -> None:
    episodes = [{"content": f"tiny {i}"} for i in range(MAX_EPISODES_PER_CALL + 1)]
    with pytest.raises(InvalidInputError, match=f"the limit is {MAX_EPISODES_PER_CALL}"):
        await memory.add(scope, episodes)
    with pytest.raises(InvalidInputError, match="add_batches"):
        await memory.upsert(scope, episodes)
    assert await memory.count(scope) == {"episodes": 0, "sentences": 0}


async def test_more_content_than_one_call_takes_is_refused(memory: Memory, scope: Scope) -> None:
    size = 1_000_000
    episodes = [{"content": "x" * size} for _ in range(MAX_CHARS_PER_CALL // size + 1)]
    with pytest.raises(InvalidInputError, match=f"the limit is {MAX_CHARS_PER_CALL}"):
        await memory.add(scope, episodes)
    assert await memory.count(scope) == {"episodes": 0, "sentences": 0}


def long_chunk() -> str:
    """One unpunctuated run of plain words that the splitter keeps whole and the tokenizer
    reads as well over ``MAX_TOKENS`` tokens, ending with ``ENDING``."""
    filler = random_words(vocabulary(500, seed=3), 1800 - len(ENDING), seed=4)
    return f"{filler} {ENDING}"


async def test_the_end_of_a_long_unpunctuated_sentence_is_searchable(memory: Memory,
                                                                     scope: Scope) -> None:
    chunk = long_chunk()
    tokens = memory.embedder.token_windows.tokenizer.encode(chunk).ids
    assert split_sentences(chunk) == [chunk] and len(tokens) > 2 * MAX_TOKENS
    await memory.add(scope, [Episode(uid="long", content=chunk),
                             Episode(uid="other", content="A harbour pilot guides ships.")])
    query = "a violet submarine surfaced beside a lighthouse"
    truncated = (await memory.embedder.embed_documents([chunk]))[0]
    query_vector = await memory.embedder.embed_query(query)
    assert float(truncated @ query_vector) < 0.3  # one vector of the chunk misses its end

    results = await memory.search_scored(scope, query, k=1, context=(0, 0), rerank=False)
    assert results[0].nucleus.uid == "long" and results[0].vector_score > 0.5
    assert results[0].matched_sentence.endswith(ENDING)
    assert results[0].text == chunk  # the episode's text once, not its windows


async def test_windows_cover_every_character_and_fit_the_model(memory: Memory,
                                                               scope: Scope) -> None:
    chunk = long_chunk()
    windows = memory.embedder.token_windows(chunk)
    assert len(windows) >= 3
    for window in windows:
        assert len(memory.embedder.token_windows.tokenizer.encode(window).ids) <= MAX_TOKENS
    assert windows[0] == chunk[:len(windows[0])] and chunk.endswith(windows[-1])
    position = 0  # consecutive windows overlap, so none of the chunk falls between them
    for window in windows:
        start = chunk.index(window, max(0, position - len(window)))
        assert start <= position
        position = start + len(window)
    assert position == len(chunk)
    await memory.add(scope, [Episode(uid="long", content=chunk)])
    assert await memory.count(scope) == {"episodes": 1, "sentences": len(windows)}
    stored = await memory.with_stored_embeddings(
        scope, await memory.search_scored(scope, ENDING, k=1, context=(0, 0)))
    assert stored[0].sentence_embeddings.shape == (len(windows), memory.embedder.dim)
    assert np.allclose(np.linalg.norm(stored[0].sentence_embeddings, axis=1), 1, atol=1e-3)


@pytest.mark.stress
@pytest.mark.timeout(3600)  # ~20 min on the shared machine
def test_stress_big_inputs_stay_within_their_bounds(pg_url: str) -> None:
    """`benchmarks.big_inputs` on the test server: the longest lexical query at 100k
    sentences, one 1 MB episode, 40,000 tiny episodes in bounded transactions, 64 texts
    over the embedder's 256 tokens."""
    env = {**os.environ, "MEMROUTE_DATABASE_URL": pg_url}
    out = subprocess.run([sys.executable, "-m", "benchmarks.big_inputs"], env=env, check=True,
                         capture_output=True, text=True, cwd=Path(__file__).parents[1]).stdout
    print(out)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["lexical"]["long_query_ms"]["p50"] <= 1000  # the target at 100k
    one_mb, tiny = report["one_mb_episode"], report["tiny_episodes"]
    assert one_mb["stored"]["episodes"] == 2 and tiny["stored"]["episodes"] == 40_001
    # the embedder's working memory goes back after each batch
    for figures in (one_mb, tiny, report["long_texts"]):
        assert figures["rss_mb_peak"] - figures["rss_mb_models_loaded"] < 400
        assert figures["rss_mb_end"] - figures["rss_mb_models_loaded"] < 250
