"""A growing score makes the softmax peaky and its gradient vanish: the sources' small examples."""

import torch

# --- settings (the page fills in its current values) ---
multiplier = 8.0  # the page's score multiplier
# --- end of settings ---

# The trainable-weights notebook's five scores, multiplied by 1, 2, 4, 8, 16 and the page's choice.
scores = torch.tensor([0.1, -0.2, 0.3, -0.2, 0.5], dtype=torch.float64)
multipliers = sorted({1.0, 2.0, 4.0, 8.0, 16.0, multiplier})
sweep = torch.stack([torch.softmax(m * scores, dim=-1) for m in multipliers])  # (M, 5), one row per multiplier
for m, row in zip(multipliers, sweep, strict=True):
    print(f"x{m:<4g}", row)


def jacobian(weights):
    """d softmax_j / d x_k = s_j (delta_jk - s_k), (3,) -> (3, 3)."""
    return torch.diag(weights) - weights[:, None] * weights[None, :]


# The attention notebook: with d_k = 64 a score is about sqrt(64) = 8 in size.
d_k = 64
unscaled = torch.softmax(torch.tensor([8.0, 0.0, 0.0], dtype=torch.float64), dim=-1)  # about [1, 0, 0]
scaled = torch.softmax(torch.tensor([8.0, 0.0, 0.0], dtype=torch.float64) / d_k**0.5, dim=-1)  # softmax([1, 0, 0])
print("softmax([8, 0, 0]) =", unscaled, " gradient size", jacobian(unscaled).norm().item())
print("softmax([1, 0, 0]) =", scaled, " gradient size", jacobian(scaled).norm().item())
