"""What a new process loads before it answers (issue 48): `memroute --help`, `--version` and
argument errors load no model, no database driver, not the store, not pydantic (typer's own
coercion loads it once a command runs), rich, structlog or `importlib.metadata`; the MCP
server lists its tools without the agent, FastAPI or a model, and `memroute mcp` answers
``initialize`` before the settings, the store or a model load. Checked in new processes, by the
modules they hold (benchmarks/cold_start.py times them; tests/test_cli_served.py checks a
served search and ask the same way)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.served import ROOT, free_port, service_env

HEAVY = ("spacy", "onnxruntime", "psycopg", "numpy", "torch", "langgraph",
         "memroute.memory.store", "memroute.agent", "memroute.nlp")
# what help and usage errors do not need: the tables' rich, the logs' structlog, an HTTP
# client, asyncio, the plugged-in commands (listed from their packages' entry_points.txt)
HELP_HEAVY = (*HEAVY, "rich", "structlog", "httpx", "asyncio", "memroute.evals")
# nor, for `memroute --help` and `--version`, pydantic and `importlib.metadata` (which pydantic
# imports): typer 0.29 coerces a command's parameters through pydantic once one is parsed

RUN_CLI = """
import json, sys
from memroute.cli import main
args, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv, code = ["memroute", *args], None
try:
    main()
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}),
      file=sys.stderr)
"""


def loaded_by(code: str, *args: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    return json.loads(done.stderr.strip().splitlines()[-1]), done.stdout


@pytest.mark.parametrize(("args", "code"), [
    (["--help"], 0), (["--version"], 0), (["search", "--help"], 0), (["ask", "--help"], 0),
    (["db", "--help"], 0), (["eval", "--help"], 0),
    (["search"], 2),  # a missing argument: typer's usage error
    (["search", "q", "--k", "0"], 2),
    (["serch", "q"], 2),  # no such command (nor a plugged-in one)
    (["ask", "q", "--strategy", "nope"], 2),  # memroute's own refusal, before any model
    (["search", "q", "--scope", "acme//u1"], 2),
    (["search", "q", "--as-of", "yesterday"], 2),
])
def test_help_version_and_argument_errors_load_no_model_and_no_store(args: list[str],
                                                                     code: int) -> None:
    report, out = loaded_by(RUN_CLI, json.dumps(args), json.dumps(HEAVY))
    assert report["code"] == code, (args, report)
    assert report["loaded"] == [], (args, report)
    if args == ["--version"]:
        assert out.startswith("memroute ")


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["search", "--help"],
                                  ["ask", "--help"], ["db", "--help"], ["search"],
                                  ["search", "q", "--k", "0"], ["serch", "q"]])
def test_help_and_usage_errors_load_neither_rich_nor_logs_nor_plugins(args: list[str]) -> None:
    top = len(args) == 1 and args[0].startswith("--")
    heavy = [*HELP_HEAVY, "pydantic", "importlib.metadata"] if top else HELP_HEAVY
    report, out = loaded_by(RUN_CLI, json.dumps(args), json.dumps(heavy))
    assert report["loaded"] == [], (args, report)
    if args == ["--help"]:  # the plugged-in `eval` is listed, not loaded
        assert "eval" in out.split("Commands:")[1]


def test_the_mcp_server_lists_its_tools_before_the_agent_or_a_model_loads() -> None:
    code = """
import asyncio, json, sys
from memroute.service.mcp_server import build_mcp_server
async def nothing():
    raise AssertionError("no service is needed to list the tools")
tools = asyncio.run(build_mcp_server(nothing, lambda ctx: None).list_tools())
heavy = [m for m in json.loads(sys.argv[1]) if m in sys.modules]
print(json.dumps({"tools": sorted(t.name for t in tools), "loaded": heavy}), file=sys.stderr)
"""
    report, _ = loaded_by(code, json.dumps([*HEAVY, "fastapi", "langchain_core"]))
    assert report["tools"] == ["memory_add", "memory_delete", "memory_retrieve",
                               "memory_search"]
    assert report["loaded"] == [], report


# `memroute mcp` as a client starts it, its stdout a pipe whose first write (the answer to
# ``initialize``) first reports the modules loaded by then on stderr
RUN_MCP_REPORTING = """
import io, json, os, sys
heavy = json.loads(sys.argv[1])
class Wire(io.RawIOBase):
    answered = False
    def writable(self):
        return True
    def write(self, data):
        if not Wire.answered:
            Wire.answered = True
            print(json.dumps({"loaded": [m for m in heavy if m in sys.modules]}),
                  file=sys.stderr, flush=True)
        return os.write(1, data)
sys.stdout = io.TextIOWrapper(io.BufferedWriter(Wire()), write_through=True)
from memroute.cli import main
sys.argv = ["memroute", "mcp"]
main()
"""
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "test", "version": "0"}}}


def test_memroute_mcp_answers_initialize_before_the_settings_the_store_or_a_model_load(
        tmp_path: Path) -> None:
    # no database answers there: the service's opening, once begun, fails (exit 3)
    env = service_env(f"postgresql://memroute@127.0.0.1:{free_port()}/none", "cold_mcp",
                      tmp_path, MEMROUTE_API_KEY="a-key")
    heavy = [*HEAVY, "fastapi", "langchain_core", "structlog", "pydantic_settings",
             "memroute.settings", "memroute.service.keys"]
    done = subprocess.run([sys.executable, "-c", RUN_MCP_REPORTING, json.dumps(heavy)],
                          cwd=ROOT, env=env, input=json.dumps(INITIALIZE) + "\n",
                          capture_output=True, text=True, timeout=120)
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "memroute"
    report = json.loads(done.stderr.splitlines()[0])
    assert report["loaded"] == [], report
    # stdin closed after ``initialize`` alone: the opening ran then, and its failure is
    # the command's error
    assert done.returncode == 3 and "cannot connect to the database" in done.stderr
