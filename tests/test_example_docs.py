"""Every snippet of docs/interfaces.md runs against the test server."""

from __future__ import annotations

import re
import shlex
import sys
import types
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memroute.cli import app
from memroute.settings import get_settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "interfaces.md"
ROOT = DOC.parents[1]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.S)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, pg_home: Path, pg_url: str):
    monkeypatch.setenv("MEMROUTE_HOME", str(pg_home))
    monkeypatch.setenv("MEMROUTE_DATABASE_URL", pg_url)
    monkeypatch.setenv("MEMROUTE_DB_SCHEMA", f"docs_{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("MEMROUTE_EMBED_THREADS", "1")
    for name in ("MEMROUTE_LLM_MODEL", "MEMROUTE_SCOPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(ROOT)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_python_snippets_run(env, capsys: pytest.CaptureFixture) -> None:
    snippets = blocks("python")
    assert len(snippets) == 5
    for number, snippet in enumerate(snippets):
        module = types.ModuleType(f"interfaces_snippet_{number}")
        sys.modules[module.__name__] = module  # typing resolves annotations through it
        try:
            exec(compile(snippet, str(DOC), "exec"), module.__dict__)  # noqa: S102
        finally:
            del sys.modules[module.__name__]
    out = capsys.readouterr().out
    assert re.search(r"^m1 \d\.\d{3} direct My sister Priya moved to Lisbon", out, re.M)
    # one result per stored episode the query matches (3), each turn printed once
    assert "Showing 1 of 3 results (page 1/3):" in out
    assert "Showing 1 of 3 results (page 2/3):" in out and "· route " in out
    assert "('memroute:" in out  # the subgraph's steps, streamed under its namespace
    assert re.search(r"^pet\nstore: dog \d\.\d{3} Biscuit the dog eats salmon kibble\.\n"
                     r"\['air'\]\n.*\('acme', 'notes', 'maya'\)", out, re.M)


def test_cli_snippets_run(env) -> None:
    env.delenv("MEMROUTE_DATABASE_URL")  # `db start` reuses the test's embedded server
    (script,) = blocks("bash")
    commands = [line.split("  #")[0].strip() for line in script.replace("\\\n", " ").splitlines()]
    runner = CliRunner()
    ran = 0
    for command in commands:
        if not command or "hotpotqa_dev.jsonl" in command:
            continue  # the benchmark lines need a data file; tests/test_cli.py covers them
        args = shlex.split(command)
        assert args[0] == "memroute"
        get_settings.cache_clear()
        result = runner.invoke(app, args[1:])
        assert result.exit_code == 0, f"{command}\n{result.output}"
        ran += 1
    assert ran == 9
