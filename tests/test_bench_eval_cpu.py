"""`benchmarks.eval_cpu`: CPU counted per thread of this process and over a server's
process tree (`benchmarks.memory.process_tree_cpu_seconds`), and the eval's workers run
every job once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import psutil

from benchmarks.eval_cpu import process_cpu_s, run_jobs
from benchmarks.memory import process_tree_cpu_seconds


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_main_thread_and_other_threads_are_counted_apart() -> None:
    main, other = process_cpu_s()
    burn(0.3)
    main_after, other_after = process_cpu_s()
    assert main_after - main >= 0.25  # other threads of the session may run meanwhile
    burnt, done = threading.Event(), threading.Event()

    def work() -> None:
        burn(0.3)
        burnt.set()
        done.wait(10)  # alive while it is counted

    worker = threading.Thread(target=work)
    worker.start()
    burnt.wait(10)
    main_last, other_last = process_cpu_s()
    done.set()
    worker.join()
    # the main thread only waited: a burn counted as the main thread's would show here
    assert other_last - other_after >= 0.25 and main_last - main_after < 0.25


BURNER = ("import time\nend = time.process_time() + 0.4\n"
          "while time.process_time() < end: pass\nprint('burnt', flush=True)\ntime.sleep(30)")


def test_a_servers_children_are_counted_with_it() -> None:
    # an idle "server" whose child burns 0.4 s of CPU, then stays alive
    server = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys\n"
         f"subprocess.run([sys.executable, '-c', {BURNER!r}])"],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert server.stdout.readline().strip() == "burnt"
        times = psutil.Process(server.pid).cpu_times()
        own = times.user + times.system
        assert process_tree_cpu_seconds(server.pid) - own >= 0.35  # its child's CPU
        assert process_tree_cpu_seconds(None) == 0.0
    finally:
        os.killpg(server.pid, signal.SIGKILL)  # the server and its child
        server.wait()
        server.stdout.close()


class Agent:
    """Records each retrieval; the eval's workers must run every job once."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []

    async def aretrieve(self, question: str, *, scope, k: int, strategy: str):
        self.runs.append((question, strategy))
        await asyncio.sleep(0.001)


class Store:
    def scope_for(self, q):
        class Scope:
            def model_dump(self):
                return {"org_id": "o", "project_id": "p"}
        return Scope()


class Q:
    def __init__(self, text: str) -> None:
        self.question = text


def test_the_workers_run_every_job_once_and_time_each_strategy() -> None:
    agent, jobs = Agent(), [(Q(f"q{i}"), s) for i in range(7) for s in ("direct", "auto")]
    wall = asyncio.run(run_jobs(agent, Store(), jobs, 4))
    assert sorted(agent.runs) == sorted((q.question, s) for q, s in jobs)
    assert len(wall["direct"]) == len(wall["auto"]) == 7 and min(wall["auto"]) > 0
