"""The testing harness the tests, the benchmarks and the load tests share: the app's paths, a local
`streamlit run` server, Debian's Chromium, a throwaway redis-server, AppTest's navigation mode, percentiles.

Imported by tests/support.py, bench/ and loadtest/; it imports none of them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from streamlit.runtime.pages_manager import PagesManager

from core.app import registry

ROOT = Path(__file__).resolve().parent.parent  # the repository
APP = str(ROOT / "streamlit_app.py")  # the frame, as AppTest.from_file takes it
CHROMIUM = "/usr/bin/chromium"  # Debian's; Playwright's own browser download is not used

# Headless, no sandbox (root in CI), and no background traffic: the machine has no network.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    # Many tabs at once (loadtest/load.py): treat every tab as a foreground tab, as each student's is.
    "--disable-renderer-backgrounding",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
]
# The one page list (core/app/registry.py): scripts for AppTest, URL paths for the browser.
PAGE_FILES = [spec.file for spec in registry.PAGES]
PAGE_URLS = [spec.slug for spec in registry.PAGES]
# What the browser-driving code waits on: the app idle after a run, and the sidebar's seed box.
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
SEED_BOX = '[data-testid="stSidebar"] [data-testid="stNumberInputField"]'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(
    timeout_s: float = 90,
    env: dict[str, str] | None = None,
    cpus: str | None = None,
    port: int | None = None,
    script: str = "streamlit_app.py",
) -> tuple[subprocess.Popen, str]:
    """`streamlit run streamlit_app.py` on a loopback port (a free one by default); returns (process, base URL).

    `env`: extra environment variables for the server (e.g. loadtest.run_log.server_env).
    `cpus`: pin the server to these cores (`taskset -c`, e.g. "0"), so a load client can have the others.
    `script`: the app to run, relative to the repository (loadtest/reference_page.py for the yardstick).
    """
    port = port or free_port()
    pin = ["taskset", "-c", cpus] if cpus is not None else []
    command = [*pin,
        sys.executable, "-m", "streamlit", "run", script, "--server.headless=true",
        f"--server.port={port}", "--server.address=127.0.0.1", "--browser.gatherUsageStats=false",
    ]  # fmt: skip
    # ATTENTION_LAB_SERVER_LOG=<file>: the server's own output goes there (appended), to diagnose a failed run.
    log_path = os.environ.get("ATTENTION_LAB_SERVER_LOG")
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - the server's lifetime
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                return process, url
        except OSError:
            time.sleep(0.5)
    process.terminate()
    raise RuntimeError(f"streamlit did not start at {url}")


def use_navigation_mode() -> None:
    """Make AppTest run every rerun through streamlit_app.py's st.navigation.

    Under Streamlit 1.67, AppTest sets PagesManager.uses_pages_directory = None before each
    run and the PagesManager it then builds sets it to True because pages/ exists, so reruns
    go through the legacy multipage runner and skip the frame and its sidebar. The real server
    keeps the flag False once st.navigation has run (see ui/frame.py `frame`); so do we.
    Returns nothing; call `restore_pages_manager()` to undo.
    """
    if getattr(PagesManager.__init__, "_attention_lab_patch", False):
        return
    original = PagesManager.__init__

    def init_then_use_navigation(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    init_then_use_navigation._attention_lab_patch = True  # type: ignore[attr-defined]
    init_then_use_navigation._original = original  # type: ignore[attr-defined]
    PagesManager.__init__ = init_then_use_navigation


def restore_pages_manager() -> None:
    original = getattr(PagesManager.__init__, "_original", None)
    if original is not None:
        PagesManager.__init__ = original


# ---------------------------------------------------------------- redis-server, for the class poll's Redis store
# Debian's redis-server on a free loopback port. Its data are kept in an append-only file in a
# temporary folder, so that a server stopped and started again on the same port comes back with its
# rooms (as the Redis in deploy/kubernetes/redis.yaml does).
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def redis_available() -> bool:
    """Whether Debian's redis-server is installed (the Redis tests skip cleanly without it)."""
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


# Pages whose sidebar seed is always greyed out (core/app/registry.py; tests/unit/test_real_model.py checks):
# a benchmark that clicks the seed's "+" must do it elsewhere.
# (with the default, book preset: pages without random weights grey the seed out too).
NO_SEED_PAGES = {
    spec.slug for spec in registry.PAGES if registry.Control.SEED in spec.ignores or not spec.random_weights
}


def low_priority_chromium(folder: Path, niceness: int = 10) -> str:
    """A launcher that runs Debian's Chromium at a lower CPU priority than the server.

    In a class every student's browser paints on their own laptop; on one benchmark machine 40
    tabs would otherwise take the server's cores, and we would time Chromium, not the app.
    """
    launcher = folder / "chromium-nice"
    launcher.write_text(f'#!/bin/sh\nexec nice -n {niceness} {CHROMIUM} "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of `values`, nearest rank (q = 0.95 for a p95)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
