"""Concurrent agent queries across scopes while ingestion runs into the same scopes.

No errors, no result from another scope (checked on every result through a scope-unique
marker word), the connection pool never grows past its maximum. Prints throughput and p95
latency. ``make test`` runs a small version; ``make stress`` runs 50 concurrent queries.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from memroute import RetrievalAgent, Scope
from memroute.planners.offline.planner import OfflinePlanner

MARKERS = ("amberwick", "bramblefen", "cobaltmere", "duskhollow")
TOPICS = ("lighthouse", "orchard", "glacier", "railway", "library", "harbor", "volcano",
          "observatory")
QUESTIONS = ("What did the {m} team note about the {t}?",
             "When was the {t} of the {m} archive built, and who repaired it?",
             "Compare the {t} and the library in the {m} notes.")


def episodes(marker: str, start: int, n: int) -> list[dict]:
    base = datetime(2025, 1, 1, tzinfo=timezone.utc)
    return [{"content": f"The {marker} team noted that the {TOPICS[i % len(TOPICS)]} number "
                        f"{i} was built in {1900 + i} and repaired by {marker} crew {i % 5}.",
             "session_id": f"{marker}-s{i % 4}", "uid": f"{marker}-{i}",
             "produced_at": base + timedelta(minutes=i)} for i in range(start, start + n)]


async def run_load(memory, queries: int, seed_per_scope: int, ingest_batches: int) -> dict:
    run = uuid.uuid4().hex[:6]
    scopes = {m: Scope(org_id=f"load-{run}", project_id=m, user_id="u1") for m in MARKERS}
    for marker, scope in scopes.items():
        await memory.add(scope, episodes(marker, 0, seed_per_scope))
    agent = RetrievalAgent(memory, planner=OfflinePlanner())
    pool = memory._pool
    max_size = pool.max_size
    peak = {"size": 0, "waiting": 0}
    done = asyncio.Event()

    async def watch_pool() -> None:
        while not done.is_set():
            stats = pool.get_stats()
            peak["size"] = max(peak["size"], stats.get("pool_size", 0))
            peak["waiting"] = max(peak["waiting"], stats.get("requests_waiting", 0))
            await asyncio.sleep(0.01)

    async def ingest() -> int:
        added = 0
        for b in range(ingest_batches):
            for marker, scope in scopes.items():
                start = seed_per_scope + b * 5
                added += len(await memory.add(scope, episodes(marker, start, 5)))
        return added

    async def query(i: int) -> tuple[str, float, object]:
        marker = MARKERS[i % len(MARKERS)]
        text = QUESTIONS[i % len(QUESTIONS)].format(m=marker, t=TOPICS[i % len(TOPICS)])
        started = time.perf_counter()
        result = await agent.aretrieve(text, scope=scopes[marker], k=5)
        return marker, time.perf_counter() - started, result

    watcher = asyncio.create_task(watch_pool())
    started = time.perf_counter()
    ingestion = asyncio.create_task(ingest())
    outcomes = await asyncio.gather(*(query(i) for i in range(queries)), return_exceptions=True)
    elapsed = time.perf_counter() - started
    added = await ingestion
    done.set()
    await watcher
    return {"outcomes": outcomes, "elapsed": elapsed, "added": added, "peak": peak,
            "max_size": max_size, "scopes": scopes}


def check_and_report(name: str, run: dict, queries: int) -> None:
    errors = [o for o in run["outcomes"] if isinstance(o, BaseException)]
    assert not errors, errors[:3]
    latencies = sorted(o[1] for o in run["outcomes"])
    results = 0
    routes: dict[str, int] = {}
    for marker, _, result in run["outcomes"]:
        assert result.results and result.route in ("direct", "split", "chain")
        routes[result.route] = routes.get(result.route, 0) + 1
        for scored in result.results:  # every result, every episode of its context
            results += 1
            for episode in [scored.nucleus, *scored.episodes]:
                assert marker in episode.content, (marker, episode.content)
                assert not any(m in episode.content for m in MARKERS if m != marker)
    p95 = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
    print(f"\n{name}: queries={queries} results_checked={results} routes={routes} "
          f"ingested={run['added']} elapsed={run['elapsed']:.2f}s "
          f"throughput={queries / run['elapsed']:.1f} q/s p50={statistics.median(latencies):.3f}s "
          f"p95={p95:.3f}s pool_peak={run['peak']['size']}/{run['max_size']} "
          f"peak_waiting={run['peak']['waiting']}")
    assert 0 < run["peak"]["size"] <= run["max_size"]
    assert run["added"] > 0


async def test_concurrent_queries_stay_in_scope_while_ingesting(memory):
    run = await run_load(memory, queries=12, seed_per_scope=16, ingest_batches=2)
    check_and_report("load small", run, 12)
    counts = [await memory.count(scope) for scope in run["scopes"].values()]
    assert all(c["episodes"] == 16 + 2 * 5 for c in counts), counts


@pytest.mark.stress
async def test_fifty_concurrent_queries_across_four_scopes(memory):
    run = await run_load(memory, queries=50, seed_per_scope=40, ingest_batches=6)
    check_and_report("load 50", run, 50)
    counts = [await memory.count(scope) for scope in run["scopes"].values()]
    assert all(c["episodes"] == 40 + 6 * 5 for c in counts), counts
