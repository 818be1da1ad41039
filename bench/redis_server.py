"""Debian's redis-server on a free loopback port, for the class poll's tests and benchmarks.

The data are kept in an append-only file in a temporary folder, so that a server stopped and
started again on the same port comes back with its rooms (as the Redis in deploy/ does).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.harness import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def available() -> bool:
    return Path(REDIS_SERVER).exists()


class RedisServer:
    """One redis-server process; `stop()` and `start()` again keep its port and its data."""

    def __init__(self, port: int | None = None, folder: Path | None = None) -> None:
        self.port = port or free_port()
        self.folder = Path(folder or tempfile.mkdtemp(prefix="attention-lab-redis-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 15) -> RedisServer:
        command = [
            REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "yes",
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return self
            except redis.exceptions.RedisError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        """SIGTERM: Redis writes its file and exits, as a container stopped by Kubernetes does."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *_) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
