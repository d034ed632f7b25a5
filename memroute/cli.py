"""The ``memroute`` command line: ingest, search, ask, db and eval.

Every command takes ``--json`` (one JSON document on stdout) and ``--debug`` (debug logs and
full tracebacks). Errors print one line on stderr and exit non-zero:
2 bad input, 3 database unavailable, 4 model unavailable, 5 embedder mismatch, 1 otherwise.
This module is the only place that configures logging (structlog and the standard library).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import logging
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

from memroute import cli_output as out

T = TypeVar("T")

# Sub-apps owned by other modules, imported only when used so the CLI starts fast.
LAZY_COMMANDS = {"eval": ("memroute.evals.cli", "app")}


class _State:
    json: bool = False
    debug: bool = False


state = _State()


# -- logging -------------------------------------------------------------------------------

class _Stderr:
    """Writes to whatever ``sys.stderr`` is at the time (test runners swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_log_handler: logging.Handler | None = None


def configure_logging(debug: bool) -> None:
    """Warnings and errors on stderr by default; everything with ``--debug``."""
    import structlog

    global _log_handler
    level = logging.DEBUG if debug else logging.WARNING
    processors: list[Any] = [structlog.processors.add_log_level]
    if debug:
        processors.append(structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False))
    processors.append(structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    if _log_handler is None:
        _log_handler = logging.StreamHandler(_Stderr())  # type: ignore[arg-type]
        _log_handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(_log_handler)
    _log_handler.setLevel(level)
    root.setLevel(level)
    logging.captureWarnings(True)  # Python warnings are logs too: shown with --debug only
    logging.getLogger("py.warnings").setLevel(logging.DEBUG if debug else logging.ERROR)


def _setup(json_output: bool, debug: bool) -> None:
    state.json, state.debug = json_output, debug
    configure_logging(debug)


# -- errors --------------------------------------------------------------------------------

def exit_code_for(exc: BaseException) -> int:
    from memroute.memory.errors import (
        EmbedderMismatchError,
        InvalidInputError,
        ModelUnavailableError,
        StoreUnavailableError,
    )

    for kind, code in ((InvalidInputError, 2), (StoreUnavailableError, 3),
                       (ModelUnavailableError, 4), (EmbedderMismatchError, 5)):
        if isinstance(exc, kind):
            return code
    return 1


def _report_error(exc: BaseException) -> None:
    from memroute.memory.errors import MemrouteError

    message = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, MemrouteError):
        message = f"unexpected {type(exc).__name__}: {message} (run with --debug for details)"
    if state.json:
        line = json.dumps({"error": message, "kind": type(exc).__name__})
    else:
        line = f"error: {message}"
    sys.stderr.write(line + "\n")


class MemrouteGroup(TyperGroup):
    """Turns every error into one line and an exit code, and loads lazy sub-apps on demand."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        names = list(super().list_commands(ctx))
        for name, (module, _) in LAZY_COMMANDS.items():
            if name not in names and _module_exists(module):
                names.append(name)
        return names

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            command = _load_lazy(*LAZY_COMMANDS[cmd_name])
        return command

    def invoke(self, ctx: typer.Context) -> Any:
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        state.json, state.debug = "--json" in rest, "--debug" in rest  # commands set them too
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # --help, usage errors and aborts are handled (and printed) by typer
        except KeyboardInterrupt:
            raise typer.Abort() from None
        except Exception as exc:
            if state.debug:
                raise
            _report_error(exc)
            raise typer.Exit(exit_code_for(exc)) from None


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _load_lazy(module_name: str, attribute: str) -> Any:
    if not _module_exists(module_name):
        return None
    module = importlib.import_module(module_name)
    return typer.main.get_command(getattr(module, attribute))


# -- shared options ------------------------------------------------------------------------

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show debug logs and tracebacks.")]
ScopeOpt = Annotated[str, typer.Option(
    "--scope", "-s", envvar="MEMROUTE_SCOPE",
    help="Whose memory: org\\[/project\\[/user\\[/agent]]] (env MEMROUTE_SCOPE).")]


def parse_scope(text: str):
    """A `Scope` from ``org[/project[/user[/agent]]]``; empty parts take their defaults."""
    from memroute.memory.errors import InvalidInputError
    from memroute.memory.models import coerce_scope

    parts = text.strip().split("/")
    if len(parts) > 4 or not parts[0]:
        raise InvalidInputError(
            f"invalid scope {text!r}: use org[/project[/user[/agent]]], e.g. acme/support/u42")
    fields = dict(zip(("org_id", "project_id", "user_id", "agent_id"), parts, strict=False))
    return coerce_scope({key: value for key, value in fields.items() if value})


def parse_filters(text: str | None) -> dict[str, Any] | None:
    from memroute.memory.errors import FilterError

    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FilterError(f"--filters is not valid JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(value, dict):
        raise FilterError("--filters must be a JSON object, e.g. '{\"producer\": \"user\"}'")
    return value


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine to completion (the CLI is an edge of the async core)."""
    return asyncio.run(coro)


