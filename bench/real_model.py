"""The real model: our traced forward pass vs transformers' BertModel, and what the model costs in memory.

    python -m bench.real_model            # speed (one thread) + memory in subprocesses + the server's RSS

speed   our `core.models.minilm.forward` (every head's weights kept) vs transformers' eager BertModel with
        output_attentions=True, same 32-word-piece sentence, one intra-op thread, calls interleaved
        (ABAB...) so drift hits both alike; the ratio is of medians (target <= 1.2x).
memory  a fresh subprocess: RSS after importing the app's modules, then after loading the model and
        running one sentence through the lesson (target: <= 150 MiB extra). safetensors maps the file:
        its pages count once touched, and being clean file pages the kernel can drop them again.
server  `streamlit run` with Chromium (when present): RSS idle, after the overview, after this page.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from testkit import harness

SENTENCE_32 = "the " * 30  # [CLS] + 30 pieces + [SEP] = 32 word pieces
_MIB = 2**20


def _rss_mib(pid: int | str = "self") -> float:
    """Current resident set size of a process (MiB), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc")


def speed(repeats: int = 30) -> dict:
    """Median seconds of our forward and transformers' eager forward, one thread, and their ratio."""
    from transformers import BertModel  # the reference: benchmarks and tests only, never the app

    from core.models import minilm as rm

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = rm.load_model()
        reference = BertModel.from_pretrained(str(model.folder), attn_implementation="eager", add_pooling_layer=False)
        reference.eval()
        batch = rm.tokenize(model, [SENTENCE_32])
        assert batch.input_ids.shape == (1, 32), batch.input_ids.shape

        def ours() -> torch.Tensor:
            return rm.forward(model, batch).attentions

        def theirs() -> tuple[torch.Tensor, ...]:
            with torch.inference_mode():
                out = reference(
                    input_ids=batch.input_ids,
                    attention_mask=batch.attention_mask.long(),
                    token_type_ids=batch.token_type_ids,
                    output_attentions=True,
                )
            return out.attentions

        assert torch.allclose(ours()[5], theirs()[5], atol=1e-5)
        times: dict[str, list[float]] = {"ours": [], "transformers": []}
        for _ in range(3):  # warm-up
            ours(), theirs()
        for _ in range(repeats):
            for name, call in (("ours", ours), ("transformers", theirs)):
                start = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    median = {name: statistics.median(values) for name, values in times.items()}
    return {
        "tokens": 32,
        "threads": 1,
        "median_s": median,
        "ours_vs_transformers": median["ours"] / median["transformers"],
    }


_MEMORY_PROBE = """
import gc, json, resource, sys, time
sys.path.insert(0, ".")
from bench.real_model import _rss_mib
import altair, pandas, streamlit, torch  # what the app imports before any page
from core.app import settings
from core.lessons import multi_head
multi_head.multihead_lesson(settings.Settings())  # torch's kernels warmed up, as any other page does
gc.collect()
before = _rss_mib()
peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
from core.lessons import real_model as real_model_lesson
from core.models import minilm as real_model
imported = _rss_mib()
start = time.perf_counter()
model = real_model.load_model()
load_s = time.perf_counter() - start
loaded = _rss_mib()
lesson = real_model_lesson.real_model_lesson(model, "The dog chased the ball because it was bored.")
gc.collect()
after = _rss_mib()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"app_modules_mib": before, "after_imports_mib": imported, "after_load_mib": loaded,
                  "after_one_sentence_mib": after, "peak_extra_mib": peak - peak_before, "load_s": load_s}))
"""


def memory() -> dict:
    """RSS of a fresh process before and after the model (MiB), and the load time (sha256 included)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE], cwd=harness.ROOT, env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["extra_mib"] = result["after_one_sentence_mib"] - result["app_modules_mib"]
    return result


def server(timeout_ms: int = 120_000) -> dict | None:
    """The server's RSS (MiB) idle, after one tab opened the overview, and after it opened this page."""
    if not Path(harness.CHROMIUM).exists():
        return None
    from playwright.sync_api import sync_playwright

    process, url = harness.start_server()
    try:
        time.sleep(2)
        result = {"idle_mib": _rss_mib(process.pid)}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            for name in ("overview", "real_model"):
                page.goto(f"{url}/{name}", wait_until="domcontentloaded")
                page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stSlider"]', timeout=timeout_ms)
                page.wait_for_selector(harness.IDLE, timeout=timeout_ms)
                page.wait_for_timeout(1500)
                result[f"after_{name}_mib"] = _rss_mib(process.pid)
            browser.close()
        result["page_extra_mib"] = result["after_real_model_mib"] - result["after_overview_mib"]
        return result
    finally:
        process.terminate()
        process.wait(timeout=30)


def run(repeats: int = 30) -> dict:
    return {"speed": speed(repeats), "memory": memory(), "server": server()}


def main() -> None:
    print(json.dumps(run(), indent=2))


if __name__ == "__main__":
    main()
