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
    weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1)  # (T, T)
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
    # v1 given v2's weights, transposed back to (d_in, d_out): the same numbers as v2.
    copied = attend(inputs @ linear_q.weight.T, inputs @ linear_k.weight.T, inputs @ linear_v.weight.T)
print("v1, own initialisation:", v1)
print("v2:", v2)
print("v1 with v2's weights:", copied)
print("largest difference v1 (copied) - v2:", (copied - v2).abs().max().item())
