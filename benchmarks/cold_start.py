"""`make bench`, cold start: how long a person waits for a new `memroute` process.

With the database already running (the embedded server under ``MEMROUTE_HOME``, started here
if it is not, or ``MEMROUTE_DATABASE_URL``), each figure is the median of ``--runs`` new
processes (wall time, from spawn): ``memroute --help``; ``memroute search`` and ``memroute
ask`` on a scope holding the sample conversation (schema ``bench_cold``, filled once);
``memroute mcp`` until the official MCP client's ``initialize`` is answered, then its
``tools/list`` and a first ``memory_search`` made at once; ``memroute serve`` until
``/v1/health`` answers and until ``/v1/ready`` is 200, then a new process searching through it
(``http.client``, one ``POST /v1/search``, as the CLI sends it: the floor of a CLI sending
its searches to a server), and ``memroute search`` and ``memroute ask`` through it
(``MEMROUTE_SERVER_URL``), ``search`` twice: the first after ``/v1/ready`` (what a server just
started adds) and again. ``memroute --version`` and an argument error (``search --k 0``) beside
``--help``.
Floors beside them: Python's own start and the import of the MCP SDK. Beside a command's wall
time, its CPU seconds (user + system, median): on a loaded machine the wall time is mostly
waiting for a core. Targets (issue 48):
``--help`` <= 0.3 s, ``search`` and ``ask`` <= 1.0 s, MCP ``initialize`` <= 1.0 s. Prints the
thread settings, one table and one JSON line, and writes ``bench-out/cold_start.json``.
``--checkout DIR`` times another checkout's ``memroute`` (e.g. ``git archive <commit>``
unpacked) in the same environment.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from benchmarks.memory import machine_info, write_report
from benchmarks.served import ROOT, ServedProcess
from memroute import sample_data

SCHEMA = "bench_cold"
SCOPE = "bench/cold/u1"
QUESTION = "Which clinic does Biscuit go to?"
TARGETS_S = {"memroute --help": 0.3, "memroute --version": 0.3,
             "memroute search --k 0 (usage error)": 0.3, "memroute search": 1.0,
             "memroute ask": 1.0, "memroute search, served": 1.0,
             "memroute search, served, again": 1.0, "memroute ask, served": 1.0,
             "mcp: initialize answered": 1.0}


CHECKOUT = ROOT  # whose `memroute` runs (--checkout)


# a search by a new process through a running `memroute serve` (http.client, one POST, as
# the CLI sends it): the floor of a CLI that sends its searches to a server
THIN_CLIENT = f"""
import http.client, json, os, sys
from urllib.parse import urlsplit
org, project, user = {SCOPE!r}.split("/")
url = urlsplit(sys.argv[1])
connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
connection.request("POST", "/v1/search", body=json.dumps({{
    "scope": {{"org_id": org, "project_id": project, "user_id": user}},
    "query": {QUESTION!r}, "k": 5}}),
    headers={{"Authorization": "Bearer " + os.environ["MEMROUTE_API_KEY"],
             "Content-Type": "application/json"}})
found = connection.getresponse()
assert found.status == 200 and json.loads(found.read())["results"]
"""


def bench_env() -> dict[str, str]:
    """This environment with the benchmark's schema and scope (thread settings kept), the
    checkout's code first."""
    return {**os.environ, "MEMROUTE_DB_SCHEMA": SCHEMA, "MEMROUTE_SCOPE": SCOPE,
            "PYTHONPATH": str(CHECKOUT)}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "memroute.cli", *args]


# CPU seconds (user + system) of each named timed process: on a loaded machine the
# wall time is mostly waiting for a core, the CPU time is what the process itself spends
CPU_S: dict[str, list[float]] = {}


def timed_process(command: list[str], env: dict[str, str], expect: int = 0,
                  name: str = "") -> float:
    """Seconds from spawn to exit of ``command`` (another exit code than ``expect`` is an
    error); its CPU seconds go to `CPU_S` under ``name``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=CHECKOUT, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if name:
        CPU_S.setdefault(name, []).append(
            after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if done.returncode != expect:
        raise RuntimeError(f"{' '.join(command[2:])} exited {done.returncode}: "
                           f"{done.stderr[-2000:]}")
    return seconds


def prepare(env: dict[str, str]) -> str:
    """The database running, the sample conversation stored in the benchmark's scope, and
    an API key for it (printed once by `memroute keys create`)."""
    if not os.environ.get("MEMROUTE_DATABASE_URL"):
        subprocess.run(cli("db", "start"), cwd=ROOT, env=env, check=True,
                       capture_output=True)
    subprocess.run(cli("ingest", str(sample_data.path())), cwd=ROOT, env=env, check=True,
                   capture_output=True)
    made = subprocess.run(cli("keys", "create", "--org", SCOPE.split("/")[0], "--name",
                              "cold-start benchmark"), cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True)
    return made.stdout.strip()


async def mcp_times(env: dict[str, str]) -> dict[str, float]:
    """One `memroute mcp` process: seconds from spawn to ``initialize`` answered, to
    ``tools/list`` answered, and to a first ``memory_search`` (made at once) answered."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    org, project, user = SCOPE.split("/")
    params = StdioServerParameters(command=sys.executable, args=["-m", "memroute.cli", "mcp"],
                                   env=env, cwd=str(CHECKOUT))
    start = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        initialized = time.perf_counter() - start
        await session.list_tools()
        listed = time.perf_counter() - start
        found = await session.call_tool("memory_search", {
            "query": QUESTION, "project_id": project, "user_id": user})
        searched = time.perf_counter() - start
        if found.is_error:
            raise RuntimeError(f"memory_search failed: {found.content}")
    return {"mcp: initialize answered": initialized, "mcp: tools/list answered": listed,
            "mcp: first memory_search answered": searched}


