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


def only_timeouts(result: dict) -> bool:
    """The harness timed out waiting (a slow shared machine), and nothing else went wrong."""
    clean = not (result["cross_talk"] or result["exceptions"] or result["js_errors"])
    return clean and bool(result["errors"]) and all("TimeoutError" in e for e in result["errors"])


def test_eight_sessions_for_fifteen_seconds() -> None:
    from bench import load

    result = load.run(sessions=8, seconds=15)
    if only_timeouts(result):  # one retry, for waits that ran out on a busy machine; never for wrong output
        print(f"\nretrying after harness timeouts: {result['errors']}")
        result = load.run(sessions=8, seconds=15)
    summary = {k: result[k] for k in ("reruns", "errors", "exceptions", "js_errors", "cross_talk", "link_seed_lost")}
    print(
        f"\nreduced load: {result['reruns']} reruns, median {result['median_s']}, p95 {result['p95_s']} s, "
        f"server peak RSS {result['memory_after_load']['peak_rss_mib']:.0f} MiB, "
        f"link seed lost on a page switch: {result['link_seed_lost']} of 8 (known issue)"
    )
    assert result["errors"] == [], summary
    assert result["js_errors"] == [], summary
    assert result["exceptions"] == 0, summary
    assert result["cross_talk"] == [], summary
    assert result["reruns"] >= 8, summary  # every session got to interact
