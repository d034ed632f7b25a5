"""`make demo` (python -m memroute.demo) end to end on the test server."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from memroute import demo, sample_data
from memroute.settings import get_settings


async def test_demo_runs_end_to_end(monkeypatch: pytest.MonkeyPatch, pg_url: str,
                                    pg_home: Path, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("MEMROUTE_DATABASE_URL", pg_url)
    monkeypatch.setenv("MEMROUTE_DB_SCHEMA", f"demo_{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("MEMROUTE_HOME", str(pg_home))
    monkeypatch.setenv("MEMROUTE_EMBED_THREADS", "1")
    monkeypatch.delenv("MEMROUTE_LLM_MODEL", raising=False)
    get_settings.cache_clear()
    try:
        await demo.main()
        first = capsys.readouterr().out
        await demo.main()  # the sample is stored once: fixed uids
        second = capsys.readouterr().out
    finally:
        get_settings.cache_clear()
    assert "sample: 40 turns in scope demo/sample/maya (40 stored)" in first
    assert "(40 stored)" in second
    questions = sample_data.questions()
    flat = " ".join(first.split())
    for question in questions:
        assert f"$ memroute ask --explain {question.question}" in flat
    assert flat.count("$ memroute search ") == 3 and "reranker" in flat
    assert first.count("stop reason") == len(questions)
    assert first.count("Cost") == len(questions)
    found = [(int(a), int(b)) for a, b in re.findall(r"evidence found (\d)/(\d)", first)]
    assert len(found) == 3 + len(questions)  # three direct searches, then every question
    assert all(hit >= 1 for hit, _ in found)
    assert re.search(r"the offline planner routed \d/9 questions as labelled", first)
    # what auto spent against one direct search per question
    assert "what auto spent against one direct search" in first
    spend = first[first.index("what auto spent"):]
    # one row per question, every column whole on an 80-column screen
    assert spend.count(" direct found ") == 1
    rows = re.findall(r"│ +\d+ │ +\d+ │ +\d+ │ +(\d)/\d │ +(\d)/\d │", spend)
    assert len(rows) == len(questions)
    # auto finds what direct finds
    assert all(int(auto) >= int(direct) for auto, direct in rows), rows
