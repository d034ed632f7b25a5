"""The entity extraction benchmark: both multiplication backends and both decodings timed on
the same sentences, their entities compared, and ingestion's way (numpy, the decoder) left in
place afterwards."""

from __future__ import annotations

from benchmarks import entities as bench
from memroute import nlp


def test_every_variant_is_timed_and_ingestion_keeps_numpy_and_the_decoder() -> None:
    texts = ["Clara moved to Lisbon in 2023.", "Karim studies at MIT with Helga Brandt.",
             "the weather was nice today"]
    report = bench.measure(texts, rounds=2)
    assert report["sentences"] == 3
    assert report["differing_sentences"] == {"numpy": 0, "numpy_decoder": 0}
    assert set(report["cpu_ms_per_sentence"]) == {"blis", "numpy", "numpy_decoder"}
    assert all(ms > 0 for ms in report["cpu_ms_per_sentence"].values())
    ner = nlp.load_pipeline(nlp.INGEST).get_pipe("ner")
    assert {layer.ops.use_blis for layer in ner.model.walk()} == {False}
    assert nlp._decoders[nlp.INGEST] is not None
    assert {e.key for e in nlp.extract_entities(texts[:1])[0]} == {"clara", "lisbon", "2023"}
