"""``memroute ingest``: store episodes from JSON Lines or a benchmark data file."""

# No `from __future__ import annotations`: typer reads every command's annotations at each
# start, and evaluating them from strings took it 0.1 s (issue 48).

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from memroute import cli_output as out
from memroute.cli._app import (
    DebugOpt,
    JsonOpt,
    ScopeOpt,
    app,
    open_memory,
    parse_scope,
    run,
    setup_command,
    state,
)


@app.command()
def ingest(
    file: Annotated[Path, typer.Argument(help="The file to ingest.", show_default=False)],
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="jsonl | hotpotqa | 2wiki | musique | locomo")] = "jsonl",
    scope: ScopeOpt = "default",
    batch_size: Annotated[int, typer.Option(
        min=1, help="Episodes per atomic write (at most MAX_EPISODES_PER_CALL, 5000).")] = 256,
    skip_invalid: Annotated[bool, typer.Option(
        "--skip-invalid", help="Store the valid lines even when some lines are bad.")] = False,
    limit: Annotated[int | None, typer.Option(
        min=1, help="Data sets only: the first N questions / conversations.")] = None,
    seed: Annotated[int, typer.Option(help="Data sets only: the shuffle seed.")] = 0,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Store episodes from a file. Every line is validated before anything is written."""
    setup_command(json_output, debug)
    from memroute.errors import InvalidInputError
    from memroute.ingest import check_format
    from memroute.memory.limits import MAX_EPISODES_PER_CALL

    if batch_size > MAX_EPISODES_PER_CALL:
        raise InvalidInputError(
            f"--batch-size must be at most {MAX_EPISODES_PER_CALL}, got {batch_size}")
    check_format(fmt)
    target = parse_scope(scope)
    report = run(_ingest(file, fmt, target, batch_size, skip_invalid, limit, seed))
    if json_output:
        out.emit_json(report)
    else:
        console = out.stdout_console()
        console.print(
            f"stored {report['added']} new episode(s) from {report['valid']} valid line(s) "
            f"in {report['elapsed_s']:.1f}s → {_stored_in(report['episodes_by_scope'])}")
        if report["invalid"]:
            console.print(f"skipped {report['invalid']} invalid line(s)")


def _stored_in(counts: dict[str, int], shown: int = 5) -> str:
    """The scopes episodes were stored in (a LoCoMo file: one per conversation), with counts."""
    if len(counts) == 1:
        ((label, count),) = counts.items()
        return f"scope {label} (now {count} episodes)"
    parts = [f"{label} (now {count})" for label, count in list(counts.items())[:shown]]
    more = f", … {len(counts) - shown} more" if len(counts) > shown else ""
    return f"{len(counts)} scopes: {', '.join(parts)}{more}"


def _print_line_errors(errors: list[Any], shown: int = 20) -> None:
    console = out.stderr_console()
    for error in errors[:shown]:
        console.print(f"line {error.line}: {error.message}", markup=False)
    if len(errors) > shown:
        console.print(f"… and {len(errors) - shown} more bad line(s)")


async def _ingest(file: Path, fmt: str, scope: Any, batch_size: int, skip_invalid: bool,
                  limit: int | None, seed: int) -> dict[str, Any]:
    from memroute.ingest import conversation_scope, read_dataset, read_jsonl, store_batches
    from memroute.errors import InvalidInputError

    start = time.perf_counter()
    if fmt == "jsonl":
        parsed = read_jsonl(file)
        groups = [(scope, parsed.episodes)]
        errors, records = parsed.errors, parsed.records
    else:
        groups = [(conversation_scope(scope, conversation), episodes)
                  for conversation, episodes in read_dataset(file, fmt, limit=limit, seed=seed)]
        errors, records = [], sum(len(e) for _, e in groups)
    if errors:
        if not state.json:
            _print_line_errors(errors)
        if not skip_invalid:
            if state.json:
                out.emit_json({"file": str(file), "written": 0, "records": records,
                               "errors": [{"line": e.line, "error": e.message} for e in errors]})
            raise InvalidInputError(
                f"{len(errors)} of {records} line(s) in {file} are invalid; nothing was written "
                "(fix them, or pass --skip-invalid to store the valid lines)")
    valid = sum(len(episodes) for _, episodes in groups)
    if valid == 0:
        raise InvalidInputError(f"{file} holds no episodes")

    memory = await open_memory()
    try:
        before = sum([(await memory.count(s))["episodes"] for s, _ in groups])
        with _progress(valid) as advance:
            for target, episodes in groups:
                await store_batches(memory, target, episodes, batch_size=batch_size,
                                    on_batch=advance)
        after = [(s, (await memory.count(s))["episodes"]) for s, _ in groups]
    finally:
        await memory.close()
    total = sum(count for _, count in after)
    return {
        "file": str(file), "format": fmt, "scope": out.scope_label(scope),
        "scopes": [out.scope_label(s) for s, _ in after],
        "episodes_by_scope": {out.scope_label(s): count for s, count in after},
        "records": records, "valid": valid, "invalid": len(errors),
        "errors": [{"line": e.line, "error": e.message} for e in errors],
        "added": total - before, "episodes": total,
        "elapsed_s": round(time.perf_counter() - start, 3),
    }


class _progress:
    """A rich progress bar on stderr (silent with --json); yields an ``advance(n)`` function."""

    def __init__(self, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("ingesting"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            console=out.stderr_console(), disable=state.json, transient=False,
        )
        self.task = self.progress.add_task("ingest", total=total)

    def __enter__(self):
        self.progress.start()
        return lambda n: self.progress.advance(self.task, n)

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
