"""Core speed: MultiHeadAttention's fast path vs PyTorch at GPT-2-small sizes, inference mode.

batch 8 x 1,024 tokens x 768 dims, 12 heads, causal. Compared in one process, same inputs:
  ours_fused     MultiHeadAttention(fused=True).forward
  sdpa_manual    the same three projections + F.scaled_dot_product_attention + out_proj, by hand
  torch_mha      torch.nn.MultiheadAttention(batch_first=True) with the same weights
  ours_traced    MultiHeadAttention.trace (every intermediate kept): time and extra peak memory
Peak memory is measured in a fresh subprocess per path (ru_maxrss high-water mark).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import core

SIZES = {"batch": 8, "tokens": 1024, "d_model": 768, "heads": 12}


def build(device: torch.device):
    g = torch.Generator().manual_seed(0)
    b, t, d, h = SIZES["batch"], SIZES["tokens"], SIZES["d_model"], SIZES["heads"]
    mha = core.MultiHeadAttention(d, d, t, 0.0, h, generator=g, fused=True).to(device).eval()
    reference = core.torch_multihead_from(mha).to(device).eval()
    x = torch.randn(b, t, d, generator=g).to(device)
    return mha, reference, x


def sdpa_manual(mha: core.MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    b, t, d = x.shape
    h, hd = mha.num_heads, mha.head_dim
    q = mha.W_query(x).view(b, t, h, hd).transpose(1, 2)  # (b, h, t, hd)
    k = mha.W_key(x).view(b, t, h, hd).transpose(1, 2)
    v = mha.W_value(x).view(b, t, h, hd).transpose(1, 2)
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, h, t, hd)
    return mha.out_proj(context.transpose(1, 2).reshape(b, t, d))


def timed(fn, device: torch.device, repeats: int, warm_up: bool = True) -> list[float]:
    if warm_up:
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times


def run(device_name: str = "cpu", repeats: int = 5) -> dict:
    device = core.resolve_device(device_name)
    torch.set_num_threads(os.cpu_count() or 1)  # the app sets 1 per process; a benchmark uses them all
    # Memory first, in fresh subprocesses, before this process holds gigabytes of its own.
    peak_extra = {p: peak_extra_mib(p, device_name) for p in ("ours_fused", "ours_traced")}
    mha, reference, x = build(device)
    causal = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=device), diagonal=1)
    paths = {
        "ours_fused": lambda: mha(x),
        "sdpa_manual": lambda: sdpa_manual(mha, x),
        "torch_mha": lambda: reference(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)[0],
    }
    results: dict = {"device": str(device), "sizes": SIZES, "threads": torch.get_num_threads(), "paths": {}}
    with torch.inference_mode():
        assert torch.allclose(paths["ours_fused"](), paths["torch_mha"](), atol=1e-4)
        for fn in paths.values():
            fn()  # warm-up
        # One call of each path in turn (ABCABC...), so that drift on a shared machine (another
        # process, thermal limits) hits every path alike; the ratio is of medians.
        for _ in range(2 * repeats):
            for name, fn in paths.items():
                results["paths"].setdefault(name, []).extend(timed(fn, device, 1, warm_up=False))
        traced = timed(lambda: mha.trace(x), device, max(2, repeats // 2))
        trace = mha.trace(x)
        kept = {id(t): t for t in vars(trace).values() if isinstance(t, torch.Tensor)}  # shared tensors once
        results["trace_kept_mib"] = sum(t.numel() * t.element_size() for t in kept.values()) / 2**20
        del trace, kept
    summary = {name: statistics.median(times) for name, times in results["paths"].items()}
    summary["ours_traced"] = statistics.median(traced)
    results["median_s"] = summary
    results["fused_vs_sdpa"] = summary["ours_fused"] / summary["sdpa_manual"]
    results["fused_vs_torch_mha"] = summary["ours_fused"] / summary["torch_mha"]
    results["traced_vs_fused"] = summary["ours_traced"] / summary["ours_fused"]
    results["peak_extra_mib"] = peak_extra
    del results["paths"]
    return results


_MEMORY_PROBE = """
import resource, sys, torch
sys.path.insert(0, ".")
from bench.core_speed import build
mha, _, x = build(torch.device("{device}"))
with torch.inference_mode():
    mha(x)  # warm-up: allocator and kernels
    if "{device}" == "cuda":
        torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = mha.trace(x) if "{path}" == "ours_traced" else mha(x)
    if "{device}" == "cuda":
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(max(0, peak - base) / 2**20)
"""


def peak_extra_mib(path: str, device: str) -> float:
    """Extra peak memory of one forward of `path`, over a warmed-up process (MiB)."""
    code = _MEMORY_PROBE.format(path=path, device=device)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "cpu", 3), indent=2))
