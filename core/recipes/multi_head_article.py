"""Multi-head attention the self-attention article's way: full-width heads, repeat, bmm and permute."""

import torch

# --- settings (the page fills in its current values) ---
tokens = "Life | is | short | eat | dessert | first"  # the page writes its tokens here
inputs = torch.rand(6, 16)  # a stand-in: the page writes its input embeddings here
seed = 123
num_heads = 3  # h
d_k = 24  # d_q = d_k: every head keeps the full width
d_v = 28
query = 1  # the query token, counted from 0: the article follows x^(2)
scale_scores = True
# --- end of settings ---

g = torch.Generator().manual_seed(seed)
d = inputs.shape[1]
W_query = torch.rand(num_heads, d_k, d, generator=g)  # (h, d_q, d): one matrix per head
W_key = torch.rand(num_heads, d_k, d, generator=g)  # (h, d_k, d)
W_value = torch.rand(num_heads, d_v, d, generator=g)  # (h, d_v, d)

query_vectors = W_query.matmul(inputs[query])  # (h, d_q): the query token, once per head
stacked_inputs = inputs.T.repeat(num_heads, 1, 1)  # (T, d) -> (d, T) -> (h, d, T)
keys = torch.bmm(W_key, stacked_inputs)  # (h, d_k, T)
values = torch.bmm(W_value, stacked_inputs)  # (h, d_v, T)
keys = keys.permute(0, 2, 1)  # (h, T, d_k): one token per row again
values = values.permute(0, 2, 1)  # (h, T, d_v)
print(query_vectors.shape, stacked_inputs.shape, keys.shape, values.shape)

scores = torch.bmm(keys, query_vectors.unsqueeze(-1)).squeeze(-1)  # (h, T, d_k) @ (h, d_k, 1) -> (h, T)
scale = 1 / d_k**0.5 if scale_scores else 1.0
weights = torch.softmax(scores * scale, dim=-1)  # (h, T): each head's weights for the query
context = torch.bmm(weights.unsqueeze(1), values).squeeze(1)  # (h, 1, T) @ (h, T, d_v) -> (h, d_v)
print(weights)
print(context.shape)  # h context vectors of width d_v: the article's h x d_v
