"""Lessons 2, 4, 5 and 7 with ?weights=pretrained: rerun time against the reference page, and the
server's memory (the one shared all-MiniLM-L6-v2, loaded once for these lessons and lesson 6).

Latency (AppTest, one process, ratios taken in the same run as the reference page): each timed rerun
misses st.cache_data. Lessons 2, 4 and 5 read the sidebar's sentence, so each rerun types a new one;
lesson 7 reads its own sentence pairs, so each rerun picks another head.

Memory (a real server and Chromium): RSS after the overview, after the four pretrained lessons, then
after lesson 6. The model is one st.cache_resource, so lesson 6 should add its lesson data only.

    python -m bench.pretrained        # prints JSON; bench.run --only pretrained stores it
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from bench.latency import _time_reruns, reference
from bench.real_model import _rss_mib
from core.app import registry
from testkit import harness

PRETRAINED = [spec for spec in registry.PAGES if spec.pretrained is not None]
SENTENCE = "The cat sat on the mat because it was tired"


def page(spec: registry.PageSpec, repeats: int, change: str) -> list[float]:
    """Rerun times of `spec` in pretrained mode, each rerun a cache miss.

    change "head": pick another head (lesson 5: another layer, so at most 5 reruns), the same
    sentence, as a student exploring the page does; "sentence": type a new sentence in the sidebar
    (lessons 2, 4 and 5: every chart's labels change too).
    """
    at = AppTest.from_file(str(harness.ROOT / "streamlit_app.py"), default_timeout=300)
    at.query_params["weights"] = "pretrained"
    at.query_params["preset"] = "custom"
    at.run()
    at.switch_page(spec.file).run()
    if change == "sentence":
        return _time_reruns(at, lambda a, i: a.sidebar.text_input(key="text").input(f"{SENTENCE} {i}"), repeats)
    if spec.slug == "multi_head":
        key = "pretrained_layer_multi_head"
        return _time_reruns(at, lambda a, i: a.selectbox(key=key).set_value(i % 5 + 1), min(repeats, 5))
    key = f"pretrained_head_{spec.slug}"
    default = at.selectbox(key=key).value
    heads = [h for h in range(12) if h != default]
    return _time_reruns(at, lambda a, i: a.selectbox(key=key).set_value(heads[i % 11]), min(repeats, 11))


def latency(repeats: int = 10) -> dict:
    harness.use_navigation_mode()
    ref = reference(repeats)
    ref_median = statistics.median(ref)
    pages = {}
    for spec in PRETRAINED:
        head = page(spec, repeats, "head")
        pages[spec.slug] = {"median_s": statistics.median(head), "ratio": statistics.median(head) / ref_median}
        if spec.slug != "cross_attention":  # lesson 7 reads its own sentence pairs, not the sidebar's
            sentence = page(spec, repeats, "sentence")
            pages[spec.slug]["sentence_median_s"] = statistics.median(sentence)
            pages[spec.slug]["sentence_ratio"] = statistics.median(sentence) / ref_median
    return {"reference_median_s": ref_median, "pages": pages}


def server(timeout_ms: int = 120_000) -> dict | None:
    """The server's RSS (MiB) after the overview, after the four pretrained lessons, after lesson 6."""
    if not Path(harness.CHROMIUM).exists():
        return None
    from playwright.sync_api import sync_playwright

    process, url = harness.start_server()
    visits = [("overview", "overview")]
    visits += [(spec.slug, f"{spec.slug}?weights=pretrained") for spec in PRETRAINED]
    visits += [("real_model", "real_model")]
    try:
        time.sleep(2)
        result: dict = {"idle_mib": _rss_mib(process.pid)}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            for name, path in visits:
                tab.goto(f"{url}/{path}", wait_until="domcontentloaded")
                tab.wait_for_selector('[data-testid="stSidebar"] [data-testid="stSlider"]', timeout=timeout_ms)
                tab.wait_for_selector(harness.IDLE, timeout=timeout_ms)
                tab.wait_for_timeout(1500)
                result[f"after_{name}_mib"] = _rss_mib(process.pid)
            browser.close()
        last_pretrained = PRETRAINED[-1].slug
        result["pretrained_extra_mib"] = result[f"after_{last_pretrained}_mib"] - result["after_overview_mib"]
        result["real_model_after_pretrained_mib"] = (
            result["after_real_model_mib"] - result[f"after_{last_pretrained}_mib"]
        )
        return result
    finally:
        process.terminate()
        process.wait(timeout=30)


def run(repeats: int = 10) -> dict:
    return {"latency": latency(repeats), "server": server()}


def rows(measured: dict | None, ok) -> list[tuple[str, str, str, str]]:
    """The README table's rows (none until `bench.run --only pretrained` has run once)."""
    if not measured:
        return []
    pages = measured["latency"]["pages"]
    worst = max(pages.items(), key=lambda kv: kv[1]["ratio"])
    by_sentence = {name: page["sentence_ratio"] for name, page in pages.items() if "sentence_ratio" in page}
    worst_sentence = max(by_sentence.items(), key=lambda kv: kv[1])
    out = [
        (
            "Pretrained weights (lessons 2, 4, 5, 7): rerun after picking another head (lesson 5: layer) "
            "/ reference, worst page",
            f"{worst[1]['ratio']:.2f}x ({worst[0]}); "
            + ", ".join(f"{name} {page['ratio']:.2f}x" for name, page in pages.items()),
            "<= 4x",
            ok(worst[1]["ratio"] <= 4),
        ),
        (
            "Pretrained weights: rerun after typing a new sentence / reference, worst page",
            f"{worst_sentence[1]:.2f}x ({worst_sentence[0]}); "
            + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in by_sentence.items()),
            "<= 4x",
            ok(worst_sentence[1] <= 4),
        ),
    ]
    server = measured.get("server")
    if server:
        out.append(
            (
                "Pretrained weights: server RSS after the overview / the four lessons / then lesson 6",
                f"{server['after_overview_mib']:.0f} / {server['after_cross_attention_mib']:.0f} "
                f"(+{server['pretrained_extra_mib']:.0f}) / {server['after_real_model_mib']:.0f} MiB "
                f"(+{server['real_model_after_pretrained_mib']:.0f}: the model is not loaded again)",
                "one shared model",
                ok(server["real_model_after_pretrained_mib"] < 50),
            )
        )
    return out


def main() -> None:
    print(json.dumps(run(), indent=2))


if __name__ == "__main__":
    main()
