"""`benchmarks.eval_cpu`: CPU counted per thread of this process and per process of a
server (from /proc), and the eval's workers run every job once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

from benchmarks.eval_cpu import process_cpu_s, run_jobs, server_cpu_s


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_main_thread_and_other_threads_are_counted_apart() -> None:
    main, other = process_cpu_s()
    burn(0.3)
    main_after, other_after = process_cpu_s()
    assert main_after - main >= 0.25 and other_after - other < 0.1
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
    assert other_last - other_after >= 0.25 and main_last - main_after < 0.1


def test_a_servers_children_are_counted_with_it() -> None:
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nend = time.process_time() + 0.4\n"
                              "while time.process_time() < end: pass\ntime.sleep(5)"])
    try:
        time.sleep(2.0)  # the child has burnt its 0.4 s and sleeps
        assert server_cpu_s(os.getpid()) >= 0.3  # this process and its children
        assert server_cpu_s(None) == 0.0
    finally:
        child.kill()
        child.wait()


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
