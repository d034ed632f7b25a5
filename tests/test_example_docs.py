"""Every snippet of README.md and docs/*.md runs as printed, as a file, against the test server."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memroute.cli import app
from memroute.settings import get_settings

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "interfaces.md"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# what a clean exit never prints: a pending task destroyed, an unclosed pool, a traceback
UNCLEAN = ("Task was destroyed", "Traceback", "Unclosed", "never awaited", "SyntaxError")


def blocks(language: str, doc: Path = DOC) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", doc.read_text(), re.S)


def python_blocks() -> list[tuple[str, str]]:
    """(where, code) of every ```python block of the docs; ```python no-run marks a fragment."""
    return [(f"{doc.name}#{number}", code) for doc in DOCS
            for number, code in enumerate(blocks("python", doc))]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, pg_home: Path, pg_url: str):
    monkeypatch.setenv("MEMROUTE_HOME", str(pg_home))
    monkeypatch.setenv("MEMROUTE_DATABASE_URL", pg_url)
    monkeypatch.setenv("MEMROUTE_DB_SCHEMA", f"docs_{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("MEMROUTE_EMBED_THREADS", "1")
    for name in ("MEMROUTE_LLM_MODEL", "MEMROUTE_SCOPE", "MEMROUTE_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(ROOT)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def run_snippet(code: str, where: str, tmp_path: Path) -> str:
    """Run ``code`` as ``python snippet.py``; its stdout, after checking it exited clean.
    The snippets of one document share a store schema (a document is one walk-through)."""
    path = tmp_path / f"{where.replace('#', '_').replace('.', '_')}.py"
    path.write_text(code)
    schema = f"{os.environ['MEMROUTE_DB_SCHEMA']}_{where.split('.')[0].lower()}"
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONWARNINGS": "default",
                                            "MEMROUTE_DB_SCHEMA": schema})
    assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"
    for sign in UNCLEAN:
        assert sign not in done.stderr, f"{where} did not exit clean:\n{done.stderr[-3000:]}"
    return done.stdout


def test_every_python_snippet_runs_as_a_file(env, tmp_path: Path) -> None:
    snippets = python_blocks()
    assert len(snippets) >= 8  # README (2) and docs/interfaces.md (6) at least
    out = {where: run_snippet(code, where, tmp_path) for where, code in snippets}
    joined = "\n".join(out.values())
    assert re.search(r"^(direct|split|chain) \[.*Priya.*\] \w+", out["README.md#0"], re.M)
    assert re.search(r"^\d\.\d{3} My order 1234 arrived broken\.", out["README.md#1"], re.M)
    assert re.search(r"^m1 \d\.\d{3} direct .*My sister Priya moved to Lisbon", joined, re.M)
    # the walk-through: a LangGraph agent with memroute as retriever, tool and store
    walk = out["interfaces.md#0"].splitlines()
    assert walk[0] == ("[search_conversations] [2024-03-18 12:16] user: My sister Priya "
                       "moved to Lisbon last year.")
    assert walk[1].startswith("[memory_search] Showing 2 of 3 results (page 1/2)")
    assert walk[2:] == ["[save_note] noted",
                        "answer: Your sister Priya lives in Lisbon and works at Tidewave Labs.",
                        "note: Noor's sister Priya lives in Lisbon."]
    # one result per stored episode the query matches (3), each turn printed once
    assert "Showing 1 of 3 results (page 1/3):" in joined
    assert "Showing 1 of 3 results (page 2/3):" in joined and "· route " in joined
    assert "('memroute:" in joined  # the subgraph's steps, streamed under its namespace
    assert re.search(r"^pet\nstore: dog \d\.\d{3} Biscuit the dog eats salmon kibble\.\n"
                     r"\['air'\]\n.*\('acme', 'notes', 'maya'\)", joined, re.M)


def test_fragments_are_few_and_marked() -> None:
    fragments = [doc.name for doc in DOCS for _ in blocks("python no-run", doc)]
    assert len(fragments) <= 3, fragments


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


def test_readme_lists_each_setting_once() -> None:
    """The settings table of the README: one row per variable, each a real setting."""
    from memroute.settings import MemrouteSettings

    rows = [line.split("|")[1] for line in (ROOT / "README.md").read_text().splitlines()
            if line.startswith("| `MEMROUTE_")]
    names = [name for row in rows for name in re.findall(r"MEMROUTE_([A-Z0-9_]+)", row)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert {n.lower() for n in names} <= set(MemrouteSettings.model_fields)
