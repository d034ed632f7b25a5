"""`GreedyEntityDecoder` finds exactly the entities of spaCy's own decoding loop (the real
en_core_web_sm ``ner``), and leaves what it cannot decode to spaCy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memroute import nlp
from memroute.ner_decoder import GreedyEntityDecoder

TURNS = [text for conversation in json.loads(
    (Path(__file__).parent / "fixtures" / "conversations.json").read_text())["conversations"]
    for session in conversation["sessions"] for _, text in session["turns"]]
# whitespace tokens (no entity starts on one), a sentence start inside a text, a text ending
# in an entity, one-word texts, an empty text, numbers, dates and amounts
EDGE_CASES = [
    "", " ", "Lisbon", "Clara", "2023", "Clara moved to Lisbon",
    "Tom  Marsh  and\n\nEli Marsh opened the Spokehouse in Portland, Oregon",
    "The Petronas Towers were the tallest from 1998 to 2004.   ",
    "Helga Brandt: Helga Brandt is a fictional character in the 1967 James Bond film You "
    "Only Live Twice, played by Karin Dor.",
    "He paid $4.5 million, about 30 percent more than the 3 bidders in New York City.",
    "On Tuesday, 3 June 2011, at 9 a.m., the United Nations met the World Health Organization.",
]


@pytest.fixture(scope="module")
def ingest():
    return nlp.load_pipeline(nlp.INGEST)


def spacy_loop(pipeline, texts: list[str]) -> list[list[nlp.Entity]]:
    ner = pipeline.get_pipe("ner")
    return [nlp.entities_of(ner(pipeline.make_doc(text))) for text in texts]


def test_the_ingestion_pipeline_decodes_with_it(ingest) -> None:
    assert isinstance(nlp._decoders[nlp.INGEST], GreedyEntityDecoder)
    assert nlp._decoders[nlp.INGEST].ner is ingest.get_pipe("ner")


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_same_entities_as_spacys_loop(ingest, batch: int) -> None:
    texts = TURNS + EDGE_CASES
    expected = spacy_loop(ingest, texts)
    assert sum(map(len, expected)) > 50  # the comparison is not between empty lists
    decoder = GreedyEntityDecoder.for_pipe(ingest.get_pipe("ner"))
    found = []
    for start in range(0, len(texts), batch):
        docs = [ingest.make_doc(text) for text in texts[start:start + batch]]
        found.extend(nlp.entities_of(spans) for spans in decoder.decode(docs))
    assert found == expected
    assert nlp.extract_entities(texts, batch_size=batch) == expected


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_moves_as_spacys_loop_when_the_scores_favour_invalid_ones(seed: int) -> None:
    """The trained model rarely prefers a move the rules forbid, so its entities alone do not
    test the rules: with random output weights (a pipeline of its own) invalid moves often
    score highest, and both decodings must still pick the same valid ones."""
    import importlib

    import numpy as np

    pipeline = importlib.import_module(nlp.MODEL_PACKAGE).load()
    ner = pipeline.get_pipe("ner")
    upper = ner.model.get_ref("upper")
    W = upper.get_param("W")
    upper.set_param("W", np.random.default_rng(seed).normal(0, 1, W.shape).astype(W.dtype))
    texts = TURNS[:40] + EDGE_CASES

    def docs():  # every fifth word of the later texts starts a sentence: no entity crosses it
        made = [pipeline.make_doc(text) for text in texts]
        for doc in made[20:]:
            for token in list(doc)[5::5]:
                token.is_sent_start = True
        return made

    expected = [nlp.entities_of(ner(doc)) for doc in docs()]
    assert sum(len(e) > 1 for e in expected) > 10  # random moves make many entities
    decoder = GreedyEntityDecoder.for_pipe(ner)
    assert [nlp.entities_of(spans) for spans in decoder.decode(docs())] == expected


def test_a_doc_with_preset_entities_is_left_to_spacy(ingest) -> None:
    from spacy.tokens import Span

    doc = ingest.make_doc("Clara moved to Lisbon in 2023.")
    doc.set_ents([Span(doc, 0, 1, label="ORG")])
    decoder = GreedyEntityDecoder.for_pipe(ingest.get_pipe("ner"))
    assert decoder.decode([ingest.make_doc("Tom lives in Paris."), doc]) is None


def test_a_recogniser_it_does_not_know_gets_no_decoder(ingest) -> None:
    assert GreedyEntityDecoder.for_pipe(ingest.get_pipe("parser")) is None
