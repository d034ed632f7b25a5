"""`make bench`'s last step: one table of what a person waits for, against issue 48's targets.

Reads what the other programs wrote under ``bench-out/`` (``cold_start.json``,
``memory.json``, ``tenants.json``, ``agent.json``) and the ``summary.json`` of any
``memroute eval`` runs given with ``--evals`` (default: ``bench-out/evals/*/summary.json``),
and prints one table: the cold CLI and MCP start, the default search's p50 / p95 against its
floor (the query's embedding p50 plus the statement's p50 on the server), ingestion with
entities against the embedder alone, and the agent's searches per question and its p50 over
direct's, per set. A program not run is named as such; nothing is measured here.

    python -m benchmarks.summary [--out bench-out] [--evals DIR_OR_SUMMARY ...]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUT = Path("bench-out")
DEFAULT_SEARCH = "rerank_entity_lexical"  # benchmarks.memory's label of the default search
VECTOR_ONLY = "no_rerank"  # its stages carry the query's embedding alone
FLOOR_FACTOR = 1.4
INGESTION_SHARE = 0.85
AGENT_SEARCHES = 2.0
AGENT_RATIO = 2.0
COLD = ("memroute --help", "memroute search", "memroute ask", "mcp: initialize answered",
        "memroute search, served", "memroute ask, served")


@dataclass(frozen=True)
class Row:
    group: str
    what: str
    figure: str
    target: str = ""
    verdict: str = ""  # "met", "missed" or "" (no target)


def check(value: float, bound: float, at_most: bool = True) -> str:
    return "met" if (value <= bound if at_most else value >= bound) else "missed"


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cold_rows(report: dict[str, Any] | None) -> list[Row]:
    if report is None:
        return [Row("cold start", "benchmarks.cold_start", "not run")]
    rows = []
    for name in COLD:
        fig = report["seconds"].get(name)
        if fig is None:
            continue
        target = fig.get("target")
        rows.append(Row("cold start", f"{name} (median of {report.get('runs', 3)})",
                        f"{fig['median']:.2f} s", f"≤ {target:g} s" if target else "",
                        check(fig["median"], target) if target else ""))
    return rows


def search_floor(fig: dict[str, Any]) -> tuple[float, float, float]:
    """The query embedding's p50 (a search without the entity lane: the embedding alone),
    the default statement's p50 on the server (``EXPLAIN ANALYZE``), and their sum."""
    embedding = fig[VECTOR_ONLY]["stages_ms_p50"]["embed_ms"]
    statement = fig["statement_ms_p50"]["default"]["server_total_ms"]
    return embedding, statement, embedding + statement


def search_rows(report: dict[str, Any] | None) -> list[Row]:
    if report is None or not report.get("search"):
        return [Row("search", "benchmarks.memory (search)", "not run")]
    rows = []
    for size, fig in report["search"].items():
        latency = fig[DEFAULT_SEARCH]["latency_ms"]
        embedding, statement, floor = search_floor(fig)
        rows.append(Row(
            "search", f"default search, {int(size):,} sentences, p50 / p95",
            f"{latency['p50']:.1f} / {latency['p95']:.1f} ms; floor {floor:.1f} ms "
            f"({embedding:.1f} + {statement:.1f}); p95 {latency['p95'] / floor:.2f}×",
            f"p95 ≤ {FLOOR_FACTOR}× floor",
            check(latency["p95"], FLOOR_FACTOR * floor)))
    return rows


