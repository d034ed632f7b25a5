"""The entity extraction benchmark: both multiplication backends timed on the same sentences,
their entities compared, and ingestion's backend (numpy) left in place afterwards."""

from __future__ import annotations

from benchmarks import entities as bench
from memroute import nlp


def test_both_backends_are_timed_and_ingestion_keeps_numpy() -> None:
    texts = ["Clara moved to Lisbon in 2023.", "Karim studies at MIT with Helga Brandt.",
             "the weather was nice today"]
    report = bench.measure(texts, rounds=2)
    assert report["sentences"] == 3 and report["differing_sentences"] == 0
    assert set(report["cpu_ms_per_sentence"]) == {"blis", "numpy"}
    assert all(ms > 0 for ms in report["cpu_ms_per_sentence"].values())
    ner = nlp.load_pipeline(nlp.INGEST).get_pipe("ner")
    assert {layer.ops.use_blis for layer in ner.model.walk()} == {False}
    assert {e.key for e in nlp.extract_entities(texts[:1])[0]} == {"clara", "lisbon", "2023"}
