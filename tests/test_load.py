"""Reduced load test for CI: 8 browser sessions for 15 s against `streamlit run` on loopback.

It asserts correctness under concurrency (no error, no exception element, no JavaScript error,
every session keeps its own seed and numbers); it reports timings but does not assert them:
timings belong to bench/ (README "Performance"), not to pass/fail on a shared machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed"),
]
pytest.importorskip("playwright.async_api")


def test_eight_sessions_for_fifteen_seconds() -> None:
    from bench import load

    result = load.run(sessions=8, seconds=15)
    print(
        f"\nreduced load: {result['reruns']} reruns, median {result['median_s']}, p95 {result['p95_s']} s,"
        f" server peak RSS {result['memory_after_load']['peak_rss_mib']:.0f} MiB"
    )
    assert result["errors"] == []
    assert result["js_errors"] == []
    assert result["exceptions"] == 0
    assert result["cross_talk"] == []
    assert result["reruns"] >= 8  # every session got to interact
