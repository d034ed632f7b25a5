"""Reading JSON Lines into episodes, and storing them in atomic batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memroute import sample_data
from memroute.ingest import conversation_scope, read_jsonl, stable_uid, store_batches
from memroute.memory import Memory, Scope
from memroute.errors import InvalidInputError


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_valid_lines_become_episodes_with_their_fields(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", [
        json.dumps({"content": "hello", "producer": "ana", "session_id": "s9",
                    "produced_at": "2024-05-01T10:00:00+02:00", "metadata": {"x": 1},
                    "uid": "given"}),
        "",
        json.dumps({"content": "bye"}),
    ])
    parsed = read_jsonl(path)
    assert parsed.errors == [] and parsed.records == 2
    first, second = parsed.episodes
    assert (first.uid, first.producer, first.session_id, first.metadata) == \
        ("given", "ana", "s9", {"x": 1})
    assert first.produced_at.isoformat() == "2024-05-01T10:00:00+02:00"
    assert second.uid == stable_uid({"content": "bye"}, 0)


def test_uids_are_stable_and_distinguish_repeated_lines(tmp_path: Path) -> None:
    lines = [json.dumps({"content": "ok"}), json.dumps({"content": "ok"}),
             json.dumps({"content": "ok", "producer": "bot"})]
    one = [e.uid for e in read_jsonl(write(tmp_path / "1.jsonl", lines)).episodes]
    two = [e.uid for e in read_jsonl(write(tmp_path / "2.jsonl", lines)).episodes]
    assert one == two and len(set(one)) == 3


@pytest.mark.parametrize(("line", "fragment"), [
    ("{oops", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"content": ""}', "content"),
    ('{"content": "x", "producer": ""}', "producer"),
    ('{"text": "x"}', "unknown field(s) text"),
    ('{"content": "x", "produced_at": "soon"}', "produced_at"),
    ('{"content": "x", "metadata": [1]}', "metadata"),
    ('{"content": "a\\u0000b"}', "NUL"),
])
def test_bad_lines_are_reported_with_their_numbers(tmp_path: Path, line: str,
                                                   fragment: str) -> None:
    parsed = read_jsonl(write(tmp_path / "bad.jsonl", ['{"content": "fine"}', line]))
    assert [e.line for e in parsed.errors] == [2]
    assert fragment in parsed.errors[0].message
    assert len(parsed.episodes) == 1


def test_unreadable_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cannot read"):
        read_jsonl(tmp_path / "missing.jsonl")
    binary = tmp_path / "latin1.jsonl"
    binary.write_bytes('{"content": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(InvalidInputError, match="not UTF-8"):
        read_jsonl(binary)


async def test_store_batches_is_idempotent_and_reports_progress(memory: Memory,
                                                                scope: Scope) -> None:
    episodes = sample_data.episodes()
    sizes: list[int] = []
    sent = await store_batches(memory, scope, episodes, batch_size=16, on_batch=sizes.append)
    assert sent == 40 and sizes == [16, 16, 8]
    assert (await memory.count(scope))["episodes"] == 40
    await store_batches(memory, scope, episodes, batch_size=16)
    assert (await memory.count(scope))["episodes"] == 40


def test_conversation_scope_sets_the_user() -> None:
    base = Scope(org_id="acme", project_id="locomo", user_id="someone", agent_id="bot")
    assert conversation_scope(base, None) is base
    narrowed = conversation_scope(base, "conv-26")
    assert narrowed.as_dict() == {"org_id": "acme", "project_id": "locomo",
                                  "user_id": "conv-26", "agent_id": "bot"}
