"""Loaders of the four data sets, on the fixture slices, and the protocol's store layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memroute.evals.datasets import load_dataset
from memroute.evals.store import planned_episodes, pooled_episodes, schema_name
from memroute.errors import InvalidInputError

FIX = Path(__file__).parent / "fixtures" / "evals"


def test_hotpotqa_both_layouts_load_the_same_questions() -> None:
    hf = load_dataset("hotpotqa", FIX / "hotpotqa_5.jsonl")
    original = load_dataset("hotpotqa", FIX / "hotpotqa_5_original.json")
    assert [q.id for q in hf.questions] == [q.id for q in original.questions]
    assert [q.gold_facts for q in hf.questions] == [q.gold_facts for q in original.questions]
    assert [q.type for q in hf.questions] == ["bridge", "comparison", "bridge", "bridge",
                                              "comparison"]
    first = hf.questions[0]
    # supporting fact (Socialist Revolutionary Party, 5) resolved and stored as "Title: sentence"
    record = json.loads((FIX / "hotpotqa_5.jsonl").read_text().splitlines()[0])
    sentence = record["context"]["sentences"][0][5].strip()
    assert first.gold_facts[0] == f"Socialist Revolutionary Party: {sentence}"
    assert first.gold_titles == ["Socialist Revolutionary Party", "Russian Civil War"]


def test_limit_keeps_the_first_questions_and_changes_the_store_key() -> None:
    full = load_dataset("hotpotqa", FIX / "hotpotqa_5.jsonl")
    two = load_dataset("hotpotqa", FIX / "hotpotqa_5.jsonl", limit=2)
    assert [q.id for q in two.questions] == [q.id for q in full.questions[:2]]
    assert two.store_key != full.store_key
    assert two.file_sha256 == full.file_sha256


def test_2wiki_types_and_gold() -> None:
    ds = load_dataset("2wiki", FIX / "2wiki_4.json")
    assert [q.type for q in ds.questions] == ["compositional", "bridge_comparison", "inference",
                                              "comparison"]
    q = ds.questions[0]
    assert q.gold_titles == ["Charles Mathew", "James Charles Mathew"]
    assert all(f.split(": ", 1)[0] in q.gold_titles for f in q.gold_facts)


def test_musique_gold_is_every_sentence_of_the_supporting_paragraphs() -> None:
    ds = load_dataset("musique", FIX / "musique_3.jsonl")
    assert [q.type for q in ds.questions] == ["2hop", "3hop", "4hop"]
    record = json.loads((FIX / "musique_3.jsonl").read_text().splitlines()[0])
    supporting = [p for p in record["paragraphs"] if p["is_supporting"]]
    q = ds.questions[0]
    assert sorted(q.gold_titles) == sorted(p["title"] for p in supporting)
    assert len(q.gold_facts) >= len(supporting)
    for p in supporting:
        assert any(f.startswith(f"{p['title']}: ") for f in q.gold_facts)


def test_locomo_turns_scopes_and_evidence() -> None:
    ds = load_dataset("locomo", FIX / "locomo_conv26_s1-2.json")
    assert ds.skipped == {"adversarial": 1}
    assert len(ds.questions) == 6
    turns = ds.conversations["conv-26"]
    assert turns[0].dia_id == "D1:1" and turns[0].speaker == "Caroline"
    assert turns[0].produced_at.isoformat() == "2023-05-08T13:56:00+00:00"
    times = [t.produced_at for t in turns]
    assert times == sorted(times)
    assert any("[image:" in t.text for t in turns)  # blip captions appended
    last = ds.questions[-1]
    assert last.gold_ids == ["D2:14"] and last.unresolved == ["D3:13"]
    assert {q.type for q in ds.questions} <= {"multi-hop", "temporal", "open-domain",
                                               "single-hop"}
    plan = planned_episodes(ds, seed=0)
    assert list(plan) == ["conv-26"]
    assert plan["conv-26"][0].metadata == {"dia_id": "D1:1"}
    assert plan["conv-26"][0].producer == "Caroline"


def test_pooled_store_is_deduplicated_shuffled_and_strictly_increasing() -> None:
    ds = load_dataset("hotpotqa", FIX / "hotpotqa_5.jsonl")
    episodes = pooled_episodes(ds, seed=0)
    contents = [e.content for e in episodes]
    assert len(contents) == len(set(contents))
    every = {c for q in ds.questions for p in q.paragraphs for c in p.contents()}
    assert set(contents) == every
    assert all(f in every for q in ds.questions for f in q.gold_facts)
    times = [e.produced_at for e in episodes]
    assert all(a < b for a, b in zip(times, times[1:]))
    assert {e.session_id for e in episodes} == {"pooled"}
    assert {e.producer for e in episodes} == {"system"}
    assert contents != [e.content for e in pooled_episodes(ds, seed=1)]
    assert contents == [e.content for e in pooled_episodes(ds, seed=0)]
    assert schema_name(ds, 0, "a") != schema_name(ds, 1, "a") != schema_name(ds, 0, "b")


@pytest.mark.parametrize(("name", "text"), [
    ("hotpotqa", "not json at all"),
    ("hotpotqa", '[{"question": "q"}]'),
    ("2wiki", '[{"_id": "x", "question": "q", "context": [["T", ["s"]]], '
              '"supporting_facts": [["T", 3]]}]'),
])
def test_bad_files_raise_a_clear_error(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InvalidInputError):
        load_dataset(name, path)


def test_unknown_dataset_and_missing_file() -> None:
    with pytest.raises(InvalidInputError, match="unknown data set"):
        load_dataset("squad", FIX / "hotpotqa_5.jsonl")
    with pytest.raises(InvalidInputError, match="not found"):
        load_dataset("hotpotqa", FIX / "nope.jsonl")