async def serve_times(env: dict[str, str], log_dir: str) -> dict[str, float]:
    """One `memroute serve` process: seconds from spawn to the first ``/v1/health`` answer
    and to ``/v1/ready`` answering 200 (the memory open, the database answering)."""
    server = ServedProcess(env, ROOT / log_dir / "cold_start_serve.log", root=CHECKOUT)
    start = time.perf_counter()
    server.launch()
    answered = None
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
            while time.perf_counter() - start < 120:
                if server.proc is not None and server.proc.poll() is not None:
                    raise RuntimeError(f"memroute serve exited: {server.log.read_text()[-2000:]}")
                try:
                    health = await client.get("/v1/health")
                    answered = answered or time.perf_counter() - start
                    if health.json().get("state", "ready") == "ready" and (
                            await client.get("/v1/ready")).status_code == 200:
                        ready = time.perf_counter() - start
                        thin = await asyncio.to_thread(timed_process, [
                            sys.executable, "-c", THIN_CLIENT, server.url], env)
                        through = {**env, "MEMROUTE_SERVER_URL": server.url}
                        search = await asyncio.to_thread(timed_process, cli(
                            "search", QUESTION, "-k", "5"), through, 0,
                            "memroute search, served")
                        again = await asyncio.to_thread(timed_process, cli(
                            "search", QUESTION, "-k", "5"), through, 0,
                            "memroute search, served, again")
                        ask = await asyncio.to_thread(timed_process, cli(
                            "ask", QUESTION, "-k", "5"), through, 0, "memroute ask, served")
                        return {"serve: /v1/health answers": answered,
                                "serve: /v1/ready answers 200": ready,
                                "new process searching a running serve": thin,
                                "memroute search, served": search,
                                "memroute search, served, again": again,
                                "memroute ask, served": ask}
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.02)
    finally:
        server.stop()
    raise RuntimeError("memroute serve was not ready in 120 s")


def repeat(runs: int, measure: Callable[[], dict[str, float] | float],
           name: str | None = None) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        got = measure()
        for key, value in (got.items() if isinstance(got, dict) else [(name, got)]):
            samples.setdefault(key, []).append(value)
    return samples


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = bench_env()
    report: dict[str, Any] = {"machine": machine_info(int(os.environ.get(
        "MEMROUTE_EMBED_THREADS", "1"))), "runs": args.runs, "schema": SCHEMA, "scope": SCOPE,
        "checkout": str(CHECKOUT)}
    key = prepare(env)
    mcp_env = {**env, "MEMROUTE_API_KEY": key}
    samples: dict[str, list[float]] = {}
    plain = {"python -c pass (floor)": [sys.executable, "-c", "pass"],
             "import mcp (SDK floor)": [sys.executable, "-c", "import mcp.server.mcpserver"],
             "memroute --help": cli("--help"),
             "memroute --version": cli("--version"),
             "memroute search": cli("search", QUESTION, "-k", "5"),
             "memroute ask": cli("ask", QUESTION, "-k", "5", "--planner", "offline")}
    usage_error = "memroute search --k 0 (usage error)"
    timed_process(cli("search", QUESTION, "--k", "0"), env, expect=2)
    samples |= repeat(args.runs, lambda: timed_process(
        cli("search", QUESTION, "--k", "0"), env, 2, usage_error), usage_error)
    for name, command in plain.items():
        timed_process(command, env)  # once unmeasured: the OS file cache, not our start
        samples |= repeat(args.runs, lambda command=command, name=name: timed_process(
            command, env, 0, name), name)
    samples |= repeat(args.runs, lambda: asyncio.run(mcp_times(mcp_env)))
    serve_env = {**mcp_env, "MEMROUTE_PLANNER": "offline"}  # as `ask --planner offline`
    samples |= repeat(args.runs, lambda: asyncio.run(serve_times(serve_env, args.log_dir)))
    report["seconds"] = {name: {"median": statistics.median(values), "min": min(values),
                                "max": max(values), "target": TARGETS_S.get(name)}
                         for name, values in samples.items()}
    for name, values in CPU_S.items():
        report["seconds"][name]["cpu_median"] = statistics.median(values)
    report["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    return report


def print_report(report: dict[str, Any]) -> None:
    machine = report["machine"]
    print(f"cold start of {report['checkout']}, median of {report['runs']} new processes, "
          "database running; "
          f"{machine['cpus']} CPUs, Python {machine['python']}, threads {machine['threads']}, "
          f"load {machine['load_average_start']} -> {machine['load_average_end']}")
    print(f"{'what':<36} {'median s':>9} {'min':>7} {'max':>7} {'cpu s':>7} {'target':>7}  ")
    for name, fig in report["seconds"].items():
        target = fig["target"]
        verdict = "" if target is None else ("ok" if fig["median"] <= target else "over")
        cpu = f"{fig['cpu_median']:.2f}" if "cpu_median" in fig else ""
        print(f"{name:<36} {fig['median']:9.2f} {fig['min']:7.2f} {fig['max']:7.2f} {cpu:>7} "
              f"{'' if target is None else f'{target:.1f}':>7}  {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="new processes per figure")
    parser.add_argument("--log-dir", default="bench-out", help="the serve runs' log, under "
                        "this checkout")
    parser.add_argument("--checkout", type=Path, default=ROOT,
                        help="the checkout whose memroute runs (default this one)")
    args = parser.parse_args()
    global CHECKOUT
    CHECKOUT = args.checkout.resolve()
    (ROOT / args.log_dir).mkdir(exist_ok=True)
    write_report(run(args), "cold_start", print_report)


if __name__ == "__main__":
    main()
