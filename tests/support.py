"""What the tests and the benchmarks (bench/) share: the app's paths, a local server, Chromium, AppTest's mode.

Tests import this module, never bench/; bench/harness.py imports it too and adds what only the
benchmarks need (a low-priority Chromium launcher, percentiles, the pages without a seed box).
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

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "streamlit_app.py")  # the frame, as AppTest.from_file takes it
CHROMIUM = "/usr/bin/chromium"  # Debian's; Playwright's own browser download is not used
CHROMIUM_PATH = Path(CHROMIUM)
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
    # Many tabs at once (bench/load.py): treat every tab as a foreground tab, as each student's is.
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

    `env`: extra environment variables for the server (e.g. bench.run_log.server_env).
    `cpus`: pin the server to these cores (`taskset -c`, e.g. "0"), so a load client can have the others.
    `script`: the app to run, relative to the repository (bench/reference_page.py for the yardstick).
    """
    port = port or free_port()
    pin = ["taskset", "-c", cpus] if cpus is not None else []
    command = [*pin,
        sys.executable, "-m", "streamlit", "run", script, "--server.headless=true",
        f"--server.port={port}", "--server.address=127.0.0.1", "--browser.gatherUsageStats=false",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
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


def validated_spec(chart) -> dict:
    """A `core.charts.spec.VegaChart`'s spec as the page sends it, checked against the Vega-Lite schema.

    Arrow tables are checked as records (the schema knows JSON values only); the returned spec keeps them.
    """
    from altair.utils.schemapi import validate_jsonschema
    from altair.vegalite.v6.schema import core as vega_lite

    spec = chart.spec()
    as_json = {**spec, "datasets": {name: table.to_pylist() for name, table in spec["datasets"].items()}}
    validate_jsonschema(as_json, vega_lite.load_schema())
    return spec


# ---------------------------------------------------------------- AppTest helpers shared by the test modules
def app(page: str | None = None, **params: str):
    """The frame with a link's parameters, run once, then `page` (a registry file) if it is not the overview."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    if page is not None and page != PAGE_FILES[0]:
        at.switch_page(page).run()
    return at


def open_page(slug: str, **params: str):
    """The frame with a link's parameters, then the page with this slug; it must run without an exception."""
    at = app(None, **params)
    at.switch_page(registry.page(slug).file).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def assert_clean(at) -> None:
    """No exception, a title drawn, and the frame's sidebar ran (not Streamlit's legacy pages/ mode)."""
    assert not at.exception, [e.value for e in at.exception]
    assert at.title, "page drew nothing"
    assert at.sidebar.slider, "the frame's sidebar did not run"


def markdown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def wait_for_rerun(page) -> None:
    """Wait until Streamlit has finished running the script in Chromium (the status widget is gone)."""
    page.wait_for_selector(IDLE, timeout=60_000)
    page.wait_for_timeout(300)


def choose(page, label: str, option: str, *, where: str = '[data-testid="stMain"]') -> None:
    """Pick `option` (its shown name) in the select box labelled `label`."""
    box = page.locator(f'{where} [data-testid="stSelectbox"]').filter(has=page.get_by_text(label, exact=True)).first
    # Typed, then Enter: clicking an option in the open list failed now and then when the list
    # closed while Playwright scrolled it into view (the box sits below a tall chart).
    field = box.locator("input")
    field.click()
    field.fill(option)
    page.get_by_role("option", name=option, exact=True).wait_for(state="attached", timeout=30_000)
    field.press("Enter")
    wait_for_rerun(page)
