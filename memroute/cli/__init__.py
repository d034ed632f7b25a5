"""The ``memroute`` command line: ingest, search, ask, db and eval (typer + rich).

Commands live one module per concern; importing this package registers them all. Heavy
imports (the memory layer, models, the agent) happen inside commands, so startup is fast.
"""

from memroute.cli import db, ingest, query  # noqa: F401  (registers the commands)
from memroute.cli import serve  # noqa: F401  (serve, mcp, keys: the `serve` extra)
from memroute.cli._app import app, configure_logging, parse_scope
from memroute.errors import exit_code_for

__all__ = ["app", "configure_logging", "exit_code_for", "main", "parse_scope"]


def main() -> None:
    """Console-script entry point."""
    app()
