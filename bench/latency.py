"""Interaction latency: median and p95 of a rerun after a sidebar change, per page (AppTest).

Measured in the same run as loadtest/reference_page.py, so the ratios cancel the machine's speed.
Each timed rerun changes the seed, so nothing is served from st.cache_data.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.app import registry
from core.attention.stats import MAX_TRIALS
from testkit.harness import PAGE_FILES, ROOT, percentile, use_navigation_mode

PAGES = PAGE_FILES
LARGEST_TEXT = " ".join(f"w{i}" for i in range(24))  # the token cap
# The real-model page has its own sentence box (the sidebar is greyed out there): each timed rerun types
# a new sentence, so nothing is served from st.cache_data; the largest is at the 64-word-piece cap.
REAL_MODEL_PAGE = registry.page("real_model").file
REAL_MODEL_DEFAULT = "The dog chased the ball because it was bored"
REAL_MODEL_LARGEST = " ".join(["word"] * 61)  # + a number + [CLS] + [SEP] = 64 pieces
LARGEST = {"preset": "custom", "text": LARGEST_TEXT, "d_in": "64", "d_out": "64", "num_heads": "8", "dropout": "0.9"}


def _time_reruns(at: AppTest, change, repeats: int) -> list[float]:
    times = []
    for i in range(repeats):
        change(at, i)
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
        assert not at.exception, [e.value for e in at.exception]
    return times


def reference(repeats: int) -> list[float]:
    at = AppTest.from_file(str(ROOT / "loadtest" / "reference_page.py"), default_timeout=120)
    at.run()
    return _time_reruns(at, lambda a, i: a.slider(key="value").set_value(i % 100), repeats)


def page(page_path: str, repeats: int, params: dict[str, str] | None = None) -> list[float]:
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=300)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    if page_path != PAGES[0]:
        at.switch_page(page_path).run()
    if params is not None and "why_scale" in page_path:
        at.select_slider(key="trials").set_value(MAX_TRIALS).run()  # the largest the UI allows
    if page_path == REAL_MODEL_PAGE:
        at.selectbox(key="real_example").set_value("own").run()
        base = REAL_MODEL_DEFAULT if params is None else REAL_MODEL_LARGEST
        return _time_reruns(at, lambda a, i: a.text_input(key="real_sentence").input(f"{base} {i}"), repeats)
    if not at.sidebar.number_input(key="seed").disabled:
        return _time_reruns(at, lambda a, i: a.sidebar.number_input(key="seed").set_value(1000 + i), repeats)
    if not at.sidebar.toggle(key="scale").disabled:  # no seed here: move another control the page uses
        return _time_reruns(at, lambda a, i: a.sidebar.toggle(key="scale").set_value(i % 2 == 0), repeats)
    # The sentence is the one input left (the overview with a source's example: seed and scale greyed out).
    at.sidebar.selectbox(key="preset").set_value("custom").run()
    return _time_reruns(at, lambda a, i: a.sidebar.text_input(key="text").input(f"a new sentence {i}"), repeats)


def run(repeats: int = 15) -> dict:
    use_navigation_mode()
    ref = reference(repeats)
    ref_median = statistics.median(ref)
    result = {"reference_median_s": ref_median, "reference_p95_s": percentile(ref, 0.95), "pages": {}}
    for page_path in PAGES:
        name = Path(page_path).stem
        default = page(page_path, repeats)
        largest = page(page_path, max(5, repeats // 3), LARGEST)
        result["pages"][name] = {
            "default_median_s": statistics.median(default),
            "default_p95_s": percentile(default, 0.95),
            "default_ratio": statistics.median(default) / ref_median,
            "largest_median_s": statistics.median(largest),
            "largest_p95_s": percentile(largest, 0.95),
            "largest_ratio": statistics.median(largest) / ref_median,
        }
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(run(5), indent=2))
