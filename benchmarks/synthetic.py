"""Synthetic word stores for the lexical-lane bounds: many sentences of random words, written
straight into the tables (no embedding), so a store of 100k sentences fills in seconds."""

from __future__ import annotations

import random
import string
from datetime import datetime, timedelta, timezone

from memroute.memory import Memory, Scope


def vocabulary(size: int, seed: int = 0) -> list[str]:
    """``size`` distinct lowercase pseudo-words of 4-9 letters."""
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        words.setdefault("".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))))
    return list(words)


def random_words(words: list[str], chars: int, seed: int = 1) -> str:
    """Random words of ``words`` joined by spaces, at most ``chars`` characters."""
    rng = random.Random(seed)
    out: list[str] = []
    length = -1
    while True:
        word = rng.choice(words)
        if length + 1 + len(word) > chars:
            return " ".join(out)
        out.append(word)
        length += 1 + len(word)


async def fill_word_store(memory: Memory, scope: Scope, sentences: int, *,
                          words_per_sentence: int = 12, vocabulary_size: int = 2000,
                          seed: int = 0) -> None:
    """Add ``sentences`` one-sentence episodes of random words to ``scope``, written with
    COPY. Their embeddings are zero vectors, which the HNSW index leaves out, so only the
    lexical lane can find them."""
    rng = random.Random(seed)
    words = vocabulary(vocabulary_size, seed)
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    zero = "[" + ",".join(["0"] * memory.embedder.dim) + "]"
    s = memory.schema
    async with memory._pool.connection() as conn, conn.transaction():
        async with conn.cursor().copy(
                f"COPY {s}.episodes (scope_key, org_id, project_id, user_id, agent_id, uid, "
                "session_id, producer, produced_at, content) FROM STDIN") as copy:
            texts = []
            for i in range(sentences):
                text = " ".join(rng.choices(words, k=words_per_sentence)) + "."
                texts.append(text)
                await copy.write_row([scope.key, scope.org_id, scope.project_id, scope.user_id,
                                      scope.agent_id, f"w{i}", "words", "system",
                                      start + timedelta(seconds=i), text])
        async with conn.cursor().copy(
                f"COPY {s}.sentences (scope_key, episode_uid, idx, text, embedding, session_id, "
                "producer, produced_at) FROM STDIN") as copy:
            for i, text in enumerate(texts):
                await copy.write_row([scope.key, f"w{i}", 0, text, zero, "words", "system",
                                      start + timedelta(seconds=i)])
    async with memory._pool.connection() as conn:
        await conn.execute(f"ANALYZE {s}.sentences")
