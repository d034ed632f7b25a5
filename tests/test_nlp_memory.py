"""spaCy's vocabulary stays bounded: in a long ingestion and in a long-lived process that
parses every question (the real en_core_web_sm pipeline)."""

from __future__ import annotations

import uuid

import pytest

from memroute import nlp


def invented_sentences(n: int) -> list[str]:
    """Sentences full of words no vocabulary has seen."""
    return [f"Zorvath {uuid.uuid4().hex[:8]} met Quillon {uuid.uuid4().hex[:6]} in "
            f"Brevaskia on Tuesday." for _ in range(n)]


def test_ingestion_adds_no_new_words_to_the_vocabulary_and_finds_the_same_entities(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = nlp.load_pipeline(nlp.INGEST)
    monkeypatch.setattr(nlp, "_kept_words", nlp._KeptWords())
    nlp.extract_entities(invented_sentences(4))  # the first batch may intern fixed strings
    nlp.extract_entities(invented_sentences(4))  # the words met again are kept from now on
    before = len(ingest.vocab.strings)
    texts = invented_sentences(200)
    found = nlp.extract_entities(texts)
    assert len(ingest.vocab.strings) == before
    # the same entities as a full parse outside any memory zone
    full = [nlp.entities_of(nlp.load_pipeline(nlp.QUERY)(t)) for t in texts[:20]]
    assert found[:20] == full
    assert any(e.label for e in found[0])


def test_the_query_pipeline_is_replaced_once_its_vocabulary_is_large(
        monkeypatch: pytest.MonkeyPatch) -> None:
    question = "Where did Zorvath meet Quillon?"
    old = nlp.load_pipeline(nlp.QUERY)
    kept = nlp.parse(question)
    monkeypatch.setattr(nlp, "QUERY_VOCAB_LIMIT", len(old.vocab) + 10)
    for text in invented_sentences(10):
        nlp.parse(text)
    fresh = nlp.load_pipeline(nlp.QUERY)
    assert fresh is not old and len(fresh.vocab) < len(old.vocab)
    # a parse made by the replaced pipeline is still whole, and the fresh one agrees with it
    assert [t.text for t in kept] == ["Where", "did", "Zorvath", "meet", "Quillon", "?"]
    assert nlp.entities_of(kept) == nlp.entities_of(fresh(question))


def test_ingestion_keeps_words_met_again_up_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A word seen in two batches stays in the vocabulary; at most `KEPT_WORDS_MAX` do."""
    ingest = nlp.load_pipeline(nlp.INGEST)
    monkeypatch.setattr(nlp, "_kept_words", nlp._KeptWords())
    monkeypatch.setattr(nlp, "KEPT_WORDS_MAX", 3)
    words = [f"zq{uuid.uuid4().hex[:10]}" for _ in range(6)]
    first, later = " ".join(words[:3]), " ".join(words[3:])
    before = len(ingest.vocab.strings)
    found = nlp.extract_entities([first])
    assert not any(w in ingest.vocab.strings for w in words)  # seen once: gone with the batch
    assert nlp.extract_entities([first]) == found
    assert all(w in ingest.vocab.strings for w in words[:3])
    grown = len(ingest.vocab.strings)
    assert grown > before
    for _ in range(2):  # met again, but the bound is reached
        nlp.extract_entities([later])
    assert not any(w in ingest.vocab.strings for w in words[3:]) and len(ingest.vocab.strings) == grown
