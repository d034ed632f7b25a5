"""Processes opening a fresh MEMROUTE_HOME at once all get one tuned server.

Each child waits for a common start instant, opens the embedded server, then keeps
connecting and querying for a while: a child that returned while another was still
restarting the new server to tune it would see its connections refused or closed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memroute.memory.server import embedded_server_status, server_tuning, stop_embedded_server

CHILD = textwrap.dedent("""
    import sys, time
    import psycopg
    from memroute.memory.server import ensure_embedded_server
    home, start_at = sys.argv[1], float(sys.argv[2])
    time.sleep(max(0.0, start_at - time.time()))
    url = ensure_embedded_server(home)
    for _ in range(15):
        with psycopg.connect(url, connect_timeout=5) as conn:
            shared = conn.execute(
                "SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()[0]
        time.sleep(0.1)
    print(shared)
""")


def first_start(home: Path, processes: int) -> list[str]:
    """``processes`` children opening ``home`` at the same instant; their outputs."""
    start_at = time.time() + 1.5  # after every interpreter has imported memroute
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(home), str(start_at)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(processes)]
    try:
        outputs = [child.communicate(timeout=240) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
        stop_embedded_server(home)
    for child, (out, err) in zip(children, outputs):
        assert child.returncode == 0, err[-2000:]
    return [out.strip() for out, _ in outputs]


def check_rounds(tmp_path: Path, processes: int, rounds: int) -> None:
    for round_ in range(rounds):
        home = tmp_path / f"home-{processes}-{round_}"
        shared = first_start(home, processes)
        tuned_mb = int(server_tuning()["shared_buffers"].removesuffix("MB"))
        assert shared == [str(tuned_mb * 2**20)] * processes
        assert not embedded_server_status(home)["running"]


@pytest.mark.parametrize("processes", [2, 4])
def test_concurrent_first_starts_share_one_tuned_server(tmp_path: Path, processes: int) -> None:
    check_rounds(tmp_path, processes, rounds=2)


@pytest.mark.stress
@pytest.mark.parametrize("processes", [2, 4])
def test_concurrent_first_starts_ten_rounds(tmp_path: Path, processes: int) -> None:
    check_rounds(tmp_path, processes, rounds=10)
