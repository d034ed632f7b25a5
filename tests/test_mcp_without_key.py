"""`memroute mcp` without a key: exit 6 and one line on stderr (docs/serving.md), nothing on
stdout (the MCP channel) and no usage box."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.served import ROOT, service_env
from memroute.memory import Memory


def test_mcp_without_a_key_exits_6_with_one_line(memory: Memory, pg_url: str,
                                                 pg_home: Path) -> None:
    env = service_env(pg_url, memory.schema, pg_home)
    env.pop("MEMROUTE_API_KEY", None)
    done = subprocess.run([sys.executable, "-m", "memroute.cli", "mcp"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 6, done.stderr
    assert done.stderr.startswith("error: missing API key") and done.stderr.count("\n") == 1
    assert done.stdout == "" and "Usage" not in done.stderr