def ingestion_rows(memory: dict[str, Any] | None, tenants: dict[str, Any] | None) -> list[Row]:
    rows = []
    target = f"≥ {INGESTION_SHARE:.0%}"
    if memory is not None and "ingestion" in memory:
        ing = memory["ingestion"]
        share = ing["ratio_to_embedder"]["pipelined_with_entities"]
        rate = ing["sentences_per_s"]["embedder"]["median"]
        rows.append(Row("ingestion", "with entities, one writer, share of the embedder",
                        f"{share['median']:.0%} (rounds {share['min']:.0%}-{share['max']:.0%};"
                        f" embedder {rate:.0f}/s)", target,
                        check(share["median"], INGESTION_SHARE, at_most=False)))
    else:
        rows.append(Row("ingestion", "benchmarks.memory (ingestion)", "not run"))
    if tenants is not None and "ingestion" in tenants:
        ing = tenants["ingestion"]
        share = ing["ratio_to_embedder"]["tenants_with_entities"]
        rows.append(Row("ingestion",
                        f"with entities, {ing['tenants']} tenants at once, share of the embedder",
                        f"{share['median']:.0%} (rounds {share['min']:.0%}-{share['max']:.0%})",
                        target, check(share["median"], INGESTION_SHARE, at_most=False)))
    else:
        rows.append(Row("ingestion", "benchmarks.tenants (ingestion)", "not run"))
    return rows


def _agent_row(where: str, searches: float, auto_p50: float, direct_p50: float) -> Row:
    ratio = auto_p50 / direct_p50
    met = searches <= AGENT_SEARCHES and ratio <= AGENT_RATIO
    return Row("agent", f"auto, {where}: searches; p50 / direct's",
               f"{searches:.2f}; {ratio:.2f}× ({auto_p50:.0f} / {direct_p50:.0f} ms)",
               f"≤ {AGENT_SEARCHES:g}; ≤ {AGENT_RATIO:g}×", "met" if met else "missed")


def agent_rows(agent: dict[str, Any] | None, evals: list[dict[str, Any]]) -> list[Row]:
    rows = []
    if agent is not None and "overhead" in agent:
        over = agent["overhead"]
        strategies = over["strategies"]
        rows.append(_agent_row(
            f"HotpotQA bench store, {over['llm_latency_ms']:.0f} ms scripted LLM",
            strategies["auto"]["searches"], strategies["auto"]["wall_ms"]["p50"],
            strategies["direct"]["wall_ms"]["p50"]))
    else:
        rows.append(Row("agent", "benchmarks.agent", "not run"))
    for summary in evals:
        strategies = summary.get("strategies", {})
        auto, direct = strategies.get("auto"), strategies.get("direct")
        if not auto or not direct or not direct.get("latency_ms_p50"):
            continue
        rows.append(_agent_row(f"{summary['dataset']}, eval of {auto['n']}", auto["queries_mean"],
                               auto["latency_ms_p50"], direct["latency_ms_p50"]))
    if not evals:
        rows.append(Row("agent", "per held-out set", "no eval given (--evals)"))
    return rows


def eval_summaries(paths: list[Path]) -> list[dict[str, Any]]:
    """The ``summary.json`` of each path (a run's directory or the file itself)."""
    found = []
    for path in paths:
        summary = _load(path / "summary.json" if path.is_dir() else path)
        if summary is not None and "strategies" in summary:
            found.append(summary)
    return found


def table_rows(out: Path, evals: list[Path]) -> list[Row]:
    memory = _load(out / "memory.json")
    return [*cold_rows(_load(out / "cold_start.json")), *search_rows(memory),
            *ingestion_rows(memory, _load(out / "tenants.json")),
            *agent_rows(_load(out / "agent.json"), eval_summaries(evals))]


def print_table(rows: list[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="memroute bench: what a person waits for (issue 48's targets)")
    for column in ("", "what", "figure", "target", ""):
        table.add_column(column)
    style = {"met": "green", "missed": "red"}
    for row in rows:
        table.add_row(row.group, row.what, row.figure, row.target,
                      f"[{style[row.verdict]}]{row.verdict}[/]" if row.verdict else "")
    console = Console()
    if not console.is_terminal:  # piped (make bench | tee): wide enough for one line a row
        console = Console(width=160)
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--evals", type=Path, nargs="*", default=None,
                        help="memroute eval output directories or their summary.json "
                             "(default: <out>/evals/*/summary.json)")
    args = parser.parse_args()
    evals = args.evals if args.evals is not None else sorted((args.out / "evals").glob(
        "*/summary.json"))
    print_table(table_rows(args.out, evals))


if __name__ == "__main__":
    main()
