"""A query's entity keys from the lean `KEYS` pipeline (no dependency parse, no lemmas) are
those of the full parse, on real questions; a kept full parse is reused (the real
en_core_web_sm pipeline)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from memroute import nlp

SHARED = Path(__file__).resolve().parents[2] / "shared/data"
HOTPOTQA = SHARED / "hotpotqa/hotpotqa_dev_distractor_800.jsonl"
LOCOMO = SHARED / "locomo/locomo10_conv0-6.json"
TURNS = [text for conversation in json.loads(
    (Path(__file__).parent / "fixtures" / "conversations.json").read_text())["conversations"]
    for session in conversation["sessions"] for _, text in session["turns"]]
EDGE_CASES = ["", " ", "who?", "Who is Clara", "What did the Petronas Towers' architect, "
              "César Pelli, build in New York City between 1998 and 2004?", "x" * 700,
              "Where does Tom  Marsh\n\nlive, and does Eli Marsh know Helga Brandt?"]


def full_parse_keys(text: str) -> list[str]:
    """The keys from a full parse of ``text`` made here (not `parse`'s kept one)."""
    pipeline = nlp.load_pipeline(nlp.QUERY)
    with pipeline.memory_zone():
        doc = pipeline(text[:nlp.MAX_PARSED_QUERY_CHARS])
        return list(dict.fromkeys(k for k in (nlp.entity_key(s.text)
                                              for s in nlp.named_spans(doc)) if k))


def assert_same_keys(texts: list[str]) -> None:
    found = [nlp.query_entity_keys(t) for t in texts]
    expected = [full_parse_keys(t) for t in texts]
    assert sum(map(len, expected)) > len(texts) // 2  # not a comparison of empty lists
    assert found == expected


def test_the_keys_pipeline_leaves_out_what_the_keys_do_not_read() -> None:
    keys = nlp.load_pipeline(nlp.KEYS)
    assert keys.pipe_names == ["tok2vec", "tagger", "ner"]
    assert "parser" in nlp.load_pipeline(nlp.QUERY).pipe_names


def test_same_keys_as_the_full_parse_on_turns_and_edge_cases() -> None:
    assert_same_keys(TURNS + EDGE_CASES)


@pytest.mark.skipif(not (HOTPOTQA.exists() and LOCOMO.exists()),
                    reason="the shared HotpotQA and LoCoMo files are not beside the repo")
def test_same_keys_as_the_full_parse_on_real_questions() -> None:
    with HOTPOTQA.open() as f:
        hotpot = [json.loads(line)["question"] for line, _ in zip(f, range(250))]
    locomo = [qa["question"] for conversation in json.loads(LOCOMO.read_text())
              for qa in conversation["qa"]][:250]
    assert len(hotpot) == len(locomo) == 250
    assert_same_keys(hotpot + locomo)
    # the keys read proper nouns from the fine tags, which the full parse maps to PROPN
    full = nlp.load_pipeline(nlp.QUERY)
    tokens = [t for doc in full.pipe(hotpot + locomo) for t in doc]
    assert sum(t.pos_ == "PROPN" for t in tokens) > 1000
    assert all((t.pos_ == "PROPN") == (t.tag_ in nlp.PROPER_NOUN_TAGS) for t in tokens)


def test_a_kept_full_parse_is_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    question = f"Which film did Mara Quinlan{uuid.uuid4().hex[:4]} direct in Lisbon?"
    doc = nlp.parse(question)
    assert nlp.kept_parse(question) is doc

    def no_lean_parse(role: str = nlp.QUERY):
        raise AssertionError(f"the {role} pipeline was asked for")

    monkeypatch.setattr(nlp, "load_pipeline", no_lean_parse)
    keys = nlp.query_entity_keys(question)
    assert "lisbon" in keys and keys == nlp._keys_of(doc)


def test_lean_keys_add_no_strings_to_the_vocabulary() -> None:
    keys = nlp.load_pipeline(nlp.KEYS)
    nlp.query_entity_keys("Where did Zorvath meet Quillon in Brevaskia?")
    before = len(keys.vocab.strings)
    for _ in range(50):
        nlp.query_entity_keys(f"Where did Zorvath {uuid.uuid4().hex[:8]} meet Quillon "
                              f"{uuid.uuid4().hex[:6]} in Brevaskia?")
    assert len(keys.vocab.strings) == before


def test_a_one_off_command_reads_keys_from_the_pipeline_it_has(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Within `reusing_query_pipeline` (the CLI's ``ask``) a query's keys come from the full
    parse when the `QUERY` pipeline is loaded, and the `KEYS` pipeline is not loaded for
    them; outside it, as before."""
    text = f"Where does Helga Brandt live, and does Eli Marsh know Clara {uuid.uuid4().hex[:6]}?"
    expected = nlp.query_entity_keys(text)  # the KEYS pipeline's
    assert "helga brandt" in expected
    nlp.load_pipeline(nlp.QUERY)
    monkeypatch.delitem(nlp._pipelines, nlp.KEYS)
    with nlp.reusing_query_pipeline():
        assert nlp.query_entity_keys(text) == expected
        assert nlp.KEYS not in nlp._pipelines and nlp.kept_parse(text[:500]) is not None
    other = text.replace("Helga", "Greta")
    assert nlp.query_entity_keys(other) and nlp.KEYS in nlp._pipelines  # loaded again
