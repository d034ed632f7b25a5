"""The first searches after a cold start, without and with warming (`Memory.warm`).

Each mode stops the embedded server under ``MEMROUTE_HOME``, drops the OS page cache (root
only: ``/proc/sys/vm/drop_caches``), starts the server and times the first ``--queries``
searches (the default search, k = 10) of HotpotQA questions:

- ``cold``: no warming;
- ``background``: `Memory.open`'s background warm-up (``MEMROUTE_WARM_ON_OPEN``), searches
  start at once;
- ``warmed``: ``memroute db warm`` first (its time reported), then the searches.

A search past the statement timeout goes on without its full-text lane (counted) or fails
with `StatementTimeoutError` (counted).

    MEMROUTE_HOME=<bench stores> python -m benchmarks.cold_start --schema bench_v2_1000000 \\
        --project 1000000 --data ../shared/data/hotpotqa/hotpotqa_dev_distractor_800.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import time
from pathlib import Path

import numpy as np

from memroute.errors import StatementTimeoutError
from memroute.memory import Memory, Scope
from memroute.memory.server import ensure_embedded_server, stop_embedded_server
from memroute.settings import get_settings

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


class LaneTimeouts(logging.Handler):
    """Counts the searches that went on without their full-text lane."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "lexical_lane_timeout" in record.getMessage():
            self.count += 1


def cold_server(home: Path) -> float:
    """Stop the server, drop the OS page cache, start it; returns the start's seconds."""
    stop_embedded_server(home)
    subprocess.run(["sync"], check=True)
    DROP_CACHES.write_text("3\n")
    start = time.perf_counter()
    ensure_embedded_server(home)
    return time.perf_counter() - start


async def run_mode(mode: str, schema: str, scope: Scope, questions: list[str]) -> dict:
    settings = get_settings().model_copy(update={"warm_on_open": mode == "background"})
    server_s = cold_server(settings.home)
    lanes = LaneTimeouts()
    logging.getLogger("memroute.memory.store").addHandler(lanes)
    opened = time.perf_counter()
    memory = await Memory.open(settings=settings, schema=schema)
    result: dict = {"mode": mode, "server_start_s": round(server_s, 2),
                    "open_s": round(time.perf_counter() - opened, 2)}
    try:
        if mode == "warmed":
            report = await memory.warm()
            result["warm"] = report.as_dict()
        times, failed = [], 0
        for question in questions:
            start = time.perf_counter()
            try:
                await memory.search_scored(scope, question, k=10)
            except StatementTimeoutError:
                failed += 1
            times.append((time.perf_counter() - start) * 1000)
        if mode == "background" and memory._warming is not None:
            report = await memory._warming
            result["warm"] = report.as_dict() if report else None
    finally:
        await memory.close()
        logging.getLogger("memroute.memory.store").removeHandler(lanes)
    result.update({
        "first_ms": round(times[0], 1), "p50_ms": round(float(np.median(times)), 1),
        "max_ms": round(max(times), 1), "total_s": round(sum(times) / 1000, 2),
        "lexical_lane_timeouts": lanes.count, "statement_timeouts": failed,
        "searches": len(times)})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema", default="bench_v2_1000000")
    parser.add_argument("--org", default="bench")
    parser.add_argument("--project", default="1000000")
    parser.add_argument("--data", required=True, help="a HotpotQA .jsonl (question texts)")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--modes", nargs="+", default=["cold", "background", "warmed"],
                        choices=["cold", "background", "warmed"])
    args = parser.parse_args()
    if not os.access(DROP_CACHES, os.W_OK):
        raise SystemExit(f"{DROP_CACHES} is not writable: a cold start needs root")
    with open(args.data) as handle:
        questions = [json.loads(line)["question"] for line in handle][:args.queries]
    scope = Scope(org_id=args.org, project_id=args.project)
    for mode in args.modes:
        print(json.dumps(asyncio.run(run_mode(mode, args.schema, scope, questions))),
              flush=True)


if __name__ == "__main__":
    main()
