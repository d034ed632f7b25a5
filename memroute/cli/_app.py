"""The CLI's shared parts: the app, error handling, logging setup and common options.

Every command takes ``--json`` (one JSON document on stdout) and ``--debug`` (debug logs and
full tracebacks). Errors print one line on stderr and exit non-zero:
2 bad input, 3 database unavailable, 4 model unavailable, 5 embedder mismatch, 1 otherwise.
This is the only place that configures logging (structlog and the standard library).
"""

# No `from __future__ import annotations`: typer reads every command's annotations at each
# start, and evaluating them from strings took it 0.1 s (issue 48).

import json
import logging
import os
import sys
from collections.abc import Coroutine, Iterator
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

from memroute.errors import exit_code_for

T = TypeVar("T")

# Commands other packages plug in (``memroute eval`` comes from the evaluation), as entry
# points: typer apps or click commands, imported only when used so the CLI starts fast.
COMMAND_ENTRY_POINTS = "memroute.cli"


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
    """Warnings and errors on stderr by default; everything with ``--debug``. structlog is
    configured when the first memroute logger is made (a served search never imports it)."""
    from memroute._log import before_first_logger

    global _log_handler
    level = logging.DEBUG if debug else logging.WARNING
    before_first_logger(lambda: _configure_structlog(level, debug))
    root = logging.getLogger()
    if _log_handler is None:
        _log_handler = logging.StreamHandler(_Stderr())  # type: ignore[arg-type]
        _log_handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(_log_handler)
    _log_handler.setLevel(level)
    root.setLevel(level)
    logging.captureWarnings(True)  # Python warnings are logs too: shown with --debug only
    logging.getLogger("py.warnings").setLevel(logging.DEBUG if debug else logging.ERROR)


def _configure_structlog(level: int, debug: bool) -> None:
    import structlog

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


def setup_command(json_output: bool, debug: bool) -> None:
    state.json, state.debug = json_output, debug
    configure_logging(debug)


# -- errors --------------------------------------------------------------------------------

def _report_error(exc: BaseException) -> None:
    from memroute.errors import MemrouteError

    message = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, MemrouteError):
        message = f"unexpected {type(exc).__name__}: {message} (run with --debug for details)"
    if state.json:
        line = json.dumps({"error": message, "kind": type(exc).__name__})
    else:
        line = f"error: {message}"
    sys.stderr.write(line + "\n")


