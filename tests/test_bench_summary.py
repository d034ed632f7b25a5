"""`make bench`'s summary table, built from sample outputs of the other programs."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import summary


def _search(p50: float, p95: float, embedding: float, statement: float) -> dict:
    return {"synthetic_sentences": 0,
            summary.DEFAULT_SEARCH: {"latency_ms": {"p50": p50, "p95": p95, "mean": p50}},
            summary.VECTOR_ONLY: {"stages_ms_p50": {"embed_ms": embedding, "read_ms": 4.0}},
            "statement_ms_p50": {"default": {"server_total_ms": statement}}}


def _write(out: Path, name: str, report: dict) -> None:
    (out / f"{name}.json").write_text(json.dumps(report))


def _eval(out: Path, dataset: str, auto: tuple[float, float], direct_p50: float) -> Path:
    run = out / "evals" / dataset
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"dataset": dataset, "strategies": {
        "direct": {"n": 50, "queries_mean": 1.0, "latency_ms_p50": direct_p50},
        "auto": {"n": 50, "queries_mean": auto[0], "latency_ms_p50": auto[1]}}}))
    return run


def test_each_figure_is_held_against_its_target(tmp_path: Path) -> None:
    _write(tmp_path, "cold_start", {"runs": 3, "seconds": {
        "python -c pass (floor)": {"median": 0.02, "target": None},
        "memroute --help": {"median": 0.25, "target": 0.3},
        "memroute search": {"median": 1.4, "target": 1.0}}})
    # 10k: p95 16.0 within 1.4 x (5 + 7); 100k: 20.0 over 1.4 x (5 + 8)
    _write(tmp_path, "memory", {
        "search": {"10000": _search(12.0, 16.0, 5.0, 7.0), "100000": _search(15.0, 20.0, 5.0, 8.0)},
        "ingestion": {"sentences_per_s": {"embedder": {"median": 170.0}},
                      "ratio_to_embedder": {"pipelined_with_entities": {
                          "median": 0.86, "min": 0.8, "max": 0.9}}}})
    _write(tmp_path, "tenants", {"ingestion": {"tenants": 16, "ratio_to_embedder": {
        "tenants_with_entities": {"median": 0.79, "min": 0.75, "max": 0.81}}}})
    _write(tmp_path, "agent", {"overhead": {"llm_latency_ms": 200.0, "strategies": {
        "direct": {"searches": 1.0, "wall_ms": {"p50": 100.0}},
        "auto": {"searches": 1.9, "wall_ms": {"p50": 190.0}}}}})
    evals = [_eval(tmp_path, "hotpotqa", (2.5, 300.0), 100.0),
             _eval(tmp_path, "musique", (1.8, 150.0), 100.0)]
    rows = summary.table_rows(tmp_path, evals)
    verdicts = {row.what: row.verdict for row in rows}
    assert verdicts["memroute --help (median of 3)"] == "met"
    assert verdicts["memroute search (median of 3)"] == "missed"
    assert not any("python -c pass" in what for what in verdicts)  # floors without a target
    searches = [row for row in rows if row.group == "search"]
    assert [row.verdict for row in searches] == ["met", "missed"]
    assert "floor 12.0 ms (5.0 + 7.0)" in searches[0].figure
    assert "1.54×" in searches[1].figure  # 20 / 13
    assert [row.verdict for row in rows if row.group == "ingestion"] == ["met", "missed"]
    agent = [row for row in rows if row.group == "agent"]
    assert [row.verdict for row in agent] == ["met", "missed", "met"]
    assert "2.50; 3.00×" in agent[1].figure and "hotpotqa" in agent[1].what


def test_a_program_not_run_is_named_and_the_table_still_prints(tmp_path: Path, capsys) -> None:
    rows = summary.table_rows(tmp_path, [])
    assert {row.figure for row in rows} >= {"not run"}
    assert all(row.verdict == "" for row in rows)
    assert {row.what for row in rows} >= {"benchmarks.cold_start", "benchmarks.agent",
                                          "benchmarks.memory (search)",
                                          "benchmarks.memory (ingestion)"}
    summary.print_table(rows)
    assert "not run" in capsys.readouterr().out


def test_the_default_evals_are_those_under_the_output_directory(tmp_path: Path) -> None:
    run = _eval(tmp_path, "locomo", (1.9, 120.0), 100.0)
    (tmp_path / "evals" / "broken").mkdir()
    (tmp_path / "evals" / "broken" / "summary.json").write_text("{not json")
    found = summary.eval_summaries(sorted((tmp_path / "evals").glob("*/summary.json")))
    assert [s["dataset"] for s in found] == ["locomo"]
    assert summary.eval_summaries([run])[0]["dataset"] == "locomo"
