"""``memroute db``: the embedded server (status, start, stop, url), erasing a scope and
backfilling the entity index."""

# No `from __future__ import annotations`: typer reads every command's annotations at each
# start, and evaluating them from strings took it 0.1 s (issue 48).

from typing import Annotated, Any

import typer

from memroute import cli_output as out
from memroute.cli._app import (
    DebugOpt,
    JsonOpt,
    db_app,
    open_memory,
    parse_scope,
    run,
    setup_command,
)


def _settings():
    from memroute.settings import get_settings

    return get_settings()


def _require_embedded(action: str) -> None:
    from memroute.errors import InvalidInputError

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
    setup_command(json_output, debug)
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
    setup_command(json_output, debug)
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
    setup_command(json_output, debug)
    _require_embedded("stop")
    from memroute.memory.server import stop_embedded_server

    stopped = stop_embedded_server(_settings().home)
    if json_output:
        out.emit_json({"stopped": stopped, "running": False})
    else:
        out.stdout_console().print("stopped" if stopped else "the embedded server was not running")


@db_app.command("tune")
def db_tune(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """Apply memroute's memory settings (shared_buffers, effective_cache_size) to an existing
    embedded server and restart it; new servers get them when created."""
    setup_command(json_output, debug)
    _require_embedded("tune")
    from memroute.memory.server import tune_embedded_server

    settings = tune_embedded_server(_settings().home)
    if json_output:
        out.emit_json(settings)
    else:
        out.stdout_console().print(
            ", ".join(f"{name} = {value}" for name, value in settings.items()), markup=False)


@db_app.command("url")
def db_url(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """Print the connection URL (starting the embedded server if needed), e.g. for psql."""
    setup_command(json_output, debug)
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
    sub_scopes: Annotated[bool, typer.Option(
        "--sub-scopes", help="Erase the scopes under this one too (a user's agents; a "
                             "project's users): everything of this user.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Delete every episode of a scope (or of one session in it; or, with --sub-scopes, of
    the scope and every scope under it), printing the count per scope."""
    setup_command(json_output, debug)
    from memroute.errors import InvalidInputError

    target = parse_scope(scope)
    label = out.scope_label(target)
    if session and sub_scopes:
        raise InvalidInputError("--session and --sub-scopes do not go together")
    what = (f"session {session!r} of scope {label}" if session
            else f"all of scope {label} and the scopes under it" if sub_scopes
            else f"all of scope {label}")
    if not yes:
        if json_output:
            raise InvalidInputError(f"refusing to erase {what} without confirmation: pass --yes")
        if not typer.confirm(f"Erase {what}?", default=False, err=True):
            raise InvalidInputError("not confirmed; nothing was erased")
    deleted = run(_erase(target, session, sub_scopes))
    if json_output:
        out.emit_json({"scope": out.scope_label(target), "session": session,
                       "deleted": int(deleted), "by_scope": deleted.by_scope})
    else:
        console = out.stdout_console()
        console.print(f"erased {int(deleted)} episode(s): {what}")
        if sub_scopes:
            for path, count in deleted.by_scope.items():
                console.print(f"  {path}: {count}")


async def _erase(scope: Any, session: str | None, sub_scopes: bool) -> Any:
    memory = await open_memory()
    try:
        if session is not None:
            return await memory.delete(scope, session_id=session)
        return await memory.delete(scope, all=True, sub_scopes=sub_scopes)
    finally:
        await memory.close()


@db_app.command("backfill-entities")
def db_backfill_entities(
    batch: Annotated[int, typer.Option(min=1, max=10_000,
                                       help="Sentences per transaction.")] = 256,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Extract the named entities of sentences stored without them (stores written before
    the entity index existed), and the days that sentences stored before days were kept
    name; the store works meanwhile. Safe to interrupt and rerun."""
    setup_command(json_output, debug)
    filled = run(_backfill(batch))
    if json_output:
        out.emit_json({"filled": filled})
    else:
        out.stdout_console().print(f"entities extracted for {filled} sentence(s)")


async def _backfill(batch: int) -> int:
    memory = await open_memory()
    try:
        return await memory.backfill_entities(batch)
    finally:
        await memory.close()


@db_app.command("warm")
def db_warm(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """Read the store's tables and indexes into memory (after a restart or a long idle), so
    the first searches read no disk. Uses pg_prewarm where the server has it, else the
    embedded server's files; reads only this store's schema. Safe to rerun."""
    setup_command(json_output, debug)
    report = run(_warm())
    if json_output:
        out.emit_json(report.as_dict())
    elif report.method == "none":
        out.stdout_console().print(f"not warmed: {report.reason}")
    else:
        out.stdout_console().print(
            f"read {report.bytes / 2**20:,.1f} MiB of {report.relations} relation(s) "
            f"with {report.method} in {report.seconds:.2f} s")


async def _warm():
    from memroute.settings import get_settings

    # open without the background warm-up: this command is the warm-up
    memory = await open_memory(get_settings().model_copy(update={"warm_on_open": False}))
    try:
        return await memory.warm()
    finally:
        await memory.close()
