"""SelfAttention_v1 vs SelfAttention_v2: different numbers from one seed, the same function."""

import torch
from torch import nn

# --- settings (the page fills in its current values) ---
tokens = "Your | journey | starts | with | one | step"  # the page writes its tokens here
inputs = torch.rand(6, 3)  # a stand-in: the page writes its input embeddings here
seed = 123
d_out = 2
# --- end of settings ---

d_in = inputs.shape[1]


def attend(queries, keys, values):
    scale = 1 / keys.shape[-1] ** 0.5  # times 1/√d_k, as the lab's own attention rounds it
    weights = torch.softmax(queries @ keys.T * scale, dim=-1)  # (T, T)
    return weights @ values  # (T, d_out)


# v1: three uniform [0, 1) matrices, x @ W.
torch.manual_seed(seed)
W_query, W_key, W_value = (torch.rand(d_in, d_out) for _ in range(3))  # each (d_in, d_out)
v1 = attend(inputs @ W_query, inputs @ W_key, inputs @ W_value)

# v2: three nn.Linear layers (centred, scaled initialisation); they store W transposed, (d_out, d_in).
torch.manual_seed(seed)
linear_q, linear_k, linear_v = (nn.Linear(d_in, d_out, bias=False) for _ in range(3))
with torch.no_grad():
    v2 = attend(linear_q(inputs), linear_k(inputs), linear_v(inputs))
    # v1 given v2's weights: copied into v1's own (d_in, d_out) matrices, transposed back. The same function as
    # v2; the product runs on a matrix laid out the other way, so the last bits may round differently.
    W_q, W_k, W_v = (linear.weight.T.contiguous() for linear in (linear_q, linear_k, linear_v))
    copied = attend(inputs @ W_q, inputs @ W_k, inputs @ W_v)
difference = (copied - v2).abs().max().item()
print("v1, own initialisation:", v1)
print("v2:", v2)
print("v1 with v2's weights:", copied)
print(f"largest difference v1 (copied) - v2: {difference:.1e}")
