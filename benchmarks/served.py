"""A real `memroute serve` process on 127.0.0.1, for the service benchmark and tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]  # the checkout: `python -m memroute.cli` runs its code


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def service_env(database_url: str, schema: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a server on ``schema`` of ``database_url``, offline planner."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMROUTE_")}
    env.update({"MEMROUTE_DATABASE_URL": database_url, "MEMROUTE_DB_SCHEMA": schema,
                "MEMROUTE_HOME": str(home), "MEMROUTE_EMBED_THREADS": "1",
                "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", **extra})
    return env


class ServedProcess:
    """``python -m memroute.cli serve`` on a free port; ``start`` waits until it is ready."""

    def __init__(self, env: dict[str, str], log: Path, *args: str, root: Path = ROOT) -> None:
        self.env, self.log, self.args, self.root = env, log, args, root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def launch(self) -> ServedProcess:
        """Start the process, not waiting for it."""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memroute.cli", "serve", "--port", str(self.port),
                 *self.args], cwd=self.root, env=self.env, stdout=log, stderr=log)
        return self

    def start(self, timeout: float = 90.0) -> ServedProcess:
        self.launch()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"memroute serve exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/v1/ready", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"memroute serve not ready in {timeout}s: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
