"""FlashAttention's loop in plain PyTorch: tiles of queries against tiles of keys, never the whole T x T matrix."""

import torch

# --- settings (the page fills in its current values) ---
seed = 123
block_q = 8
block_k = 8
causal = True
# --- end of settings ---

draws = torch.Generator().manual_seed(seed)
Q, K, V = (torch.randn(1, 32, 8, generator=draws) for _ in range(3))  # (1, T, E): T = 32 tokens, width 8
T = Q.shape[1]
scale = 1 / 8**0.5  # 1/sqrt(head width), multiplied in, as the page does
out = torch.zeros_like(Q)
skipped = 0
for q0 in range(0, T, block_q):
    q_rows = torch.arange(q0, min(q0 + block_q, T))[:, None]  # (Bq, 1) query positions
    m = torch.full((1, len(q_rows), 1), float("-inf"))  # running max per query
    l = torch.zeros_like(m)  # running sum per query  # noqa: E741 (the papers' name)
    acc = torch.zeros(1, len(q_rows), V.shape[-1])
    for k0 in range(0, T, block_k):
        if causal and k0 > q_rows[-1]:  # every key of this tile is in every query's future
            skipped += 1
            continue
        k_cols = torch.arange(k0, min(k0 + block_k, T))[None, :]  # (1, Bk) key positions
        s = Q[:, q_rows[:, 0]] @ K[:, k_cols[0]].transpose(-2, -1) * scale  # (1, Bq, Bk): one tile of scores
        if causal:
            s = s.masked_fill(k_cols > q_rows, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        l = l * torch.exp(m - m_new) + p.sum(dim=-1, keepdim=True)  # noqa: E741
        acc = acc * torch.exp(m - m_new) + p @ V[:, k_cols[0]]
        m = m_new
    out[:, q_rows[:, 0]] = acc / l

# The page's reference: every score at once, softmax, then the weighted sum of the values.
scores = Q @ K.transpose(-2, -1) * scale  # (1, T, T)
if causal:
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
reference = torch.softmax(scores, dim=-1) @ V
print(f"{skipped} tiles skipped; max |tiled - reference| = {(out - reference).abs().max().item():.1e}")
