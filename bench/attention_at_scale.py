"""Lesson 9's costs, every ratio measured in one run on this machine's device (CPU, or CUDA where present).

    python -m bench.attention_at_scale            # ~1 minute on 2 cores
    python -m bench.attention_at_scale --quick    # fewer repeats

- plain vs tiled attention at 4,096 tokens: peak extra memory (the allocator's own count: the
  profiler's allocation records on the CPU, max_memory_allocated on CUDA) and time, one head of width
  64, causal; PyTorch's fused kernel beside them;
- the KV cache's speed-up at 256 generated tokens with the training lab's tiny transformer (total
  time without the cache / with it; each step's fastest of three generations, as the page measures);
- the lesson page's rerun (a seed change; the measurements are cached, as in class) against the
  reference page (loadtest/reference_page.py), median of the reruns.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from bench import latency
from core.app import registry
from core.attention.long_context import AttentionPath, measure
from core.lessons import attention_at_scale as lesson
from core.lessons import attention_at_scale_kv as scale_kv
from testkit.harness import use_navigation_mode

TOKENS = 4096
GENERATED = 256


def memory_and_time(device: torch.device, repeats: int) -> dict:
    paths = {path.name.lower(): measure(path, TOKENS, lesson.HEAD_DIM, device, repeats) for path in AttentionPath}
    return {
        "tokens": TOKENS,
        "peak_mib": {name: m.peak_bytes / 2**20 for name, m in paths.items()},
        "ms": {name: m.milliseconds for name, m in paths.items()},
        "plain_vs_tiled_memory": paths["plain"].peak_bytes / paths["tiled"].peak_bytes,
        "tiled_vs_plain_time": paths["tiled"].milliseconds / paths["plain"].milliseconds,
        "fused_vs_plain_time": paths["fused"].milliseconds / paths["plain"].milliseconds,
    }


def cache_speedup(device: torch.device) -> dict:
    """The page's own timing (each step's fastest of three generations), at 256 generated tokens."""
    timing, speedup = scale_kv.generation_timing(scale_kv.trained_model(), GENERATED, device)
    totals = timing.groupby("way").milliseconds.sum()
    return {
        "generated": GENERATED,
        "with_cache_ms": float(totals["with the cache"]),
        "without_cache_ms": float(totals["without (whole prefix again)"]),
        "speedup": speedup,
    }


def page_rerun(repeats: int) -> dict:
    use_navigation_mode()
    reference = latency.reference(repeats)
    page = latency.page(registry.page("attention_at_scale").file, repeats)
    return {
        "reference_median_s": statistics.median(reference),
        "page_median_s": statistics.median(page),
        "ratio": statistics.median(page) / statistics.median(reference),
    }


def run(quick: bool = False) -> dict:
    torch.set_num_threads(1)  # as the app runs (streamlit_app.py)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    repeats = 2 if quick else 5
    return {
        "device": device.type,
        "memory_and_time": memory_and_time(device, repeats),
        "kv_cache": cache_speedup(device),
        "page": page_rerun(5 if quick else 15),
    }


def rows(measured: dict, ok) -> list[tuple[str, str, str, str]]:
    """The README table's rows for lesson 9."""
    mt, kv, page = measured["memory_and_time"], measured["kv_cache"], measured["page"]
    device = measured["device"].upper()
    peak, ms = mt["peak_mib"], mt["ms"]
    return [
        (f"Attention at scale: plain / tiled peak extra memory, {mt['tokens']:,} tokens, one head, causal ({device})",
         f"{mt['plain_vs_tiled_memory']:.0f}x ({peak['plain']:,.1f} MiB vs {peak['tiled']:,.2f} MiB; "
         f"fused kernel {peak['fused']:,.2f} MiB)", ">= 10x (O(T²) vs O(T))", ok(mt["plain_vs_tiled_memory"] >= 10)),
        (f"Attention at scale: time tiled (Python loop, blocks of 128) / plain; fused / plain ({device})",
         f"{mt['tiled_vs_plain_time']:.2f}x / {mt['fused_vs_plain_time']:.2f}x "
         f"({ms['tiled']:,.0f} / {ms['fused']:,.0f} / {ms['plain']:,.0f} ms)", "(reported)", ""),
        (f"Attention at scale: KV cache speed-up, {kv['generated']} generated tokens, tiny transformer ({device})",
         f"{kv['speedup']:.2f}x ({kv['without_cache_ms']:,.0f} ms without, {kv['with_cache_ms']:,.0f} ms with)",
         "> 1x", ok(kv["speedup"] > 1)),
        ("Attention at scale: page rerun (seed change, measurements cached) / reference page, median",
         f"{page['ratio']:.2f}x ({page['page_median_s'] * 1e3:.0f} ms vs {page['reference_median_s'] * 1e3:.0f} ms)",
         "<= 4x", ok(page["ratio"] <= 4)),
    ]  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    print(json.dumps(run(parser.parse_args().quick), indent=2))
