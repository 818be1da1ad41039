"""Self-attention with trainable weights, laid out as the self-attention article does: W @ x."""

import torch

# --- settings (the page fills in its current values) ---
tokens = "Life | is | short | eat | dessert | first"
inputs = torch.randn(6, 16, generator=torch.Generator().manual_seed(123))[torch.tensor([0, 4, 5, 2, 1, 3])]
seed = 123
d_out = 24  # d_k, the width of queries and keys
scale_scores = True  # divide the scores by sqrt(d_k) before the softmax
query = 1  # the chosen query token, counted from 0
# --- end of settings ---

g = torch.Generator().manual_seed(seed)
d_in, d_k, d_v = inputs.shape[1], d_out, d_out + 4  # values may be wider than queries and keys
W_query = torch.rand(d_k, d_in, generator=g)  # (d_out, d_in): the article's layout
W_key = torch.rand(d_k, d_in, generator=g)
W_value = torch.rand(d_v, d_in, generator=g)

queries = W_query.matmul(inputs.T).T  # (d_k, d_in) @ (d_in, T) -> (d_k, T) -> (T, d_k)
keys = W_key.matmul(inputs.T).T  # (T, d_k)
values = W_value.matmul(inputs.T).T  # (T, d_v)

scores = queries @ keys.T  # omega, (T, T)
scale = 1 / d_k**0.5 if scale_scores else 1.0
weights = torch.softmax(scores * scale, dim=-1)
context = weights @ values  # (T, d_v)
print("omega for the query:", scores[query])
print("its weights:", weights[query])
print("its context vector z:", context[query])
