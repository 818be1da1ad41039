"""What only the benchmarks need, on top of tests/support.py (shared with the tests and re-exported here)."""

from __future__ import annotations

from pathlib import Path

from core.app import registry
from tests.support import (  # noqa: F401 - re-exported: the benchmarks import them from here
    CHROMIUM,
    CHROMIUM_ARGS,
    IDLE,
    PAGE_FILES,
    PAGE_URLS,
    ROOT,
    SEED_BOX,
    free_port,
    restore_pages_manager,
    start_server,
    use_navigation_mode,
)

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
