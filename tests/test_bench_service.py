"""The service benchmark end to end on a tiny store: its figures mean what they say.

No timing assertions: counts, errors and the paired overhead's arithmetic are checked.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from benchmarks import service as bench_service
from memroute import sample_data
from memroute.memory import Memory, Scope


async def test_service_benchmark_measures_rest_against_in_process(
        memory: Memory, tmp_path: Path) -> None:
    scope = Scope(org_id=f"bench-{uuid.uuid4().hex[:6]}", project_id="service")
    await memory.add(scope, sample_data.episodes())
    queries = ["Where does Priya live?", "What is the dog's name?", "When is the dentist?"]
    report = await bench_service.measure(memory, scope, queries, clients=[1, 3], requests=9,
                                         paired=4, threads=1, log=tmp_path / "serve.log")
    over = report["overhead"]
    assert over["queries"] == 4
    assert over["p95_overhead_ms"] == pytest.approx(
        over["rest_ms"]["p95"] - over["in_process_ms"]["p95"])
    assert over["rest_ms"]["mean"] - over["in_process_ms"]["mean"] == pytest.approx(
        over["paired_overhead_ms"]["mean"])  # REST minus the mean of its two in-process runs
    assert set(over["noise_ms"]) == {"p50", "p95", "mean"}
    assert [(t["clients"], t["requests"], t["errors"]) for t in report["throughput"]] == [
        (1, 9, 0), (3, 9, 0)]
    assert all(t["requests_per_s"] > 0 for t in report["throughput"])