async def open_memory():
    from memroute.memory import Memory
    from memroute.settings import get_settings

    return await Memory.open(settings=get_settings())


# -- the app -------------------------------------------------------------------------------

app = typer.Typer(
    name="memroute", cls=MemrouteGroup, no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False, rich_markup_mode="rich",
    help="memroute: a retrieval agent over episodic memory on PostgreSQL + pgvector.",
)
db_app = typer.Typer(no_args_is_help=True, help="The database: embedded server and scopes.")
app.add_typer(db_app, name="db")


def _version(value: bool) -> None:
    if value:
        from memroute import __version__

        typer.echo(f"memroute {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """memroute: a retrieval agent over episodic memory on PostgreSQL + pgvector."""


# -- ingest --------------------------------------------------------------------------------

@app.command()
def ingest(
    file: Annotated[Path, typer.Argument(help="The file to ingest.", show_default=False)],
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="jsonl | hotpotqa | 2wiki | musique | locomo")] = "jsonl",
    scope: ScopeOpt = "default",
    batch_size: Annotated[int, typer.Option(min=1, max=10_000,
                                            help="Episodes per atomic write.")] = 256,
    skip_invalid: Annotated[bool, typer.Option(
        "--skip-invalid", help="Store the valid lines even when some lines are bad.")] = False,
    limit: Annotated[int | None, typer.Option(
        min=1, help="Data sets only: the first N questions / conversations.")] = None,
    seed: Annotated[int, typer.Option(help="Data sets only: the shuffle seed.")] = 0,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Store episodes from a file. Every line is validated before anything is written."""
    _setup(json_output, debug)
    from memroute.ingest import FORMATS
    from memroute.memory.errors import InvalidInputError

    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown --format {fmt!r}: use one of {', '.join(FORMATS)}")
    target = parse_scope(scope)
    report = run(_ingest(file, fmt, target, batch_size, skip_invalid, limit, seed))
    if json_output:
        out.emit_json(report)
    else:
        console = out.stdout_console()
        console.print(
            f"stored {report['added']} new episode(s) from {report['valid']} valid line(s) "
            f"in {report['elapsed_s']:.1f}s → scope {report['scope']} "
            f"(now {report['episodes']} episodes)")
        if report["invalid"]:
            console.print(f"skipped {report['invalid']} invalid line(s)")


def _print_line_errors(errors: list[Any], shown: int = 20) -> None:
    console = out.stderr_console()
    for error in errors[:shown]:
        console.print(f"line {error.line}: {error.message}", markup=False)
    if len(errors) > shown:
        console.print(f"… and {len(errors) - shown} more bad line(s)")


async def _ingest(file: Path, fmt: str, scope: Any, batch_size: int, skip_invalid: bool,
                  limit: int | None, seed: int) -> dict[str, Any]:
    from memroute.ingest import conversation_scope, read_dataset, read_jsonl, store_batches
    from memroute.memory.errors import InvalidInputError

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


# -- search --------------------------------------------------------------------------------

@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    k: Annotated[int, typer.Option("--k", "-k", min=1, max=1000, help="How many results.")] = 10,
    filters: Annotated[str | None, typer.Option(
        help='A JSON filter, e.g. \'{"producer": "user"}\'.')] = None,
    scope: ScopeOpt = "default",
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Direct search of the memory (no agent): results with scores and stage timings."""
    _setup(json_output, debug)
    target = parse_scope(scope)
    where = parse_filters(filters)
    results = run(_search(target, query, k, where))
    if json_output:
        out.emit_json({
            "query": query, "scope": out.scope_label(target), "k": k, "filters": where,
            "reranker": results.reranker, "timings_ms": results.timings,
            "results": [out.result_dict(i, r) for i, r in enumerate(results, start=1)],
        })
        return
    console = out.stdout_console()
    if not results:
        console.print(f"no results in scope {out.scope_label(target)}")
    else:
        console.print(out.results_table(results))
    console.print(out.timings_line(results.timings, results.reranker), style="dim")


async def _search(scope: Any, query: str, k: int, filters: dict | None) -> Any:
    memory = await open_memory()
    try:
        return await memory.search_scored(scope, query, k=k, filters=filters)
    finally:
        await memory.close()


# -- ask -----------------------------------------------------------------------------------

STRATEGIES = ("auto", "direct", "split", "chain")
PLANNERS = ("auto", "offline", "llm")


@app.command()
def ask(
    query: Annotated[str, typer.Argument(help="The question.", show_default=False)],
    strategy: Annotated[str, typer.Option(help="auto | direct | split | chain")] = "auto",
    k: Annotated[int, typer.Option("--k", "-k", min=1, max=1000, help="How many results.")] = 10,
    filters: Annotated[str | None, typer.Option(
        help='A JSON filter, e.g. \'{"producer": "user"}\'.')] = None,
    planner: Annotated[str, typer.Option(
        help="auto (an LLM when MEMROUTE_LLM_MODEL is set) | offline | llm")] = "auto",
    max_llm_calls: Annotated[int | None, typer.Option(min=0, help="Budget: LLM calls.")] = None,
    max_tokens: Annotated[int | None, typer.Option(
        min=0, help="Budget: input tokens (output is capped at the same number).")] = None,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Show the route, sub-queries or hops, evidence and costs.")] = False,
    scope: ScopeOpt = "default",
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Retrieve with the agent: it routes the question (direct, split or chain) and searches."""
    _setup(json_output, debug)
    from memroute.memory.errors import InvalidInputError

    if strategy not in STRATEGIES:
        raise InvalidInputError(f"unknown --strategy {strategy!r}: use {', '.join(STRATEGIES)}")
    if planner not in PLANNERS:
        raise InvalidInputError(f"unknown --planner {planner!r}: use {', '.join(PLANNERS)}")
    target = parse_scope(scope)
    budget = None
    if max_llm_calls is not None or max_tokens is not None:
        budget = {"max_llm_calls": max_llm_calls, "max_input_tokens": max_tokens,
                  "max_output_tokens": max_tokens}
    options = {"scope": target, "k": k, "filters": parse_filters(filters),
               "strategy": strategy, "budget": budget}
    result = run(_ask(query, planner, options))
    if json_output:
        out.emit_json(out.answer_dict(query, target, result))
        return
    console = out.stdout_console()
    if explain:
        out.print_explanation(console, result)
        return
    console.print(out.results_table(result.results))
    totals = result.costs.totals
    console.print(f"route {result.route} · {len(result.queries)} quer"
                  f"{'y' if len(result.queries) == 1 else 'ies'} · {totals['llm_calls']} LLM "
                  f"call(s) · {totals['wall_ms']:.0f} ms · stop {result.stop_reason}",
                  style="dim", markup=False)


def make_agent(memory: Any, planner: str) -> Any:
    """The retrieval agent with the planner asked for on the command line."""
    from memroute.agent import RetrievalAgent
    from memroute.memory.errors import InvalidInputError

    if planner == "offline":
        from memroute.strategies.offline_planner import OfflinePlanner

        return RetrievalAgent(memory=memory, planner=OfflinePlanner())
    if planner == "llm" and not memory.settings.llm_model:
        raise InvalidInputError("--planner llm needs a model: set MEMROUTE_LLM_MODEL "
                                "(and MEMROUTE_LLM_BASE_URL / MEMROUTE_LLM_API_KEY)")
    return RetrievalAgent(memory=memory)


async def _ask(query: str, planner: str, options: dict[str, Any]) -> Any:
    memory = await open_memory()
    try:
        agent = make_agent(memory, planner)
        console = out.stderr_console()
        result = None
        async for event in agent.astream(query, **options):
            if getattr(event, "event", "") == "final":
                result = event.result
            elif not state.json and (line := out.event_line(event)):
                console.print(f"· {line}", style="dim", markup=False, highlight=False)
        return result
    finally:
        await memory.close()


# -- db ------------------------------------------------------------------------------------

def _settings():
    from memroute.settings import get_settings

    return get_settings()


def _require_embedded(action: str) -> None:
    from memroute.memory.errors import InvalidInputError

    if _settings().database_url:
        raise InvalidInputError(
            f"`db {action}` manages the embedded server, but MEMROUTE_DATABASE_URL points at "
            "an external database; unset it to use the embedded server")


@db_app.command("status")
def db_status(
    scope: Annotated[str | None, typer.Option(
        "--scope", "-s", help="Also count the episodes of this scope.")] = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Where the database is, whether it runs, and (with --scope) what a scope holds."""
    _setup(json_output, debug)
    from memroute.memory.server import embedded_server_status

    settings = _settings()
    if settings.database_url:
        info: dict[str, Any] = {"mode": "external", "running": None,
                                "url": out.redact_url(settings.database_url)}
    else:
        info = {"mode": "embedded", "home": str(settings.home),
                **embedded_server_status(settings.home)}
    info["schema"] = settings.db_schema
    if scope is not None:
        target = parse_scope(scope)
        info["scope"] = out.scope_label(target)
        info["counts"] = run(_count(target)) if info["running"] is not False else None
    if json_output:
        out.emit_json(info)
        return
    console = out.stdout_console()
    for key, value in info.items():
        console.print(f"[bold]{key:>11}[/bold]  {value if value is not None else '-'}")


async def _count(scope: Any) -> dict[str, int]:
    memory = await open_memory()
    try:
        return await memory.count(scope)
    finally:
        await memory.close()


@db_app.command("start")
def db_start(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """Start the embedded server (or reuse the running one)."""
    _setup(json_output, debug)
    _require_embedded("start")
    from memroute.memory.server import ensure_embedded_server

    url = ensure_embedded_server(_settings().home)
    if json_output:
        out.emit_json({"running": True, "url": url})
    else:
        out.stdout_console().print(f"embedded server running: {url}", markup=False)


@db_app.command("stop")
def db_stop(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """Stop the embedded server."""
    _setup(json_output, debug)
    _require_embedded("stop")
    from memroute.memory.server import stop_embedded_server

    stopped = stop_embedded_server(_settings().home)
    if json_output:
        out.emit_json({"stopped": stopped, "running": False})
    else:
        out.stdout_console().print("stopped" if stopped else "the embedded server was not running")


@db_app.command("url")
def db_url(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """Print the connection URL (starting the embedded server if needed), e.g. for psql."""
    _setup(json_output, debug)
    settings = _settings()
    if settings.database_url:
        url = settings.database_url
    else:
        from memroute.memory.server import ensure_embedded_server

        url = ensure_embedded_server(settings.home)
    if json_output:
        out.emit_json({"url": url})
    else:
        typer.echo(url)


@db_app.command("erase")
def db_erase(
    scope: Annotated[str, typer.Option("--scope", "-s", help="The scope to erase (required).",
                                       show_default=False)],
    session: Annotated[str | None, typer.Option(help="Erase only this session.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Delete every episode of a scope (or of one session in it)."""
    _setup(json_output, debug)
    from memroute.memory.errors import InvalidInputError

    target = parse_scope(scope)
    label = out.scope_label(target)
    what = f"session {session!r} of scope {label}" if session else f"all of scope {label}"
    if not yes:
        if json_output:
            raise InvalidInputError(f"refusing to erase {what} without confirmation: pass --yes")
        if not typer.confirm(f"Erase {what}?", default=False, err=True):
            raise InvalidInputError("not confirmed; nothing was erased")
    deleted = run(_erase(target, session))
    if json_output:
        out.emit_json({"scope": out.scope_label(target), "session": session, "deleted": deleted})
    else:
        out.stdout_console().print(f"erased {deleted} episode(s): {what}")


async def _erase(scope: Any, session: str | None) -> int:
    memory = await open_memory()
    try:
        return await memory.delete(scope, session_id=session)
    finally:
        await memory.close()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
