"""Why scale by 1/sqrt(d_k): the variance of q.k grows like d_k; divided by sqrt(d_k) it stays at 1."""

import torch

# --- settings (the page fills in its current values) ---
seed = 123
trials = 20000  # random (q, k) pairs for each d_k
# --- end of settings ---

g = torch.Generator().manual_seed(seed)
unscaled_vars, scaled_vars = [], []
for d_k in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]:
    q = torch.randn(trials, d_k, generator=g)  # one random query per trial, (trials, d_k)
    k = torch.randn(trials, d_k, generator=g)  # and one random key
    dots = (q * k).sum(dim=-1, dtype=torch.float64)  # q.k for every trial, (trials,)
    unscaled_vars.append(dots.var(unbiased=False).item())  # about d_k
    scaled_vars.append((dots / d_k**0.5).var(unbiased=False).item())  # about 1
    print(f"d_k={d_k:4d}  var(q.k)={unscaled_vars[-1]:9.4f}  var(q.k/sqrt(d_k))={scaled_vars[-1]:.4f}")
