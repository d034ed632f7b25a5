"""`memroute search` and `ask` through a running `memroute serve` (MEMROUTE_SERVER_URL):
the same output as in process, the server's typed errors as the same exit codes, and the
in-process path when no server answers (issue 48)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.served import ROOT, ServedProcess, free_port, service_env
from memroute import sample_data
from memroute.cli import app
from memroute.settings import get_settings

SCHEMA = f"cli_served_{uuid.uuid4().hex[:8]}"
ORG = f"served-{uuid.uuid4().hex[:6]}"
SCOPE = f"{ORG}/tests/u1"


@pytest.fixture(scope="module")
def base_env(pg_url: str, pg_home: Path) -> dict[str, str]:
    return {"MEMROUTE_DATABASE_URL": pg_url, "MEMROUTE_DB_SCHEMA": SCHEMA,
            "MEMROUTE_HOME": str(pg_home), "MEMROUTE_EMBED_THREADS": "1",
            "MEMROUTE_POOL_MAX_SIZE": "2", "MEMROUTE_PLANNER": "offline"}


def invoke(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], *args: str):
    for name in ("MEMROUTE_SCOPE", "MEMROUTE_LLM_MODEL", "MEMROUTE_LLM_BASE_URL",
                 "MEMROUTE_SERVER_URL", "MEMROUTE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        return CliRunner().invoke(app, list(args))
    finally:
        get_settings.cache_clear()


@pytest.fixture(scope="module")
def server(base_env: dict[str, str], pg_url: str, pg_home: Path, tmp_path_factory):
    """The sample conversation in SCOPE, a key for ORG, and a server on the same schema."""
    patch = pytest.MonkeyPatch()
    try:
        assert invoke(patch, base_env, "ingest", str(sample_data.path()),
                      "--scope", SCOPE).exit_code == 0
        made = invoke(patch, base_env, "keys", "create", "--org", ORG, "--json")
        assert made.exit_code == 0, made.output
        key = json.loads(made.stdout)["key"]
    finally:
        patch.undo()
    env = service_env(pg_url, SCHEMA, pg_home, MEMROUTE_PLANNER="offline")
    served = ServedProcess(env, tmp_path_factory.mktemp("serve") / "serve.log").start()
    yield served, key
    served.stop()


def both(monkeypatch, base_env, server, *args: str):
    """(in process, served) results of the same command."""
    served, key = server
    here = invoke(monkeypatch, base_env, *args)
    there = invoke(monkeypatch, {**base_env, "MEMROUTE_SERVER_URL": served.url,
                                 "MEMROUTE_API_KEY": key}, *args)
    return here, there


def table(stdout: str) -> list[str]:
    """The printed lines before the timings (or costs) line, whose times differ."""
    lines = stdout.splitlines()
    return lines[:next((i for i, line in enumerate(lines) if " ms" in line), len(lines))]


def without_timings(payload: dict) -> dict:
    payload = dict(payload)
    payload.pop("timings_ms", None)
    if "costs" in payload:
        payload["costs"] = {"totals_llm_calls": payload["costs"]["totals"]["llm_calls"]}
    return payload


def test_search_served_gives_what_search_in_process_gives(monkeypatch, base_env, server):
    args = ("search", "when is the dentist appointment", "--scope", SCOPE, "--k", "3",
            "--filters", '{"producer": "user"}', "--as-of", "2030-01-01", "--json")
    here, there = both(monkeypatch, base_env, server, *args)
    assert here.exit_code == 0 and there.exit_code == 0, (here.output, there.output)
    assert "not reachable" not in there.stderr
    mine, theirs = json.loads(here.stdout), json.loads(there.stdout)
    assert [r["uid"] for r in theirs["results"]] == [r["uid"] for r in mine["results"]]
    assert mine["results"], mine
    assert list(theirs["timings_ms"]) == list(mine["timings_ms"])
    assert without_timings(theirs) == without_timings(mine)
    # the table: the same rows (the timings line differs by its times)
    here, there = both(monkeypatch, base_env, server, *args[:-1])
    assert table(here.stdout) == table(there.stdout)
    assert table(here.stdout)


def test_an_empty_scope_gives_the_same_hint_served(monkeypatch, base_env, server):
    here, there = both(monkeypatch, base_env, server, "search", "dentist",
                       "--scope", f"{ORG}/nothing-here")
    assert here.exit_code == there.exit_code == 0
    assert "hint:" in here.stderr and here.stderr == there.stderr


@pytest.mark.parametrize("strategy", ["direct", "split"])
def test_ask_served_gives_what_ask_in_process_gives(monkeypatch, base_env, server, strategy):
    args = ("ask", "When is the dentist appointment and what did I book for Friday?",
            "--scope", SCOPE, "--strategy", strategy, "--k", "4")
    here, there = both(monkeypatch, base_env, server, *args, "--json")
    assert here.exit_code == 0 and there.exit_code == 0, (here.output, there.output)
    mine, theirs = json.loads(here.stdout), json.loads(there.stdout)
    assert mine["results"]
    assert without_timings(theirs) == without_timings(mine)
    here, there = both(monkeypatch, base_env, server, *args)
    # the agent's steps (a split question's searches run at once: they end in either order)
    assert sorted(here.stderr.splitlines()) == sorted(there.stderr.splitlines())
    assert here.stderr
    here, there = both(monkeypatch, base_env, server, *args, "--explain")
    assert here.exit_code == 0 and there.exit_code == 0, (here.output, there.output)
    assert table(here.stdout) == table(there.stdout)  # up to the cost table's times
    assert "Evidence" in here.stdout and "Cost" in there.stdout
    assert table(here.stdout) == table(there.stdout)
    assert table(here.stdout)


def test_ask_served_refuses_a_planner_it_cannot_send(monkeypatch, base_env, server):
    served, key = server
    result = invoke(monkeypatch, {**base_env, "MEMROUTE_SERVER_URL": served.url,
                                  "MEMROUTE_API_KEY": key},
                    "ask", "dentist", "--scope", SCOPE, "--planner", "offline")
    assert result.exit_code == 2 and "--planner" in result.stderr


@pytest.mark.parametrize("command", ["search", "ask"])
def test_the_servers_typed_errors_keep_their_exit_codes(monkeypatch, base_env, server,
                                                        command):
    served, key = server
    env = {**base_env, "MEMROUTE_SERVER_URL": served.url}
    anonymous = invoke(monkeypatch, env, command, "dentist", "--scope", SCOPE, "--json")
    assert anonymous.exit_code == 6, anonymous.output  # NotAuthenticatedError
    assert json.loads(anonymous.stderr.splitlines()[-1])["kind"] == "NotAuthenticatedError"
    elsewhere = invoke(monkeypatch, {**env, "MEMROUTE_API_KEY": key}, command, "dentist",
                       "--scope", "another-org/tests")
    assert elsewhere.exit_code == 7, elsewhere.output  # ScopeForbiddenError: no fallback
    assert "not reachable" not in elsewhere.stderr


@pytest.mark.parametrize("command", ["search", "ask"])
def test_no_server_listening_means_in_process(monkeypatch, base_env, server, command):
    env = {**base_env, "MEMROUTE_SERVER_URL": f"http://127.0.0.1:{free_port()}"}
    result = invoke(monkeypatch, env, command, "dentist", "--scope", SCOPE, "--json")
    assert result.exit_code == 0, result.output
    assert "not reachable" in result.stderr
    assert json.loads(result.stdout)["results"]


# a served command sends one request: not the models' module (typer's coercion loads pydantic
# itself), no HTTP client library, no event loop, no structlog, no rich for --json
HEAVY = ("spacy", "onnxruntime", "psycopg", "numpy", "torch", "langgraph",
         "memroute.memory.store", "memroute.memory.embedders", "memroute.memory.models",
         "memroute.agent", "memroute.nlp", "memroute.settings", "memroute.strategies.base",
         "httpx", "asyncio", "structlog", "rich")


@pytest.mark.parametrize("command", ["search", "ask"])
def test_a_served_command_loads_no_model_no_driver_and_no_store(server, command):
    from test_cold_imports import RUN_CLI

    served, key = server
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMROUTE_")}
    env.update({"MEMROUTE_SERVER_URL": served.url, "MEMROUTE_API_KEY": key})
    done = subprocess.run(
        [sys.executable, "-c", RUN_CLI, json.dumps([command, "dentist", "--scope", SCOPE,
                                                   "--json"]), json.dumps(HEAVY)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report == {"code": 0, "loaded": []}, done.stderr
    assert json.loads(done.stdout)["results"]
