"""Why scale by 1/sqrt(d_k): the variance of q.k grows like d_k; divided by sqrt(d_k) it stays at 1.

Drawn as the page draws it, so the digits match the page's table. For unit-normal q and k, turn
the axes so that q points along the first one: then q.k = |q| * k_1, where k_1 is one standard
normal number and |q|^2 is chi-squared with d_k degrees of freedom (twice a Gamma(d_k / 2)).
That is the same random number as the sum of d_k products, drawn with 2 numbers instead of 2 * d_k.
"""

import torch

# --- settings (the page fills in its current values) ---
seed = 123
trials = 20000  # random (q, k) pairs for each d_k
# --- end of settings ---

g = torch.Generator().manual_seed(seed)
dims = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
widths = torch.tensor(dims, dtype=torch.float64)  # (D,)
alpha = (widths / 2).expand(trials, len(dims)).contiguous()  # (trials, D)
length = (2.0 * torch._standard_gamma(alpha, generator=g)).sqrt()  # |q| for every trial and d_k, (trials, D)
k_1 = torch.randn(trials, len(dims), generator=g, dtype=torch.float64)  # (trials, D)
dots = length * k_1  # q.k, (trials, D)
unscaled_vars = dots.var(dim=0, unbiased=False).tolist()  # about d_k
scaled_vars = (dots / widths.sqrt()).var(dim=0, unbiased=False).tolist()  # about 1
for d_k, unscaled, scaled in zip(dims, unscaled_vars, scaled_vars, strict=True):
    print(f"d_k={d_k:4d}  var(q.k)={unscaled:9.4f}  var(q.k/sqrt(d_k))={scaled:.4f}")
