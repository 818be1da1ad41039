"""Monte Carlo: dot_product_variance (10 dims x 100,000 trials) vs the sources' Python loop."""

from __future__ import annotations

import json
import time

import numpy as np
import torch

import core

DIMS = core.DEFAULT_DIMS  # 1, 2, 4, ..., 512: ten dimensions


def run(trials: int = 100_000) -> dict:
    start = time.perf_counter()
    ours = core.dot_product_variance(DIMS, trials, torch.Generator().manual_seed(0))
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    direct = core.dot_product_variance(DIMS, trials, torch.Generator().manual_seed(0), method="direct")
    direct_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    loop = [core.dot_product_variance_loop(d, trials, rng) for d in DIMS]
    loop_s = time.perf_counter() - start
    return {
        "trials": trials,
        "dims": list(DIMS),
        "ours_s": ours_s,
        "direct_vectorised_s": direct_s,
        "loop_s": loop_s,
        "speedup_vs_loop": loop_s / ours_s,
        "max_relative_gap_unscaled": float(
            max(abs(o / lp[0] - 1) for o, lp in zip(ours.unscaled_var, loop, strict=True))
        ),
        "direct_agrees": bool(np.allclose(direct.unscaled_var / ours.unscaled_var, 1, atol=0.05)),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
