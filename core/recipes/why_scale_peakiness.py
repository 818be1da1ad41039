"""How peaky is the softmax of random scores, with and without dividing by sqrt(d_k)?"""

import math

import torch

# --- settings (the page fills in its current values) ---
seed = 124  # the page draws these from its own seed
trials = 1000  # random queries for each d_k
# --- end of settings ---

g = torch.Generator().manual_seed(seed)
num_keys = 8
rows = []
for d_k in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]:
    q = torch.randn(trials, 1, d_k, generator=g, dtype=torch.float64)  # one query per trial
    keys = torch.randn(trials, num_keys, d_k, generator=g, dtype=torch.float64)  # 8 keys per trial
    scores = (q * keys).sum(dim=-1)  # (trials, 8)
    for scaling, factor in (("unscaled", 1.0), ("scaled", 1 / math.sqrt(d_k))):
        weights = torch.softmax(scores * factor, dim=-1)
        entropy = -(weights * weights.clamp_min(1e-300).log()).sum(dim=-1)  # nats; 0 log 0 counts as 0
        rows.append((d_k, scaling, weights.max(dim=-1).values.mean().item(), entropy.mean().item()))
        print(f"d_k={d_k:4d} {scaling:9s} max weight {rows[-1][2]:.3f}  entropy {rows[-1][3]:.3f}")
