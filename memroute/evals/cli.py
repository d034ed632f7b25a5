"""``memroute eval``: the evaluation command (plugged into the main CLI through the
``memroute.cli`` entry point; also ``python -m memroute.evals``). Progress goes to stderr;
the last stdout line is the summary as one JSON object."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Evaluate retrieval on a benchmark, per the evaluation protocol.")


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _ints(text: str) -> list[int]:
    from memroute.evals.runner import EvalConfigError

    try:
        return [int(p) for p in _csv(text)]
    except ValueError:
        raise EvalConfigError(f"--k takes comma-separated integers, not {text!r}") from None


class RichReporter:
    """Progress bars for ingestion and questions on stderr."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = Console(stderr=True)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=self.console, transient=False)
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _update(self, name: str, done: int, total: int) -> None:
        if name not in self._tasks:
            self._tasks[name] = self.progress.add_task(name, total=total)
        self.progress.update(self._tasks[name], completed=done, total=total)

    def ingest(self, done: int, total: int) -> None:
        self._update("ingest episodes", done, total)

    def questions(self, done: int, total: int) -> None:
        self._update("retrievals", done, total)

    def message(self, text: str) -> None:
        self.progress.console.print(text, markup=False)


@app.command("eval")
def eval_command(
    dataset: Annotated[str, typer.Argument(help="hotpotqa | 2wiki | musique | locomo")],
    data: Annotated[Path, typer.Option(help="The data file (formats: shared/data/README.md).")],
    limit: Annotated[int | None, typer.Option(min=1, help="The first N questions.")] = None,
    seed: Annotated[int, typer.Option(help="Shuffle seed of the pooled store.")] = 0,
    strategy: Annotated[str, typer.Option(
        help="Comma-separated: auto,direct,split,chain.")] = "direct,auto",
    k: Annotated[str | None, typer.Option("--k", help=(
        "Comma-separated result counts (default 10,20; passage unit: the recall cuts, "
        "default 2,5,10, from one ranked list)."))] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64,
                                             help="Questions in flight.")] = 4,
    embedder: Annotated[str | None, typer.Option(
        help="minilm | e5 | openai[:model] (default MEMROUTE_EMBEDDER).")] = None,
    reranker: Annotated[str | None, typer.Option(
        help="offline | flashrank[:model] | none (default MEMROUTE_RERANKER).")] = None,
    planner: Annotated[str, typer.Option(
        help="offline | llm | cascade (the offline decision, the model below "
             "MEMROUTE_CASCADE_THRESHOLD).")] = "offline",
    scripted_llm: Annotated[bool, typer.Option(
        "--scripted-llm", help="The planner's model is a scripted stand-in (cost figures "
                               "without a model; with --planner llm|cascade).")] = False,
    answer: Annotated[bool, typer.Option("--answer", help="Answer from the results (LLM).")
                      ] = False,
    judge: Annotated[bool, typer.Option("--judge", help="LLM-judge the answers (implies "
                                                         "--answer).")] = False,
    lexical: Annotated[bool | None, typer.Option(
        "--lexical/--no-lexical", help="Full-text lane on or off (default MEMROUTE_LEXICAL).")
    ] = None,
    rerank_mode: Annotated[str, typer.Option(
        help="Final multi-query rerank: fused (per query, fused) | concat (one query).")
    ] = "fused",
    context: Annotated[bool | None, typer.Option(
        "--context/--no-context",
        help="Neighbour episodes (default: off for Wikipedia sets, on for LoCoMo).")] = None,
    unit: Annotated[str, typer.Option(
        help="sentence (one episode per sentence) | passage (one per paragraph, the "
             "published multi-hop protocol: passage_recall@k).")] = "sentence",
    pool: Annotated[list[str] | None, typer.Option(
        help="Passage unit: NAME=FILE, another set whose passages join the store as "
             "distractors (repeatable).")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Debug logs and tracebacks.")] = False,
) -> None:
    """Run the evaluation protocol on one data set; write results.jsonl, summary.json,
    summary.md and plots into --out."""
    from memroute.evals.runner import EvalConfig, run_eval
    from memroute.errors import MemrouteError, exit_code_for

    _configure_logging(debug)
    try:
        cfg = EvalConfig(dataset=dataset, data=data, limit=limit, seed=seed,
                         strategies=_csv(strategy),
                         ks=_ints(k) if k else ([2, 5, 10] if unit == "passage" else [10, 20]),
                         out=out,
                         concurrency=concurrency, embedder=embedder, reranker=reranker,
                         planner=planner, scripted_llm=scripted_llm,
                         answer=answer or judge, judge=judge, lexical=lexical,
                         rerank_mode=rerank_mode, context=context, unit=unit,
                         pool=list(pool or []))
        with RichReporter() as reporter:
            summary = asyncio.run(run_eval(cfg, reporter=reporter))
    except MemrouteError as exc:
        if debug:
            raise
        sys.stderr.write(f"error: {' '.join(str(exc).split())}\n")
        raise typer.Exit(exit_code_for(exc)) from None
    sys.stdout.write(json.dumps(summary, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    if summary.get("partial"):
        raise typer.Exit(130)


def _configure_logging(debug: bool) -> None:
    """Use the main CLI's logging setup (the only place that configures logging)."""
    from memroute.cli import configure_logging

    configure_logging(debug)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
