"""Causal attention: mask the future with -inf before the softmax, then dropout on the weights."""

import torch
from torch import nn

# --- settings (the page fills in its current values) ---
tokens = "Your | journey | starts | with | one | step"  # the page writes its tokens here
inputs = torch.rand(6, 3)  # a stand-in: the page writes its input embeddings here
seed = 123
d_out = 2
scale_scores = True  # divide the scores by sqrt(d_k) before the softmax
dropout = 0.0  # the rate p; it only acts in training mode
training = False
# --- end of settings ---

torch.manual_seed(seed)
d_in = inputs.shape[1]
W_query = nn.Linear(d_in, d_out, bias=False)  # drawn in this order, as the book's CausalAttention does
W_key = nn.Linear(d_in, d_out, bias=False)
W_value = nn.Linear(d_in, d_out, bias=False)

batch = inputs.unsqueeze(0)  # a batch of one sentence, (1, T, d_in)
with torch.no_grad():
    queries, keys, values = W_query(batch), W_key(batch), W_value(batch)  # each (1, T, d_out)
    num_tokens = batch.shape[1]
    future = torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool()  # True above the diagonal
    scores = queries @ keys.transpose(1, 2)  # (1, T, T)
    scale = 1 / keys.shape[-1] ** 0.5 if scale_scores else 1.0
    scores = (scores * scale).masked_fill(future, -torch.inf)  # keep the result: masked_fill is not in place
    weights = torch.softmax(scores, dim=-1)[0]  # (T, T), zero above the diagonal

    torch.manual_seed(seed + 1)  # the page draws dropout from its own seed
    drop = nn.Dropout(dropout)
    drop.train(training)
    dropped = drop(weights.unsqueeze(0))[0]  # survivors are multiplied by 1 / (1 - p)
print(weights)
print(dropped)