class MemrouteGroup(TyperGroup):
    """Turns every error into one line and an exit code, and loads plugged-in commands on
    demand."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        names = list(super().list_commands(ctx))
        return names + [name for name in plugged_commands() if name not in names]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            command = _plugged_command(cmd_name)
        return command

    def format_commands(self, ctx: typer.Context, formatter: Any) -> None:
        """The commands' one-line helps; a plugged-in command is named, not loaded (loading
        `memroute eval` to show its line would double the time `--help` takes)."""
        own = [(name, command) for name in TyperGroup.list_commands(self, ctx)
               if (command := TyperGroup.get_command(self, ctx, name)) is not None
               and not command.hidden]
        plugged = [name for name in plugged_commands() if name not in dict(own)]
        if not own and not plugged:
            return
        limit = formatter.width - 6 - max(len(name) for name in [*dict(own), *plugged])
        rows = [(name, command.get_short_help_str(limit)) for name, command in own]
        rows += [(name, f"Plugged in by an installed package; memroute {name} --help.")
                 for name in plugged]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: typer.Context) -> Any:
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        state.json, state.debug = "--json" in rest, "--debug" in rest  # commands set them too
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # --help, usage errors and aborts are handled (and printed) by typer
        except KeyboardInterrupt:
            raise typer.Abort() from None
        except BrokenPipeError:
            raise  # the reader left (`memroute ... | head`): click exits quietly, as Unix tools do
        except Exception as exc:
            if state.debug:
                raise
            _report_error(exc)
            raise typer.Exit(exit_code_for(exc)) from None


_plugged: dict[str, str] | None = None


def plugged_commands() -> dict[str, str]:
    """``name: "module:attribute"`` of every command an installed package plugs in (its
    ``memroute.cli`` entry points), first on ``sys.path`` first. Read from the packages'
    ``entry_points.txt`` directly: `importlib.metadata` reads every package's metadata
    (0.1-0.2 s, as long as the rest of `--help`)."""
    global _plugged
    if _plugged is None:
        _plugged = {}
        for text in _entry_point_files():
            for line in _section(text, f"[{COMMAND_ENTRY_POINTS}]").splitlines():
                name, sep, target = line.partition("=")
                if sep and name.strip() and not name.lstrip().startswith(("#", ";")):
                    _plugged.setdefault(name.strip(), target.strip())
    return _plugged


def _entry_point_files() -> Iterator[str]:
    """The ``entry_points.txt`` of each installed package, in ``sys.path`` order."""
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(folder or ".", name, "entry_points.txt"),
                              encoding="utf-8") as file:
                        yield file.read()
                except OSError:
                    continue


def _section(text: str, header: str) -> str:
    """The lines of an ini-style ``text`` under ``header`` ("" without it)."""
    if header not in text:
        return ""
    return text.split(header, 1)[1].split("\n[", 1)[0]


def _plugged_command(name: str) -> Any:
    """The click command an installed package registers under ``name``, or ``None``."""
    import importlib

    target = plugged_commands().get(name)
    if target is None:
        return None
    module, _, attribute = target.partition("[")[0].strip().partition(":")
    command: Any = importlib.import_module(module.strip())
    for part in attribute.strip().split(".") if attribute.strip() else ():
        command = getattr(command, part)
    return typer.main.get_command(command) if isinstance(command, typer.Typer) else command


# -- shared options ------------------------------------------------------------------------

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show debug logs and tracebacks.")]
ScopeOpt = Annotated[str, typer.Option(
    "--scope", "-s", envvar="MEMROUTE_SCOPE",
    help="Whose memory: org[/project[/user[/agent]]] (env MEMROUTE_SCOPE).")]


def scope_fields(text: str) -> dict[str, str]:
    """``org[/project[/user[/agent]]]`` as a `Scope`'s fields (no pydantic: a served command
    sends them, and the server checks them as every face does); an empty part ("acme/p/",
    "acme//u1") is an input error, never a wider scope."""
    from memroute.errors import InvalidInputError

    parts = text.strip().split("/")
    if len(parts) > 4 or not all(parts):
        raise InvalidInputError(
            f"invalid scope {text!r}: use org[/project[/user[/agent]]] with no empty part, "
            "e.g. acme/support/u42 (the default project is 'default')")
    return dict(zip(("org_id", "project_id", "user_id", "agent_id"), parts, strict=False))


def parse_scope(text: str):
    """A `Scope` from ``org[/project[/user[/agent]]]`` (the same model as every face's)."""
    from memroute.memory.models import coerce_scope

    return coerce_scope(scope_fields(text))


def parse_filters(text: str | None) -> dict[str, Any] | None:
    from memroute.errors import FilterError

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
    import asyncio

    return asyncio.run(coro)


async def open_memory(settings=None):
    from memroute.memory import Memory
    from memroute.settings import get_settings

    return await Memory.open(settings=settings or get_settings())


# -- the app -------------------------------------------------------------------------------

app = typer.Typer(
    name="memroute", cls=MemrouteGroup, no_args_is_help=True, add_completion=False,
    # Plain help, as click writes it: typer's rich help imports rich and markdown-it (0.4 s).
    pretty_exceptions_enable=False, rich_markup_mode=None,
    help="memroute: a retrieval agent over episodic memory on PostgreSQL + pgvector.",
)
db_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                     help="The database: embedded server and scopes.")
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

