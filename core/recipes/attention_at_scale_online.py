"""The online softmax: softmax(q K^T / sqrt(d)) @ V for one query, reading the keys one block at a time."""

import torch

# --- settings (the page fills in its current values) ---
seed = 123
num_keys = 12
block_size = 4
# --- end of settings ---

draws = torch.Generator().manual_seed(seed)
q = torch.randn(4, generator=draws)  # one query, width 4
K = torch.randn(num_keys, 4, generator=draws) * 2  # (S, 4)
V = torch.randn(num_keys, 3, generator=draws)  # (S, 3)

m = torch.tensor(float("-inf"))  # the largest score so far
l = torch.tensor(0.0)  # sum of e^(score - m) so far  # noqa: E741 (the papers' name)
acc = torch.zeros(3)  # sum of e^(score - m) * v so far
for start in range(0, num_keys, block_size):
    s = K[start : start + block_size] @ q / 4**0.5  # this block's scores
    m_new = torch.maximum(m, s.max())
    correction = torch.exp(m - m_new)  # rescales everything summed with the old maximum
    p = torch.exp(s - m_new)
    l = l * correction + p.sum()  # noqa: E741
    acc = acc * correction + p @ V[start : start + block_size]
    m = m_new
    print(f"keys {start}-{start + len(s) - 1}: m = {m.item():.4f}, l = {l.item():.4f}, sum / l so far {acc / l}")

online = acc / l
ordinary = torch.softmax(K @ q / 4**0.5, dim=0) @ V  # the whole row at once
print("max |online - ordinary| =", (online - ordinary).abs().max().item())
