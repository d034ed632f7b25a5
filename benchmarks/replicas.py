"""`make stress` (benchmarks.replicas): read your writes on a lagging replica, and searches
while the replica dies and comes back.

A fresh embedded server and a real streaming standby of it (`benchmarks.standby`); one
`Memory` with the standby as its read replica, ``--workers`` concurrent loops, each pair of
its loop on a scope of its own:

- ``paused``: replay paused (the replica lags more with every write, the lag bound set
  high so it stays in): each iteration adds an episode and searches for it (a miss: not
  found), deletes it and searches again (stale: still found), then searches a scope this
  Memory has not written (which the replica serves);
- ``replaying``: the same with replay running, the replica a few milliseconds behind;
- ``killed``: the loops search without pause while the standby is SIGKILLed, then started
  again: every search's latency, how long the dead replica took to be left out and the
  restarted one to be taken back, and the reads it served after.

Also the round trips read-your-writes adds: noting the primary's position after a write,
and a replica's replay position before a read. Prints a table and one JSON line, and writes
``bench-out/replicas.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.memory import load_average, machine_info, percentiles, write_report
from benchmarks.standby import Standby
from memroute.memory import Episode, Memory, Scope
from memroute.memory.replicas import REPLAYED, _query_one
from memroute.memory.server import ensure_embedded_server, stop_embedded_server
from memroute.settings import MemrouteSettings

K = 10
COLD = Scope(org_id="bench", project_id="cold")
PLACES = "harbor lantern copper meadow violet glacier orchard summit canyon ember".split()


def note(tag: str, n: int) -> str:
    return (f"Parcel {tag} was left by the {PLACES[n % 10]} gate next to the "
            f"{PLACES[(n * 3) % 10]} shed.")


def reads(memory: Memory) -> dict[str, int]:
    return dict(memory.read_routing()["reads"])


def moved(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


async def timed(operation) -> tuple[Any, float]:
    started = time.perf_counter()
    result = await operation
    return result, (time.perf_counter() - started) * 1000


async def pairs(memory: Memory, phase: str, workers: int, per_worker: int) -> dict[str, Any]:
    """Add-then-search and delete-then-search pairs, and a search of an unwritten scope."""
    ms: dict[str, list[float]] = {"add": [], "search_after_add": [], "delete": [],
                                  "search_after_delete": [], "search_unwritten": []}
    misses: list[str] = []
    stale: list[str] = []
    before = reads(memory)

    async def loop(w: int) -> None:
        for i in range(per_worker):
            scope = Scope(org_id="bench", project_id=f"{phase}-{w}", user_id=f"u{i % 8}")
            tag = f"{phase}{w}x{i}"
            _, t = await timed(memory.add(scope, [Episode(uid=tag, content=note(tag, i))]))
            ms["add"].append(t)
            found, t = await timed(memory.search_scored(scope, f"Where was parcel {tag} left?",
                                                        k=K, context=(0, 0)))
            ms["search_after_add"].append(t)
            if tag not in [r.uid for r in found]:
                misses.append(tag)
            _, t = await timed(memory.delete(scope, uids=[tag]))
            ms["delete"].append(t)
            found, t = await timed(memory.search_scored(scope, f"Where was parcel {tag} left?",
                                                        k=K, context=(0, 0)))
            ms["search_after_delete"].append(t)
            if tag in [r.uid for r in found]:
                stale.append(tag)
            _, t = await timed(memory.search_scored(COLD, f"the {PLACES[i % 10]} gate", k=K,
                                                    context=(0, 0)))
            ms["search_unwritten"].append(t)

    started = time.perf_counter()
    await asyncio.gather(*(loop(w) for w in range(workers)))
    return {"pairs": workers * per_worker, "misses": len(misses), "stale": len(stale),
            "examples": (misses + stale)[:5], "wall_s": round(time.perf_counter() - started, 1),
            "ms": {k: percentiles(v) for k, v in ms.items()},
            "reads": moved(before, reads(memory))}


async def killed(memory: Memory, standby: Standby, workers: int) -> dict[str, Any]:
    """Searches without pause while the standby is killed and started again."""
    latencies: list[float] = []
    errors: list[str] = []
    done = asyncio.Event()

    async def loop(w: int) -> None:
        n = 0
        while not done.is_set():
            n += 1
            scope = COLD if n % 2 else Scope(org_id="bench", project_id=f"replaying-{w}",
                                              user_id=f"u{n % 8}")
            try:
                _, t = await timed(memory.search_scored(scope, f"the {PLACES[n % 10]} gate",
                                                        k=K, context=(0, 0)))
                latencies.append(t)
            except Exception as exc:  # noqa: BLE001 - counted, the target is none
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    def up() -> bool:
        return memory.read_routing()["replicas"][0]["up"]

    async def until(condition, since: float, timeout_s: float = 30.0) -> float:
        """Seconds from ``since`` until ``condition()`` holds."""
        while not condition():
            if time.monotonic() - since > timeout_s:
                raise TimeoutError(f"not within {timeout_s}s")
            await asyncio.sleep(0.01)
        return time.monotonic() - since

    searching = [asyncio.create_task(loop(w)) for w in range(workers)]
    try:
        await asyncio.sleep(1.0)
        killed_at = time.monotonic()
        await asyncio.to_thread(standby.kill)
        left_out_s = await until(lambda: not up(), killed_at)
        await asyncio.sleep(2.0)
        await asyncio.to_thread(standby.start)  # returns once it accepts connections
        taken_back_s = await until(up, time.monotonic())
        before = reads(memory)
        await asyncio.sleep(2.0)
        after = moved(before, reads(memory))
    finally:
        done.set()
        await asyncio.gather(*searching)
    return {"searches": len(latencies), "errors": len(errors), "error_examples": errors[:3],
            "ms": percentiles(latencies), "slowest_ms": max(latencies),
            "left_out_after_kill_s": round(left_out_s, 3),
            "taken_back_after_start_s": round(taken_back_s, 3),
            "reads_after_taken_back": after}


async def round_trips(memory: Memory, n: int = 300) -> dict[str, Any]:
    """The two statements read-your-writes adds: the primary's position after a write, and
    a replica's replay position before a read (on a connection of the replica's pool)."""
    router = memory._reads
    note_ms, check_ms = [], []
    for _ in range(n):
        _, t = await timed(router.wrote(["bench/round-trips"]))
        note_ms.append(t)
    async with router.replicas[0].pool.connection() as conn:
        for _ in range(n):
            _, t = await timed(_query_one(conn, REPLAYED))
            check_ms.append(t)
    return {"note_write_position_ms": percentiles(note_ms),
            "check_replay_position_ms": percentiles(check_ms)}


async def run(workers: int, per_worker: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="memroute-bench-replicas-"))
    url = await asyncio.to_thread(ensure_embedded_server, home)
    standby = await asyncio.to_thread(Standby(url, home / "standby").create)
    settings = MemrouteSettings(home=home, database_url=url, embed_threads=1,
                                read_database_url=standby.url, read_max_lag_s=3600.0)
    report: dict[str, Any] = {"machine": machine_info(1), "workers": workers,
                              "per_worker": per_worker}
    try:
        memory = await Memory.open(settings=settings, schema="bench_replicas")
        try:
            await memory.add(COLD, [Episode(uid=f"cold-{n}", content=note(f"cold{n}", n))
                                    for n in range(40)])
            await asyncio.to_thread(standby.caught_up)
            report["round_trips"] = await round_trips(memory)
            await asyncio.to_thread(standby.pause_replay)
            try:
                report["paused"] = await pairs(memory, "paused", workers, per_worker)
            finally:
                await asyncio.to_thread(standby.resume_replay)
            await asyncio.to_thread(standby.caught_up)
            report["replaying"] = await pairs(memory, "replaying", workers, per_worker)
            report["killed"] = await killed(memory, standby, workers)
        finally:
            await memory.close()
    finally:
        await asyncio.to_thread(standby.remove)
        await asyncio.to_thread(stop_embedded_server, home)
        shutil.rmtree(home, ignore_errors=True)
    report["load_average_end"] = load_average()
    return report


def print_table(report: dict[str, Any]) -> None:
    print(f"\nread replicas: {report['workers']} concurrent loops, "
          f"load {report['machine']['load_average_start']} -> {report['load_average_end']}")
    for phase in ("paused", "replaying"):
        r = report[phase]
        print(f"{phase:>10}: {r['pairs']} add-then-search and {r['pairs']} delete-then-search "
              f"pairs: {r['misses']} misses, {r['stale']} stale; reads {r['reads']}")
        print("            p50/p95 ms: " + ", ".join(
            f"{k} {v['p50']:.1f}/{v['p95']:.1f}" for k, v in r["ms"].items()))
    k = report["killed"]
    print(f"    killed: {k['searches']} searches, {k['errors']} errors, p50/p95 "
          f"{k['ms']['p50']:.1f}/{k['ms']['p95']:.1f} ms, slowest {k['slowest_ms']:.0f} ms; "
          f"left out {k['left_out_after_kill_s']:.2f}s after the kill, taken back "
          f"{k['taken_back_after_start_s']:.2f}s after it accepted connections; then reads "
          f"{k['reads_after_taken_back']}")
    rt = report["round_trips"]
    print(f"round trips p50: note the write position {rt['note_write_position_ms']['p50']:.2f} "
          f"ms, check a replica's position {rt['check_replay_position_ms']['p50']:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--per-worker", type=int, default=250,
                        help="iterations per loop and phase (each: one add-then-search and "
                             "one delete-then-search pair)")
    args = parser.parse_args()
    write_report(asyncio.run(run(args.workers, args.per_worker)), "replicas", print_table)


if __name__ == "__main__":
    main()
