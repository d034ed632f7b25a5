"""Loaders of the four data sets, on the fixture slices, and the protocol's store layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memroute.evals.datasets import load_dataset, parse_pool_entry
from memroute.evals.store import (
    passage_episodes,
    passage_schema_name,
    planned_episodes,
    pooled_episodes,
    schema_name,
)
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


def _hotpot_record(qid: str, context: list, facts: list) -> dict:
    return {"id": qid, "question": f"question {qid}?", "answer": "a", "type": "bridge",
            "context": context, "supporting_facts": facts}


def test_passage_gold_is_one_passage_per_supporting_paragraph(tmp_path: Path) -> None:
    shared = ["Shirley Temple", [" Shirley Temple was an actress.", " She was an ambassador."]]
    records = [
        # two supporting sentences in one paragraph make one gold passage
        _hotpot_record("q1", [["Kiss and Tell", ["Kiss and Tell is a film.", " It stars her."]],
                              shared, ["Ghana", ["Ghana is a country."]]],
                       [["Kiss and Tell", 0], ["Kiss and Tell", 1], ["Shirley Temple", 1]]),
        # q2's supporting passage is also in q1's context: the pool holds it once
        _hotpot_record("q2", [shared, ["Accra", ["Accra is a city."]]],
                       [["Shirley Temple", 0]]),
    ]
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    ds = load_dataset("hotpotqa", path)
    temple = "Shirley Temple: Shirley Temple was an actress. She was an ambassador."
    assert ds.questions[0].gold_passages == [
        "Kiss and Tell: Kiss and Tell is a film. It stars her.", temple]
    assert ds.questions[1].gold_passages == [temple]
    episodes = passage_episodes([ds], seed=0)
    contents = [e.content for e in episodes]
    assert sorted(contents) == sorted({temple, "Kiss and Tell: Kiss and Tell is a film. It "
                                       "stars her.", "Ghana: Ghana is a country.",
                                       "Accra: Accra is a city."})
    assert {e.metadata["title"] for e in episodes} == {"Shirley Temple", "Kiss and Tell",
                                                      "Ghana", "Accra"}
    assert all(q.gold_passages and set(q.gold_passages) <= set(contents) for q in ds.questions)


def test_musique_gold_passages_follow_is_supporting_not_the_title() -> None:
    ds = load_dataset("musique", FIX / "musique_3.jsonl")
    records = [json.loads(line) for line in (FIX / "musique_3.jsonl").read_text().splitlines()]
    for q, r in zip(ds.questions, records):
        supporting = [p for p in r["paragraphs"] if p["is_supporting"]]
        assert len(q.gold_passages) == len({(p["title"], p["paragraph_text"])
                                            for p in supporting})
        assert all(g.startswith(f"{p['title']}: ") for g, p in zip(q.gold_passages, supporting))


def test_the_passage_pool_is_the_same_store_whichever_set_is_evaluated() -> None:
    hotpot = load_dataset("hotpotqa", FIX / "hotpotqa_5.jsonl")
    wiki = load_dataset("2wiki", FIX / "2wiki_4.json")
    musique = load_dataset("musique", FIX / "musique_3.jsonl")
    one = passage_episodes([hotpot, wiki, musique], seed=0)
    other = passage_episodes([musique, hotpot, wiki, hotpot], seed=0)
    assert [e.content for e in one] == [e.content for e in other]
    assert (passage_schema_name([hotpot, wiki, musique], 0, "m")
            == passage_schema_name([musique, wiki, hotpot], 0, "m"))
    assert passage_schema_name([hotpot, wiki], 0, "m") != passage_schema_name([hotpot], 0, "m")
    assert passage_schema_name([hotpot], 0, "m") != passage_schema_name([hotpot], 0, "e5")
    every = {p.passage() for d in (hotpot, wiki, musique) for q in d.questions
             for p in q.paragraphs}
    assert {e.content for e in one} == every and len(one) == len(every)
    assert [e.content for e in one] != [e.content for e in passage_episodes([hotpot], 1)]


def test_pool_entries_name_a_wikipedia_set() -> None:
    assert parse_pool_entry("2wiki=/x/y.json") == ("2wiki", Path("/x/y.json"))
    for bad in ("2wiki", "locomo=/x", "squad=/x", "musique="):
        with pytest.raises(InvalidInputError, match="NAME=FILE"):
            parse_pool_entry(bad)
