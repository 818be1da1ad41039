"""The trainable-weights notebook's variance experiment at its own widths, d = 5 and d = 100."""

import torch

# --- settings (the page fills in its current values) ---
seed = 123  # the notebook set no seed: its digits differ from any run, its law does not
# --- end of settings ---

g = torch.Generator().manual_seed(seed)
trials = 1000  # the notebook's num_trails
for d in [5, 100]:
    q = torch.randn(trials, d, generator=g)  # 1,000 random queries, (trials, d)
    k = torch.randn(trials, d, generator=g)  # and keys
    dots = (q * k).sum(dim=-1, dtype=torch.float64)  # (trials,)
    unscaled = dots.var(unbiased=False).item()  # about d
    scaled = (dots / d**0.5).var(unbiased=False).item()  # about 1, and exactly unscaled / d
    print(f"d={d:3d}  var before scaling {unscaled:.4f}  after {scaled:.4f}")
