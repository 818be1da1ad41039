"""How peaky is the softmax of random scores, with and without dividing by sqrt(d_k)?

Drawn as the page draws it, so the digits match the page's table: the scores of one query
against 8 keys are |q| * z_j, with z_j standard normal and |q|^2 chi-squared with d_k degrees of
freedom (turn the axes so that q points along the first one; then q.k_j is |q| times k_j's first entry).
"""

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
    alpha = torch.full((trials, 1), d_k / 2, dtype=torch.float64)
    length = (2.0 * torch._standard_gamma(alpha, generator=g)).sqrt()  # |q| per trial, (trials, 1)
    scores = length * torch.randn(trials, num_keys, generator=g, dtype=torch.float64)  # q.k_j, (trials, 8)
    for scaling, factor in (("unscaled", 1.0), ("scaled", 1 / math.sqrt(d_k))):
        weights = torch.softmax(scores * factor, dim=-1)
        logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))  # 0 log 0 counts as 0
        entropy = -(weights * logs).sum(dim=-1)  # nats
        rows.append((d_k, scaling, weights.max(dim=-1).values.mean().item(), entropy.mean().item()))
        print(f"d_k={d_k:4d} {scaling:9s} max weight {rows[-1][2]:.3f}  entropy {rows[-1][3]:.3f}")
